"""The review screen shows pictures and video keyframes in the terminal (half-block
thumbnails), and its o key opens the pair in the HTML report."""

from __future__ import annotations

import io
import re
import stat
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from rich.console import Console
from skimage import data

from mmdedup import Platform
from mmdedup.review.media import AssetMedia
from mmdedup.review.pictures import GREY_RAMP, UPPER_HALF, half_blocks, side_by_side
from mmdedup.review.screen import screen
from mmdedup.review.view import load_pairs

from helpers import clip, encode
from test_review import Terminal, review_cmd

CONFIG = "tier_strong = 0.999\ntier_medium = 0.6\ntier_weak = 0.5\n"
# A cell in colour: an upper half block in a foreground and a background colour, 24-bit or
# the 256-colour palette (what rich brings it down to on an xterm-256color).
COLOURED_CELL = re.compile(r"\x1b\[(?:38;2;\d+;\d+;\d+|38;5;\d+);(?:48;2;\d+;\d+;\d+|48;5;\d+)m" + UPPER_HALF)
BLOCK_RUN = re.compile(UPPER_HALF + "+")


@pytest.fixture
def media_store(home: Path, db_url: str, tmp_path: Path, photos) -> Path:
    """A picture pair and a video pair, both in the review queue, the pictures first."""
    folder = tmp_path / "media"
    folder.mkdir()
    photo = Image.fromarray(data.astronaut())
    photo.save(folder / "astronaut.png")
    # A light crop: its pair must score above the video pair (a trimmed copy) to be
    # reviewed first.
    photo.crop((6, 6, 506, 506)).save(folder / "astronaut-crop.jpg", quality=70)
    frames = clip(photos["rocket"], photos["coffee"])
    encode(frames, path=folder / "launch.mp4")
    encode(frames[12:], path=folder / "launch-cut.mp4", bit_rate=80_000)
    (home / "config.toml").write_text(CONFIG)
    with Platform.open(home, db_url) as p:
        p.ingest(folder)
        queue = [(q["a"], q["b"]) for q in p.review_queue("ann")]
    assert queue == [("astronaut-crop.jpg", "astronaut.png"), ("launch-cut.mp4", "launch.mp4")]
    return folder


def coloured_lines(raw: str) -> list[str]:
    return [line for line in raw.split("\n") if COLOURED_CELL.search(line)]


def test_pictures_and_keyframes_in_the_terminal_and_the_report_key(
        media_store: Path, home: Path, db_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"):  # no browser: the path is shown
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the session's folder is made
    term = Terminal(review_cmd(home, db_url))
    screen_ = term.wait_for("astronaut-crop.jpg", "astronaut.png", "[o] report", "[q] quit")
    assert "(500x500)" in screen_ and "(512x512)" in screen_  # sizes beside the file names
    lines = coloured_lines(term.frame(raw=True))
    assert len(lines) >= 6
    # both pictures on the same rows, one in each column
    plain = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines]
    assert all(len(BLOCK_RUN.findall(line.split("│")[1])) == 1 == len(BLOCK_RUN.findall(line.split("│")[2]))
               for line in plain), plain

    term.press("o")
    shown = term.wait_for("report of this pair:")
    path = Path(re.search(r"report of this pair: (\S+\.html)", shown.replace("\n", "")).group(1))
    page = path.read_text(encoding="utf-8")
    assert "astronaut-crop.jpg" in page and "astronaut.png" in page and "image-reuse" in page
    assert page.count('<img src="data:image/jpeg') == 2
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700  # a folder of this session's own
    assert path.parent.parent == tmp_path

    term.press("s")
    term.wait_for("launch-cut.mp4", "launch.mp4", "skipped astronaut-crop.jpg", "[q] quit")
    assert "3.5 s)" in term.frame() and "4.0 s)" in term.frame()
    plain = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in coloured_lines(term.frame(raw=True))]
    assert plain
    # a strip of keyframes on each side
    for line in plain:
        cells = line.split("│")
        assert len(BLOCK_RUN.findall(cells[1])) >= 3 and len(BLOCK_RUN.findall(cells[2])) >= 3
    term.press("q")
    rc, out = term.finish()
    assert rc == 0, out


