"""Page items through ingest: main text as the text signal, the dom signal, repeated site
blocks dropped, and bad pages recorded with their reason."""

from __future__ import annotations

import shutil
from pathlib import Path

from sqlalchemy import select

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
    # The first chunk's two pages came before the site had three: nothing was common yet.
    assert "newsletter" in texts["p0"] and "newsletter" in texts["p1"]
    assert all("newsletter" not in texts[f"p{i}"] for i in range(2, 12))
    assert all(f"Story {i}" in texts[f"p{i}"] and "council" in texts[f"p{i}"] for i in range(12))
