"""Bad input of every kind, and paths that leave their folder: each record becomes a
failure row with its own reason, the records around it are ingested, a rerun gives the
same, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import ast
import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from PIL import Image
from sqlalchemy import select

import mmdedup
from mmdedup import Item, Platform
from mmdedup.input import items as input_items
from mmdedup.input.reasons import REASONS
from mmdedup.store.schema import Item as StoredItem

from conftest import write_manifest
from helpers import encode

ROOT = Path(__file__).resolve().parents[1]


def stored_ids(platform: Platform) -> set[str]:
    with platform.sessions() as session:
        return set(session.scalars(select(StoredItem.id)))


def open_failures(platform: Platform) -> dict[str, str]:
    """{key: reason} of the open failures, each key listed once."""
    failures = platform.failures()
    keys = [f["key"] for f in failures]
    assert len(keys) == len(set(keys)), f"a record has several open failures: {keys}"
    return {f["key"]: f["reason"] for f in failures}


def make_picture(path: Path, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


def make_outside(folder: Path) -> dict[str, Path]:
    """A real file of every kind, outside the folder the ingest is given."""
    folder.mkdir(parents=True)
    (folder / "secret.txt").write_text("root:x:0:0:the secret outside the folder\n")
    (folder / "page.html").write_text("<html><body><p>A page outside the folder, with a "
                                      "paragraph of text.</p></body></html>")
    frames = [np.full((64, 64, 3), 20 * i, np.uint8) for i in range(10)]
    encode(frames, path=folder / "clip.mp4")
    return {"txt": folder / "secret.txt", "html": folder / "page.html",
            "png": make_picture(folder / "pic.png"), "mp4": folder / "clip.mp4"}


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


# --------------------------------------------------------------------------------------
# A manifest holding every bad record, good records around them
# --------------------------------------------------------------------------------------

GOOD = [f"good-{i}" for i in range(5)]


def good(n: int) -> dict:
    return {"id": GOOD[n], "text": f"good record number {n} with a few words of its own"}


@pytest.fixture
def bad_manifest(tmp_path: Path, home: Path) -> tuple[Path, dict[str, str]]:
    """(manifest, {failure key: reason}); chunks of three records, so a record that
    aborted its chunk would lose the good ones after it."""
    (home / "config.toml").write_text("ingest_chunk = 3\n")
    corpus = tmp_path / "corpus"
    outside = make_outside(tmp_path / "outside")
    make_picture(corpus / "real" / "pic.png", seed=1)
    (corpus / "fake.png").write_text("this is not a picture")
    (corpus / "loop.png").symlink_to("loop.png")
    (corpus / "in.png").symlink_to("real/pic.png")
    (corpus / "out.html").symlink_to(outside["html"])
    (corpus / "out.png").symlink_to(outside["png"])
    (corpus / "out.mp4").symlink_to(outside["mp4"])
    lines: list[object] = [
        good(0),
        '{"id": "deep", "meta": ' + "[" * 100_000 + "]" * 100_000 + "}",
        {"id": "deep-meta", "meta": {"a": nested(100)}},
        '{"id": "big-int", "meta": {"n": ' + "9" * 5000 + "}}",
        '{"id": "nan", "meta": {"x": NaN}}',
        good(1),
        '{"id": "inf", "meta": {"x": -Infinity}}',
        '{"id": "huge-float", "meta": {"x": 1e999}}',
        '{"id": "sur\\ud800", "text": "a lone surrogate in the id"}',
        '{"id": "sur-text", "text": "a lone \\udc80 surrogate in the text"}',
        '{"id": "sur-meta", "text": "x", "meta": {"k": "\\ud83d"}}',
        '{"id": "nul\\u0000id", "text": "a NUL in the id"}',
        '{"id": "nul-text", "text": "a NUL \\u0000 in the text"}',
        '{"id": "nul-meta", "text": "x", "meta": {"a\\u0000": 1}}',
        good(2),
        {"id": "x" * 600, "text": "an id over the id column"},
        {"id": "loop", "images": ["loop.png"]},
        {"id": "out-html", "html": "out.html"},
        {"id": "out-img", "images": ["out.png"]},
        {"id": "out-vid", "video": "out.mp4"},
        {"id": "not-image", "images": ["fake.png"]},
        {"id": "in-link", "images": ["in.png"]},
        good(3),
    ]
    expected = {
        "line 2": "too_deep", "deep-meta": "too_deep", "line 4": "bad_number",
        "line 5": "bad_number", "line 7": "bad_number", "line 8": "bad_number",
        "sur\\ud800": "invalid_unicode", "sur-text": "invalid_unicode",
        "sur-meta": "invalid_unicode", "nul\\x00id": "nul_character", "nul-text": "nul_character",
        "nul-meta": "nul_character", "loop": "symlink_loop", "out-html": "path_escape",
        "out-img": "path_escape", "out-vid": "path_escape", "not-image": "not_an_image",
    }
    return write_manifest(corpus, lines), expected


def check_bad_manifest(platform: Platform, report: object, expected: dict[str, str]) -> None:
    found = open_failures(platform)
    long_keys = [k for k in found if k.startswith("x" * 100)]
    assert len(long_keys) == 1 and len(long_keys[0]) <= 512
    assert found.pop(long_keys[0]) == "invalid_field"
    assert found == expected
    assert stored_ids(platform) == set(GOOD[:4]) | {"in-link"}
    assert report.failed == len(expected) + 1  # type: ignore[attr-defined]
    for failure in platform.failures():
        assert "\x00" not in failure["key"] + failure["detail"]
        assert " object at 0x" not in failure["detail"], failure["detail"]


def test_every_bad_record_fails_alone_and_the_rest_is_ingested(
    platform: Platform, bad_manifest: tuple[Path, dict[str, str]]
) -> None:
    manifest, expected = bad_manifest
    first = platform.ingest(manifest)
    assert first.new == 5
    check_bad_manifest(platform, first, expected)

    again = platform.ingest(manifest)
    assert (again.new, again.updated, again.unchanged) == (0, 0, 5)
    check_bad_manifest(platform, again, expected)
    history = platform.failures(include_resolved=True)
    assert len(history) == len(expected) + 1  # a record failing again keeps its one failure


def test_python_items_are_checked_as_manifest_records(platform: Platform) -> None:
    report = platform.ingest([
        {"id": "ok", "text": "a good item"},
        Item(id="nul\x00", text="x"),
        Item(id="nan", text="x", meta={"x": float("nan")}),
        Item(id="when", text="x", meta={"at": datetime(2024, 1, 1)}),
        Item(id="deep", text="x", meta={"a": nested(5000)}),
        Item(id="key", text="x", meta={1: "a key that is no string"}),
        Item(id="long", text="x", meta={"n": 10**5000}),
        Item(id="y" * 513, text="x"),
        Item(id=7, text="an id that is no string"),  # type: ignore[arg-type]
        {"id": "ok-2", "text": "another good item"},
    ])
    assert report.new == 2
    reasons = sorted(open_failures(platform).values())
    assert reasons == sorted(["nul_character", "bad_number", "invalid_field", "too_deep",
                              "invalid_field", "bad_number", "invalid_field", "missing_id"])


def test_a_page_the_extractor_fails_on_fails_alone(
    platform: Platform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever goes wrong inside page extraction (here: trafilatura's optional
    dependency missing) fails that page's item, never the ingest."""
    real = input_items.extract_page

    def extract_page(data: bytes, *args: object, **kwargs: object) -> object:
        if b"boom" in data:
            raise ImportError("lxml.html.clean module is now a separate project lxml_html_clean")
        return real(data, *args, **kwargs)

    monkeypatch.setattr(input_items, "extract_page", extract_page)
    corpus = tmp_path / "pages"
    corpus.mkdir()
    (corpus / "a.html").write_text("<html><body><p>boom goes this page</p></body></html>")
    (corpus / "b.html").write_text("<html><body><p>a page that reads well enough</p></body></html>")
    report = platform.ingest(corpus)
    assert report.new == 1
    failures = platform.failures()
    assert [(f["key"], f["reason"]) for f in failures] == [("a.html", "page_error")]
    assert "ImportError" in failures[0]["detail"] and "lxml_html_clean" in failures[0]["detail"]


