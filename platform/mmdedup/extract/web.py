"""Web pages: bytes -> text, HTML tree -> main content, and a signature of the DOM.

Crawled pages of one site share a template (navigation, sidebars, footers, ad blocks) that
can be larger than the article itself. Signed as whole-page text, two different articles
of one site look like duplicates (the template trap), and one article under two sites'
templates looks unrelated. So a page yields two signals:

- the text of its main content, the template removed (trafilatura, with a plain lxml
  fallback), optionally with the blocks that recur across a site's pages dropped as well
  (`drop_repeated`, fed by per-site block frequencies: boilerplate, and the side matter
  that changes from page to page but whose items recur across the site);
- the structure of its DOM (`tag_paths` -> `dom_sketch`), which says "built from the same
  template", a hint for fusion and review, never a duplicate call on its own.

Everything here is pure: bytes or strings in, dataclasses and numpy arrays out. Pages are
untrusted input, so decoding and parsing are bounded (size, depth) and every refusal is a
`PageError` with a short machine-readable reason the ingest records against the item.
"""

from __future__ import annotations

import codecs
import logging
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from lxml import etree
from lxml import html as lxml_html

from .minhash import MinHash
from .simhash import SIMHASH_VERSION, simhash64
from .hashing import hash_strings, hash_tokens
from .normalize import normalize
from .tokenbatch import TokenBatch

_log = logging.getLogger(__name__)

# Limits. Bytes, characters and depth are settings (max_file_bytes, max_page_chars,
# max_page_depth in config.py) that every caller passes. A real article page is a few
# hundred KB and rarely nests deeper than 40 elements; libxml2 itself stops at depth 256
# unless huge_tree is on, which it never is here.
MAX_PATHS = 20_000  # elements whose tag path counts in the DOM signature

DOM_PERM = 128
DOM_TOKENS = 2  # class/id tokens kept per element
_DOM_MINHASH = MinHash(num_perm=DOM_PERM, seed=1)
DOM_VERSION = f"dom1-t{DOM_TOKENS}-nodigits-uni+bi-max{MAX_PATHS}|{_DOM_MINHASH.version}|{SIMHASH_VERSION}"


class PageError(ValueError):
    """A page we refuse to read, with a short `reason` the ingest records per item
    ("page_too_large", "page_too_deep", "malformed_page", "empty_page",
    "undecodable_page") and a human `detail`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class DecodeError(PageError):
    """Bytes that decode under no declared or detected charset (binary data, say)."""

    def __init__(self, detail: str) -> None:
        super().__init__("undecodable_page", detail)


# --------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------
# Order of authority, as browsers do it (WHATWG encoding sniffing), with two crawler-side
# corrections: (1) a declared legacy charset is replaced by its superset (GB2312/GBK pages
# routinely use GB18030-only characters; servers saying "iso-8859-1" mean windows-1252),
# and (2) bytes that are valid UTF-8 and not pure ASCII are UTF-8 whatever an
# ASCII-compatible declaration says: mislabelled UTF-8 is the commonest charset error on
# the web (server defaults, copied templates), while legacy-encoded text of more than a
# few non-ASCII characters is practically never valid UTF-8. A declaration that fails to
# decode strictly is ignored, and charset_normalizer detects.

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_ALIASES = {"x-gbk": "gbk", "gb_2312-80": "gb2312", "csgb2312": "gb2312", "x-sjis": "shift_jis",
            "unicode-1-1-utf-8": "utf-8", "x-x-big5": "big5", "ks_c_5601-1987": "euc_kr"}
_SUPERSETS = {"gb2312": "gb18030", "gbk": "gb18030", "iso8859-1": "cp1252", "ascii": "cp1252",
              "big5": "big5hkscs", "shift_jis": "cp932", "euc_kr": "cp949", "iso8859-9": "cp1254",
              "tis-620": "cp874", "iso8859-11": "cp874"}
_WIDE = ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be")
_META_CHARSET = re.compile(
    rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_:.+\-]+)"""
    rb"""|<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9_:.+\-]+)""",
    re.I,
)
_PRESCAN = 4096  # bytes searched for <meta charset> (WHATWG says 1024; CMSs put scripts first)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def _codec(label: str | None) -> str | None:
    """Python codec name for a charset label, legacy labels mapped to their superset."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    label = _ALIASES.get(label, label)
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    return _SUPERSETS.get(name, name)


def _meta_charset(head: bytes) -> str | None:
    match = _META_CHARSET.search(head)
    if not match:
        return None
    name = _codec((match.group(1) or match.group(2)).decode("ascii"))
    # A UTF-16 declaration inside ASCII-readable markup is a lie (WHATWG: treat as UTF-8).
    return "utf-8" if name in _WIDE else name


def decode_charset(data: bytes, declared: str | None = None) -> tuple[str, str]:
    """(the page's text, the codec that decoded it): BOM, then the declared (HTTP) charset,
    then <meta charset> / <meta http-equiv> / <?xml encoding?>, then detection; see the
    notes above.

    Raises DecodeError (a PageError, reason "undecodable_page") for bytes that are no text.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"page must be bytes, not {type(data).__name__}")
    data = bytes(data)
    for bom, name in _BOMS:
        if data.startswith(bom):  # a BOM outranks every declaration
            return _checked(data[len(bom):].decode(name, errors="replace")), name
    candidates = []
    http = _codec(declared)
    if http:
        candidates.append(http)
    meta = _meta_charset(data[:_PRESCAN])
    if meta and meta not in candidates:
        candidates.append(meta)
    wide_first = bool(candidates) and candidates[0] in _WIDE
    if not wide_first:
        if data.isascii():
            return _checked(data.decode("ascii")), "ascii"
        try:
            return _checked(data.decode("utf-8")), "utf-8"
        except UnicodeDecodeError:
            pass
    for name in candidates:
        try:
            return _checked(data.decode(name)), name
        except (UnicodeDecodeError, LookupError):
            continue
    return _detect(data)


