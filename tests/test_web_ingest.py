"""Page items through ingest: main text as the text signal, the dom signal, repeated site
blocks dropped, and bad pages recorded with their reason."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import select, text

from mmdedup import Platform
from mmdedup.store.schema import Item

from helpers import pair_map

DATA = Path(__file__).parent / "data" / "web"


def test_folder_of_pages(platform: Platform, tmp_path: Path) -> None:
    folder = tmp_path / "crawl"
    shutil.copytree(DATA, folder)
    depth = 100_000
    (folder / "deep.html").write_text("<html><body>" + "<div>" * depth + "x" + "</div>" * depth)
    report = platform.ingest(folder)
    reasons = {f["key"]: f["reason"] for f in platform.failures()}
    assert reasons == {"no_content.html": "empty_content", "xml_bomb.xhtml": "malformed_page",
                       "deep.html": "page_too_deep"}
    assert report.new == 7
    pairs = pair_map(platform)
    # One story on two sites: the same main text under different templates.
    story = pairs[("en_a1.html", "en_b1.html")]
    assert story["tier"] == "strong" and story["signals"]["dom"] < 0.2
    # A GBK page without a charset declaration, detected, equals its UTF-8 twin.
    assert pairs[("zh_gbk_nometa.html", "zh_news.html")]["signals"]["text"] >= 0.9
    # Two articles of one site share the template, not the text.
    assert ("en_a1.html", "en_a2.html") not in pairs
    with platform.sessions() as session:
        title_text = session.execute(select(Item.page_text, Item.page_date).where(
            Item.id == "en_a1.html")).one()
    assert "flood barrier" in title_text.page_text and "Local News" not in title_text.page_text
    assert title_text.page_date == "2024-03-05"


TEMPLATE = """<html><head><meta charset="utf-8"><title>{title}</title></head><body>
<nav><a href="/">Home</a> <a href="/news">News</a></nav>
<article><h1>{title}</h1>
<p>{body}</p>
<p>Subscribe to the Harbour Gazette newsletter for the morning briefing every weekday.</p>
</article><footer>(c) Harbour Gazette</footer></body></html>"""

WORDS = ("river council budget school harbour museum railway hospital market festival "
         "library bridge election tunnel stadium theatre orchard factory airport garden").split()


def test_lines_repeated_across_a_site_leave_the_main_text(home: Path, db_url: str, tmp_path: Path) -> None:
    (home / "config.toml").write_text("block_min_pages = 3\nblock_min_share = 0.5\ningest_chunk = 2\n")
    pages = tmp_path / "pages"
    pages.mkdir()
    records = []
    for i in range(12):
        body = " ".join(WORDS[(i * 7 + j) % len(WORDS)] + str(j % 5) for j in range(60))
        (pages / f"p{i}.html").write_text(TEMPLATE.format(title=f"Story {i}", body=body))
        records.append({"id": f"p{i}", "html": f"pages/p{i}.html", "meta": {"url": f"https://gazette.example/{i}"}})
    import json

    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    with Platform.open(home, db_url) as platform:
        platform.ingest(tmp_path / "m.jsonl")
        with platform.sessions() as session:
            texts = dict(session.execute(select(Item.id, Item.page_text)).all())
    # The first chunk's two pages came before the site had three: they are cleaned once
    # the line is known to recur.
    assert all("newsletter" not in texts[f"p{i}"] for i in range(12))
    assert all(f"Story {i}" in texts[f"p{i}"] and "council" in texts[f"p{i}"] for i in range(12))


# --------------------------------------------------------------------------------------
# Short articles beside long side matter that changes from page to page: plain divs, no
# <aside>/<nav>, so the extractor keeps the side matter as main text.
# --------------------------------------------------------------------------------------

SOUP = """<html><head><meta charset="utf-8"><title>Courier - {title}</title></head><body>
<div class="w"><div class="c1"><a href="/">Courier</a></div>
<div class="c2"><div class="hd">{title}</div><div class="dt">2024-05-{day:02d}</div>
<div class="bd">{body}</div>{ads}<div class="c3"><div class="hd2">You may also like</div>{related}</div>
<div class="tx">Weather today: {weather} degrees.</div></div></div></body></html>"""

ADS = ["Advertisement. Switch to Bright Valley Energy today and save up to 200 pounds a year on your "
       "household bills, with fixed prices for two years and no exit fees for new customers.",
       "Sponsored. Book a weekend break on the coast from 59 pounds per night, breakfast included, "
       "with free cancellation until the day before arrival and children under twelve free.",
       "Advertisement. Home insurance from 8 pounds a month: compare quotes from over forty insurers "
       "in under two minutes and get a cinema ticket every week for a year."]


def _vocab(rng) -> list[str]:
    syll = "ka lo mi re tu sa ne po vi da fe gu ho ji ze bo ru ta".split()
    return sorted({rng.choice(syll) + rng.choice(syll) + rng.choice(syll) for _ in range(600)})


def _site(n: int, seed: int = 7):
    """n short articles (title, paragraphs of about 70 words all told)."""
    import random

    rng = random.Random(seed)
    vocab = _vocab(rng)
    return [(" ".join(rng.choice(vocab) for _ in range(5)).capitalize(),
             [" ".join(rng.choice(vocab) for _ in range(22)) + "." for _ in range(3)]) for _ in range(n)], rng


def _soup_page(articles, i: int, rng) -> str:
    from html import escape

    title, paras = articles[i]
    recent = [(i - k) % len(articles) for k in range(1, 8)]
    related = "".join(
        f'<div class="i"><div class="t"><a href="/a/{j}">{escape(articles[j][0])}</a></div>'
        f'<div class="s">{escape(" ".join(" ".join(articles[j][1]).split()[:35]))} ...</div></div>'
        for j in rng.sample(recent, 6))
    ads = "".join(f'<div class="bx"><div class="tx">{escape(a)}</div></div>' for a in rng.sample(ADS, 2))
    body = "".join(f'<div class="tx">{escape(p)}</div>' for p in paras)
    return SOUP.format(title=escape(title), day=1 + i % 28, body=body, ads=ads, related=related,
                       weather=rng.randint(-5, 30))


def _crawls(tmp_path: Path, n: int) -> list[Path]:
    import json

    articles, rng = _site(n)
    (tmp_path / "pages").mkdir()
    manifests = []
    for crawl in (1, 2):  # the side matter is drawn again for each crawl
        lines = []
        for i in range(n):
            name = f"a{i}-c{crawl}"
            (tmp_path / "pages" / f"{name}.html").write_text(_soup_page(articles, i, rng), encoding="utf-8")
            lines.append(json.dumps({"id": name, "html": f"pages/{name}.html",
                                     "meta": {"url": f"https://courier.example/{name}"}}))
        manifests.append(tmp_path / f"crawl{crawl}.jsonl")
        manifests[-1].write_text("\n".join(lines) + "\n")
    return manifests


def test_short_articles_beside_recurring_side_lists_pair_only_with_themselves(
        home: Path, db_url: str, tmp_path: Path) -> None:
    # The share guard alone (a line on half the site's pages) never catches the lists:
    # each item is on a few pages only. Four pages a commit: the first pages are signed
    # before anything is known to recur.
    (home / "config.toml").write_text("block_min_pages = 3\nblock_min_share = 0.5\ningest_chunk = 4\n")
    n = 16
    with Platform.open(home, db_url) as platform:
        for manifest in _crawls(tmp_path, n):
            platform.ingest(manifest)
        medium = {tuple(sorted((p["a"], p["b"]))) for p in platform.pairs("medium")}
        with platform.sessions() as session:
            texts = dict(session.execute(select(Item.id, Item.page_text)).all())
    article = lambda pid: pid.split("-")[0]  # noqa: E731
    # (a) different articles of the site are not paired at medium or above
    assert not [p for p in medium if article(p[0]) != article(p[1])]
    # (b) each article crawled twice, its side matter drawn again, still pairs
    assert {(f"a{i}-c1", f"a{i}-c2") for i in range(n)} <= medium
    # The side matter left the main text, of the first pages too; the articles stayed.
    assert not [pid for pid, t in texts.items() if "Advertisement" in t or "Sponsored" in t or " ..." in t]
    assert all(len(texts[f"a{i}-c1"].split()) >= 60 for i in range(n))


def test_a_shared_template_never_lifts_a_pair_whose_texts_differ(platform: Platform, tmp_path: Path) -> None:
    import json

    articles, rng = _site(3)
    # Two pages of one template, half their text in common: the texts differ.
    title, paras = articles[0]
    half = (title, paras[:2] + articles[1][1][:2])
    pages = tmp_path / "pages"
    pages.mkdir()
    lines = []
    for name, art in (("one", articles[0]), ("two", half)):
        html = SOUP.format(title=title, day=3, body="".join(f'<div class="tx">{p}</div>' for p in art[1]),
                           ads="", related="", weather=12)
        (pages / f"{name}.html").write_text(html, encoding="utf-8")
        lines.append(json.dumps({"id": name, "html": f"pages/{name}.html", "meta": {"site": "courier"}}))
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
    platform.ingest(tmp_path / "m.jsonl")
    with platform.sessions() as session:
        stored = session.execute(text("SELECT score, signals FROM pairs")).all()
    assert len(stored) == 1
    score, signals = stored[0]
    signals = json.loads(signals) if isinstance(signals, str) else signals
    assert signals["dom"] > 0.95 and 0.5 <= signals["text"] < 0.8
    assert score == pytest.approx(signals["text"])  # the template added nothing
