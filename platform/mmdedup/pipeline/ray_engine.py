"""The ray engine: a source read and extracted in blocks on a Ray cluster.

The source is cut into blocks where it is read (manifest line spans, lists of a folder's
files, Python items' entries); each block is one Ray task, which reads its records,
asks the store which of them it already holds unchanged, and loads the rest (files read
and checked, pictures and pages decoded and hashed, video keyframes, text tokens): the
work that pays for more cores. Signals that read pixels (CLIP) extract there too, through
their `worker_extract`, on an actor per GPU where the cluster has GPUs: the vectors come
back, not the pixels. Plain texts are signed there too, under the signers in force when
the block was sent (the text signal's `worker_extract`; the writer signs again what a
TF-IDF refresh overtook). The blocks come back in order and `run_ingest` writes
them chunk by chunk in this process, as the local engine's. The text and picture signals
only store and index them there: once every chunk is written, their candidate pairs are searched
and scored on the workers (`search`), each task a block of the run's items against the
index files the run saved, and this process writes what they found. Pairs, tiers and
clusters are the same whichever engine ran (tests/test_ray_engine.py compares them). Blocks are of
`engine_block` records (a chunk's at most), and two chunks' worth of them (at least two
per core) are in flight at once: the workers go on extracting while this process writes
a chunk, and what waits in memory stays bounded.

Every worker must reach the source's files and the store at the paths this process
uses: a one-machine cluster with SQLite, or PostgreSQL and a shared file system.
Ray is an optional extra (`pip install 'mmdedup[ray]'`), imported only here and only
when this engine runs.
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
from sqlalchemy.orm import Session, sessionmaker
from tqdm import tqdm

from ..config import Settings
from ..input.items import Entry, LoadedItem
from ..input.sources import FirstOfEachId, Span, manifest_entries, manifest_spans, read_folder
from ..store.db import open_store
from .ingest import (Chunks, Extracted, PixelsWanted, Searched, chunked, entry_bytes, extract_entries,
                     keyed, stored_fingerprints)


CONNECT_SECONDS = 5
# A task whose worker died (killed, out of memory, its node lost) is run again, elsewhere
# if need be; a block is only read, so running it twice writes nothing twice.
RETRIES = 3


class EngineUnavailable(RuntimeError):
    """The ray engine was asked for where Ray is not installed or no cluster answers."""


@dataclass(frozen=True)
class Block:
    """What one task reads: a manifest's lines (`span`), some of a folder's files, or
    Python items' entries (read where they were handed over)."""

    manifest: Path | None = None
    span: Span | None = None
    folder: Path | None = None
    files: tuple[Path, ...] = ()
    entries: tuple[Entry, ...] = ()

    @property
    def records(self) -> int:
        return self.span.lines if self.span is not None else len(self.files) + len(self.entries)


def block_size(settings: Settings) -> int:
    return min(settings.engine_block, settings.ingest_chunk)


def manifest_blocks(path: Path, settings: Settings) -> list[Block]:
    path = path.absolute()
    return [Block(manifest=path, span=span) for span in manifest_spans(path, block_size(settings))]


def folder_blocks(folder: Path, files: list[Path], settings: Settings) -> list[Block]:
    """(Paths made absolute, not resolved: a link is read as the local engine reads it.)"""
    whole, n = folder.absolute(), block_size(settings)
    return [Block(folder=whole, files=tuple(whole / p.relative_to(folder) for p in files[i:i + n]))
            for i in range(0, len(files), n)]


def entry_blocks(entries: Iterable[Entry], settings: Settings) -> list[Block]:
    listed, n = list(entries), block_size(settings)
    return [Block(entries=tuple(listed[i:i + n])) for i in range(0, len(listed), n)]


# What a worker runs to search a block of a signal's stored items (`Platform.searched` on a
# read-only Platform of the worker's: api.py's `searched_on_worker`): home, store URL,
# settings, the writer's environment to score in, signal name, the block's pks, every pk
# the search covers, the signals on.
Searcher = Callable[[Path, str, Settings, dict[str, str], str, np.ndarray, np.ndarray, tuple[str, ...]],
                    Searched]


_ENV_PREFIXES = ("MMDEDUP_", "HF_")
_WORKER_OWN_ENV: dict[str, str] | None = None  # a worker's own such variables, as started