def _detect(data: bytes) -> tuple[str, str]:
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        raise DecodeError("no charset decodes these bytes (binary data?)")
    name = _codec(best.encoding) or best.encoding
    try:
        return _checked(data.decode(name)), name
    except (UnicodeDecodeError, LookupError):
        return _checked(str(best)), best.encoding


def _checked(text: str) -> str:
    """Refuse "text" that is mostly control characters: binary data some codec accepted."""
    sample = text[:100_000]
    if sample and len(_CONTROL.findall(sample)) > 0.01 * len(sample):
        raise DecodeError("control characters throughout: binary data, not a page")
    return text


# --------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------
# lxml's HTML parser reads no DTD, never touches the network (no_network), and knows only
# HTML's own named entities: an entity declared in a DOCTYPE's internal subset is not
# expanded (it stays literal text), so billion-laughs input cannot blow up here; there is
# no resolve_entities switch on HTMLParser because there is nothing to resolve. huge_tree
# stays off, so libxml2 keeps its own limits (depth 256, 10 MB text nodes), and stops a
# deeper tree with a logged error we turn into "page_too_deep" rather than silently
# keeping a truncated page. XHTML served as XML is parsed with the same HTML parser (its
# XML declaration removed): no XML parser, and hence no entity expansion, is used anywhere.
# We still refuse a DOCTYPE that declares entities: no real web page does; it is an attack
# or not a page, and its half-parsed subset would leak into the text as "]>".

_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")
_ENTITY_DECL = re.compile(r"<!DOCTYPE[^>\[]*\[[^\]]*<!ENTITY", re.I)
_local = threading.local()


def _parser() -> lxml_html.HTMLParser:
    """One parser per thread (lxml advises against sharing parsers between threads)."""
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = lxml_html.HTMLParser(
            no_network=True, huge_tree=False, remove_comments=True, remove_pis=True,
            collect_ids=False, default_doctype=False,
        )
        _local.parser = parser
    return parser


