"""Text normalisation and cleaning, shared by exact hashing and the near-duplicate text signals.

Two copies of one article differ in ways no reader notices: full-width versus half-width
characters, Chinese versus Latin punctuation, case, runs of whitespace, spaces that one
editor puts between CJK characters. `normalize` folds all of that away so that such copies
hash the same and tokenise the same. `clean` also takes out what is not content (markup,
links, e-mail addresses; see the note above CLEANER_VERSION).
"""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata

NORMALIZER_VERSION = "norm1"

# Punctuation NFKC leaves alone (CJK full stops, curly quotes, CJK brackets) folded to one
# ASCII form, so "。" and "." or "“" and '"' are the same character after normalisation.
_PUNCT_FOLD = str.maketrans(
    {
        "。": ".", "｡": ".", "、": ",", "､": ",", "·": ".", "・": ".",
        "“": '"', "”": '"', "„": '"', "‟": '"', "«": '"', "»": '"', "〝": '"', "〞": '"',
        "‘": "'", "’": "'", "‚": "'", "‛": "'", "`": "'", "´": "'",
        "「": '"', "」": '"', "『": '"', "』": '"', "《": '"', "》": '"', "〈": '"', "〉": '"',
        "【": "[", "】": "]", "〔": "[", "〕": "]", "〖": "[", "〗": "]", "〘": "[", "〙": "]",
        "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-", "―": "-", "−": "-", "～": "~", "〜": "~",
        "…": "...", "‥": "..", "\u00a0": " ", "\u3000": " ",
        "\u200b": "", "\u200c": "", "\u200d": "", "\ufeff": "", "\u00ad": "",
    }
)

_CJK = r"\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A space next to a CJK character carries no meaning (Chinese does not separate words), so
# "中 文" and "中文" are one text.
_SPACE_NEAR_CJK = re.compile(rf"(?<=[{_CJK}]) (?=\S)|(?<=\S) (?=[{_CJK}])")


_ANY_CJK = re.compile(f"[{_CJK}]")


def normalize(text: str) -> str:
    """Fold width, punctuation, case and whitespace so trivially different copies match.

    str.split/join collapses whitespace several times faster than a regex substitution,
    and the CJK space rule only runs on texts that have a CJK character at all: this is
    on the ingest hot path for every text.
    """
    return _finish(_fold(text))


def _finish(text: str) -> str:
    """`normalize` of a `_fold`ed text: whitespace collapsed, the CJK space rule."""
    text = _collapse_whitespace(text)
    return _SPACE_NEAR_CJK.sub("", text) if not text.isascii() and _ANY_CJK.search(text) else text


# ASCII characters str.split() separates at, other than the space itself.
_ASCII_OTHER_SPACES = b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"


def _collapse_whitespace(text: str) -> str:
    """`" ".join(text.split())`, returning an ASCII text that already is single-spaced as
    it is: splitting and joining a 400-word text costs ~35 us (a string object per word),
    checking it ~2 us, and most texts need no change."""
    if text.isascii() and "  " not in text and not text.startswith(" ") and not text.endswith(" "):
        data = text.encode("ascii")
        if len(data.translate(None, _ASCII_OTHER_SPACES)) == len(data):
            return text
    return " ".join(text.split())


# `_PUNCT_FOLD` as a regex: str.translate with a dict costs ~45 ns a character on any
# non-ASCII text (a dict lookup each), while most texts hold a handful of these characters.
_PUNCT_CHARS = re.compile("[" + "".join(re.escape(chr(c)) for c in _PUNCT_FOLD) + "]")


def _fold(text: str) -> str:
    """`normalize` less the whitespace collapse and the CJK space rule: NFKC, punctuation,
    casefold. ASCII text gets the same result faster: NFKC leaves it alone, casefold is
    lower, and the one ASCII character `_PUNCT_FOLD` maps is the backtick."""
    if text.isascii():
        return (text.replace("`", "'") if "`" in text else text).lower()
    text = unicodedata.normalize("NFKC", text)
    for char in set(_PUNCT_CHARS.findall(text)):  # the replacements hold none of the keys
        text = text.replace(char, _PUNCT_FOLD[ord(char)] or "")
    return text.lower() if text.isascii() else text.casefold()  # one less pass if ASCII now


