"""Web pages: decoding, bounded parsing, main content, repeated blocks, DOM signature."""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np
import pytest

from mmdedup.config import Settings
from mmdedup.extract import web
from mmdedup.extract.hashing import hash_strings
from mmdedup.extract.minhash import jaccard
from mmdedup.extract.normalize import normalize
from mmdedup.extract.simhash import hamming

DATA = Path(__file__).parent / "data" / "web"
SETTINGS = Settings()
# The limits as the ingest passes them.
TREE_LIMITS = {"max_chars": SETTINGS.max_page_chars, "max_depth": SETTINGS.max_page_depth}
PAGE_LIMITS = {"max_bytes": SETTINGS.max_file_bytes, **TREE_LIMITS}
BLOCK_MIN = (SETTINGS.block_min_pages, SETTINGS.block_min_share)


def read(name: str) -> bytes:
    return (DATA / name).read_bytes()


def main_content(html: str) -> web.Page:
    """`web.main_content` of a page parsed as the ingest parses it."""
    return web.main_content(web.parse(html, **TREE_LIMITS))


def zh_text() -> str:
    return read("zh_news.html").decode("utf-8")


# --- decoding -------------------------------------------------------------------------


def test_gbk_bytes_declared_utf8_fall_back_to_detection():
    page = zh_text()  # its <meta charset> says utf-8 too
    data = page.encode("gbk")
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    assert web.decode_charset(data, "utf-8")[0] == page
    text, charset = web.decode_charset(data, "UTF-8")
    assert text == page and charset == "gb18030"


def test_utf8_bytes_declared_latin1_are_read_as_utf8():
    page = zh_text()
    assert web.decode_charset(page.encode("utf-8"), "iso-8859-1")[0] == page
    en = '<html><head><meta charset="iso-8859-1"></head><body><p>Caf\u00e9 cr\u00e8me \u2013 na\u00efve</p></body></html>'
    assert web.decode_charset(en.encode("utf-8"))[0] == en


def test_real_latin1_page_still_decodes_as_declared():
    page = '<html><head><meta charset="iso-8859-1"></head><body><p>Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e</p></body></html>'
    text, charset = web.decode_charset(page.encode("latin-1"))
    assert text == page and charset == "cp1252"  # WHATWG: latin-1 labels mean windows-1252


def test_gb2312_declared_page_decodes_as_gb18030(monkeypatch):
    # U+4DAE is in GB18030 only: GB2312/GBK codecs cannot decode it.
    page = '<html><head><meta http-equiv="Content-Type" content="text/html; charset=gb2312"></head><body><p>\u4dae\u5e74\u7eaa\u5ff5</p></body></html>'
    data = page.encode("gb18030")
    with pytest.raises(UnicodeDecodeError):
        data.decode("gb2312")
    text, charset = web.decode_charset(data)
    assert text == page and charset == "gb18030"
    # By the declaration itself, not by detection rescuing a failed GBK decode.
    monkeypatch.setattr(web, "_detect", lambda data: pytest.fail("detection used"))
    bare = "<p>\u4dae\u5e74\u7eaa\u5ff5\u6d3b\u52a8\u5728\u5317\u4eac\u4e3e\u884c</p>"  # no meta
    assert web.decode_charset(bare.encode("gb18030"), "GBK") == (bare, "gb18030")


def test_missing_charset_chinese_page_is_detected():
    data = read("zh_gbk_nometa.html")
    assert b"charset" not in data
    text, charset = web.decode_charset(data)
    assert charset == "gb18030"
    assert "我市新建三座城市公园" in text and "版权所有" in text


def test_bom_outranks_declarations():
    page = '<html><head><meta charset="gbk"></head><body><p>\u57ce\u5e02\u516c\u56ed</p></body></html>'
    data = b"\xff\xfe" + page.encode("utf-16-le")
    assert web.decode_charset(data, "gbk") == (page, "utf-16-le")
    assert web.decode_charset(b"\xef\xbb\xbf" + page.encode("utf-8"), "gbk") == (page, "utf-8")


def test_http_charset_outranks_meta_when_both_decode():
    page = '<html><head><meta charset="windows-1251"></head><body><p>\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440</p></body></html>'
    data = page.encode("koi8-r")
    assert web.decode_charset(data, "koi8-r") == (page, "koi8-r")
    assert web.decode_charset(data)[0] != page  # the meta alone (a lie here) would win