def test_the_report_key_opens_a_browser_where_one_is_named(
        media_store: Path, home: Path, db_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    monkeypatch.setenv("BROWSER", str(browser))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    term = Terminal(review_cmd(home, db_url))
    term.wait_for("astronaut-crop.jpg", "[q] quit")
    term.press("o")
    shown = term.wait_for("opened in the browser")
    path = Path(re.search(r"opened in the browser: (\S+\.html)", shown.replace("\n", "")).group(1))
    assert opened.read_text().strip() == path.as_uri() and path.is_file()
    term.press("q")
    assert term.finish()[0] == 0


def test_scripted_review_draws_no_pictures(media_store: Path, home: Path, db_url: str) -> None:
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("mmdedup")
    done = subprocess.run([str(exe), *review_cmd(home, db_url, "--limit", "1")], input="d\n",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "astronaut.png (512x512)" in done.stdout and UPPER_HALF not in done.stdout


def test_a_missing_file_says_why_instead_of_a_picture(media_store: Path, home: Path, db_url: str) -> None:
    (media_store / "astronaut.png").unlink()
    with Platform.open(home, db_url) as p, p.review_session("ann") as session:
        view = session.current()
        media = AssetMedia(p.settings, None, 128)
        pictures = tuple(media.of({"source": v["source"], "assets": v["media"]}, 4) for v in (view.a, view.b))
    console = Console(file=io.StringIO(), width=120, height=40, force_terminal=True,
                      color_system="truecolor")
    console.print(screen(view, "ann", 2, 0, "", 120, 40, pictures))
    out = console.file.getvalue()
    assert "\x1b[38;2;" in out and UPPER_HALF in out  # the copy that is still there
    assert "image: astronaut.png: missing_file" in re.sub(r"\x1b\[[0-9;]*m", "", out)


def test_half_blocks_keep_proportions_and_colours() -> None:
    left_red = np.zeros((40, 80, 3), np.uint8)
    left_red[:, :40] = (255, 0, 0)
    left_red[:20, 40:] = (0, 0, 255)
    rows = half_blocks(Image.fromarray(left_red), cols=40, rows=20)
    assert len(rows) == 10 and {r.cell_len for r in rows} == {40}  # 2:1 picture, 40 x 20 pixels
    console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=80)
    console.print(rows[0])
    first = console.file.getvalue()
    assert "38;2;255;0;0;48;2;255;0;0m" + UPPER_HALF in first  # red on red at the left
    assert "38;2;0;0;255;48;2;0;0;255m" + UPPER_HALF in first  # blue on blue at the top right
    grey = half_blocks(Image.fromarray(left_red), cols=40, rows=20, colour=False)
    assert set(grey[-1].plain) <= set(GREY_RAMP) and grey[-1].plain[-1] == GREY_RAMP[0]  # black
    tall = half_blocks(Image.new("RGB", (10, 100), "white"), cols=40, rows=10)
    assert len(tall) == 10 and tall[0].cell_len == 2
    strip = side_by_side([Image.new("RGB", (30, 20), c) for c in ("red", "green", "blue")], 40, 5)
    assert len(BLOCK_RUN.findall(strip[0].plain)) == 3 and strip[0].cell_len <= 40


def test_views_carry_what_the_screen_reads(media_store: Path, home: Path, db_url: str) -> None:
    with Platform.open(home, db_url) as p, p.review_session("ann") as review, p.sessions() as session:
        key = review.current().key
        view = load_pairs(session, [key], p.settings.tier_thresholds)[key]
    assert view.a["media"][0]["role"] == "image" and len(view.a["media"][0]["sha256"]) == 64
    assert view.a["source"] == str(media_store.resolve())


def test_pair_report_from_python(media_store: Path, home: Path, db_url: str, tmp_path: Path) -> None:
    from mmdedup.results import UnknownItem

    with Platform.open(home, db_url) as p:
        out = p.pair_report("launch.mp4", "launch-cut.mp4", tmp_path / "pair.html")
        page = out.read_text(encoding="utf-8")
        assert "video-reuse" in page and page.count('<img src="data:image/jpeg') >= 4  # keyframes
        with pytest.raises(UnknownItem, match="nope"):
            p.pair_report("launch.mp4", "nope", tmp_path / "x.html")
        with pytest.raises(KeyError, match="no pair"):
            p.pair_report("launch.mp4", "astronaut.png", tmp_path / "x.html")
