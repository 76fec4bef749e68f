"""Platform: the one facade the CLI, the scripts and Python users call.

Results are plain dicts and lists in the shapes of the documented file formats (a pairs
line, a clusters line), so what a script reads from `mmdedup pairs --format jsonl` and what
it gets from `Platform.pairs()` are the same thing.
"""

from __future__ import annotations

import getpass
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Iterable

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from .clip_stage import ClipStage
from .config import DEFAULT_HOME, Settings, load_settings, tiers_at_least
from .extract.image import image_codes
from .extract.normalize import text_hash
from .extract.video import VideoError, video_frames
from .extract.web import extract_page
from .image_stage import ImageStage, image_signal
from .ingest import IngestReport, run_ingest
from .items import (
    Item,
    count_manifest_lines,
    folder_files,
    read_folder,
    read_items,
    read_manifest,
)
from .learn import feedback
from .learn.feedback import DECISIONS, ImportReport, ReviewSession  # noqa: F401  (DECISIONS re-exported)
from .learn.retrain import Job, LockBusy, RetrainReport, active_fusion, with_fusion  # noqa: F401
from .report import DEFAULT_MAX_CLUSTERS, DEFAULT_MAX_PAIRS, write_report
from .score.cluster import accepted_edges, components
from .score.fusion import fuse
from .score.pairs import SignalFn, pair_signals, score_pairs
from .semantic_stage import SemanticStage
from .store.db import open_store, resolve_url
from .store.schema import Asset, Failure, IngestRun, Label, Pair, Signature
from .store.schema import Item as ItemRow
from .text_stage import TextStage
from .video_stage import VideoStage, video_signal
from .web_stage import WebStage, dom_signal

SIGNAL_NAMES = ("text", "image", "video", "dom")