def writer_env() -> dict[str, str]:
    """This process's variables that decide what its signals load and score."""
    return {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)}


def take_env(env: dict[str, str]) -> None:
    """Set the writer's `env` over this worker's own variables, as Ray's runtime_env
    would, but in a worker that also serves tasks without it. A worker lives as long as
    the job, whose next run may have changed or dropped a variable: what an earlier task
    set is undone first."""
    global _WORKER_OWN_ENV
    if _WORKER_OWN_ENV is None:
        _WORKER_OWN_ENV = writer_env()
    for key in writer_env():
        del os.environ[key]
    os.environ.update({**_WORKER_OWN_ENV, **env})


class RayEngine:
    """The engine over these blocks (an `Engine`). `root`: what relative paths are
    resolved against (None: this process's working directory, as the local engine does);
    `url`: the store the workers ask for fingerprints; `address`: the cluster's ("auto",
    HOST:PORT) or None for Ray's own choice ($RAY_ADDRESS, else a cluster of this
    machine). After a run, `summary` says what the cluster did: blocks, records, CPUs,
    GPUs encoding pictures, seconds."""

    def __init__(self, blocks: list[Block], root: Path | None, settings: Settings, id_prefix: str,
                 home: Path, url: str, address: str | None, progress: bool = False,
                 searcher: Searcher | None = None) -> None:
        self.blocks, self.settings, self.id_prefix = blocks, settings, id_prefix
        self.root = root.absolute() if root is not None else None
        self.home, self.url, self.address, self.progress = home.absolute(), url, address, progress
        self.searcher = searcher
        self.cwd = os.getcwd()
        self.summary: dict[str, Any] = {}

    def __call__(self, pixels: PixelsWanted) -> Chunks:
        """The blocks' records in order, chunked as the local engine chunks its entries:
        ids repeated across blocks are refused here, where every block is seen in order."""
        ray = connect(self.address)
        task = ray.remote(max_retries=RETRIES)(extract_block)
        keep = pixels(None)  # (a block's content is known only where it is read)
        # Signals that read pixels extract where the block is read, in the task, or on an
        # accelerator: one actor per GPU of the cluster holds the models (Ray gives each
        # its GPU), and the tasks send it their pictures.
        extractors = pixels.extractors() if keep else None
        resources = ray.cluster_resources()
        gpus, cpus = int(resources.get("GPU", 0)), max(1, int(resources.get("CPU", 1)))
        actors = ([ray.remote(num_gpus=1, num_cpus=0, max_restarts=RETRIES, max_task_retries=RETRIES)
                   (Extractors).remote(extractors) for _ in range(gpus)]
                  if extractors and gpus else [])
        ahead = max(2 * cpus, -(-2 * self.settings.ingest_chunk // block_size(self.settings)))
        seen = FirstOfEachId()
        started, records = time.perf_counter(), 0
        on_workers: Counter[str] = Counter()  # values extracted there, by signal
        sent: tuple[dict[str, Callable], Any] = ({}, None)  # text extractors, in Ray's store
        bar = tqdm(total=len(self.blocks), unit="block", desc="read and extract", position=1,
                   leave=False, disable=not self.progress)

        def done() -> Iterator[Record]:
            nonlocal records
            calls = (task.remote(block, self.root, self.cwd, self.settings, self.id_prefix, keep,
                                 self.url, actors[i % len(actors)] if actors else extractors, texts())
                     for i, block in enumerate(self.blocks))
            for got in _in_order(ray, calls, ahead):
                records += len(got)
                on_workers.update(name for _, _, x in got if isinstance(x, LoadedItem) for name in x.extracted)
                bar.update()
                yield from got

        def texts() -> Any:
            """The text extractors in force, put into Ray's object store once each (a
            TF-IDF model is large) and passed to the tasks by reference."""
            nonlocal sent
            wanted = pixels.text_extractors()
            if wanted.keys() != sent[0].keys() or any(wanted[k] is not sent[0][k] for k in wanted):
                sent = (wanted, ray.put(wanted))
            return sent[1]

        def first(record: Record) -> Record:
            entry = seen(record[0])
            return record if entry is record[0] else (entry, 0, entry.error)

        try:
            for chunk in chunked(map(first, done()), lambda record: record[1], self.settings):
                yield [entry for entry, _, _ in chunk], [got for _, _, got in chunk]
        finally:
            bar.close()
        self.summary = {"blocks": len(self.blocks), "records": records, "cpus": cpus,
                        "gpus": len(actors), "seconds": round(time.perf_counter() - started, 3),
                        "extracted": dict(on_workers)}

    def workers(self) -> ClusterWorkers:
        """The cluster, for the signals' own work between chunks (`Signal.workers`)."""
        return ClusterWorkers(connect(self.address), self.url)

    def search(self, name: str, pks: np.ndarray, on: tuple[str, ...]) -> Iterator[Searched]:
        """Signal `name`'s search of stored items `pks` (sorted; what the run wrote
        unsearched), a task a block of them: each worker holds a read-only Platform over
        this store, whose index it opens from the files the run saved (memory-mapped: a
        worker reads the pages its items' keys lead to, not the whole index) and whose
        signatures it reads for the pairs it scores. The results come back in order, for
        `run_ingest` to write."""
        ray = connect(self.address)
        assert self.searcher is not None
        # Scoring reads every signal's stored values under the versions in force, and some
        # versions follow from this process's environment (the model registry names the
        # CLIP model): the workers take its MMDEDUP_ and HF_ variables, or a signal this
        # process has on would score nothing there. They go as an argument, not as Ray's
        # runtime_env: a task with a runtime_env of its own gets worker processes of its
        # own, started and importing everything again beside the ones that extracted.
        env = writer_env()
        task = ray.remote(max_retries=RETRIES)(self.searcher)
        # A chunk's items a task: each search asks the store a few questions a signal
        # whatever its size, which blocks of `engine_block` would ask eight times as often.
        among, step = ray.put(pks), self.settings.ingest_chunk
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        started, items, candidates, pairs = time.perf_counter(), 0, 0, 0
        calls = (task.remote(self.home, self.url, self.settings, env, name, pks[i:i + step], among, on)
                 for i in range(0, len(pks), step))
        bar = tqdm(total=len(pks), unit="item", desc=f"search and score ({name})", position=1,
                   leave=False, disable=not self.progress)
        try:
            for found in _in_order(ray, calls, 2 * cpus):
                items += len(found.pks)
                candidates += found.candidates
                pairs += len(found.scored.records)
                bar.update(len(found.pks))
                yield found
        finally:
            bar.close()
            self.summary.setdefault("searched", {})[name] = {
                "items": items, "tasks": -(-len(pks) // step), "candidates": candidates,
                "pairs": pairs, "seconds": round(time.perf_counter() - started, 3)}


def connect(address: str | None) -> Any:
    """The `ray` module, connected to the cluster (once a process)."""
    try:
        import ray
    except ImportError:
        raise EngineUnavailable("the ray engine needs Ray, which is not installed here: "
                                "pip install 'mmdedup[ray]'") from None
    if not ray.is_initialized():
        _answers(address)
        try:
            ray.init(address=address, include_dashboard=False, logging_level="WARNING",
                     log_to_driver=False)
        except ConnectionError as exc:
            raise EngineUnavailable(f"no Ray cluster answers at {address}: {exc}") from None
    return ray


def _answers(address: str | None) -> None:
    """A HOST:PORT where nothing listens is said at once: Ray itself retries for minutes."""
    host, sep, port = (address or "").rpartition(":")
    if not sep or not port.isdigit():
        return  # None, "auto", ray://...: Ray finds the cluster, or says there is none
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise EngineUnavailable(
            f"no Ray cluster answers at {address} ({exc.strerror or exc}): start one there "
            "(`ray start --head --port PORT`) or give the address of a running one") from None


# A record as a task returns it: the entry, its size for chunking, what loading made of it.
Record = tuple[Entry, int, "Any"]


def _result(ray: Any, ref: Any) -> list[Record]:
    """A task's records; what it raised, raised here as itself (a store it cannot open
    is the StoreError the local engine would raise)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        raise (exc.cause or exc) from None


class ClusterWorkers:
    """`signals.base.Workers` on the cluster: a function a task, with the worker's
    read-only sessions of the store."""

    def __init__(self, ray: Any, url: str) -> None:
        self.ray, self.url = ray, url
        self.task = ray.remote(max_retries=RETRIES)(_with_store)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Handle:
        return Handle(self.ray, self.task.remote(self.url, fn, *args))

    def share(self, value: Any) -> Any:
        return self.ray.put(value)


@dataclass(frozen=True)
class Handle:
    ray: Any
    ref: Any

    def done(self) -> bool:
        return bool(self.ray.wait([self.ref], timeout=0)[0])

    def result(self) -> Any:
        return _result(self.ray, self.ref)


def _with_store(url: str, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(_store(url), *args)


def _in_order(ray: Any, calls: Iterable[Any], ahead: int) -> Iterator[Any]:
    """The results of the tasks `calls` submits (object refs, made as it is iterated), in
    order, with `ahead` of them in flight; those not awaited when the caller stops (it
    failed, or its writer did) are abandoned."""
    pending: deque[Any] = deque()
    try:
        for ref in calls:
            pending.append(ref)
            if len(pending) >= ahead:
                yield _result(ray, pending.popleft())
        while pending:
            yield _result(ray, pending.popleft())
    finally:
        _abandon(ray, pending)


def _abandon(ray: Any, pending: Iterable[Any]) -> None:
    """Tasks a run stopped waiting for (it failed, or its writer did): cancelled, and their
    outcome taken, so that Ray does not print each one's error at exit after the one line
    the run ends with."""
    pending = list(pending)
    for ref in pending:
        ray.cancel(ref, force=True)
    for ref in pending:
        try:
            ray.get(ref, timeout=CONNECT_SECONDS)
        except Exception:  # noqa: BLE001, S110 - cancelled, failed, or slow to go: all the same now
            pass


def extract_block(block: Block, root: Path | None, cwd: str, settings: Settings, id_prefix: str,
                  keep_pixels: bool, url: str, extractors: Any = None,
                  text_extractors: dict[str, Callable] | None = None) -> list[Record]:
    """A task: the block's entries read, keyed, sized and extracted, the items the store
    holds unchanged only read and hashed. Relative paths without a `root` are the
    driver's: this worker takes its working directory `cwd`. `extractors`: the pixel
    signals' `worker_extract` ({name: callable}, run here) or an `Extractors` actor
    holding them; their values go back in place of the pixels. `text_extractors`: the
    other signals' (text sketches), run here on every loaded item."""
    if root is None:
        os.chdir(cwd)
    entries = [keyed(e) for e in _read(block, settings, id_prefix)]
    known = stored_fingerprints(_store(url), entries)
    extracted: Extracted = extract_entries(entries, root, settings, keep_pixels, known)
    loaded = [x for x in extracted if isinstance(x, LoadedItem) and (x.pictures or x.video is not None)]
    if extractors is not None and loaded:
        if isinstance(extractors, dict):
            values = run_extractors(extractors, loaded)
        else:
            import ray

            values = ray.get(extractors.run.remote(loaded))
        for li, got in zip(loaded, values):
            li.extracted.update(got)
            li.pictures = None
            if li.video is not None:
                li.video.images = None
    if text_extractors:
        items = [x for x in extracted if isinstance(x, LoadedItem)]
        for li, got in zip(items, run_extractors(text_extractors, items)):
            li.extracted.update({name: value for name, value in got.items() if value is not None})
    return [(e, entry_bytes(e, root), got) for e, got in zip(entries, extracted)]


def run_extractors(extractors: dict[str, Callable], items: list[LoadedItem]) -> list[dict[str, Any]]:
    """Each item's {signal name: value} by the signals' `worker_extract`."""
    values = {name: extract(items) for name, extract in extractors.items()}
    return [{name: got[i] for name, got in values.items()} for i in range(len(items))]


class Extractors:
    """A Ray actor holding the pixel signals' extractors on one GPU: their models load
    once, and every task's pictures are encoded there."""

    def __init__(self, extractors: dict[str, Callable]) -> None:
        self.extractors = extractors

    def run(self, items: list[LoadedItem]) -> list[dict[str, Any]]:
        return run_extractors(self.extractors, items)


def _read(block: Block, settings: Settings, id_prefix: str) -> Iterable[Entry]:
    if block.manifest is not None:
        return manifest_entries(block.manifest, settings, id_prefix, block.span)
    if block.folder is not None:
        return read_folder(block.folder, list(block.files), settings, id_prefix)
    return block.entries


_STORES: dict[str, sessionmaker[Session]] = {}  # a worker's read-only sessions, per store


def _store(url: str) -> sessionmaker[Session]:
    if url not in _STORES:
        _STORES[url] = open_store(url, read_only=True)
    return _STORES[url]