# --------------------------------------------------------------------------------------
# Folders: every path stays inside, odd names and links fail alone
# --------------------------------------------------------------------------------------


def test_folder_paths_stay_inside_for_every_file_type(platform: Platform, tmp_path: Path) -> None:
    outside = make_outside(tmp_path / "outside")
    folder = tmp_path / "drop"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("the first good text of the folder")
    (folder / "z.txt").write_text("the last good text of the folder, different words")
    (folder / "passwd.txt").symlink_to(outside["txt"])
    (folder / "page.html").symlink_to(outside["html"])
    (folder / "pic.png").symlink_to(outside["png"])
    (folder / "clip.mp4").symlink_to(outside["mp4"])
    (folder / "sub" / "up.txt").symlink_to("../../outside/secret.txt")
    (folder / "loop.txt").symlink_to("loop.txt")
    (folder / "dangling.png").symlink_to("nowhere.png")
    (folder / "sub" / "inside.txt").symlink_to("../a.txt")
    (folder / "linked").symlink_to(tmp_path / "outside")
    (folder / "nul.txt").write_bytes(b"a NUL \x00 in a text file")
    try:
        with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as fh:
            fh.write(b"a file whose name is Latin-1")
    except OSError:
        pytest.skip("this file system refuses file names that are not UTF-8")
    expected = {
        "passwd.txt": "path_escape", "page.html": "path_escape", "pic.png": "path_escape",
        "clip.mp4": "path_escape", "sub/up.txt": "path_escape", "loop.txt": "symlink_loop",
        "dangling.png": "missing_file", "nul.txt": "nul_character",
        "caf\\xe9.txt": "invalid_file_name", "linked": "unsupported_type",
    }
    for _ in range(2):
        report = platform.ingest(folder)
        assert report.failed == len(expected)
        assert open_failures(platform) == expected
        assert stored_ids(platform) == {"a.txt", "z.txt", "sub/inside.txt"}
    assert [c.as_dict() for c in platform.clusters()] == [
        {"canonical": "a.txt", "members": ["a.txt", "sub/inside.txt"]}]


