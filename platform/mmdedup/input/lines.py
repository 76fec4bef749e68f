"""Reading JSON Lines records with a size limit: what a manifest, a stream on standard
input and a followed file share.

A line is read only up to the limit; the rest of a longer one is read a block at a time
and only counted, so a 1 GB line costs no more memory than the limit, and the record is
reported as too large rather than lost silently.
"""

from __future__ import annotations

from typing import IO, Callable, Iterator, NamedTuple

SKIP_BLOCK = 1 << 20  # what one read of an over-long line takes


class Line(NamedTuple):
    """One record: its number, bytes (None: over the size limit), size, and where the
    reading stands after it (a followed file's inode and byte offset)."""

    number: int
    raw: bytes | None
    size: int
    inode: int = 0
    end: int = 0


def read_lines(fh: IO[bytes], limit: int, more: Callable[[int], bool | None] = lambda offset: False,
               first: int = 0, inode: int = 0, offset: int = 0, until: int | None = None) -> Iterator[Line | None]:
    """The lines of `fh` from where it stands (line `first` and byte `offset` before it),
    up to the line that starts at or after byte `until` (None: to the end). At the end of
    what is there, `more(offset)`: True, the file may still grow (None is yielded, and a
    line still being written is read once it ends); False, it is complete (its last line,
    ended or not, and stop); None, stop reading now (a line not ended is left for the next
    run). A line over `limit` bytes is only counted."""
    number, kept, size = first, b"", 0
    while until is None or size or offset < until:
        raw = fh.readline(SKIP_BLOCK if size else limit + 1)
        if not raw:
            going = more(offset)
            if going:
                yield None
                continue
            if size and going is not None:
                yield Line(number + 1, kept if size <= limit else None, size, inode, offset + size)
            return
        size += len(raw)
        if size <= limit:
            kept += raw
        if raw.endswith(b"\n"):
            number, offset = number + 1, offset + size
            yield Line(number, kept if size <= limit else None, size, inode, offset)
            kept, size = b"", 0