def parse(html: str, *, max_chars: int, max_depth: int) -> lxml_html.HtmlElement:
    """The page's document root (an lxml.html element), or PageError.

    "page_too_large" over `max_chars` characters, "page_too_deep" deeper than `max_depth`
    elements (or than libxml2's own 256), "malformed_page" for entity declarations or
    what the parser cannot read, "empty_page" for nothing at all.
    """
    if not isinstance(html, str):
        raise TypeError(f"parse() takes str, not {type(html).__name__}; decode_charset() first")
    if len(html) > max_chars:
        raise PageError("page_too_large", f"{len(html):,} characters > {max_chars:,}")
    if _ENTITY_DECL.search(html, 0, 65536):
        raise PageError("malformed_page", "DOCTYPE declares entities (entity-expansion attack?)")
    html = _XML_DECL.sub("", html, count=1)  # lxml refuses str input with an encoding declaration
    if _CONTROL.search(html):
        html = _CONTROL.sub("", html)  # NUL and friends: lxml refuses them, browsers drop them
    if not html.strip():
        raise PageError("empty_page", "no markup")
    parser = _parser()
    try:
        root = lxml_html.document_fromstring(html, parser=parser)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError) as exc:
        _check_limits(str(exc))
        raise PageError("malformed_page", str(exc)[:200]) from None
    for entry in parser.error_log:
        if entry.type_name == "ERR_RESOURCE_LIMIT" or "depth" in entry.message.lower():
            _check_limits(entry.message)
    depth = _depth(root)
    if depth > max_depth:
        raise PageError("page_too_deep", f"depth {depth} > {max_depth}")
    return root


def _check_limits(message: str) -> None:
    """Raise the PageError for a libxml2 resource-limit message (a truncated parse)."""
    text = " ".join(message.split())[:160]
    if "depth" in text.lower():
        raise PageError("page_too_deep", f"parser limit: {text}")
    if "huge" in text.lower() or "limit" in text.lower():
        raise PageError("page_too_large", f"parser limit: {text}")


def _depth(root: etree._Element) -> int:
    depth = deepest = 0
    for event, _ in etree.iterwalk(root, events=("start", "end")):
        if event == "start":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


# --------------------------------------------------------------------------------------
# Main content
# --------------------------------------------------------------------------------------


@dataclass
class Page:
    """The main content of a page. Empty `text`: the page has none (the caller records
    "empty_content"). `used_fallback`: trafilatura found nothing, the lxml fallback spoke."""

    title: str | None
    text: str
    date: str | None
    used_fallback: bool


_FALLBACK_DROP = ("script", "style", "noscript", "template", "nav", "header", "footer", "aside",
                  "form", "iframe", "svg", "select", "button")
# Class/id words of template blocks built from plain divs.
_BOILERPLATE_ATTR = re.compile(
    r"(?:^|[\s_-])(?:nav|navbar|menu|header|footer|sidebar|side|breadcrumbs?|cookie|banner|ad|ads|"
    r"advert|promo|share|social|related|subscribe|newsletter|copyright|masthead|widget)(?:$|[\s_-])",
    re.I,
)
_BLOCK_TAGS = frozenset("""address article blockquote br dd div dl dt figcaption figure h1 h2 h3 h4
    h5 h6 hr li main ol p pre section table td th tr ul""".split())


def main_content(tree: lxml_html.HtmlElement) -> Page:
    """Title, main text (one block a line), publication date of a page.

    trafilatura with favor_precision and no comments: for deduplication a missed paragraph
    costs little, template text kept costs a lot (it makes different pages alike). Where
    trafilatura finds nothing (short pages, odd markup), the body's text minus script,
    style, navigation, header, footer, aside and template-looking blocks, so the page still
    has a text signal; a page that has neither gives "".

    trafilatura's own metadata pass (author, site name, categories...) would halve the
    throughput for two fields, so the title comes from og:title / h1 / <title> and the date
    from htmldate (what trafilatura itself calls: meta tags, JSON-LD, <time>, date-like
    bylines), both on the tree already parsed (`parse`, under the configured limits).
    """
    import trafilatura
    from htmldate import find_date

    if not isinstance(tree, lxml_html.HtmlElement):
        raise TypeError(f"main_content() takes a parsed page, not {type(tree).__name__}; parse() first")
    doc = None
    try:
        # trafilatura and htmldate copy a tree they are given: `tree` stays intact.
        doc = trafilatura.bare_extraction(
            tree, with_metadata=False, include_comments=False, favor_precision=True,
            include_tables=True, include_images=False, include_links=False, deduplicate=False,
        )
    except Exception as exc:  # noqa: BLE001 - heuristics crashing on odd markup must not lose the page
        _log.debug("trafilatura failed (%s: %s); using the fallback", type(exc).__name__, exc)
        doc = None
    try:
        # Not htmldate's extensive search: on a page without a date it guesses one from a
        # "(c) 2024" line; a missing date is better than a wrong one.
        date = find_date(tree, extensive_search=False, original_date=True) or None
    except Exception as exc:  # noqa: BLE001 - as above: no date rather than no page
        _log.debug("htmldate failed (%s: %s)", type(exc).__name__, exc)
        date = None
    title = _html_title(tree)
    text = _tidy(getattr(doc, "text", None) or "")
    if text:
        return Page(title, text, date, False)
    return Page(title, _fallback_text(tree), date, True)