@pytest.mark.parametrize("data", [random.Random(7).randbytes(3000), b"\x00\x01\x02\x03" * 200])
def test_undecodable_bytes_raise_a_clear_error(data):
    with pytest.raises(web.DecodeError) as err:
        web.decode_charset(data)
    assert err.value.reason == "undecodable_page"
    assert isinstance(err.value, web.PageError)
    with pytest.raises(web.PageError):
        web.extract_page(data, **PAGE_LIMITS)


def test_decode_refuses_str():
    with pytest.raises(TypeError):
        web.decode_charset("<html></html>")  # type: ignore[arg-type]


# --- parsing limits --------------------------------------------------------------------


def test_xml_bomb_is_refused_quickly():
    data = read("xml_bomb.xhtml")
    start = time.perf_counter()
    with pytest.raises(web.PageError) as err:
        web.extract_page(data, **PAGE_LIMITS)
    assert err.value.reason == "malformed_page"
    assert "entit" in err.value.detail
    assert time.perf_counter() - start < 2


def test_html_parser_itself_never_expands_dtd_entities():
    # Belt and braces: even past our DOCTYPE check, lxml's HTML parser leaves the
    # declared entities unexpanded (they would be 10^9 "lol"s).
    text = read("xml_bomb.xhtml").decode("ascii")
    from lxml import html as lxml_html

    root = lxml_html.document_fromstring(web._XML_DECL.sub("", text), parser=web._parser())
    body_text = root.find(".//body").text_content()
    assert len(body_text) < 100 and "lollol" not in body_text
    # Quadratic blow-up: one big entity referenced many times.
    quad = ("<!DOCTYPE html [<!ENTITY a \"" + "x" * 50_000 + "\">]><html><body><p>"
            + "&a;" * 50_000 + "</p></body></html>")
    root = lxml_html.document_fromstring(quad, parser=web._parser())
    assert len(root.find(".//body").text_content()) < 400_000
    with pytest.raises(web.PageError) as err:
        web.parse(quad, **TREE_LIMITS)
    assert err.value.reason == "malformed_page"


def test_xhtml_with_xml_declaration_parses():
    signals = web.extract_page(read("xhtml_page.xhtml"), **PAGE_LIMITS)
    assert "highest tides expected in the last week of March" in signals.text
    assert signals.title == "Tide tables for the spring season"
    assert signals.tag_paths[0] == "html"


def test_over_deep_tree_is_refused_without_hanging():
    n = 100_000
    page = ("<html><body>" + "<div>" * n + "deep" + "</div>" * n + "</body></html>").encode()
    start = time.perf_counter()
    with pytest.raises(web.PageError) as err:
        web.extract_page(page, **PAGE_LIMITS)
    assert err.value.reason == "page_too_deep"
    assert time.perf_counter() - start < 5
    # libxml2 stops at depth 256 and keeps a truncated tree: that is refused too, not kept.
    with pytest.raises(web.PageError) as err:
        web.parse(page.decode(), max_chars=SETTINGS.max_page_chars, max_depth=10_000)
    assert err.value.reason == "page_too_deep" and "parser limit" in err.value.detail
    # Our own limit, below libxml2's 256.
    mid = "<html><body>" + "<div>" * 210 + "x" + "</div>" * 210 + "</body></html>"
    with pytest.raises(web.PageError) as err:
        web.parse(mid, **TREE_LIMITS)
    assert err.value.reason == "page_too_deep" and "> 200" in err.value.detail
    assert web.parse(mid, max_chars=SETTINGS.max_page_chars, max_depth=220) is not None
    with pytest.raises(web.PageError):
        web.parse(mid.replace("<div>" * 210, "<div>" * 150), max_chars=SETTINGS.max_page_chars, max_depth=100)
    # The parser is reused: its error log from the failure must not leak into the next page.
    assert web.parse(read("en_a1.html").decode(), **TREE_LIMITS).find(".//h1") is not None


def test_size_limits():
    with pytest.raises(web.PageError) as err:
        web.parse("<p>" + "x" * 2000 + "</p>", max_chars=1000, max_depth=SETTINGS.max_page_depth)
    assert err.value.reason == "page_too_large"
    with pytest.raises(web.PageError) as err:
        web.extract_page(read("en_a1.html"), **{**PAGE_LIMITS, "max_bytes": 1000})
    assert err.value.reason == "page_too_large"


@pytest.mark.parametrize("data", [b"", b"   \n\t  "])
def test_empty_input(data):
    with pytest.raises(web.PageError) as err:
        web.extract_page(data, **PAGE_LIMITS)
    assert err.value.reason == "empty_page"


