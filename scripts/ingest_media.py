"""Batch ingest of a crawl dump: one item per page, with its text, html, pictures and video.

Two dump layouts:

- a folder of pages (*.html, *.htm) next to the pictures and videos they reference. A
  reference is resolved against the page's folder (`img/a.jpg`, `../media/v.mp4`), or, for
  an absolute URL, as a mirror path `<dump>/<host>/<path>` (the layout `wget -p` and most
  crawlers save). The item id is the page's path in the dump.
- a WARC-like JSON Lines export, one fetched page a line:
      {"url": "...", "html": "<html>..." | "html_file": "pages/1.html",
       "images": ["img/1.jpg", ...], "video": "vid/1.mp4", "title": "...", "text": "...",
       "fetched_at": "2026-11-30T10:00:00Z", ...}
  Paths are relative to the export's folder; inline html is staged under
  `<export folder>/.mmdedup-staging/` (ingest reads pages from files). The item id is the
  URL (else the line number); other fields go to the item's meta.

Extraction (page main text, perceptual hashes, video keyframes, tokens) runs in
--workers - 1 processes while the main process writes to the store. Resumable: the store commits every
chunk, and a rerun skips pages whose id is already stored unless --rescan is given (then
unchanged pages are still recognised by their fingerprint and skipped after extraction).
A page whose references cannot all be found is ingested with what exists; the summary
counts the unresolved references.

    python scripts/ingest_media.py DUMP_FOLDER | EXPORT.jsonl [--home H] [--db URL]
        [--workers N] [--rescan] [--no-progress]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import lxml.html
from sqlalchemy import select

from mmdedup import Platform
from mmdedup.api import StoreError, store_problem
from mmdedup.config import TIERS
from mmdedup.input.items import HTML_EXTENSIONS, IMAGE_EXTENSIONS, VIDEO_EXTENSIONS
from mmdedup.store.queries import tier_counts
from mmdedup.store.schema import Item
from mmdedup.terminal import printable

STAGING = ".mmdedup-staging"


@dataclass
class DumpScan:
    """Items found in a dump, and what could not be turned into one."""

    root: Path
    items: list[dict[str, Any]] = field(default_factory=list)
    unresolved: Counter[str] = field(default_factory=Counter)  # reference kind -> count
    bad_lines: list[str] = field(default_factory=list)


def page_references(html: bytes) -> tuple[str | None, list[str], list[str]]:
    """(title, picture sources, video sources) of a page, in document order."""
    try:
        doc = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return None, [], []
    title = (doc.findtext(".//title") or "").strip() or None
    images = [s for s in doc.xpath("//img/@src") if s.strip()]
    videos = [s for s in doc.xpath("//video/@src | //video/source/@src") if s.strip()]
    return title, images, videos


def resolve_reference(ref: str, page_dir: Path, root: Path, kinds: set[str]) -> str | None:
    """A page's reference as a path relative to the dump, if that file exists and is of the
    expected kind (by extension); None otherwise."""
    parts = urlsplit(ref.strip())
    if parts.scheme in ("http", "https") or ref.startswith("//"):
        candidate = root / parts.netloc / unquote(parts.path).lstrip("/")
    elif parts.scheme:  # data:, javascript:, ...
        return None
    else:
        candidate = page_dir / unquote(parts.path)
    try:
        resolved = candidate.resolve()
        rel = resolved.relative_to(root.resolve())
    except (OSError, ValueError):
        return None
    if resolved.suffix.lower() not in kinds or not resolved.is_file():
        return None
    return rel.as_posix()


def _with_references(item: dict[str, Any], html: bytes, page_dir: Path, scan: DumpScan) -> None:
    title, images, videos = page_references(html)
    if title and not item.get("title"):
        item["title"] = title
    found_images = []
    for ref in images:
        rel = resolve_reference(ref, page_dir, scan.root, IMAGE_EXTENSIONS)
        if rel is None:
            scan.unresolved["image"] += 1
        elif rel not in found_images:
            found_images.append(rel)
    item["images"] = item.get("images") or found_images
    if not item.get("video"):
        found_videos = [r for r in (resolve_reference(v, page_dir, scan.root, VIDEO_EXTENSIONS)
                                    for v in videos) if r]
        scan.unresolved["video"] += len(videos) - len(found_videos)
        if found_videos:
            item["video"] = found_videos[0]


def scan_folder(root: Path) -> DumpScan:
    scan = DumpScan(root)
    pages = sorted(p for p in root.rglob("*") if p.suffix.lower() in HTML_EXTENSIONS
                   and p.is_file() and STAGING not in p.parts)
    for page in pages:
        rel = page.relative_to(root).as_posix()
        item: dict[str, Any] = {"id": rel, "html": rel}
        _with_references(item, page.read_bytes(), page.parent, scan)
        scan.items.append(item)
    return scan


def scan_export(path: Path) -> DumpScan:
    root = path.parent
    scan = DumpScan(root)
    staging = root / STAGING
    known = {"url", "html", "html_file", "images", "video", "title", "text"}
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
                if not isinstance(rec, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, UnicodeDecodeError) as exc:
                scan.bad_lines.append(f"line {n}: {exc}")
                continue
            item: dict[str, Any] = {"id": str(rec.get("url") or f"line {n}")}
            for key in ("title", "text", "images", "video"):
                if rec.get(key):
                    item[key] = rec[key]
            meta = {k: v for k, v in rec.items() if k not in known}
            if rec.get("url"):
                meta["url"] = rec["url"]
            if meta:
                item["meta"] = meta
            html: bytes | None = None
            if isinstance(rec.get("html"), str):
                html = rec["html"].encode("utf-8")
                staging.mkdir(exist_ok=True)
                name = hashlib.sha256(html).hexdigest()[:32] + ".html"
                if not (staging / name).exists():
                    (staging / name).write_bytes(html)
                item["html"] = f"{STAGING}/{name}"
            elif rec.get("html_file"):
                item["html"] = rec["html_file"]
                page = root / rec["html_file"]
                html = page.read_bytes() if page.is_file() else None
            if html is not None:
                page_dir = root / Path(item["html"]).parent if rec.get("html_file") else root
                _with_references(item, html, page_dir, scan)
            scan.items.append(item)
    return scan


def stored_ids(platform: Platform, ids: list[str]) -> set[str]:
    found: set[str] = set()
    with platform.sessions() as session:
        for start in range(0, len(ids), 5000):
            chunk = ids[start:start + 5000]
            found.update(session.scalars(select(Item.id).where(Item.id.in_(chunk))))
    return found


def pair_counts(platform: Platform) -> dict[str, int]:
    """Pairs per tier: the one count of `stats()` the summary needs (stats also builds the
    clusters, reading every pair and item id)."""
    with platform.sessions() as session:
        return tier_counts(session, platform.settings.tier_thresholds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dump", type=Path, help="a dump folder of pages, or a JSON Lines export")
    ap.add_argument("--home", default=None, help="store folder (default $MMDEDUP_HOME or .mmdedup)")
    ap.add_argument("--db", default=None, help="database URL (default SQLite in the home)")
    # Decoding pictures and pages is most of the work, and the writer mostly waits for it:
    # an extractor per CPU, and the writer besides.
    ap.add_argument("--workers", type=int, default=(os.cpu_count() or 1) + 1,
                    help="processes in all, one writing and the rest extracting (default: one "
                         "extracting per CPU, plus the writer)")
    ap.add_argument("--rescan", action="store_true",
                    help="look at pages already stored again (changed ones are updated)")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    if args.dump.is_dir():
        scan = scan_folder(args.dump)
    elif args.dump.is_file():
        scan = scan_export(args.dump)
    else:
        print(f"ingest_media: no dump folder or export at {args.dump}", file=sys.stderr)
        return 2
    try:
        platform = Platform.open(args.home, args.db)
    except StoreError as exc:  # the store cannot be opened: one line saying what to do
        print(f"ingest_media: {printable(exc)}", file=sys.stderr)
        return 2
    with platform:
        try:
            before = pair_counts(platform)
            items = scan.items
            skipped = 0
            if not args.rescan:
                done = stored_ids(platform, [i["id"] for i in items])
                items = [i for i in items if i["id"] not in done]
                skipped = len(scan.items) - len(items)
            report = platform.ingest(items, root=scan.root, workers=max(1, args.workers),
                                     source_name=str(args.dump.resolve()),
                                     progress=not args.no_progress and sys.stderr.isatty())
            after = pair_counts(platform)
        except Exception as exc:
            problem = store_problem(exc, platform.url)  # the database went away, the disk filled
            if problem is None:
                raise
            print(f"ingest_media: {printable(problem)}", file=sys.stderr)
            return 2
    print(f"pages found: {len(scan.items)}; already stored, skipped: {skipped}")
    print(report.summary())
    if scan.bad_lines:
        print(f"unreadable export lines: {len(scan.bad_lines)} (first: {scan.bad_lines[0]})")
    if sum(scan.unresolved.values()):
        print("references not found in the dump: " +
              ", ".join(f"{kind} {n}" for kind, n in sorted(scan.unresolved.items()) if n))
    print("duplicate pairs by tier (new in this run / in the store): " + ", ".join(
        f"{t} {after.get(t, 0) - before.get(t, 0)} / {after.get(t, 0)}" for t in TIERS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
