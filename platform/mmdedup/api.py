"""Platform: the one facade the CLI, the scripts and Python users call.

Results are typed (results.py: `Pair`, `Cluster`, `Match`) and their `as_dict()` is the
documented line, so what a script reads from `mmdedup pairs --format jsonl` and what it
gets from `Platform.pairs()` are the same thing. Every signal comes from the registry
(signals/registry.py): nothing here names one.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
import threading
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import replace
from functools import partial
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from .config import DEFAULT_HOME, Settings, load_settings, tiers_at_least
from .extract.web import extract_page
from .input.items import Item, probe_item, text_for_signals
from .input.sources import (
    count_manifest_lines,
    folder_files,
    folder_ids,
    read_folder,
    read_items,
    read_manifest,
)
from .learn.retrain import Job, RetrainReport, active_fusion, with_fusion  # noqa: F401
from .pipeline import thresholds as adaptive, windows
from .pipeline.delete import DeleteReport, Selection, delete_chosen, delete_items, meta_matches
from .pipeline import stream as streaming
from .pipeline.ingest import ChunkHook, Engine, IngestReport, Searched, local_engine, run_ingest
from .pipeline.ray_engine import (EngineUnavailable, RayEngine, entry_blocks, folder_blocks, manifest_blocks,
                                  take_env)
from .pipeline.repeats import Repeats
from .report import DEFAULT_MAX_CLUSTERS, DEFAULT_MAX_PAIRS
from .report.write import write_pair_report, write_report
from .results import Cluster, Match, Pair, UnknownItem
from .review import labels, queue
from .review.labels import DECISIONS, ImportReport, default_reviewer  # noqa: F401  (DECISIONS re-exported)
from .review.session import ReviewSession
from .score.canonical import canonical, member_facts
from .score.cluster import accepted_edges, components
from .score.windows import as_utc
from .signals import registry
from .signals.base import Signal
from .signals.exact_keys import ExactKeys
from .signals.scorer import PairScorer, fusion_of
from .store import items as stored_items
from .store import thresholds as stored_thresholds
from .store import queries
from .store.db import open_store, resolve_url
from .store.errors import NoStore, StoreError, explain, shown_url
from .store.locks import LockBusy, job_lock, take_write_lock  # noqa: F401  (LockBusy: raised by retrain)
from .store.signatures import has_other_version
from .store.streams import read_cursor


EXPIRE_EVERY = 60.0  # seconds: how often a stream deletes what is past its retention
RESIGN_LOCK = "resign"  # the job lock of signing a store again after an upgrade
_log = logging.getLogger("mmdedup")


class Platform:
    """A store of items and their duplicate relations, opened on one database."""

    def __init__(self, home: Path, url: str, sessions: sessionmaker[Session],
                 settings: Settings, signals: Iterable[type[Signal]] | None = None, *,
                 read_only: bool = False) -> None:
        self.home = home
        self.url = url
        self.sessions = sessions
        self.read_only = read_only
        # {signal name: the version whose stored signatures were found current (or signed
        # again)}: a query asks the store once per process, not at every query.
        self._current: dict[str, str] = {}
        self._configured = settings  # as configured; `settings` adds the fitted fusion model
        self.settings = settings
        # Every signal gets the scorer at construction (a re-sign re-pairs what it changed),
        # and the scorer every signal.
        self._signals = [kind(home, sessions, settings, rescore=self._rescore)
                         for kind in (signals or registry.SIGNALS)]
        self._scorer = PairScorer(self._signals, settings)
        self._exact = ExactKeys(home, sessions, settings)
        self._load_fusion()

    def _rescore(self, session: Session, pairs: Any) -> int:
        return self._scorer(session, pairs)

    @classmethod
    def open(cls, home: str | Path | None = None, db_url: str | None = None, *,
             read_only: bool = False) -> Platform:
        """Open (creating and migrating as needed) the store under `home`.

        `home` defaults to $MMDEDUP_HOME or ./.mmdedup; `db_url` to $MMDEDUP_DATABASE_URL or
        SQLite inside home. Index files always live in home. `read_only`: for reading
        only; the store must exist (NoStore otherwise) and nothing is created, migrated
        or written, so a read-only store answers too. A store that cannot be opened is a
        StoreError saying what to do.
        """
        home_path = Path(home or os.environ.get("MMDEDUP_HOME") or DEFAULT_HOME)
        db_url = db_url or os.environ.get("MMDEDUP_DATABASE_URL")
        if home_path.exists() and not home_path.is_dir():
            raise StoreError(f"the store folder {home_path} is a file: give --home a folder "
                             "(it is created when missing)")
        # Settings first: a bad config touches no database.
        settings = load_settings(home_path, registry.settings_types(),
                                 [s.name for s in registry.SIGNALS if s.medium])
        if not read_only:
            try:
                home_path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the store folder {home_path}: {exc.strerror}; "
                                 "give --home a folder this user may write") from None
        url = resolve_url(home_path, db_url)
        try:
            sessions = open_store(url, read_only=read_only)
        except NoStore:
            if db_url:
                raise NoStore(f"the database {shown_url(url)} holds no mmdedup store (run "
                              "`mmdedup --db URL ingest ...` first; a command that only "
                              "reads creates nothing)") from None
            raise NoStore(f"no mmdedup store at {home_path} (run `mmdedup --home {home_path} "
                          "ingest ...` first)") from None
        return cls(home_path, url, sessions, settings, read_only=read_only)

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
        id_prefix: str = "",
        engine: str = "local",
        ray_address: str | None = None,
    ) -> IngestReport:
        """Ingest a manifest (.jsonl), a folder (one item per file), one file (an item, as
        its folder would ingest it) or Python items.

        For Python items, relative paths are resolved against `root` (and may not leave it)
        or, without one, against the working directory. `workers`: processes in all; with
        more than one, workers - 1 extract (read files, decode media, tokenise) chunks
        ahead while this one writes. `engine="ray"`: the source is read and extracted in
        blocks on a Ray cluster instead (`ray_address`: "auto", HOST:PORT, or None for
        Ray's own choice: $RAY_ADDRESS, else a cluster of this machine started for the
        run); needs the `ray` extra, and every worker must reach the files and the store.
        `source_name` names Python items' source in runs and failures (a rerun of the same
        source resolves its earlier failures). `id_prefix` is put before every item id.
        A folder's ids are the paths inside it: a folder whose ids name items ingested from
        another source is refused (ValueError) rather than replacing them; an `id_prefix`
        keeps both.
        """
        if engine not in ("local", "ray"):
            raise ValueError(f"engine is \"local\" or \"ray\", not {engine!r}")
        if engine == "ray" and workers > 1:
            raise ValueError("workers is for the local engine: the ray engine uses the cluster's cores")
        if engine == "ray" and self.settings.window_store:
            raise ValueError("window_store is for the local engine: the ray engine's workers search "
                             "the index files, not a window in Redis")
        if isinstance(source, (str, Path)):
            path = Path(source)
            if path.is_dir() or (path.is_file() and path.suffix.lower() != ".jsonl"):
                folder, files = (path, folder_files(path)) if path.is_dir() else (path.parent, [path])
                name = str(folder.resolve())
                self._refuse_taken(folder, folder_ids(folder, files, id_prefix), name)
                if engine == "ray":
                    run = RayEngine(folder_blocks(folder, files, self.settings), folder, self.settings,
                                    id_prefix, self.home, self.url, ray_address, progress, searched_on_worker)
                else:
                    run = local_engine(read_folder(folder, files, self.settings, id_prefix),
                                       folder, self.settings, self.sessions, workers)
                return self._run(run, name, len(files), progress)
            if not path.is_file():
                raise FileNotFoundError(f"no manifest or folder at {path}")
            if engine == "ray":
                blocks = manifest_blocks(path, self.settings)
                run = RayEngine(blocks, path.parent, self.settings, id_prefix, self.home, self.url,
                                ray_address, progress, searched_on_worker)
                total = sum(block.records for block in blocks)
            else:
                # (the lines are counted for the progress bar's total only: a read of the
                # whole manifest, seconds for a few gigabytes, before the first item)
                total = count_manifest_lines(path, self.settings) if progress else None
                run = local_engine(read_manifest(path, self.settings, id_prefix), path.parent,
                                   self.settings, self.sessions, workers)
            return self._run(run, str(path.resolve()), total, progress)
        items = list(source)
        entries = read_items(items, id_prefix)
        base = Path(root) if root else None
        run = (RayEngine(entry_blocks(entries, self.settings), base, self.settings, "", self.home,
                         self.url, ray_address, progress, searched_on_worker) if engine == "ray"
               else local_engine(entries, base, self.settings, self.sessions, workers))
        return self._run(run, source_name, len(items), progress)

    def stream(self, source: str | Path = "-", *, follow: bool = False,
               out: str | Path | IO[str] | None = None, idle: float = 0.0, id_prefix: str = "",
               stop: threading.Event | None = None, progress: bool = False) -> IngestReport:
        """Ingest a stream of JSON Lines records in micro-batches (pipeline/stream.py),
        writing each record's decision as a JSON line to `out` (a path: appended, exactly
        once across restarts when following; a text file; default standard output) as
        soon as its batch commits. `source`: "-" for standard input (read to its end), or
        a file to `follow` as it grows and is rotated, resuming after the last committed
        line when started again. Stops at the end of standard input, after `idle` seconds
        without a new line (0: never), or when `stop` is set. The report's `engine` holds
        the decisions counted by status, and what the exact repeats' filter did
        (`stream_repeats`, pipeline/repeats.py)."""
        limit, stopped = self.settings.max_manifest_line_bytes, stop or threading.Event()
        with ExitStack() as closing:
            if source == "-":
                if follow:
                    raise ValueError("--follow follows a file; standard input is read to its end")
                lines, root, name, cursor = streaming.read_lines(sys.stdin.buffer, limit), None, "stdin", None
            else:
                path = Path(source)
                if not follow:
                    raise ValueError(f"{path}: a file is streamed with follow=True (or ingested whole)")
                name = str(path.resolve())
                with self.sessions() as session:
                    cursor = read_cursor(session, name)
                start = streaming.Position(cursor.inode, cursor.offset, cursor.line) if cursor else streaming.Position()
                lines, root = streaming.follow(path, start, limit, stopped), path.parent
            out_bytes = 0
            if isinstance(out, (str, Path)):
                out_bytes = streaming.complete_out(Path(out), cursor if source != "-" else None)
                fh = closing.enter_context(open(out, "a", encoding="utf-8"))
                write = partial(_write_synced, fh)
            else:
                write = partial(_write_flushed, out or sys.stdout)
            batches = streaming.batches(lines, self.settings.stream_batch, self.settings.stream_batch_seconds,
                                     idle, stopped)
            repeats = Repeats(self.sessions, self.settings, self._exact, self._signals) \
                if self.settings.stream_repeats else None
            engine = streaming.StreamEngine(batches, root, self.settings, self.sessions, id_prefix, repeats)
            said = streaming.Decisions(engine, self.settings, write, None if source == "-" else name, out_bytes)
            said.after = self._after_batch(said, EXPIRE_EVERY)
            report = self._run(engine, name, None, progress, hook=said)
        report.engine = {"name": "stream", "decisions": said.counts}
        if repeats is not None:
            report.engine["repeats"] = {"looked up": repeats.looked_up, "given stored values": repeats.copied}
        return report

    def _after_batch(self, said: streaming.Decisions, seconds: float) -> Callable[[], None]:
        """What a stream runs after each batch: adaptive thresholds brought up to date
        (the next batch's decisions read them), and `expire` at most once in `seconds`."""
        last = time.monotonic()

        def run() -> None:
            nonlocal last
            if self._adapt():
                said.settings = self.settings
            if time.monotonic() - last >= seconds:
                self.expire()
                last = time.monotonic()
        return run

    def _adapt(self) -> dict[str, float]:
        """New adaptive cut-offs where they are due (pipeline/thresholds.py), put in force
        here; {pair kind: cut-off} of the new ones."""
        made = adaptive.adapt(self.sessions, self.settings)
        if made:
            self._load_fusion()
        return {row["kind"]: row["cutoff"] for row in made}

    def _refuse_taken(self, folder: Path, ids: list[str], source: str) -> None:
        with self.sessions() as session:
            taken = stored_items.taken_ids(session, ids, source)
        if taken:
            item_id, other = taken[0]
            raise ValueError(
                f"{folder}: {len(taken)} of its item ids already name items ingested from another "
                f"source (\"{item_id}\" from {other}); a folder's ids are the paths inside it, so "
                f"this ingest would replace them. Give this folder an id prefix to keep both, "
                f"e.g. --id-prefix \"{folder.resolve().name}/\"")

    def holds(self, db_url: str | None) -> bool:
        """Whether `db_url` (None: SQLite in this platform's home) names its database: what
        a query server asks before it answers for a store (cli/query_server.py)."""
        return resolve_url(self.home, db_url) == self.url

    def signal(self, name: str) -> Signal:
        """The signal of that name (signals/registry.py lists them)."""
        for signal in self._signals:
            if signal.name == name:
                return signal
        raise KeyError(f"no signal named {name!r}; known: {', '.join(s.name for s in self._signals)}")

    def _run(self, engine: Engine, source: str, total: int | None, progress: bool,
             hook: ChunkHook | None = None) -> IngestReport:
        for signal in self._signals:
            signal.follow_active()
        self._load_fusion()
        self._catch_up(progress)
        ray = isinstance(engine, RayEngine)
        report = run_ingest(self.sessions, engine, source=source, settings=self.settings,
                            total=total, progress=progress, signals=self._signals,
                            scorer=self._scorer, follow=self._follow_models, exact=self._exact,
                            search=engine.search if ray else self._search_here, defer=ray,
                            workers=engine.workers() if ray else None, hook=hook)
        if ray:
            report.engine = {"name": "ray", **engine.summary}
        report.expired = len(self.expire(progress=progress).ids)
        report.adapted = self._adapt()
        return report

    def searched(self, name: str, pks: np.ndarray, among: np.ndarray, on: Iterable[str] = ()) -> Searched:
        """The candidate pairs of stored items `pks` that signal `name` finds, scored with
        every signal, not written: the search an ingest ran after writing its items (on
        the ray engine's workers, each with a read-only Platform). `among`: every item
        that search covers (`Signal.search_stored`); `on`: the signals the writing
        process scores with, whose models load here if they wait for a first use (a
        signal it has on and this process cannot have is an EngineUnavailable saying why)."""
        self._follow_models()
        for signal in self._signals:
            if signal.name in on and signal.version() is None and (why := signal.load_models()):
                raise EngineUnavailable(f"the {signal.name} signal, on where this ingest writes, is off "
                                        f"on a worker that scores its pairs: {why}")
        signal = self.signal(name)
        before = Counter(signal.capped)
        with self.sessions() as session:
            pairs = signal.search_stored(session, pks, among)
            return Searched(pks, self._scorer.scored(session, pairs), len(pairs), signal.capped - before)

    def _search_here(self, name: str, pks: np.ndarray, on: tuple[str, ...]) -> Iterator[Searched]:
        """Items an ingest cut short left unsearched, searched in this process."""
        step = self.settings.ingest_chunk
        for start in range(0, len(pks), step):
            yield self.searched(name, pks[start:start + step], pks)

    def resign_stale(self, progress: bool = False) -> list[str]:
        """Sign again, before a search, the stored items whose signatures an earlier
        release made (another tokenizer, hash or picture-code version): those are never
        compared with the active version's, so without this a query after an upgrade
        finds nothing among them until the next ingest. Done once, for every process:
        under a job lock (a second process waits, then finds nothing left) and each batch
        under the write lock, written to the store with the index files saved, so the
        next open answers at once. A read-only Platform signs through a writer of its
        own on the same store; where the store cannot be written, a warning says the
        answers miss those items. Asked of the store once per signal version in a process.
        Only signatures of another release count (`Signal.release_part`): texts signed
        under other TF-IDF or word-weight models are those a retrain or a refresh is
        signing again, or a later ingest or retrain resumes, and a query leaves them to it.
        `progress`: a bar on stderr. Returns the signals signed again."""
        todo, cannot = [], []
        with self.sessions() as session:
            for signal in self._signals:
                version = signal.version()
                if version is None or self._current.get(signal.name) == version:
                    continue
                if signal.needs_resign(session, version):
                    (todo if signal.resigns else cannot).append(signal.name)
                else:
                    self._current[signal.name] = version
        for name in cannot:
            _log.warning("the store holds %s signatures of an earlier version, which this release does "
                         "not compare and cannot make again from the store: queries miss those items' %s "
                         "until they are ingested again", name, name)
            self._current[name] = self.signal(name).version()
        if not todo:
            return []
        if not self.read_only:
            done = self._catch_up(progress, todo)
        else:
            try:
                with Platform(self.home, self.url, open_store(self.url), self._configured) as writer:
                    for signal in writer._signals:
                        signal.follow_active()
                    writer._load_fusion()
                    done = writer._catch_up(progress, todo)
            except Exception as exc:
                problem = explain(exc, self.url)
                if problem is None and not isinstance(exc, (StoreError, OSError)):
                    raise
                _log.warning("the store holds %s signatures of an earlier version and cannot be "
                             "written here to sign them again (%s): queries miss those items until a "
                             "process that may write opens it", " and ".join(todo), problem or exc)
                done = []
        for name in todo:
            self._current[name] = self.signal(name).version()
        return done

    def _catch_up(self, progress: bool, names: Iterable[str] | None = None) -> list[str]:
        """Every signal (of `names`) whose stored signatures are of another version signed
        again (`Signal.catch_up`), one process at a time: a second one waits on the job
        lock, and once it has it finds what the first signed."""
        chosen = [s for s in self._signals if s.resigns and (names is None or s.name in names)]
        if not chosen:
            return []
        with self.sessions() as session:
            stale = any(s.version() is not None and has_other_version(session, s.name, s.version())
                        for s in chosen)
        engine = self.sessions.kw["bind"]
        with ExitStack() as held:
            if not stale:  # (the usual ingest: no lock to take; each signal still looks, under the write lock)
                return [s.name for s in chosen if s.catch_up(progress)]
            try:
                held.enter_context(job_lock(engine, RESIGN_LOCK, 0.0))
            except LockBusy:
                if progress:
                    print("waiting for another process signing this store's items again after an "
                          "upgrade...", file=sys.stderr)
                held.enter_context(job_lock(engine, RESIGN_LOCK, float("inf"), poll=0.2))
            return [s.name for s in chosen if s.catch_up(progress)]

    def _follow_models(self) -> None:
        """Take up the models another process (a retrain, a TF-IDF refresh) made active."""
        for signal in self._signals:
            signal.follow_active()
        self._load_fusion()

    def _load_fusion(self) -> None:
        """Fusion weights and tiers: the retrained model in force, else the configured."""
        with self.sessions() as session:
            self.settings = with_fusion(self._configured, active_fusion(session),
                                        {s.name: s.settings_type for s in self._signals})
        self.settings = replace(self.settings, adapted=adaptive.in_force(self.sessions, self.settings))
        self._scorer.settings = self.settings

    # --- learning ----------------------------------------------------------------------

    def retrain(self, *, rollback: bool = False, wait_seconds: float = 0.0) -> RetrainReport:
        """Retrain TF-IDF, word weights and fusion from the store and the labels (or roll
        the last retrain back), re-sign and re-score what changed; one run at a time
        across every process on this store (`LockBusy` after `wait_seconds`)."""
        job = Job(self.sessions, self._configured, self.signal("text"), self._scorer,
                  fusion_of(self._signals, self._configured), self._load_fusion)
        return job.rollback(wait_seconds) if rollback else job.run(wait_seconds)

    # --- queries -----------------------------------------------------------------------

    def query(self, text: str | None = None, *, image: str | Path | bytes | None = None,
              video: str | Path | bytes | None = None, html: str | Path | bytes | None = None,
              k: int = 10, min_score: float = 0.0, meta: dict[str, Any] | None = None,
              since: datetime | None = None, until: datetime | None = None) -> list[Match]:
        """The stored items nearest to a text, a picture or a page (or several at once),
        best first, without ingesting anything. The probe is loaded as an item would be,
        every signal that has its medium searches its index, and the per-signal scores
        are fused as for pairs. Where CLIP is on, a text also searches the pictures and
        video keyframes through CLIP's text tower (signal `clip_text`, detail
        `clip_text_cosine`). `meta` keeps items whose meta has those values;
        `since`/`until` keep items ingested in that window. A platform kept open (a
        server) answers under the models in force now, another process's retrain included.
        Items an earlier release signed are signed again first (`resign_stale`), so the
        answers after an upgrade are those of a store ingested under this one."""
        self._follow_models()
        self.resign_stale()
        page = None
        if html is not None:
            page = extract_page(_read(html), max_bytes=self.settings.max_file_bytes,
                                max_chars=self.settings.max_page_chars, max_depth=self.settings.max_page_depth)
            text = "\n".join(t for t in (text, page.text) if t and t.strip())
        if text is not None and not text.strip():
            raise ValueError("the query text is empty")
        if text is None and image is None and video is None:
            raise ValueError("give a text, an image, a video or a page to query with")
        probe = probe_item(text, None if image is None else _read(image),
                           None if video is None else _read(video), self.settings,
                           keep_pixels=(image is not None or video is not None)
                           and any(s.wants_pixels() for s in self._signals))
        probe.page = page  # the DOM signal's tag paths
        signals: dict[int, dict[str, float]] = {}
        details: dict[int, dict[str, float]] = {}
        fusion = fusion_of(self._signals, self.settings)
        weights = dict(fusion.weights)
        for signal in self._signals:
            weights.update(signal.query_only_weights())
            for name, found in signal.queries(probe).items():
                for pk, (score, figures) in found.items():
                    signals.setdefault(pk, {})[name] = score
                    details.setdefault(pk, {}).update(figures)
        text_signal = next((s for s in self._signals if s.name == "text"), None)
        text_figures = text_signal.query_figures if text_signal is not None else ()
        for pk in self._exact.with_text(probe.text_hash if text_signal is not None else None):
            # the same normalised text: 1.0 on the text signal
            signals.setdefault(pk, {})["text"] = 1.0
            details[pk] = {k: v for k, v in details.get(pk, {}).items() if k not in text_figures}
        found_pks = sorted(signals)
        for signal in self._signals:  # the signals without an index join on what was found
            for pk, (score, figures) in signal.query_found(probe, found_pks).items():
                signals[pk][signal.name] = score
                details[pk].update(figures)
        fusion = fusion.with_weights(weights)
        scored = sorted(((fusion.fuse(sig), pk) for pk, sig in signals.items()),
                        key=lambda sp: (-sp[0], sp[1]))
        scored = [(score, pk) for score, pk in scored if score >= min_score]
        with self.sessions() as session:
            rows = queries.items_by_pk(session, [pk for _, pk in scored])
        keep = [(score, pk) for score, pk in scored if _passes(rows[pk], meta, since, until)][:k]
        return [Match(rows[pk].id, score, signals[pk], details.get(pk, {})) for score, pk in keep]

    # --- results -----------------------------------------------------------------------

    def delete(self, ids: Iterable[str] = (), *, meta: dict[str, Any] | None = None,
               before: datetime | None = None, dry_run: bool = False,
               progress: bool = False) -> DeleteReport:
        """Delete the items named by `ids` (every item when none is named) whose meta holds
        every `meta` value and whose time is before `before`: their signatures,
        pairs and index entries go, their labels stay, marked as about a deleted item
        (pipeline/delete.py). Ids the store does not hold are reported, not an error:
        deleting twice deletes nothing more. `dry_run`: only say what would go."""
        selection = Selection(tuple(ids), dict(meta or {}), before)
        report = delete_items(self.sessions, self._scorer, selection, dry_run=dry_run, progress=progress)
        if not dry_run:
            self._catch_up_windows()
        return report

    def expire(self, *, dry_run: bool = False, progress: bool = False) -> DeleteReport:
        """Take the items behind every class's window out of the candidate indexes, and
        delete those older than their class's retention (`windows`, pipeline/windows.py),
        as `delete` does; every ingest ends with it."""
        evicted = 0 if dry_run else windows.evict(self.sessions, self.settings)
        with self.sessions() as session:
            ids = windows.expired(session, self.settings)
        report = delete_chosen(self.sessions, self._scorer, ids, [], dry_run=dry_run, progress=progress)
        report.evicted = evicted
        if not dry_run:
            self._catch_up_windows()
        return report

    def _catch_up_windows(self) -> None:
        """A window shared in Redis takes out what was just deleted or evicted now, not at
        the next batch or query that looks: its memory follows the window."""
        for signal in (self._exact, *self._signals):
            if signal.in_window and signal.version() is not None:
                with self.sessions.begin() as session:
                    take_write_lock(session, numbered=False)
                    signal.index(session)

    def pairs(self, min_tier: str = "weak") -> list[Pair]:
        """Scored pairs at or above `min_tier` under the tiers in force, best first."""
        return list(self.iter_pairs(min_tier))

    def iter_pairs(self, min_tier: str = "weak") -> Iterator[Pair]:
        """`pairs`, read from the store a batch at a time: what a large store's pairs are
        written out by without holding them all."""
        tiers = tiers_at_least(min_tier)
        listed = registry.listed_names()
        with self.sessions() as session:
            for rows in queries.pairs_in_tiers(session, tiers, self.settings.tier_thresholds):
                for row in rows:
                    yield Pair.from_row(row, {row.a_pk: row.a_id, row.b_pk: row.b_id}, listed)

    def clusters(self) -> list[Cluster]:
        """Duplicate groups, each with its canonical member: the original by
        `canonical_rule` (score/canonical.py), not merely the first ingested."""
        rule = self.settings.canonical_rule
        with self.sessions() as session:
            groups = self._groups(session)
            pks = [pk for g in groups for pk in g]
            ids = queries.item_ids_of(session, pks)
            facts = member_facts(((r.pk, r.meta, r.page_date, text_for_signals(r.title, r.text, r.page_text))
                                  for r in queries.member_rows(session, pks)),
                                 queries.media_sizes(session, pks), self.settings.canonical_time_keys)
        return [Cluster(ids[canonical(g, facts, rule)], [ids[pk] for pk in g]) for g in groups]

    def _groups(self, session: Session) -> list[list[int]]:
        """The clusters' members (item pks, in ingest order)."""
        strong = queries.strong_edges(session, self.settings.tier_thresholds, self.settings.tier_weak,
                                      [s.name for s in self._signals if s.medium])
        return components(accepted_edges(strong, labels.decisions_in_force(session)))

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
        labels.label_pair(self.sessions, a, b, decision, reviewer or default_reviewer())

    # --- review ------------------------------------------------------------------------

    def import_labels(self, path: str | Path, reviewer: str | None = None,
                      fmt: str | None = None) -> ImportReport:
        """Bulk-import labels from CSV (header a,b,decision[,reviewer][,created_at]) or JSON
        Lines; bad rows are reported with line number and reason, the rest imported."""
        return labels.import_labels(self.sessions, path, reviewer or default_reviewer(), fmt)

    def labels(self) -> list[dict[str, Any]]:
        """Every label, oldest first: [{"a", "b", "decision", "reviewer", "created_at"}]."""
        return list(labels.iter_labels(self.sessions))

    def export_labels(self, out: str | Path | IO[str], fmt: str = "jsonl") -> int:
        """Write every label as JSON Lines or CSV to a path or an open text file; returns
        how many. The output imports back with `import_labels`."""
        if isinstance(out, (str, Path)):
            with open(out, "w", encoding="utf-8", newline="") as fh:
                return labels.write_labels(labels.iter_labels(self.sessions), fh, fmt)
        return labels.write_labels(labels.iter_labels(self.sessions), out, fmt)

    def review_queue(self, reviewer: str | None = None, tiers: Iterable[str] | None = None,
                     limit: int | None = None) -> list[dict[str, Any]]:
        """The pairs `reviewer` would be offered next, in order, without claiming them."""
        tiers = queue.check_tiers(list(tiers or self.settings.review_tiers))
        return queue.peek_queue(self.sessions, reviewer or default_reviewer(), tiers,
                                self.settings.tier_thresholds, limit)

    def review_session(self, reviewer: str | None = None,
                       tiers: Iterable[str] | None = None) -> ReviewSession:
        """A reviewer's pass over the review queue (see review/session.py); close it (or use
        it in a with block) to release the pairs it holds."""
        return ReviewSession(self.sessions, self.settings, reviewer or default_reviewer(),
                             list(tiers) if tiers else None)

    def failures(self, include_resolved: bool = False) -> list[dict[str, Any]]:
        """Inputs that failed, with their reason; open ones only unless asked. `at` is
        the time of the (latest) failing run, in UTC."""
        with self.sessions() as session:
            return [
                {"source": f.source, "key": f.key, "id": f.item_id, "reason": f.reason,
                 "detail": f.detail,
                 "at": as_utc(f.created_at).isoformat(),
                 "resolved": f.resolved_at is not None}
                for f in queries.failures(session, include_resolved)
            ]

    def thresholds(self) -> list[dict[str, Any]]:
        """Every medium tier cut-off adaptive thresholds computed (pipeline/thresholds.py),
        oldest first, each with the scores it came from; the latest of each pair kind is
        in force while `thresholds = "adaptive"`."""
        with self.sessions() as session:
            return [{"kind": r.kind, "through_item": r.through_pk, "pairs": r.pairs, "mean": round(r.mean, 4),
                     "std": round(r.std, 4), "cutoff": round(r.cutoff, 4),
                     "at": as_utc(r.created_at).isoformat()} for r in stored_thresholds.history(session)]

    def stats(self) -> dict[str, Any]:
        with self.sessions() as session:
            return {**queries.counts(session, self.settings.tier_thresholds),
                    "clusters": len(self._groups(session))}

    def report(self, out: str | Path, *, max_pairs: int = DEFAULT_MAX_PAIRS,
               max_clusters: int = DEFAULT_MAX_CLUSTERS,
               root: str | Path | None = None) -> dict[str, Any]:
        """Write a self-contained HTML report (summary, score histogram per tier, clusters,
        the review queue with texts side by side) to `out`; returns its summary. `root`
        resolves relative picture and video paths of items ingested from Python."""
        return write_report(Path(out), self.sessions, self.settings, [c.as_dict() for c in self.clusters()],
                            max_pairs=max_pairs, max_clusters=max_clusters, root=root)


    def pair_report(self, a: str, b: str, out: str | Path, *,
                    root: str | Path | None = None) -> Path:
        """Write the stored pair (a, b) as the report shows it (scores, texts side by
        side, thumbnails) to a page of its own at `out`; UnknownItem for an id the store
        does not hold, KeyError where the two are not a stored pair."""
        return write_pair_report(Path(out), self.sessions, self.settings, a, b, root=root)


_ON_WORKER: dict[tuple[Path, str, bytes], Platform] = {}  # a Ray worker's, across tasks and runs


def searched_on_worker(home: Path, url: str, settings: Settings, env: dict[str, str], name: str,
                       pks: np.ndarray, among: np.ndarray, on: tuple[str, ...]) -> Searched:
    """A ray engine's task (pipeline/ray_engine.py `Searcher`): `Platform.searched` on this
    worker's read-only Platform over the store, kept while the settings and the writer's
    environment `env` are the same (its indexes then stay open, caught up from the store
    at each task). `env` is set in this process first: the models the signals load read it."""
    take_env(env)
    key = (home, url, pickle.dumps((settings, sorted(env.items()))))
    if key not in _ON_WORKER:
        _ON_WORKER.clear()
        _ON_WORKER[key] = Platform(home, url, open_store(url, read_only=True), settings, read_only=True)
    return _ON_WORKER[key].searched(name, pks, among, on)


def store_problem(exc: BaseException, url: str) -> StoreError | None:
    """What a failure of a database driver on the store at `url` means, as one line with
    what to do (server gone, store read-only, disk full); None for any other exception."""
    return explain(exc, url)


def _passes(row: Any, meta: dict[str, Any] | None, since: datetime | None,
            until: datetime | None) -> bool:
    if meta and not meta_matches(row.meta, meta):
        return False
    created = as_utc(row.created_at)
    if since is not None and created < as_utc(since):
        return False
    return until is None or created <= as_utc(until)


def _write_flushed(out: IO[str], text: str) -> None:
    out.write(text)
    out.flush()


def _write_synced(out: IO[str], text: str) -> None:
    """On disk before the next batch is read: what a restart completes from the store."""
    out.write(text)
    out.flush()
    os.fsync(out.fileno())


def _read(source: str | Path | bytes) -> bytes:
    if isinstance(source, bytes):
        return source
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"no file at {path}")
    return path.read_bytes()


__all__ = ["Platform", "Item", "IngestReport", "DeleteReport", "Pair", "Cluster", "Match", "UnknownItem",
           "NoStore", "StoreError", "EngineUnavailable", "store_problem"]