def test_one_file_is_one_item_whatever_it_holds(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    note = tmp_path / "notes" / "note.txt"
    note.parent.mkdir()
    note.write_text('{"id": "x", "text": "a line that looks like a manifest record"}\n')
    rc, out, _ = cli("ingest", str(note))
    assert rc == 0 and "1 new" in out
    rc, out, _ = cli("stats", "--format", "json")
    assert json.loads(out)["items"] == 1
    rc, out, _ = cli("query", "--text", "a line that looks like a manifest record", "--format", "json")
    assert [m["id"] for m in json.loads(out)][:1] == ["note.txt"]


def test_a_second_folder_with_the_same_names_needs_an_id_prefix(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    for name, own in (("one", "the first folder's own words"), ("two", "other words entirely, second")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.txt").write_text(own)
        (tmp_path / name / "b.txt").write_text("a text both folders hold, word for word")
    assert cli("ingest", str(tmp_path / "one"))[0] == 0

    rc, out, err = cli("ingest", str(tmp_path / "two"))
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "--id-prefix" in err and "a.txt" in err and str((tmp_path / "one").resolve()) in err
    assert json.loads(cli("stats", "--format", "json")[1])["items"] == 2

    rc, out, _ = cli("ingest", str(tmp_path / "two"), "--id-prefix", "two/")
    assert rc == 0 and "2 new" in out
    pairs = [json.loads(line) for line in cli("pairs", "--format", "jsonl")[1].splitlines()]
    assert [(p["a"], p["b"]) for p in pairs] == [("b.txt", "two/b.txt")]

    # Each folder again, as it was ingested: an update of its own items.
    assert "2 unchanged" in cli("ingest", str(tmp_path / "one"))[1]
    assert "2 unchanged" in cli("ingest", str(tmp_path / "two"), "--id-prefix", "two/")[1]


# --------------------------------------------------------------------------------------
# Memory: chunks bounded by bytes, long lines refused while reading
# --------------------------------------------------------------------------------------


def test_a_chunk_closes_at_its_byte_bound(home: Path, db_url: str, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    paths = [make_picture(corpus / f"p{i}.bmp", seed=i) for i in range(5)]
    size = paths[0].stat().st_size
    assert all(p.stat().st_size == size for p in paths)
    records = [{"id": f"p{i}", "images": [f"p{i}.bmp"]} for i in range(5)]
    records.insert(2, {"id": "large", "text": "w " * size * 2})
    manifest = write_manifest(corpus, records)
    # Two pictures a chunk; the text of four pictures' size goes alone.
    (home / "config.toml").write_text(f"ingest_chunk = 100\ningest_chunk_bytes = {2 * size}\n")
    with Platform.open(home, db_url) as platform:
        report = platform.ingest(manifest)
    assert (report.new, report.failed) == (6, 0)
    assert report.chunks == 4  # [p0 p1] [large] [p2 p3] [p4]


def test_a_long_manifest_line_is_refused_while_read(platform: Platform, tmp_path: Path,
                                                    home: Path) -> None:
    (home / "config.toml").write_text("max_manifest_line_bytes = 1000\n")
    manifest = write_manifest(tmp_path / "c", [
        good(0), {"id": "long", "text": "y" * 50_000}, good(1)])
    with Platform.open(home, platform.url) as limited:
        report = limited.ingest(manifest)
        assert (report.new, report.failed) == (2, 1)
        [failure] = limited.failures()
    assert (failure["key"], failure["reason"]) == ("line 2", "too_large")
    size = len(manifest.read_bytes().splitlines(keepends=True)[1])
    assert f"{size} bytes" in failure["detail"]


# --------------------------------------------------------------------------------------
# Every reason documented
# --------------------------------------------------------------------------------------

ERRORS = {"InputError", "PageError", "ImageError", "VideoError", "SubtitleError"}


def emitted_reasons() -> set[str]:
    """Every reason literal the package raises an input error with: the first argument of
    each InputError / PageError / ImageError / VideoError, and of super().__init__ in
    their subclasses."""
    found = set()
    for path in Path(mmdedup.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        subclasses = {node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                      and any(getattr(b, "id", None) in ERRORS for b in node.bases)}
        calls = [(node, None) for node in ast.walk(tree) if isinstance(node, ast.Call)]
        calls += [(node, cls) for cls in subclasses for node in ast.walk(cls)
                  if isinstance(node, ast.Call)]
        for call, cls in calls:
            func = call.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            is_super = (cls is not None and name == "__init__" and isinstance(func, ast.Attribute)
                        and isinstance(func.value, ast.Call)
                        and getattr(func.value.func, "id", None) == "super")
            if (name in ERRORS or is_super) and call.args and isinstance(call.args[0], ast.Constant) \
                    and isinstance(call.args[0].value, str):
                found.add(call.args[0].value)
    return found


def test_every_failure_reason_is_declared_and_documented() -> None:
    emitted = emitted_reasons()
    assert {"malformed_json", "corrupt_video", "undecodable_page", "symlink_loop"} <= emitted
    assert emitted - set(REASONS) == set(), "declare these in input/reasons.py"
    assert set(REASONS) - emitted == set(), "reasons nothing raises any more"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| reason | meaning |"):].split("\n\n")[0]
    documented = dict(re.findall(r"^\| `([a-z_0-9]+)` \| (.+) \|$", table, re.M))
    assert documented == REASONS, "the README's table of failure reasons and REASONS differ"