def _clean_line(value: str | None) -> str | None:
    value = " ".join(value.split()) if value else ""
    return value or None


def _html_title(tree: etree._Element) -> str | None:
    """og:title, else the first <h1>, else <title> (which usually carries the site name)."""
    for meta in tree.iterfind(".//meta[@property='og:title']"):
        title = _clean_line(meta.get("content"))
        if title:
            return title
    for path in (".//h1", ".//title"):
        el = tree.find(path)
        if el is not None:
            title = _clean_line(el.text_content())
            if title:
                return title
    return None


def _tidy(text: str) -> str:
    """One block a line, blank lines and edge whitespace gone."""
    return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


def _fallback_text(tree: etree._Element) -> str:
    body = tree.find(".//body")
    if body is None:
        return ""
    # A class word alone does not condemn a block that holds most of the page's text:
    # wrappers are called "has-sidebar" or "layout-with-ads" too.
    half = len(body.text_content()) / 2
    skip = set()
    for el in body.iterdescendants():
        if not isinstance(el.tag, str):
            continue
        if el.tag in _FALLBACK_DROP or (_BOILERPLATE_ATTR.search(
                f"{el.get('class', '')} {el.get('id', '')} {el.get('role', '')}")
                and len(el.text_content()) < half):
            skip.add(el)
    parts: list[str] = []
    skipping = 0
    for event, el in etree.iterwalk(body, events=("start", "end")):
        if event == "start":
            if el in skip:
                skipping += 1
            elif not skipping:
                if el.tag in _BLOCK_TAGS:
                    parts.append("\n")
                if el.text and isinstance(el.tag, str):
                    parts.append(el.text)
        else:
            if el in skip:
                skipping -= 1
            elif not skipping and el.tag in _BLOCK_TAGS:
                parts.append("\n")
            if not skipping and el.tail and el is not body:
                parts.append(el.tail)
    return _tidy("".join(parts))


# --------------------------------------------------------------------------------------
# Repeated blocks
# --------------------------------------------------------------------------------------
# trafilatura keeps some template lines that sit inside the article container ("Read
# more", a copyright line, a subscription appeal), and on pages built of plain divs much
# of the side matter too: lists of other articles with their snippets, ad blocks, "most
# read" widgets. They recur on many pages of one site and on no page of another, so
# per-site block frequencies find them where no site-independent rule can. Two levels:
#
# - common (COMMON): on at least min_pages pages and min_share of the site: the site's
#   boilerplate; always dropped.
# - recurring (RECURRING): on at least min_pages pages, whatever the share. Side matter
#   that changes from page to page recurs so: a related-article item is on a dozen pages
#   of a site of thousands, far under any share a line of boilerplate has, and the TF-IDF
#   weight of its words is not low either (it changes with the lists). But the lines of
#   an article posted min_pages times recur as much. What tells them apart is the page:
#   side matter sits beside an article whose own lines do not recur, while on a page of a
#   much-posted article nearly every line recurs. So recurring lines are dropped only
#   where the lines that do not recur keep at least `min_left` of the page's text;
#   otherwise the page keeps them (and loses its common lines only).
#
# The store keeps the frequencies; these are the pure parts.

KEEP, RECURRING, COMMON = 0, 1, 2


def _blocks(text: str) -> tuple[list[str], list[str]]:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines, [normalize(line) for line in lines]


def block_hashes(text: str) -> list[int]:
    """XXH3-64 of each normalised non-empty line (block) of a main text, in order."""
    _, norm = _blocks(text)
    return hash_strings(norm).tolist() if norm else []