def test_broken_markup_still_gives_text_and_paths():
    signals = web.extract_page(read("broken.html"), **PAGE_LIMITS)
    assert "old lighthouse on the northern pier" in signals.text
    assert "lantern room has been repaired" in signals.text
    assert len(signals.tag_paths) > 10


def test_control_characters_and_garbage_do_not_break_parsing():
    page = "<html><body><p>Nul\x00 bytes\x01 and \x1b escapes in a paragraph</p>\ufffd\ufffd</body></html>"
    root = web.parse(page, **TREE_LIMITS)
    assert "Nul bytes and  escapes" in root.text_content()
    assert web.parse("just some text, no markup at all", **TREE_LIMITS).find(".//body") is not None


# --- main content ----------------------------------------------------------------------


def test_english_article_main_content():
    page = main_content(read("en_a1.html").decode())
    assert page.title == "City council approves harbour flood barrier"
    assert page.date == "2024-03-05"
    assert not page.used_fallback
    assert "movable flood barrier across the mouth of the old harbour" in page.text
    assert "independent review of the cost estimate" in page.text
    for boilerplate in ("Business and Economy", "Ferry timetable", "Registered in England",
                        "Privacy policy", "dataLayer", "top stories from the harbour"):
        assert boilerplate not in page.text


def test_chinese_article_main_content():
    page = main_content(zh_text())
    assert page.title == "我市新建三座城市公园 市民休闲有了好去处"
    assert page.date == "2024-05-20"
    assert "新增绿地面积约四十二公顷" in page.text
    assert "五百米见绿" in page.text
    for boilerplate in ("热点排行", "滨江大桥夜间施工", "版权所有", "国际新闻", "当前位置"):
        assert boilerplate not in page.text


def test_page_without_main_content_gives_empty_text():
    page = main_content(read("no_content.html").decode())
    assert page.text == ""
    assert page.used_fallback
    assert page.title and "Page not found" in page.title


def test_fallback_when_trafilatura_finds_nothing(monkeypatch):
    import trafilatura

    monkeypatch.setattr(trafilatura, "bare_extraction", lambda *a, **k: None)
    page = main_content(read("en_a1.html").decode())
    assert page.used_fallback
    assert page.title == "City council approves harbour flood barrier"  # og:title, not <title> with the site name
    lines = page.text.splitlines()
    assert any(line.startswith("The city council voted on Tuesday night") for line in lines)
    for boilerplate in ("Business and Economy", "Ferry timetable", "Registered in England",
                        "dataLayer", "Sign up", "Local News"):
        assert boilerplate not in page.text


def test_a_crash_inside_trafilatura_or_htmldate_falls_back(monkeypatch):
    import htmldate
    import trafilatura

    def boom(*a, **k):
        raise IndexError("heuristic bug")

    monkeypatch.setattr(trafilatura, "bare_extraction", boom)
    monkeypatch.setattr(htmldate, "find_date", boom)
    page = main_content(read("en_a2.html").decode())
    assert page.used_fallback and page.date is None
    assert "family bakery that began selling sourdough" in page.text


def test_fallback_keeps_a_wrapper_whose_class_sounds_like_boilerplate(monkeypatch):
    import trafilatura

    monkeypatch.setattr(trafilatura, "bare_extraction", lambda *a, **k: None)
    page = main_content(
        '<html><body class="has-sidebar"><div class="layout-with-ads"><div class="nav">Home | News</div>'
        "<p>The only paragraph of this short notice says the library is closed on Monday.</p>"
        '<div class="ad-box">Buy now</div></div></body></html>')
    assert page.used_fallback
    assert page.text == "The only paragraph of this short notice says the library is closed on Monday."


def test_deep_but_allowed_page_goes_through_trafilatura():
    paras = "<p>A paragraph deep inside a heavily nested layout, long enough to count as text.</p>" * 5
    page = ("<html><body>" + "<div>" * 190 + paras + "</div>" * 190 + "</body></html>").encode()
    signals = web.extract_page(page, **PAGE_LIMITS)
    assert "heavily nested layout" in signals.text
    assert max(p.count("/") for p in signals.tag_paths) == 192


def test_extract_page_returns_all_signals():
    signals = web.extract_page(read("zh_gbk_nometa.html"), **PAGE_LIMITS)
    assert isinstance(signals, web.PageSignals)
    assert signals.charset == "gb18030"
    assert "城南公园附近的居民" in signals.text
    assert signals.date == "2024-05-20"
    assert signals.tag_paths[:2] == ["html", "html/head"]