class Platform:
    """A store of items and their duplicate relations, opened on one database."""

    def __init__(self, home: Path, url: str, sessions: sessionmaker[Session],
                 settings: Settings) -> None:
        self.home = home
        self.url = url
        self.sessions = sessions
        self.configured = settings  # as configured; `settings` adds the fitted fusion model
        self.settings = settings
        self._load_fusion()
        self.web = WebStage(settings)
        self.image = ImageStage(home, sessions, settings)
        self.video = VideoStage(home, sessions, settings)
        self.clip = ClipStage(home, sessions, settings)
        self.semantic = SemanticStage(home, sessions, settings)
        self.text = TextStage(home, sessions, settings)
        self.text.scorer = self._score

    @classmethod
    def open(cls, home: str | Path | None = None, db_url: str | None = None) -> Platform:
        """Open (creating and migrating as needed) the store under `home`.

        `home` defaults to $MMDEDUP_HOME or ./.mmdedup; `db_url` to $MMDEDUP_DATABASE_URL or
        SQLite inside home. Index files always live in home.
        """
        home_path = Path(home or os.environ.get("MMDEDUP_HOME") or DEFAULT_HOME)
        home_path.mkdir(parents=True, exist_ok=True)
        url = resolve_url(home_path, db_url or os.environ.get("MMDEDUP_DATABASE_URL"))
        return cls(home_path, url, open_store(url), load_settings(home_path))

    def close(self) -> None:
        self.sessions.kw["bind"].dispose()

    def __enter__(self) -> Platform:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- ingest ------------------------------------------------------------------------

    def ingest(
        self,
        source: str | Path | Iterable[Item | dict[str, Any]],
        *,
        root: str | Path | None = None,
        progress: bool = False,
        workers: int = 1,
        source_name: str = "api",
    ) -> IngestReport:
        """Ingest a manifest (.jsonl), a folder (one item per file) or Python items.

        For Python items, relative paths are resolved against `root` (and may not leave it)
        or, without one, against the working directory. `workers`: processes in all; with
        more than one, workers - 1 extract (read files, decode media, tokenise) chunks
        ahead while this one writes.
        `source_name` names Python items' source in runs and failures (a rerun of the same
        source resolves its earlier failures).
        """
        if isinstance(source, (str, Path)):
            path = Path(source)
            if path.is_dir():
                files = folder_files(path)
                entries = read_folder(path, files, self.settings)
                return self._run(entries, str(path.resolve()), path, len(files), progress, workers)
            if not path.is_file():
                raise FileNotFoundError(f"no manifest or folder at {path}")
            return self._run(read_manifest(path, self.settings), str(path.resolve()),
                             path.parent, count_manifest_lines(path), progress, workers)
        items = list(source)
        return self._run(read_items(items), source_name, Path(root) if root else None,
                         len(items), progress, workers)

    def _run(self, entries: Iterable, source: str, root: Path | None, total: int,
             progress: bool, workers: int) -> IngestReport:
        self.text.follow_active()
        self._load_fusion()
        self.text.catch_up()
        return run_ingest(self.sessions, entries, source=source, root=root,
                          settings=self.settings, total=total, progress=progress,
                          stages=[self.web, self.image, self.clip, self.video, self.semantic,
                                  self.text],
                          scorer=self._score, workers=workers)

    def _signal_fns(self) -> dict[str, SignalFn]:
        return {"text": self.text.signal(), "image": image_signal(self.settings),
                "video": video_signal(self.video), "clip": self.clip.signal(),
                "semantic": self.semantic.signal(), "dom": dom_signal}

    def _score(self, session: Session, pairs: np.ndarray) -> int:
        """Score candidate pairs with every signal and write them."""
        return score_pairs(session, pairs, self._signal_fns(), self.settings,
                           self.text.signer.version)

    def _load_fusion(self) -> None:
        """Fusion weights and tiers: the retrained model in force, else the configured."""
        with self.sessions() as session:
            self.settings = with_fusion(self.configured, active_fusion(session))

    # --- learning ----------------------------------------------------------------------

    def retrain(self, *, rollback: bool = False, wait_seconds: float = 0.0) -> RetrainReport:
        """Retrain TF-IDF, word weights and fusion from the store and the labels (or roll
        the last retrain back), re-sign and re-score what changed; one run at a time
        across every process on this store (`LockBusy` after `wait_seconds`)."""
        job = Job(self.sessions, self.configured, self.text,
                  lambda session, pairs: pair_signals(session, pairs, self._signal_fns()),
                  self._score, self._load_fusion)
        return job.rollback(wait_seconds) if rollback else job.run(wait_seconds)

    # --- queries -----------------------------------------------------------------------

    def query(self, text: str | None = None, *, image: str | Path | bytes | None = None,
              video: str | Path | bytes | None = None, html: str | Path | bytes | None = None,
              k: int = 10, min_score: float = 0.0, meta: dict[str, Any] | None = None,
              since: datetime | None = None, until: datetime | None = None) -> list[dict[str, Any]]:
        """The stored items nearest to a text, a picture or a page (or several at once),
        best first, without ingesting anything: [{"id", "score", "signals", "details"}].
        Each given modality is scored against the stored items' same signal and the
        per-signal scores are fused as for pairs. Where CLIP is on, a text also searches the
        pictures and video keyframes through CLIP's text tower (signal `clip_text`, detail
        `clip_text_cosine`). `meta` keeps items whose meta has those values;
        `since`/`until` keep items ingested in that window."""
        if html is not None:
            page = extract_page(_read(html), max_bytes=self.settings.max_file_bytes,
                                max_chars=self.settings.max_page_chars, max_depth=self.settings.max_page_depth)
            text = "\n".join(t for t in (text, page.text) if t and t.strip())
        if text is not None and not text.strip():
            raise ValueError("the query text is empty")
        if text is None and image is None and video is None:
            raise ValueError("give a text, an image, a video or a page to query with")
        signals: dict[int, dict[str, float]] = {}
        details: dict[int, dict[str, float]] = {}
        if text is not None:
            for pk, sims in self.text.query([text])[0].items():
                signals.setdefault(pk, {})["text"] = sims.pop("text")
                details[pk] = sims
            with self.sessions() as session:
                for pk in session.scalars(select(ItemRow.pk).where(ItemRow.text_hash == text_hash(text))):
                    signals.setdefault(pk, {})["text"] = 1.0
                    details.pop(pk, None)
            # Where CLIP is on: the pictures and keyframes the text describes (text tower).
            for pk, (score, cosine) in self.clip.query_text(text).items():
                signals.setdefault(pk, {})["clip_text"] = score
                details.setdefault(pk, {})["clip_text_cosine"] = cosine
        if image is not None:
            codes = image_codes([_read(image)], self.settings.max_image_pixels)
            if codes.errors[0] is not None:
                raise ValueError(f"the query image cannot be read: {codes.errors[0]}")
            for pk, score in self.image.query(codes).items():
                signals.setdefault(pk, {})["image"] = score
        if video is not None:
            try:
                frames = video_frames(_read(video), max_seconds=self.settings.max_video_seconds,
                                      max_bytes=self.settings.max_file_bytes)
            except VideoError as exc:
                raise ValueError(f"the query video cannot be read: {exc}") from exc
            for pk, score in self.video.query(frames).items():
                signals.setdefault(pk, {})["video"] = score
        weights = {**self.settings.fusion_weights, "clip_text": self.settings.clip_text_weight}
        scored = sorted(((fuse(sig, weights), pk) for pk, sig in signals.items()),
                        key=lambda sp: (-sp[0], sp[1]))
        scored = [(score, pk) for score, pk in scored if score >= min_score]
        with self.sessions() as session:
            rows = {r.pk: r for r in session.execute(select(
                ItemRow.pk, ItemRow.id, ItemRow.meta, ItemRow.created_at).where(
                ItemRow.pk.in_([pk for _, pk in scored])))}
        keep = [(score, pk) for score, pk in scored if _passes(rows[pk], meta, since, until)][:k]
        return [{"id": rows[pk].id, "score": round(score, 4),
                 "signals": {name: round(v, 4) for name, v in signals[pk].items()},
                 "details": {key: round(v, 4) for key, v in details.get(pk, {}).items()}}
                for score, pk in keep]

    # --- results -----------------------------------------------------------------------

    def pairs(self, min_tier: str = "weak") -> list[dict[str, Any]]:
        """Scored pairs at or above `min_tier`, best first, as pairs-file lines."""
        tiers = tiers_at_least(min_tier)
        with self.sessions() as session:
            ids = self._ids(session)
            rows = session.scalars(
                select(Pair).where(Pair.tier.in_(tiers)).order_by(Pair.score.desc(), Pair.a_pk, Pair.b_pk)
            ).all()
            return [_pair_dict(p, ids) for p in rows]

    def clusters(self) -> list[dict[str, Any]]:
        """Duplicate groups; the canonical member is the earliest ingested."""
        with self.sessions() as session:
            ids = self._ids(session)
            edges = accepted_edges(
                session.execute(select(Pair.a_pk, Pair.b_pk, Pair.tier, Pair.signals)).all(),
                feedback.decisions_in_force(session), self.settings.tier_weak,
            )
        groups = components(edges)
        # pks grow in ingest order, so the smallest pk is the earliest ingested item.
        return [{"canonical": ids[g[0]], "members": [ids[pk] for pk in g]} for g in groups]

    def label(self, a: str, b: str, duplicate: bool | None = None, reviewer: str | None = None,
              *, decision: str | None = None) -> None:
        """Record a reviewer's decision on the pair (a, b): `duplicate` True or False, or
        `decision` "duplicate" | "distinct" | "unsure". Every label is kept with its reviewer
        and time; the latest duplicate/distinct one is in force."""
        if decision is None:
            if duplicate is None:
                raise ValueError("give duplicate=True/False or a decision")
            decision = "duplicate" if duplicate else "distinct"
        self._record_label(a, b, decision, reviewer)

    def _record_label(self, a: str, b: str, decision: str, reviewer: str | None) -> None:
        feedback.label_pair(self.sessions, a, b, decision, reviewer or default_reviewer())

    # --- review ------------------------------------------------------------------------

    def import_labels(self, path: str | Path, reviewer: str | None = None,
                      fmt: str | None = None) -> ImportReport:
        """Bulk-import labels from CSV (header a,b,decision[,reviewer][,created_at]) or JSON
        Lines; bad rows are reported with line number and reason, the rest imported."""
        return feedback.import_labels(self.sessions, path, reviewer or default_reviewer(), fmt)

    def labels(self) -> list[dict[str, Any]]:
        """Every label, oldest first: [{"a", "b", "decision", "reviewer", "created_at"}]."""
        return list(feedback.iter_labels(self.sessions))

    def export_labels(self, out: str | Path | IO[str], fmt: str = "jsonl") -> int:
        """Write every label as JSON Lines or CSV to a path or an open text file; returns
        how many. The output imports back with `import_labels`."""
        if isinstance(out, (str, Path)):
            with open(out, "w", encoding="utf-8", newline="") as fh:
                return feedback.write_labels(feedback.iter_labels(self.sessions), fh, fmt)
        return feedback.write_labels(feedback.iter_labels(self.sessions), out, fmt)

    def review_queue(self, reviewer: str | None = None, tiers: Iterable[str] | None = None,
                     limit: int | None = None) -> list[dict[str, Any]]:
        """The pairs `reviewer` would be offered next, in order, without claiming them."""
        tiers = feedback.check_tiers(list(tiers or self.settings.review_tiers))
        return feedback.peek_queue(self.sessions, reviewer or default_reviewer(), tiers, limit)

    def review_session(self, reviewer: str | None = None,
                       tiers: Iterable[str] | None = None) -> ReviewSession:
        """A reviewer's pass over the review queue (see learn/feedback.py); close it (or use
        it in a with block) to release the pairs it holds."""
        return ReviewSession(self.sessions, self.settings, reviewer or default_reviewer(),
                             list(tiers) if tiers else None)

    def failures(self, include_resolved: bool = False) -> list[dict[str, Any]]:
        """Inputs that failed, with their reason; open ones only unless asked."""
        query = select(Failure).order_by(Failure.pk)
        if not include_resolved:
            query = query.where(Failure.resolved_at.is_(None))
        with self.sessions() as session:
            return [
                {"source": f.source, "key": f.key, "id": f.item_id, "reason": f.reason,
                 "detail": f.detail, "at": f.created_at.isoformat(),
                 "resolved": f.resolved_at is not None}
                for f in session.scalars(query)
            ]

    def stats(self) -> dict[str, Any]:
        def counts(session: Session, column: Any, *where: Any) -> dict[str, int]:
            query = select(column, func.count()).group_by(column)
            for clause in where:
                query = query.where(clause)
            return {str(k): v for k, v in session.execute(query).all()}

        with self.sessions() as session:
            return {
                "items": session.scalar(select(func.count()).select_from(ItemRow)) or 0,
                "assets": counts(session, Asset.role),
                "signatures": counts(session, Signature.kind),
                "pairs": counts(session, Pair.tier),
                "labels": counts(session, Label.decision),
                "open_failures": counts(session, Failure.reason, Failure.resolved_at.is_(None)),
                "ingest_runs": counts(session, IngestRun.status),
                "clusters": len(self.clusters()),
            }

    def report(self, out: str | Path, *, max_pairs: int = DEFAULT_MAX_PAIRS,
               max_clusters: int = DEFAULT_MAX_CLUSTERS,
               root: str | Path | None = None) -> dict[str, Any]:
        """Write a self-contained HTML report (summary, score histogram per tier, clusters,
        the review queue with texts side by side) to `out`; returns its summary. `root`
        resolves relative picture and video paths of items ingested from Python."""
        return write_report(Path(out), self.sessions, self.settings, self.clusters(),
                            max_pairs=max_pairs, max_clusters=max_clusters, root=root)

    # --- helpers -----------------------------------------------------------------------

    @staticmethod
    def _ids(session: Session) -> dict[int, str]:
        return dict(session.execute(select(ItemRow.pk, ItemRow.id)).all())


def _passes(row: Any, meta: dict[str, Any] | None, since: datetime | None,
            until: datetime | None) -> bool:
    if meta and any(row.meta.get(key) != value for key, value in meta.items()):
        return False
    created = _aware(row.created_at)
    if since is not None and created < _aware(since):
        return False
    return until is None or created <= _aware(until)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _read(source: str | Path | bytes) -> bytes:
    if isinstance(source, bytes):
        return source
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"no file at {path}")
    return path.read_bytes()


def default_reviewer() -> str:
    try:
        return os.environ.get("MMDEDUP_REVIEWER") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _pair_dict(pair: Pair, ids: dict[int, str]) -> dict[str, Any]:
    signals = {name: pair.signals.get(name) for name in SIGNAL_NAMES}
    signals.update({k: v for k, v in pair.signals.items() if k not in signals})
    out = {"a": ids[pair.a_pk], "b": ids[pair.b_pk], "score": round(pair.score, 4),
           "tier": pair.tier, "kind": pair.kind, "signals": signals}
    if pair.details:
        out["details"] = pair.details
    return out


__all__ = ["Platform", "Item", "IngestReport"]
