"""Text normalisation shared by exact hashing and the near-duplicate text signals.

Two copies of one article differ in ways no reader notices: full-width versus half-width
characters, Chinese versus Latin punctuation, case, runs of whitespace, spaces that one
editor puts between CJK characters. `normalize` folds all of that away so that such copies
hash the same and tokenise the same.
"""

from __future__ import annotations

import hashlib
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

_WS = re.compile(r"\s+")
_CJK = r"\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A space next to a CJK character carries no meaning (Chinese does not separate words), so
# "中 文" and "中文" are one text.
_SPACE_NEAR_CJK = re.compile(rf"(?<=[{_CJK}]) (?=\S)|(?<=\S) (?=[{_CJK}])")


def normalize(text: str) -> str:
    """Fold width, punctuation, case and whitespace so trivially different copies match."""
    text = unicodedata.normalize("NFKC", text).translate(_PUNCT_FOLD).casefold()
    text = _WS.sub(" ", text).strip()
    return _SPACE_NEAR_CJK.sub("", text)


def text_hash(text: str | None) -> str | None:
    """SHA-256 of the normalised text, the key of exact text duplicates; None if it is empty."""
    normalized = normalize(text) if text else ""
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest() if normalized else None
