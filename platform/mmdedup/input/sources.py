"""Sources of items: manifests, folders and Python objects, read into entries.

A bad record becomes an entry with its `InputError` (a short machine-readable reason and a
sentence for people), never an exception: the ingest records it and goes on.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from ..config import Settings
from .lines import SKIP_BLOCK, read_lines
from .items import (
    HTML_EXTENSIONS,
    IMAGE_EXTENSIONS,
    MAX_INT_DIGITS,
    TEXT_EXTENSIONS,
    VIDEO_EXTENSIONS,
    Entry,
    InputError,
    Item,
    read_text_file,
    resolve_path,
)


def read_manifest(path: Path, settings: Settings, id_prefix: str = "") -> Iterator[Entry]:
    """Entries of a JSON Lines manifest; a bad line is a failure entry, never an exception.
    `id_prefix` is put before every id."""
    seen = FirstOfEachId()
    for entry in manifest_entries(path, settings, id_prefix):
        yield seen(entry)


@dataclass(frozen=True)
class Span:
    """Lines of a manifest: those starting at bytes [start, end), the first numbered
    `first_line`. A cluster's workers each read one (pipeline/ray_engine.py)."""

    start: int
    end: int
    first_line: int
    lines: int


def manifest_entries(path: Path, settings: Settings, id_prefix: str = "",
                     span: Span | None = None) -> Iterator[Entry]:
    """The manifest's entries (of `span`, or all), before ids repeated across lines are
    refused (`FirstOfEachId`): a block read apart from the others cannot know them."""
    for line_no, raw, size in _manifest_lines(path, settings.max_manifest_line_bytes, span):
        entry = line_entry(line_no, raw, size, settings, id_prefix)
        if entry is not None:
            yield entry


def line_entry(line_no: int, raw: bytes | None, size: int, settings: Settings, id_prefix: str = "") -> Entry | None:
    """The entry of one JSON Lines record (its bytes, None when it was over the limit; its
    size): an item, or a failure entry naming the line; None for a blank line. A manifest
    and a stream (pipeline/stream.py) read their lines alike."""
    key = f"line {line_no}"
    if raw is None:
        return Entry(key, error=InputError(
            "too_large", f"manifest line is {size} bytes, over the limit of "
            f"{settings.max_manifest_line_bytes}"))
    if not raw.strip():
        return None
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Entry(key, error=InputError(
            "invalid_utf8", f"line {line_no}: not UTF-8 at byte {exc.start}"))
    try:
        data = json.loads(line, parse_constant=_no_constant, parse_int=_int, parse_float=_float)
    except InputError as exc:
        exc.detail = f"line {line_no}: {exc.detail}"
        return Entry(key, error=exc)
    except RecursionError:
        return Entry(key, error=InputError(
            "too_deep", f"line {line_no}: the JSON nests too deeply to read"))
    except json.JSONDecodeError as exc:
        return Entry(key, error=InputError("malformed_json", f"line {line_no}: {exc}"))
    try:
        item = Item.from_dict(data)
    except InputError as exc:
        exc.detail = f"line {line_no}: {exc.detail}"
        named = isinstance(data, dict) and isinstance(data.get("id"), str) and data["id"].strip()
        return Entry(id_prefix + data["id"] if named else key, error=exc)
    item.id = id_prefix + item.id
    return Entry(item.id, item=item, line=line_no)


class FirstOfEachId:
    """Keeps the first entry of each item id; a later one becomes a failure entry."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __call__(self, entry: Entry) -> Entry:
        if entry.item is None:
            return entry
        if entry.item.id in self.seen:
            where = f"line {entry.line}: " if entry.line is not None else ""
            return Entry(entry.item.id, error=InputError(
                "duplicate_id", f"{where}id \"{entry.item.id}\" already appeared earlier "
                "in this manifest; the first one was kept"))
        self.seen.add(entry.item.id)
        return entry


def count_manifest_lines(path: Path, settings: Settings) -> int:
    return sum(1 for _, raw, _ in _manifest_lines(path, settings.max_manifest_line_bytes)
               if raw is None or raw.strip())


def _manifest_lines(path: Path, limit: int, span: Span | None = None
                    ) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number, the line's bytes or None when it is over `limit` bytes, its size)
    of the manifest, or of its `span` (input/lines.py reads them)."""
    with path.open("rb") as fh:
        if span is not None:
            fh.seek(span.start)
        lines = read_lines(fh, limit, first=0 if span is None else span.first_line - 1,
                           offset=0 if span is None else span.start, until=None if span is None else span.end)
        for line in lines:
            if line is not None:
                yield line.number, line.raw, line.size


