"""Index files as caches of the store.

Each signal saves its indexes next to the database with a stamp: what made them (the
signature version and the index's own parameters), the last write of the store they saw
(`seq`, store/locks.py) and how many signatures of that version the store held up to it.
On open the files are used only if what made them is still what the signal runs with and
nothing they hold was replaced or removed since (the count up to `seq` still agrees); the
signal then reads just the signatures written after `seq`. Otherwise (a newer model
version, an item changed since) the caller rebuilds from the signatures table.

The stamp goes first and comes back last (each part and the stamp renamed into place
whole), so a process killed mid-save never leaves a stamp vouching for parts it did not
finish.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable


def read_stamp(folder: Path, name: str) -> dict[str, Any] | None:
    """The stamp saved with index `name`, or None when missing or unreadable."""
    try:
        stamp = json.loads((folder / f"{name}-index.json").read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def load_parts(folder: Path, name: str, loaders: dict[str, Callable[[Path], Any]]) -> dict[str, Any] | None:
    """The saved parts of index `name`, or None when one is missing or unreadable."""
    try:
        return {part: load(folder / f"{name}-{part}.npz") for part, load in loaders.items()}
    except (OSError, ValueError, KeyError, EOFError):
        return None


def save_cached(folder: Path, name: str, stamp: dict[str, Any], parts: dict[str, Any]) -> None:
    """Save each part (anything with .save(path)), then the stamp that vouches for them.
    The stamp is taken away first: until the new one lands, the parts vouch for nothing."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp_path = folder / f"{name}-index.json"
    stamp_path.unlink(missing_ok=True)
    for part, index in parts.items():
        index.save(folder / f"{name}-{part}.npz")
    temp = stamp_path.with_name(f"{stamp_path.name}.tmp-{os.getpid()}")
    temp.write_text(json.dumps(stamp))
    os.replace(temp, stamp_path)
