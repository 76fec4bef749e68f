"""Subtitles: an .srt or .vtt file, or a video's subtitle streams -> the words spoken.

Two re-posts of one clip often carry the same subtitles, and two clips that look alike
(the same place, the same photos) rarely say the same thing: what is said is text, and
the text signal signs it. Only the words are kept, in order: cue numbers, timings, cue
settings, styling tags (<i>, {\\an8}, ASS override blocks) and VTT notes are dropped, so a
copy re-timed or re-styled yields the same text.

A file that is not subtitles (no cue with a valid timing line, a block whose timing is
broken) is a `SubtitleError` with a short reason the ingest records against the item.
"""

from __future__ import annotations

import io
import re
from typing import Any

_TIME = r"(?:\d+:)?\d{1,2}:\d{2}[.,]\d{1,3}"
_TIMING = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}(?:\s.*)?$")
_TAG = re.compile(r"<[^>]*>|\{\\[^}]*\}")
_ASS_BREAK = re.compile(r"\\[Nnh]")


class SubtitleError(ValueError):
    """Subtitles we cannot read, with a short `reason` ("bad_subtitles") and a `detail`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def _clean(line: str) -> str:
    return " ".join(_ASS_BREAK.sub(" ", _TAG.sub("", line)).split())


def _blocks(text: str) -> list[list[str]]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks, block = [], []
    for line in lines:
        if line.strip():
            block.append(line)
        elif block:
            blocks.append(block)
            block = []
    if block:
        blocks.append(block)
    return blocks


def parse_srt(text: str) -> str:
    """The cue texts of a SubRip file, one line each, in order."""
    out = []
    for n, block in enumerate(_blocks(text), 1):
        lines = block[1:] if block[0].strip().isdigit() else block
        if not lines or not _TIMING.match(lines[0]):
            raise SubtitleError("bad_subtitles", f"SubRip block {n} has no timing line "
                                f"(\"00:00:01,000 --> 00:00:02,000\"): {block[0][:60]!r}")
        words = " ".join(_clean(x) for x in lines[1:]).strip()
        if words:
            out.append(words)
    if not out:
        raise SubtitleError("bad_subtitles", "no SubRip cue with text")
    return "\n".join(out)


def parse_vtt(text: str) -> str:
    """The cue texts of a WebVTT file, one line each, in order."""
    blocks = _blocks(text)
    if not blocks or not blocks[0][0].lstrip("\ufeff").startswith("WEBVTT"):
        raise SubtitleError("bad_subtitles", "a WebVTT file starts with \"WEBVTT\"")
    out = []
    for n, block in enumerate(blocks[1:], 2):
        if block[0].startswith(("NOTE", "STYLE", "REGION")):
            continue
        at = next((i for i, x in enumerate(block[:2]) if "-->" in x), None)
        if at is None or not _TIMING.match(block[at]):
            raise SubtitleError("bad_subtitles", f"WebVTT block {n} has no valid timing line: "
                                f"{block[0][:60]!r}")
        words = " ".join(_clean(x) for x in block[at + 1:]).strip()
        if words:
            out.append(words)
    if not out:
        raise SubtitleError("bad_subtitles", "no WebVTT cue with text")
    return "\n".join(out)


def parse_subtitles(text: str, name: str) -> str:
    """An .srt or .vtt file's words, by its extension."""
    lower = name.lower()
    if lower.endswith(".srt"):
        return parse_srt(text)
    if lower.endswith(".vtt"):
        return parse_vtt(text)
    raise SubtitleError("bad_subtitles", f"{name}: subtitles are an .srt or .vtt file")


def stream_subtitles(data: bytes) -> str | None:
    """The words of a video file's subtitle streams (the first that holds text), or None
    when it has none. Text subtitles decode to events (text, or ASS dialogue lines whose
    last field is the text); picture subtitles (DVD, PGS) hold no text and are skipped.
    A stream that fails to decode yields what decoded before the failure."""
    import av

    try:
        container = av.open(io.BytesIO(data), mode="r")
    except (av.FFmpegError, OSError, EOFError, ValueError, IndexError, RuntimeError):
        return None  # the video reader says why
    with container:
        streams = list(container.streams.subtitles)
        if not streams:
            return None
        order = [s.index for s in streams]
        texts: dict[int, list[str]] = {i: [] for i in order}
        try:
            for packet in container.demux(streams):
                for sub in _decode(packet):
                    for rect in getattr(sub, "rects", None) or [sub]:
                        words = _rect_text(rect)
                        if words:
                            texts[packet.stream.index].append(words)
        except (av.FFmpegError, OSError, EOFError, ValueError, RuntimeError):
            pass
    for i in order:
        if texts[i]:
            return "\n".join(texts[i])
    return None


def _decode(packet: Any) -> list:
    if packet.size == 0:
        return []
    return list(packet.decode())


def _rect_text(rect: Any) -> str:
    text = getattr(rect, "text", None)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not text:
        ass = getattr(rect, "ass", None)
        if isinstance(ass, bytes):
            ass = ass.decode("utf-8", "replace")
        if ass:
            # "Dialogue: ..." or FFmpeg's "ReadOrder,Layer,Style,Name,MarginL,MarginR,
            # MarginV,Effect,Text": the text is the last field, after eight commas.
            text = ass.split(",", 8)[-1] if ass.count(",") >= 8 else ass
    return _clean(text or "")