# --- repeated blocks ------------------------------------------------------------------


def test_block_hashes_are_of_normalised_lines():
    text = "Read more: rising seas\n\n  READ   MORE: Rising Seas  \nSecond block"
    hashes = web.block_hashes(text)
    assert len(hashes) == 3 and hashes[0] == hashes[1] != hashes[2]
    assert hashes == hash_strings([normalize("Read more: rising seas"), normalize("Second block")])[[0, 0, 1]].tolist()
    assert all(isinstance(h, int) for h in hashes)
    assert web.block_hashes("") == [] and web.block_hashes("\n \n") == []


def test_drop_repeated_removes_site_boilerplate_and_keeps_articles():
    a1 = main_content(read("en_a1.html").decode()).text
    a2 = main_content(read("en_a2.html").decode()).text
    stats = web.BlockStats()
    stats.add("harbor", web.block_hashes(a1))
    stats.add("harbor", web.block_hashes(a2))
    for i in range(8):  # more pages of the site: same appeal lines, their own paragraphs
        stats.add("harbor", web.block_hashes(
            f"Paragraph {i} of another story.\nRead more: How other coastal towns are preparing for rising seas\n"
            "Independent local journalism needs your support. Subscribe today from 1 pound a week."))
    cleaned = web.drop_repeated(a1, stats.checker("harbor", *BLOCK_MIN))
    assert "Read more" not in cleaned and "Subscribe today" not in cleaned
    assert cleaned.splitlines() == a1.splitlines()[:-2]
    # Another site has never seen these blocks: nothing is common there.
    assert web.drop_repeated(a1, stats.checker("northwind", *BLOCK_MIN)) == a1
    assert not stats.common("northwind", web.block_hashes(a1), *BLOCK_MIN).any()


def test_block_stats_guards_min_pages_and_min_share():
    stats = web.BlockStats()
    story = web.block_hashes("A paragraph of an article posted five times.")
    for _ in range(5):
        stats.add("big", story)
    for i in range(95):
        stats.add("big", web.block_hashes(f"unique page {i}"))
    assert not stats.common("big", story, min_pages=5, min_share=0.2)[0]  # 5 of 100 pages: a duplicate
    assert stats.common("big", story, min_pages=5, min_share=0.05)[0]
    small = web.BlockStats()
    for _ in range(3):
        small.add("tiny", story)
    assert not small.common("tiny", story, min_pages=5, min_share=0.2)[0]  # on every page, but only 3 pages seen
    assert small.common("tiny", story, min_pages=3, min_share=0.2)[0]
    stats.add("big", story + story)  # repeats within a page count once
    assert stats.freq["big"][story[0]] == 6


def test_drop_repeated_checks_the_callable_shape():
    with pytest.raises(ValueError):
        web.drop_repeated("a\nb", lambda h: np.array([True]))
    assert web.drop_repeated("a\n\nb", lambda h: np.zeros(len(h), bool)) == "a\nb"


# --- DOM signature ---------------------------------------------------------------------


def paths_of(html: str) -> list[str]:
    return web.tag_paths(web.parse(html, **TREE_LIMITS))


def test_tag_paths_strip_digits_and_keep_two_tokens():
    a = paths_of('<html><body><div id="post-123" class="Post post-123 featured big">'
                 '<!-- c --><p class="x1">t</p></div></body></html>')
    b = paths_of('<html><body><div id="post-456" class="post post-456 featured big">'
                 '<p class="x22">t</p></div></body></html>')
    assert a == b == ["html", "html/body", "html/body/div#post.post",
                      "html/body/div#post.post/p.x"]
    c = paths_of('<html><body><div class="main nav extra"><ul class="nav-7"><li>x</li></ul></div></body></html>')
    assert c[-1] == "html/body/div.main.nav/ul.nav/li"
    assert paths_of('<html><body><DIV CLASS="123">x</DIV></body></html>')[-1] == "html/body/div"
    assert paths_of('<html><body><article class="post post-1182 big">x</article></body></html>')[-1] \
        == "html/body/article.post.big"  # "post-1182" is "post" again, not a second token


def test_tag_paths_are_capped():
    tree = web.parse("<html><body><ul>" + "<li>x</li>" * 500 + "</ul></body></html>", **TREE_LIMITS)
    assert len(web.tag_paths(tree)) == 503  # html, body, ul, 500 li
    assert web.tag_paths(tree, max_paths=50) == web.tag_paths(tree)[:50]