def drop_repeated(text: str, is_common: Callable[[np.ndarray], np.ndarray], min_left: float = 0.0) -> str:
    """The text without the blocks `is_common` flags. It gets a uint64 array of
    `block_hashes` and returns, per block, a bool (True: common, drop it) or a level
    (KEEP, RECURRING, COMMON); RECURRING blocks go only where what is left holds at least
    `min_left` of the characters of the text without its common blocks (see above)."""
    lines, norm = _blocks(text)
    if not lines:
        return ""
    level = np.asarray(is_common(hash_strings(norm)))
    if level.shape != (len(lines),):
        raise ValueError(f"is_common returned shape {level.shape}, expected ({len(lines)},)")
    level = np.where(level.astype(bool), COMMON, KEEP) if level.dtype == bool else level.astype(np.int64)
    keep = level == KEEP
    if (level == RECURRING).any():
        size = np.fromiter((len(n) for n in norm), np.int64, len(norm))
        if size[keep].sum() < min_left * size[level != COMMON].sum():
            keep = level != COMMON  # nearly all of it recurs: a much-posted article, not side matter
    return "\n".join(line.strip() for line, k in zip(lines, keep.tolist()) if k)


def block_levels(df: np.ndarray, pages: int, min_pages: int, min_share: float) -> np.ndarray:
    """KEEP, RECURRING or COMMON for blocks on `df` pages of a site of `pages` pages."""
    df = np.asarray(df, np.int64)
    level = np.where(df >= min_pages, RECURRING, KEEP)
    return np.where((df >= min_pages) & (df >= min_share * pages), COMMON, level)


@dataclass
class BlockStats:
    """Document frequency of blocks per site key (host, say), in memory.

    A block is common on a site when at least `min_pages` of its pages and a share of at
    least `min_share` of them hold it. Both guards matter: an article posted five times on
    a big site recurs on five pages but on a tiny share of them, and must not be dropped
    (that would hide the very duplicates we look for); on a site we have seen three pages
    of, everything is "on every page". Callers pass both (Settings.block_min_pages and
    Settings.block_min_share). A block on min_pages pages at a smaller share is recurring
    (`levels`): side matter, or that article; `drop_repeated` tells them apart per page.
    """

    pages: Counter = field(default_factory=Counter)
    freq: dict = field(default_factory=dict)

    def add(self, site: str, hashes: Sequence[int] | np.ndarray) -> None:
        """Count one page of `site` (its `block_hashes`; repeats within the page count once)."""
        self.pages[site] += 1
        self.freq.setdefault(site, Counter()).update(set(np.asarray(hashes, np.uint64).tolist()))

    def levels(self, site: str, hashes: Sequence[int] | np.ndarray, min_pages: int,
               min_share: float) -> np.ndarray:
        """KEEP, RECURRING or COMMON per hash (`block_levels`)."""
        hashes = np.asarray(hashes, np.uint64)
        total = self.pages.get(site, 0)
        counts = self.freq.get(site)
        if not total or counts is None:
            return np.zeros(len(hashes), np.int64)
        df = np.fromiter((counts.get(h, 0) for h in hashes.tolist()), np.int64, len(hashes))
        return block_levels(df, total, min_pages, min_share)

    def common(self, site: str, hashes: Sequence[int] | np.ndarray, min_pages: int,
               min_share: float) -> np.ndarray:
        """bool per hash: does it recur on at least min_pages pages and min_share of the site?"""
        return self.levels(site, hashes, min_pages, min_share) == COMMON

    def checker(self, site: str, min_pages: int, min_share: float) -> Callable[[np.ndarray], np.ndarray]:
        """`is_common` for `drop_repeated` on pages of `site`: the levels of its blocks."""
        return lambda hashes: self.levels(site, hashes, min_pages, min_share)


# --------------------------------------------------------------------------------------
# DOM signature
# --------------------------------------------------------------------------------------
# A template is a tree shape plus class names. Each element becomes the path of its
# ancestors' labels ("html/body/div#main.content/ul.nav/li"); digits are stripped from
# class/id tokens so per-page ids ("post-123", "post-456") agree, and only the first two
# tokens count: the ones that name the component; modifiers and state classes ("is-open",
# "lazyloaded") tend to come later. The feature set is every path plus every pair of
# consecutive paths in document order (which captures sibling order and nesting the bag of
# paths alone misses). Only the first MAX_PATHS elements count: a template shows itself
# long before that, and a path is up to max_depth labels long, so an unbounded list of
# them could take hundreds of MB on a huge page.

