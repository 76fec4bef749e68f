"""Index files as caches of the store.

Each signal saves its indexes next to the database with a stamp: what made them (the
signature version and the index's own parameters), the last write of the store they saw
(`seq`, store/locks.py), how many signatures of that version the store held up to it, and
for each part a manifest naming its files. On open the files are used only if what made
them is still what the signal runs with and nothing they hold was replaced or removed
since (the count up to `seq` still agrees); the signal then reads just the signatures
written after `seq`. Otherwise (a newer model version, an item changed since, a file
missing or unreadable) the caller rebuilds from the signatures table.

Why a manifest rather than fixed file names: an index saves only what changed (a segment
of new entries, index/runs.py), so its files are many and each is written once under a
name of its own and never rewritten. A save writes its new files first, then replaces
the stamp in one rename: the stamp on disk always names complete files, and a process
killed mid-save leaves the previous stamp and its files as they were, plus new files no
stamp names, which the next save deletes. Saves run under the store's write lock
(signals/base.py), so two processes never save at once; a process that read the previous
stamp just before a save replaced it may find a file gone, and reads the stamp again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

_FORMAT = 2  # stamps that name their files; older stamps (fixed .npz names) are stale


def read_stamp(folder: Path, name: str) -> dict[str, Any] | None:
    """The stamp saved with index `name`, or None when missing, unreadable or of an older
    layout."""
    try:
        stamp = json.loads((folder / f"{name}-index.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("layout") != _FORMAT or not isinstance(stamp.get("parts"), dict):
        return None
    return stamp


def load_parts(folder: Path, stamp: dict[str, Any],
               loaders: dict[str, Callable[[Path, dict[str, Any]], Any]]) -> dict[str, Any] | None:
    """The parts of an index as its stamp names them, or None when one is missing or
    unreadable."""
    try:
        return {part: load(folder, stamp["parts"][part]) for part, load in loaders.items()}
    except (OSError, ValueError, KeyError, TypeError, EOFError, AttributeError):
        return None


def save_cached(folder: Path, name: str, stamp: dict[str, Any], parts: dict[str, Any]) -> None:
    """Save each part: `part.save(folder, prefix, on_disk)` writes files named
    ``prefix.*`` (new names, never a file the stamp on disk names), what it adds to the
    files `on_disk` (its manifest in that stamp) names, or all of it, and returns its
    manifest (JSON, naming every file it keeps); then the stamp naming them lands; then
    the files of this index it no longer names are deleted. Call under the store's write
    lock."""
    folder.mkdir(parents=True, exist_ok=True)
    current = read_stamp(folder, name)
    on_disk = current["parts"] if current is not None else {}
    manifests = {part: index.save(folder, f"{name}-{part}", on_disk.get(part)) for part, index in parts.items()}
    stamp_path = folder / f"{name}-index.json"
    temp = stamp_path.with_name(f"{stamp_path.name}.tmp-{os.getpid()}")
    with open(temp, "w") as f:
        f.write(json.dumps({**stamp, "layout": _FORMAT, "parts": manifests}))
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, stamp_path)
    named = {file for manifest in manifests.values() for file in _files_named(manifest)}
    for part in parts:
        for path in folder.glob(f"{name}-{part}.*"):
            if path.name not in named:
                path.unlink(missing_ok=True)


def drop_cached(folder: Path, name: str) -> None:
    """Delete index `name`: its stamp first (so no process opens it any more), then the
    files of its parts. Call under the store's write lock."""
    stamp = read_stamp(folder, name)
    (folder / f"{name}-index.json").unlink(missing_ok=True)
    for part in (stamp or {}).get("parts", {}):
        for path in folder.glob(f"{name}-{part}.*"):
            path.unlink(missing_ok=True)


def _files_named(manifest: Any) -> list[str]:
    """Every string anywhere in a manifest: the names of the files it keeps among them."""
    if isinstance(manifest, dict):
        return [f for v in manifest.values() for f in _files_named(v)]
    if isinstance(manifest, list):
        return [f for v in manifest for f in _files_named(v)]
    return [manifest] if isinstance(manifest, str) else []