def test_dom_similarity_same_template_high_cross_template_low():
    pages = [web.extract_page(read(n), **PAGE_LIMITS).tag_paths
             for n in ("en_a1.html", "en_a2.html", "en_b1.html", "zh_news.html")]
    simhash, minhash = web.dom_sketch(pages)
    assert simhash.dtype == np.uint64 and simhash.shape == (4,)
    assert minhash.dtype == np.uint32 and minhash.shape == (4, web.DOM_PERM)
    assert jaccard(minhash[0], minhash[1]) >= 0.8  # the `dom` signal (web_stage.dom_signal)
    for j in (2, 3):
        assert jaccard(minhash[0], minhash[j]) <= 0.2
    assert jaccard(minhash[2], minhash[3]) <= 0.2
    assert jaccard(minhash[0], minhash[0]) == 1.0
    bits = hamming(simhash[[0, 0, 0]], simhash[[1, 2, 3]])
    assert bits[0] < min(bits[1], bits[2])
    rows = jaccard(minhash[[0, 0]], minhash[[1, 2]])
    assert rows.shape == (2,) and rows[0] > rows[1]


def test_dom_similarity_tolerates_a_different_article_length():
    template = ('<html><body><div class="top"><ul class="menu">{nav}</ul></div>'
                '<div class="story-{n}"><h1>t</h1>{paras}</div><div class="foot">f</div></body></html>')
    nav = "<li><a>x</a></li>" * 8
    short = paths_of(template.format(nav=nav, n=1, paras="<p>a</p>" * 3))
    long = paths_of(template.format(nav=nav, n=2, paras="<p>a</p>" * 12 + "<blockquote>q</blockquote>"))
    other = paths_of('<html><body><table class="layout"><tr><td class="c">' + "<p>a</p>" * 3
                     + "</td></tr></table></body></html>")
    _, mh = web.dom_sketch([short, long, other])
    assert jaccard(mh[0], mh[1]) >= 0.6
    assert jaccard(mh[0], mh[2]) <= 0.3


def test_dom_features_match_a_naive_computation():
    pages = [["html", "html/body", "html/body/p"], [], ["html"]]
    feats = web.dom_features(pages)
    assert feats.lengths.tolist() == [5, 0, 1]
    h = hash_strings(pages[0])
    assert feats.doc(0)[:3].tolist() == h.tolist()
    assert len(set(feats.doc(0)[3:].tolist()) - set(h.tolist())) == 2  # two pair features
    simhash, minhash = web.dom_sketch(pages)
    assert simhash[1] == 0 and (minhash[1] == 0xFFFFFFFF).all()
    assert jaccard(minhash[1], minhash[1]) == 0.0  # empty is never similar
    s0, m0 = web.dom_sketch([])
    assert s0.shape == (0,) and m0.shape == (0, web.DOM_PERM)


def test_dom_version_names_its_parts():
    assert web.DOM_VERSION.startswith("dom1-")
    assert "minhash-" in web.DOM_VERSION and "simhash64-" in web.DOM_VERSION


def test_side_matter_recurring_at_a_small_share_leaves_an_article_but_not_a_reposted_one():
    stats = web.BlockStats()
    side = [f"Related: headline {k} of the site, with a snippet of its first words ..." for k in range(6)]
    article = "\n".join(f"Paragraph {k} of the one article the reader came for, its own words." for k in range(3))
    for i in range(100):  # a big site: each related item on 10 of its 100 pages
        stats.add("big", web.block_hashes(f"Story {i} body.\n" + side[i % 6] if i < 60 else f"Story {i} body."))
    for _ in range(5):  # an article posted five times, its side matter as recurring as it
        stats.add("big", web.block_hashes(article))
    levels = stats.levels("big", web.block_hashes(side[0] + "\n" + article), *BLOCK_MIN)
    assert levels.tolist() == [web.RECURRING] * 4  # none common (10% of the site), all recurring
    checker = stats.checker("big", *BLOCK_MIN)
    new = "A short new article: the council met on Tuesday and approved the budget for the library."
    page = new + "\n" + "\n".join(side)  # as long as the article five times over
    assert web.drop_repeated(page, checker, SETTINGS.block_min_left) == new
    # Nearly every line of the reposted article's page recurs: it keeps them.
    reposted = article + "\n" + side[1]
    assert web.drop_repeated(reposted, checker, SETTINGS.block_min_left) == reposted
