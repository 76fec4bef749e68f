"""Writing the report: gathered from the store, rendered, written whole to a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from ..config import Settings
from . import DEFAULT_MAX_CLUSTERS, DEFAULT_MAX_PAIRS
from .gather import gather, gather_pair
from .html import render, render_pair
from .thumbs import Thumbnails


def write_report(out: Path, sessions: sessionmaker[Session], settings: Settings,
                 clusters: list[dict[str, Any]], *, max_pairs: int = DEFAULT_MAX_PAIRS,
                 max_clusters: int = DEFAULT_MAX_CLUSTERS,
                 root: str | Path | None = None) -> dict[str, Any]:
    """Render the report to `out` (written whole, then renamed, so a reader never sees
    half a page) and return its summary. `clusters` are Platform.clusters() lines;
    `root` resolves relative asset paths of items ingested from Python (as ingest's)."""
    if max_pairs < 0 or max_clusters < 0:
        raise ValueError("--max-pairs and --max-clusters must not be negative")
    with sessions() as session:
        data = gather(session, settings, clusters, max_pairs, max_clusters)
    page = render(data, settings, Thumbnails(settings, Path(root) if root else None))
    _write(Path(out), page)
    return {"path": str(out), **data["summary"]}


def write_pair_report(out: Path, sessions: sessionmaker[Session], settings: Settings, a: str,
                      b: str, *, root: str | Path | None = None) -> Path:
    """Render one stored pair (a, b), as the report shows it, to a page of its own at `out`."""
    with sessions() as session:
        data = gather_pair(session, settings, a, b)
    page = render_pair(data["pair"], data["items"], settings,
                       Thumbnails(settings, Path(root) if root else None))
    _write(Path(out), page)
    return Path(out)


def _write(out: Path, page: str) -> None:
    """Written whole, then renamed, so a reader never sees half a page."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)


__all__ = ["write_report", "write_pair_report"]