_DIGITS = re.compile(r"\d+")
_TOKEN_EDGE = "-_:."


def _token(value: str) -> str:
    return _DIGITS.sub("", value).strip(_TOKEN_EDGE).lower()


def _label(el: etree._Element) -> str:
    """Tag name plus the first DOM_TOKENS id/class tokens: "div#main.content"."""
    tokens: list[str] = []
    ident = (el.get("id") or "").split()
    if ident and _token(ident[0]):
        tokens.append("#" + _token(ident[0]))
    for cls in (el.get("class") or "").split():
        if len(tokens) >= DOM_TOKENS:
            break
        tok = _token(cls)
        if tok and "." + tok not in tokens:  # "post post-12" is one token
            tokens.append("." + tok)
    return el.tag.lower() + "".join(tokens)


def tag_paths(tree: etree._Element, max_paths: int = MAX_PATHS) -> list[str]:
    """Root-to-node label path of every element (the first max_paths), in document order."""
    root = tree.getroot() if isinstance(tree, etree._ElementTree) else tree
    paths: list[str] = []
    stack: list[str] = []
    for event, el in etree.iterwalk(root, events=("start", "end")):
        if not isinstance(el.tag, str):
            continue
        if event == "start":
            if len(paths) >= max_paths:
                break
            label = _label(el)
            path = f"{stack[-1]}/{label}" if stack else label
            stack.append(path)
            paths.append(path)
        else:
            stack.pop()
    return paths


_PAIR_K = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))


def dom_features(pages: Sequence[Sequence[str]]) -> TokenBatch:
    """Hashes of every path and of every consecutive pair of paths, per page."""
    paths = hash_tokens([list(p) for p in pages])
    lengths = paths.lengths
    pair_counts = np.maximum(lengths - 1, 0)
    keep = np.ones(len(paths.hashes), bool)
    keep[paths.offsets[1:][lengths > 0] - 1] = False  # no pair starts at a page's last path
    first, second = paths.hashes[:-1], paths.hashes[1:]
    with np.errstate(over="ignore"):
        pairs = (first * _PAIR_K[0]) ^ (second * _PAIR_K[1])
        pairs ^= pairs >> np.uint64(31)
    pairs = pairs[keep[:-1]] if len(pairs) else pairs
    counts = lengths + pair_counts
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    doc_single = np.repeat(np.arange(len(lengths)), lengths)
    doc_pair = np.repeat(np.arange(len(lengths)), pair_counts)
    order = np.argsort(np.concatenate([doc_single, doc_pair]), kind="stable")
    hashes = np.concatenate([paths.hashes, pairs])[order]
    return TokenBatch(hashes, offsets)


def dom_sketch(pages: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """(SimHash uint64 (n,), MinHash uint32 (n, DOM_PERM)) of each page's `tag_paths`."""
    feats = dom_features(pages)
    return simhash64(feats), _DOM_MINHASH(feats)


# --------------------------------------------------------------------------------------
# One page, as the ingest calls it
# --------------------------------------------------------------------------------------


@dataclass
class PageSignals:
    """What a page gives the signals: its main text (title, date) and its DOM tag paths."""

    title: str | None
    text: str
    date: str | None
    used_fallback: bool
    tag_paths: list[str]
    charset: str


def extract_page(data: bytes, declared_charset: str | None = None, *, max_bytes: int, max_chars: int,
                 max_depth: int, max_paths: int = MAX_PATHS) -> PageSignals:
    """Decode, parse once, extract main content and tag paths; PageError with a reason.

    Empty main text is returned, not raised: the DOM signal still stands, and the caller
    records "empty_content" for the text signal.
    """
    if len(data) > max_bytes:
        raise PageError("page_too_large", f"{len(data):,} bytes > {max_bytes:,}")
    text, charset = decode_charset(data, declared_charset)
    tree = parse(text, max_chars=max_chars, max_depth=max_depth)
    page = main_content(tree)
    return PageSignals(page.title, page.text, page.date, page.used_fallback, tag_paths(tree, max_paths), charset)

