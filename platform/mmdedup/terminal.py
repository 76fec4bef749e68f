"""Text bound for a terminal, where item ids, titles, texts, paths and meta must be read,
never obeyed.

They come from users' files: an ESC in an id starts a sequence that clears the screen,
moves the cursor or retitles the window, a carriage return overwrites what was printed,
a bidirectional override shows a text backwards. Every terminal output (tables, messages,
the review screen) passes through `printable`; JSON output through `json_printable`,
which keeps it the same JSON.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls (0x9b is CSI to some terminals), the line and paragraph
# separators, the bidirectional embeddings, overrides and isolates, and lone surrogates
# (which no terminal encoding can carry).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
# The same, less what JSON itself already writes as an escape (below 0x20).
_JSON_RAW = re.compile("[\x7f-\x9f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, lines: bool = False) -> str:
    """`text` (str() of anything) with every control character written as an escape
    (`\\x1b`, `\\u202e`); `lines`: newlines kept (a text shown over several lines) and
    tabs as spaces."""
    text = str(text)
    if lines:
        return "\n".join(_CONTROL.sub(_escape, part.replace("\t", " ").rstrip("\r"))
                         for part in text.split("\n"))
    return _CONTROL.sub(_escape, text)


def json_printable(text: str) -> str:
    """JSON text with the control characters JSON leaves raw (DEL, C1, separators, bidi
    overrides, lone surrogates) written as \\u escapes: the same data to any parser."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


__all__ = ["json_printable", "printable"]