def text_hash(text: str | None) -> str | None:
    """SHA-256 of the normalised text, the key of exact text duplicates; None if it is empty."""
    normalized = normalize(text) if text else ""
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest() if normalized else None


# --------------------------------------------------------------------------------------
# Cleaning
# --------------------------------------------------------------------------------------
# Copies of one post crawled from two sites differ in markup, tracking links and the contact
# address in the footer, none of which is the content a reviewer compares. Cleaning removes
# them before tokenising so that they cannot make copies look different (or unrelated posts
# that share a footer look alike).

CLEANER_VERSION = "clean1"

_HTML_BLOCK = re.compile(r"<(script|style|noscript|template)\b[^>]*>.*?</\1\s*>", re.I | re.S)
_HTML_COMMENT = re.compile(r"<!--.*?-->|<!\[CDATA\[.*?\]\]>", re.S)
# Only things shaped like tags: "a < b and c > d" in plain text must survive.
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>|<![A-Za-z][^<>]*>|<\?[^<>]*\?>")
# No \b before the scheme: in "看http://x" the Han character is a word character too.
_URL = re.compile(
    r"(?:(?:https?|ftp)://|(?<![A-Za-z0-9.\-])www\.)[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+",
    re.I,
)
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
    r"\.[A-Za-z]{2,}(?![A-Za-z0-9\-])"
)


def clean(text: str) -> str:
    """`normalize`, with markup, entities, URLs and e-mail addresses taken out.

    Tags become spaces (block boundaries separate words; the space is dropped again next
    to CJK by `normalize`). Entities are decoded rather than deleted so "caf&eacute;" and
    "café" stay one word. URLs are matched after normalisation so full-width ones count.
    """
    return _clean_unmarked(_unmark(text))


def _clean_unmarked(text: str) -> str:
    text = normalize(text)
    if _has_link(text):
        text = normalize(_drop_links(text))
    return text


def _unmark(text: str) -> str:
    if "<" in text:
        text = _HTML_BLOCK.sub(" ", text)
        text = _HTML_COMMENT.sub(" ", text)
        text = _HTML_TAG.sub(" ", text)
    if "&" in text:
        text = html.unescape(text)
    return text


def _has_link(text: str) -> bool:
    return "@" in text or "/" in text or "www." in text


def _drop_links(text: str) -> str:
    """URLs and e-mail addresses of a normalised (casefolded, single-spaced) text replaced
    by spaces.

    Neither regex starts with a literal, so a `sub` over a whole text is a slow scan (~50 us
    for 400 words). Neither can match across a space, and a match needs "://" or "www." (a
    URL) or "@" (an address): so each runs only on the space-delimited chunks holding one,
    with the same result (at a chunk's ends its lookarounds see a space or the end of the
    string, both outside their classes).
    """
    if "://" in text or "www." in text:
        text = _sub_chunks(_URL, text, ("://", "www."))
    if "@" in text:
        text = _sub_chunks(_EMAIL, text, ("@",))
    return text


def _sub_chunks(pattern: re.Pattern, text: str, needles: tuple[str, ...]) -> str:
    spans = set()
    for needle in needles:
        at = text.find(needle)
        while at >= 0:
            end = text.find(" ", at)
            end = len(text) if end < 0 else end
            spans.add((text.rfind(" ", 0, at) + 1, end))
            at = text.find(needle, end)
    pieces, done = [], 0
    for start, end in sorted(spans):
        pieces.append(text[done:start])
        pieces.append(pattern.sub(" ", text[start:end]))
        done = end
    pieces.append(text[done:])
    return "".join(pieces)
