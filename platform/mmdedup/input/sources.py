"""Sources of items: manifests, folders and Python objects, read into entries.

A bad record becomes an entry with its `InputError` (a short machine-readable reason and a
sentence for people), never an exception: the ingest records it and goes on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..config import Settings
from .items import (
    HTML_EXTENSIONS,
    IMAGE_EXTENSIONS,
    TEXT_EXTENSIONS,
    VIDEO_EXTENSIONS,
    Entry,
    InputError,
    Item,
    read_text_file,
)


def read_manifest(path: Path, settings: Settings) -> Iterator[Entry]:
    """Entries of a JSON Lines manifest; a bad line is a failure entry, never an exception."""
    seen: set[str] = set()
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            key = f"line {line_no}"
            if not raw.strip():
                continue
            if len(raw) > settings.max_manifest_line_bytes:
                yield Entry(key, error=InputError(
                    "too_large", f"manifest line is {len(raw)} bytes, over the limit of "
                    f"{settings.max_manifest_line_bytes}"))
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield Entry(key, error=InputError("invalid_utf8", f"line is not UTF-8 ({exc})"))
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                yield Entry(key, error=InputError("malformed_json", f"line {line_no}: {exc}"))
                continue
            try:
                item = Item.from_dict(data)
            except InputError as exc:
                exc.detail = f"line {line_no}: {exc.detail}"
                named = isinstance(data, dict) and isinstance(data.get("id"), str) and data["id"].strip()
                yield Entry(data["id"] if named else key, error=exc)
                continue
            if item.id in seen:
                yield Entry(item.id, error=InputError(
                    "duplicate_id", f"line {line_no}: id {item.id!r} already appeared earlier "
                    "in this manifest; the first one was kept"))
                continue
            seen.add(item.id)
            yield Entry(item.id, item=item)


def count_manifest_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for raw in fh if raw.strip())


def folder_files(folder: Path) -> list[Path]:
    """Every visible file below `folder`, in a stable order."""
    return sorted(
        p for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def read_folder(folder: Path, files: list[Path], settings: Settings) -> Iterator[Entry]:
    """One item per file, its kind chosen by extension; the id is the path in the folder."""
    for path in files:
        rel = path.relative_to(folder).as_posix()
        ext = path.suffix.lower()
        if ext in TEXT_EXTENSIONS:
            try:
                text = read_text_file(path, settings)
            except InputError as exc:
                yield Entry(rel, error=exc)
                continue
            yield Entry(rel, item=Item(id=rel, text=text))
        elif ext in HTML_EXTENSIONS:
            yield Entry(rel, item=Item(id=rel, html=rel))
        elif ext in IMAGE_EXTENSIONS:
            yield Entry(rel, item=Item(id=rel, images=[rel]))
        elif ext in VIDEO_EXTENSIONS:
            yield Entry(rel, item=Item(id=rel, video=rel))
        else:
            yield Entry(rel, error=InputError(
                "unsupported_type", f"{rel}: no item kind for extension {ext or '(none)'!r}"))


def read_items(items: Iterable[Item | dict[str, Any]]) -> Iterator[Entry]:
    """Entries from Python objects handed to the API."""
    seen: set[str] = set()
    for n, obj in enumerate(items, start=1):
        try:
            item = obj if isinstance(obj, Item) else Item.from_dict(obj)
        except InputError as exc:
            yield Entry(f"item {n}", error=exc)
            continue
        if item.id in seen:
            yield Entry(item.id, error=InputError(
                "duplicate_id", f"id {item.id!r} appears twice in this batch"))
            continue
        seen.add(item.id)
        yield Entry(item.id, item=item)


