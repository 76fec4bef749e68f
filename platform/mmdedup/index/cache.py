"""Index files as caches of the store.

Each signal saves its indexes next to the database with a stamp (the signature version
and how many signatures of it the store held, signals/base.py). On open the files are
used only if the stamp still matches the store; otherwise (a crash between a commit and a
save, a newer model version) the caller rebuilds from the signatures table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable



def load_cached(folder: Path, name: str, stamp: dict[str, Any],
                loaders: dict[str, Callable[[Path], Any]]) -> dict[str, Any] | None:
    """The saved parts of index `name`, or None when missing, unreadable or stale."""
    try:
        if json.loads((folder / f"{name}-index.json").read_text()) != stamp:
            return None
        return {part: load(folder / f"{name}-{part}.npz") for part, load in loaders.items()}
    except (OSError, ValueError, KeyError):
        return None


def save_cached(folder: Path, name: str, stamp: dict[str, Any], parts: dict[str, Any]) -> None:
    """Save each part (anything with .save(path)), then the stamp that vouches for them."""
    folder.mkdir(parents=True, exist_ok=True)
    for part, index in parts.items():
        index.save(folder / f"{name}-{part}.npz")
    (folder / f"{name}-index.json").write_text(json.dumps(stamp))
