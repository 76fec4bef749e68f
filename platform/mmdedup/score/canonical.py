"""Which member of a duplicate group is the original: the cluster's canonical member.

Ingest order is a poor guess (a folder is ingested alphabetically, so `photo-crop.jpg`
comes before `photo.jpg`), so members are compared by a rule: a list of criteria, each
deciding only between members it finds unequal, the next one breaking its ties:

    earliest_published   a publication time (the first of the configured meta keys that
                         holds one, else the date the item's page declares); members with
                         a time come before members without one
    longest_text         more word characters in the text the text signal reads
                         (spaces and punctuation not counted: re-spacing is no addition)
    largest_pictures     more picture pixels in all (width x height, as the files declare)
    longest_video        a longer video (seconds decoded, to a tenth)
    earliest_ingested    ingested first

Whatever the rule, the earliest ingested member breaks the ties it leaves. Times are read
leniently: ISO 8601 (a date alone is its midnight), RFC 2822 (RSS `pubDate`), and numbers
as Unix seconds (above 1e11, milliseconds); a zone-less time is UTC; anything else counts
as no time, never as an error.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Iterable, Mapping, Sequence

CRITERIA = ("earliest_published", "longest_text", "largest_pictures", "longest_video",
            "earliest_ingested")
_NOT_WORD = re.compile(r"[\W_]+")
_MS_ABOVE = 1e11  # a number this large is milliseconds (1e11 seconds is the year 5138)


@dataclass(frozen=True)
class Facts:
    """What the rule compares of one member."""

    published: float | None  # Unix seconds
    text_chars: int
    picture_pixels: int
    video_seconds: float


def canonical(members: Sequence[int], facts: Mapping[int, Facts], rule: Sequence[str]) -> int:
    """The member (an item pk; pks grow in ingest order) the rule puts first."""
    def key(pk: int) -> tuple:
        f = facts.get(pk) or Facts(None, 0, 0, 0.0)
        parts: list[Any] = []
        for criterion in rule:
            if criterion == "earliest_published":
                parts.append((0, f.published) if f.published is not None else (1, 0.0))
            elif criterion == "longest_text":
                parts.append(-f.text_chars)
            elif criterion == "largest_pictures":
                parts.append(-f.picture_pixels)
            elif criterion == "longest_video":
                parts.append(-round(f.video_seconds, 1))
            else:
                parts.append(pk)
        return (*parts, pk)

    return min(members, key=key)


def member_facts(rows: Iterable[tuple[int, Any, str | None, str | None]],
                 sizes: Mapping[int, tuple[int, float]], time_keys: Sequence[str]) -> dict[int, Facts]:
    """{pk: Facts} from (pk, meta, page date, the text the text signal reads) of each
    member and {pk: (picture pixels, video seconds)}."""
    out = {}
    for pk, meta, page_date, text in rows:
        pixels, seconds = sizes.get(pk, (0, 0.0))
        out[pk] = Facts(publication_time(meta, page_date, time_keys), word_chars(text),
                        pixels, seconds)
    return out


def word_chars(text: str | None) -> int:
    return len(_NOT_WORD.sub("", text)) if text else 0


def publication_time(meta: Mapping[str, Any] | None, page_date: str | None,
                     keys: Sequence[str]) -> float | None:
    """The first of `keys` in meta that holds a readable time, else the page's date."""
    for key in keys:
        if isinstance(meta, Mapping) and (t := parse_time(meta.get(key))) is not None:
            return t
    return parse_time(page_date)


def parse_time(value: Any) -> float | None:
    """Unix seconds of a time written in any of the usual ways, or None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        seconds = value / 1000 if abs(value) > _MS_ABOVE else float(value)
        return seconds if math.isfinite(seconds) and abs(seconds) < _MS_ABOVE else None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


__all__ = ["CRITERIA", "Facts", "canonical", "member_facts", "parse_time",
           "publication_time", "word_chars"]
