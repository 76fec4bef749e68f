"""The HTML report: what it shows, that it is self-contained and escapes item text, that a
missing file is a placeholder, and that a real browser (Debian's chromium, headless)
renders it: a screenshot with the highlight and histogram colours, a DOM with the
clusters and pairs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from skimage import data

from conftest import write_manifest
from mmdedup import Platform
from mmdedup.report.html import MARK_COLOUR, TIER_COLOURS, marked_html, shared_spans
from mmdedup.review.display import display_tokens

from helpers import write_clip_and_trimmed_copy

P1 = ("The city council approved the new harbour bridge on Tuesday after a long debate about "
      "its cost and the traffic it would bring to the old town.")
P2 = ("Construction is expected to start next spring and to last three years, with the main "
      "span lifted into place during the second summer.")
P3 = ("Local shop owners said they welcomed the decision but asked for parking to be kept "
      "open while the works go on.")
P4 = ("Opponents of the project, mostly residents of the northern district, announced that "
      "they would appeal to the regional court.")
OTHER = ("A different closing paragraph about weather and football results in the region "
         "this weekend <script>alert('pwned')</script> nothing to do with bridges.")
ZH_A = "北京市政府今天宣布，新的地铁线路将于明年年底开通，全长三十公里，共设二十个车站。市民对此表示欢迎。"
ZH_B = "据报道，北京市政府今天宣布，新的地铁线路将于明年年底开通，全长三十公里。天气预报说周末有雨。"

# Tiers set so both reworded texts land in the review queue whatever the calibration does
# to them, while the copies of pictures and videos (score 1.0) are strong.
CONFIG = "tier_strong = 0.97\ntier_medium = 0.6\ntier_weak = 0.5\n"


@pytest.fixture(scope="module")
def clips(tmp_path_factory, photos):
    folder = tmp_path_factory.mktemp("clips")
    write_clip_and_trimmed_copy(folder, photos)
    return folder


@pytest.fixture
def store(home: Path, db_url: str, tmp_path: Path, clips: Path) -> Path:
    """A store with a picture cluster, a video cluster, a cluster whose picture file was
    deleted after ingest, and two reworded texts (English, Chinese) in the review queue;
    returns the corpus folder."""
    corpus = tmp_path / "corpus"
    (corpus / "img").mkdir(parents=True)
    shutil.copytree(clips, corpus / "vid")
    astro, coffee = Image.fromarray(data.astronaut()), Image.fromarray(data.coffee())
    astro.save(corpus / "img/astro.png")
    astro.resize((256, 256)).save(corpus / "img/astro-small.jpg", quality=30)
    coffee.save(corpus / "img/coffee.png")
    coffee.save(corpus / "img/coffee-copy.png")
    manifest = write_manifest(corpus, [
        {"id": "news-1", "title": "Bridge approved", "text": "\n\n".join([P1, P2, P3, P4]),
         "images": ["img/astro.png"]},
        {"id": "news-2", "title": "Bridge <b>yes</b>", "text": "\n\n".join([P3, P1, OTHER, P2])},
        # The bare picture (no words to disagree with news-1's story) joins news-1's cluster.
        {"id": "pic-1", "images": ["img/astro-small.jpg"]},
        {"id": "cof-1", "title": "Coffee", "images": ["img/coffee.png"]},
        {"id": "cof-2", "title": "Coffee again", "images": ["img/coffee-copy.png"]},
        {"id": "vid-1", "title": "clip", "video": "vid/orig.mp4"},
        {"id": "vid-2", "title": "clip trimmed", "video": "vid/trimmed.mp4"},
        {"id": "zh-1", "text": ZH_A},
        {"id": "zh-2", "text": ZH_B},
    ])
    (home / "config.toml").write_text(CONFIG)
    with Platform.open(home, db_url) as p:
        report = p.ingest(manifest)
        assert report.failed == 0, p.failures()
    (corpus / "img/coffee-copy.png").unlink()  # moved away after ingest
    return corpus


def render(home: Path, db_url: str, out: Path, **kw) -> tuple[dict, str]:
    with Platform.open(home, db_url) as p:
        summary = p.report(out, **kw)
    return summary, out.read_text(encoding="utf-8")


def test_report_shows_clusters_queue_and_why(store: Path, home: Path, db_url: str,
                                             tmp_path: Path) -> None:
    summary, page = render(home, db_url, tmp_path / "out" / "report.html")
    assert summary["items"] == 9 and summary["clusters"] == summary["clusters_shown"] == 3
    assert summary["pairs"] == {"strong": 3, "medium": 2, "weak": 0}
    assert summary["review_queue"] == summary["review_shown"] == 2

    # Self-contained: every picture inline, nothing to fetch, no script.
    sources = re.findall(r'\bsrc="([^"]*)"', page)
    assert len(sources) >= 6 and all(s.startswith("data:image/jpeg;base64,") for s in sources)
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert "href=" not in page and "url(" not in page and "@import" not in page
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in page
    assert "Bridge &lt;b&gt;yes&lt;/b&gt;" in page

    # Sections, clusters with thumbnails (the video's keyframes too), the missing file.
    for heading in ("Summary", "Fused scores per tier", "Clusters", "Review queue"):
        assert f">{heading}</h2>" in page
    assert page.count('class="cluster"') == 3 and "<svg" in page
    assert all(f'fill="{c}"' in page for t, c in TIER_COLOURS.items() if t != "weak")
    assert 'alt="video: vid/orig.mp4"' in page and 'alt="image: img/astro.png"' in page
    assert re.search(r'class="missing">image: img/coffee-copy.png<br>missing_file:', page)

    # The queue: most uncertain (highest medium score) first, per-signal scores and the
    # raw figures, shared passages marked in both texts (the shuffled paragraphs too).
    pairs = re.findall(r"<b>([\w-]+)</b> &harr; <b>([\w-]+)</b> score ([\d.]+)", page)
    assert {p[:2] for p in pairs} == {("news-1", "news-2"), ("zh-1", "zh-2")}
    assert [float(p[2]) for p in pairs] == sorted((float(p[2]) for p in pairs), reverse=True)
    assert "wjaccard" in page and "simhash_bits" in page
    for passage in (P1, P2, P3):  # a passage runs from its first token to its last
        assert page.count(f"<mark>{passage[:-1]}</mark>{passage[-1]}") == 2
    assert "Opponents" in page and not re.search(r"<mark>[^<]*(Opponents|weather)", page)
    assert "<mark>北京市政府今天宣布，新的地铁线路将于明年年底开通，全长三十公里</mark>" in page

    # A decided pair leaves the queue; a confirmed one joins a cluster; caps are said.
    with Platform.open(home, db_url) as p:
        p.label("zh-1", "zh-2", duplicate=True)
    summary, page = render(home, db_url, tmp_path / "again.html", max_pairs=0, max_clusters=2)
    assert summary["review_queue"] == 1 and summary["clusters"] == 4
    assert "Showing 2 of 4 clusters" in page and "Showing 0 of 1 pairs" in page


def test_report_cli(store: Path, cli, tmp_path: Path) -> None:
    out = tmp_path / "cli.html"
    rc, stdout, _ = cli("report", "--out", str(out), "--max-pairs", "1")
    assert rc == 0 and f"wrote {out}: 3 of 3 clusters, 1 of 2 pairs to review" in stdout
    assert out.read_text(encoding="utf-8").count('class="pair"') == 1
    rc, _, err = cli("report", "--out", str(out), "--max-clusters", "-1")
    assert rc == 2 and "must not be negative" in err


def test_shared_spans_any_order_and_at_least_a_few_tokens() -> None:
    a = "Alpha beta gamma delta. One two three four five. Common words here."
    b = "One two three four five! Alpha beta gamma delta? Words here common."
    spans_a, spans_b = shared_spans(display_tokens(a), display_tokens(b))
    # Two passages, each marked in both texts, though their order differs; three shared
    # words ("words here common" vs "common words here") are no passage.
    assert [a[s:e] for s, e in spans_a] == ["Alpha beta gamma delta", "One two three four five"]
    assert [b[s:e] for s, e in spans_b] == ["One two three four five", "Alpha beta gamma delta"]
    # Case and width are folded as the text signal folds them; the original is shown.
    spans, _ = shared_spans(display_tokens("ＨＡＲＢＯＵＲ Bridge Opens Today"),
                            display_tokens("harbour bridge opens today"))
    assert spans == [(0, 26)]
    assert marked_html("<i>x</i> & y", [(9, 11)]) == "&lt;i&gt;x&lt;/i&gt; <mark>&amp; </mark>y"


@pytest.fixture(scope="module")
def chromium() -> str:
    """The browser, or a skip outside CI (a CI run must have it: .ci/run installs it);
    module-scoped, so a skip comes before any store is built."""
    exe = shutil.which("chromium")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed, and CI must run the browser test "
                        "(make chromium installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium, or make chromium)")
    return exe


def _browse(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _pixels_near(image: np.ndarray, colour: str, tolerance: int = 3) -> int:
    rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(image.astype(int) - rgb).max(axis=2) <= tolerance).sum())


def test_report_in_headless_chromium(chromium: str, store: Path, home: Path, db_url: str,
                                     tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    render(home, db_url, out, max_clusters=1)  # one cluster: the queue fits on screen
    shot = tmp_path / "shot.png"
    _browse(chromium, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,2000",
            out.as_uri())
    image = np.asarray(Image.open(shot).convert("RGB"))
    assert image.shape == (2000, 1200, 3)
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 500  # text, photos: not blank
    assert _pixels_near(image, MARK_COLOUR) > 2000  # the highlighted shared passages
    assert _pixels_near(image, TIER_COLOURS["medium"]) > 300  # histogram bars and badges
    assert _pixels_near(image, TIER_COLOURS["strong"]) > 300

    dom = _browse(chromium, tmp_path / "profile", "--dump-dom", out.as_uri()).stdout
    assert "news-1 (canonical)" in dom and "pic-1" in dom
    assert "Showing 1 of 3 clusters" in dom
    assert re.search(r"<b>news-1</b> ↔ <b>news-2</b>", dom)
    assert f"<mark>{P1[:-1]}</mark>" in dom and "天气预报说周末有雨" in dom
    assert "<script" not in dom.lower() and "&lt;script&gt;alert" in dom