def manifest_spans(path: Path, lines: int) -> list[Span]:
    """The manifest cut into spans of `lines` lines: one read of the file, its line ends
    found a megabyte at a time by numpy (seconds for gigabytes), so that each span knows
    the number of its first line and the failures a worker records name the line as a
    read of the whole manifest would."""
    starts = [0]  # the byte after every `lines`-th line end
    size = count = 0
    buf_ended_line = True
    with path.open("rb") as fh:
        while buf := fh.read(SKIP_BLOCK):
            ends = np.flatnonzero(np.frombuffer(buf, np.uint8) == 10) + size + 1
            starts.extend(ends[(-count - 1) % lines::lines].tolist())
            count += len(ends)
            size += len(buf)
            buf_ended_line = buf.endswith(b"\n")
    if size and not buf_ended_line:
        count += 1  # a last line without its line end
    stops = [*starts[1:], size]
    return [Span(a, b, 1 + i * lines, min(lines, count - i * lines))
            for i, (a, b) in enumerate(zip(starts, stops)) if b > a]


def _no_constant(name: str) -> None:
    raise InputError("bad_number", f"{name} is not a JSON number")


def _int(digits: str) -> int:
    try:
        return int(digits)
    except ValueError:  # over Python's limit on the digits of an integer
        raise InputError("bad_number", f"an integer of {len(digits)} digits, over "
                         f"{MAX_INT_DIGITS}") from None


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InputError("bad_number", f"{text[:40]} is out of range")
    return value


def folder_files(folder: Path) -> list[Path]:
    """Every visible file below `folder`, in a stable order: symbolic links and other
    entries that are not folders included, so each is ingested or fails with its reason
    (a link leading outside the folder, a loop), never skipped in silence."""
    return sorted(
        p for p in folder.rglob("*")
        if (p.is_symlink() or not p.is_dir())
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def folder_ids(folder: Path, files: list[Path], id_prefix: str = "") -> list[str]:
    """The ids `read_folder` gives these files: `id_prefix` and the path in the folder."""
    return [id_prefix + rel for path in files if _utf8(rel := _rel(folder, path))]


def read_folder(folder: Path, files: list[Path], settings: Settings,
                id_prefix: str = "") -> Iterator[Entry]:
    """One item per file, its kind chosen by extension; the id is `id_prefix` and the
    path in the folder. Every path, a text file's too, must stay in the folder."""
    for path in files:
        rel = _rel(folder, path)
        if not _utf8(rel):
            shown = os.fsencode(rel).decode("utf-8", "backslashreplace")
            yield Entry(id_prefix + shown, error=InputError(
                "invalid_file_name", f"{shown}: the file name is not valid UTF-8; rename the file"))
            continue
        item_id = id_prefix + rel
        ext = path.suffix.lower()
        if path.is_dir():
            yield Entry(item_id, error=InputError(
                "unsupported_type", f"{rel}: a link to a folder, which a folder ingest does not follow"))
        elif ext in TEXT_EXTENSIONS:
            try:
                text = read_text_file(resolve_path(rel, folder), rel, settings)
            except InputError as exc:
                yield Entry(item_id, error=exc)
                continue
            yield Entry(item_id, item=Item(id=item_id, text=text))
        elif ext in HTML_EXTENSIONS:
            yield Entry(item_id, item=Item(id=item_id, html=rel))
        elif ext in IMAGE_EXTENSIONS:
            yield Entry(item_id, item=Item(id=item_id, images=[rel]))
        elif ext in VIDEO_EXTENSIONS:
            yield Entry(item_id, item=Item(id=item_id, video=rel))
        else:
            yield Entry(item_id, error=InputError(
                "unsupported_type", f"{rel}: no item kind for the extension \"{ext or '(none)'}\""))


def _rel(folder: Path, path: Path) -> str:
    return path.relative_to(folder).as_posix()


def _utf8(name: str) -> bool:
    """Whether a file name read from the file system was valid UTF-8 (Python keeps the
    bytes of one that was not as lone surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_items(items: Iterable[Item | dict[str, Any]], id_prefix: str = "") -> Iterator[Entry]:
    """Entries from Python objects handed to the API; `id_prefix` is put before every id."""
    seen: set[str] = set()
    for n, obj in enumerate(items, start=1):
        try:
            item = obj if isinstance(obj, Item) else Item.from_dict(obj)
        except InputError as exc:
            yield Entry(f"item {n}", error=exc)
            continue
        if not isinstance(item.id, str):
            yield Entry(f"item {n}", error=InputError(
                "missing_id", f"the item's id is a {type(item.id).__name__}, not a string"))
            continue
        if id_prefix:
            item = dataclasses.replace(item, id=id_prefix + item.id)
        if item.id in seen:
            yield Entry(item.id, error=InputError(
                "duplicate_id", f"id \"{item.id}\" appears twice in this batch"))
            continue
        seen.add(item.id)
        yield Entry(item.id, item=item)


