"""The signal contract: one base class does the shared work, each signal its few steps.

A signal is one way two items can be alike (the same words, the same picture, the same
frames, the same page template...). imagededup's template method is the model: the base
class below owns what every signal does the same way

- at ingest (`on_chunk`): extract a chunk's values (pure, batch-first), store them as
  signatures of the signal's version, take the items out of the candidate index and put
  the new values in, and return the candidate pairs the index proposes;
- the candidate index as a cache of the store: opened from its files when their stamp
  (index/cache.py) agrees with the store, else rebuilt from the signatures; caught up with
  the signatures other processes wrote since it last looked; saved at the end;
- a pair's score (`pair_values`): the stored values of both items, the raw similarity,
  calibrated to the common scale through one helper, NaN where either item lacks it;
- a query (`query`): a probe's values searched in the index and scored like a pair;

and each signal supplies only what is its own: its name and settings, `version`,
`extract`, `pack`/`unpack`, its index (`new_index`, `index_add`, `index_remove`,
`search`) and `similarity` (and, where its extraction is worth sending to a cluster's
workers, `worker_extract`). A signal without an index (`dom`) proposes no candidates of
its own and only scores pairs others found. `registry.py` lists the signals; fusion, the
pairs table, queries, the report and the review screen take their names from there.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Callable, ClassVar, Generic, Protocol, Sequence, TypeVar

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from ..config import S, Settings, SignalSettings
from ..index.cache import load_parts, read_stamp, save_cached
from ..index.redis_window import SharedWindow
from ..index.slots import distinct_pairs
from ..input.items import LoadedItem
from ..score.calibration import calibrate
from ..score.pairs import SignalValues, candidate_pairs
from ..store import unsearched
from ..store.deletion import deleted_since, deleted_through
from ..store.locks import last_write, take_write_lock
from ..store.signatures import (
    count_signatures_through,
    evicted_since,
    load_signatures,
    replace_signatures,
    signatures_since,
    versions_stored,
)
from .shared_window import SharedIndex

V = TypeVar("V")  # what the signal extracts from one item (codes, frames, vectors, sketches)

# Candidate pairs: an (n, 2) int64 array of item pks.
Pairs = np.ndarray


class Handle(Protocol):
    def done(self) -> bool: ...

    def result(self) -> Any: ...


class Workers(Protocol):
    """Where a signal can run a function of its own elsewhere (pipeline/ray_engine.py's):
    `submit(fn, *args)` runs `fn(store, *args)` there, `store` a read-only sessionmaker of
    this store; `share(value)` sends a large argument once, for several calls."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Handle: ...

    def share(self, value: Any) -> Any: ...


class Signal(Generic[V, S]):
    """One signal. Subclasses set the class attributes and the steps marked as theirs."""

    name: ClassVar[str]  # in pairs, fusion, config ([signals.<name>]) and signatures
    settings_type: ClassVar[type[SignalSettings]] = SignalSettings
    # A content signal reads a medium ("text", "image", "video"): its score alone can make
    # a duplicate, and `kind` names the pairs it carries. A structural one (None) only
    # moves the fused mean.
    medium: ClassVar[str | None] = None
    kind: ClassVar[str | None] = None
    # The parts of an item this signal reads ("text": its own text or title, "html",
    # "image", "video"): two items with the same content score 1.0 on it.
    exact_parts: ClassVar[tuple[str, ...]] = ()
    # Always a column of the pairs line and table (null where a pair lacks it); the others
    # appear only where they have a value.
    listed: ClassVar[bool] = False
    # The index files' parts and their loaders; empty: the signal keeps no index. A part
    # saves itself with `save(folder, prefix, on_disk) -> manifest` and is opened by its
    # loader `load(folder, manifest)` (index/cache.py says what each must keep to).
    index_parts: ClassVar[dict[str, Any]] = {}
    # The raw figures a query result reports (a pair keeps all of them).
    query_figures: ClassVar[tuple[str, ...]] = ()
    # Whether an engine may leave this signal's search of a chunk's items until the
    # chunks are written and run it on its workers (`defer`, `search_stored`): its search
    # must find a pair from either side (`once_in_pass` keeps it on one).
    searched_after: ClassVar[bool] = False
    # Whether the signal's index can live in a shared window (`window_store`, Redis):
    # key tables only (`shared_index`); a vector index stays in the process.
    shared: ClassVar[bool] = False
    # Whether `catch_up` can sign stored items again from what the store keeps (their text,
    # their files' paths): then a query on a store signed by an earlier release signs them
    # first, rather than answer without them (Platform.resign_stale).
    resigns: ClassVar[bool] = False

    def __init__(self, home: Path, sessions: sessionmaker[Session], settings: Settings, *,
                 rescore: Callable[[Session, np.ndarray], int] | None = None) -> None:
        self.folder = home / "index"
        self.sessions = sessions
        self.settings = settings
        self.config: S = settings.signal(self.name, self.settings_type)  # type: ignore[assignment]
        self._index: Any = None
        self._index_version: str | None = None
        self._seq = 0  # the last write of the store the index has caught up with
        # Scores pairs with every signal and writes them (the Platform's scorer), for a
        # signal that re-signs stored items and must re-pair them.
        self.rescore = rescore
        # Set on a `searched_after` signal by an ingest whose engine searches after
        # writing: it then stores and indexes each chunk's items, and lists them as
        # unsearched.
        self.defer = False
        # What the cap on candidates an item (`kept`) cut since the process started: the
        # searches cut, bucket entries passed over, candidates dropped (for run reports).
        self.capped: Counter[str] = Counter()
        # An engine's workers, set by an ingest whose engine has them: work between chunks
        # that a signal hands over (the text signal's TF-IDF refresh signs its next batch
        # of stored texts there while the chunks in between are written).
        self.workers: Workers | None = None
        # Where the index lives in a shared window (`window_store`): signals/shared_window.py.
        self._window: SharedIndex | None = None

    # --- the signal's own steps ---------------------------------------------------------

    def version(self) -> str | None:
        """What made the values (extractor and parameters); None: the signal is off here."""
        raise NotImplementedError

    def extract(self, items: Sequence[LoadedItem]) -> list[V | None]:
        """Pure, batch-first: each item's value, None where the item has none."""
        raise NotImplementedError

    def worker_extract(self) -> Callable[[Sequence[LoadedItem]], list[V | None]] | None:
        """`extract` as a picklable callable that an engine runs where the items are
        loaded (a cluster's workers, or actors on its accelerators), giving what `extract`
        gives; None: the signal extracts only here. What it gives reaches `on_chunk` in
        `LoadedItem.extracted`."""
        return None

    def pack(self, value: V) -> bytes:
        raise NotImplementedError

    def unpack(self, blob: bytes) -> V:
        raise NotImplementedError

    def as_extracted(self, blob: bytes) -> Any:
        """A stored value as `LoadedItem.extracted` holds it (an exact repeat is given
        its original's, pipeline/repeats.py)."""
        return self.unpack(blob)

    def unpack_many(self, blobs: list[bytes]) -> Any:
        """Stored values as a batch, what `similarity`, `index_add` and `search` take: a
        list by default; a signal with array sketches (text) keeps one array."""
        return [self.unpack(blob) for blob in blobs]

    def take(self, batch: Any, rows: np.ndarray) -> Any:
        return [batch[i] for i in rows.tolist()]

    def new_index(self) -> Any:
        raise NotImplementedError

    def shared_index(self, window: SharedWindow, prefix: str) -> Any:
        """The index as `new_index` makes it, its tables kept in the shared window under
        key `prefix` (for a `shared` signal)."""
        raise NotImplementedError

    def index_add(self, index: Any, pks: np.ndarray, values: Any) -> None:
        """Index a batch of values (a list, or what `unpack_many` makes) under their pks."""
        raise NotImplementedError

    def index_remove(self, index: Any, pks: np.ndarray) -> None:
        raise NotImplementedError

    def search(self, index: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
        """(row of the batch `values`, item pk) of every candidate the index proposes."""
        raise NotImplementedError

    def similarity(self, a: Any, b: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Raw similarity of each pair (a[i], b[i]) of two aligned batches, and the raw
        figures behind it."""
        raise NotImplementedError

    def calibrate(self, raw: np.ndarray | float) -> np.ndarray:
        return calibrate(raw, self.config.calibration)

    # --- ingest -------------------------------------------------------------------------

    def prepare(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> list[int] | None:
        """Before any signal's `on_chunk`, in the chunk's transaction: what a signal must
        settle about the items from the store (pages lose their site's boilerplate).
        Returns the stored items outside the chunk whose text for the signals this changed
        (earlier pages of a site, cleaned of side matter that recurs only now): every
        signal's `restate` is given them after `on_chunk`."""
        return None

    def restate(self, session: Session, pks: np.ndarray) -> Pairs | None:
        """Sign again stored items whose text for the signals changed (`prepare`), and
        return the candidate pairs to score: those found now and those they had (a pair
        that no longer reaches the floor is then removed). Only signals that read the
        stored text have anything to do."""
        return None

    def on_chunk(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> Pairs | None:
        """Store the values of these new or changed items, index them, and return the
        candidate pairs the index proposes (with stored items and with each other)."""
        version = self.version()
        if version is None or not changed:
            return None
        values = self.extracted([li for _, li in changed])
        index = self.index(session) if self.index_parts else None
        if index is not None:
            self.index_remove(index, np.fromiter((pk for pk, _ in changed), np.int64, len(changed)))
        kept = [(pk, v) for (pk, _), v in zip(changed, values) if v is not None]
        if not kept:
            return None
        replace_signatures(session, self.name, version, ((pk, self.pack(v)) for pk, v in kept), fresh=True)
        if index is None:
            return None
        pks = np.fromiter((pk for pk, _ in kept), np.int64, len(kept))
        found = [v for _, v in kept]
        self.index_add(index, pks, found)
        self.indexed_write(session)
        if self.defer:
            unsearched.add(session, self.name, pks)
            return None
        pairs = self.confirmed(session, lambda index: self.candidates(index, pks, found))
        return pairs if len(pairs) else None

    def candidates(self, index: Any, pks: np.ndarray, values: Any, among: np.ndarray | None = None) -> Pairs:
        """Distinct candidate pairs (lo, hi) of indexed items `pks` (their `values` a
        batch), each item's capped (`kept`). `among` (sorted): every item of the pass
        this search is part of (a search after writing); by default the batch itself."""
        rows, others = self.search(index, values)
        found = np.stack([pks[rows], others], axis=1) if len(rows) else np.zeros((0, 2), np.int64)
        return self.kept(found, among, pks)

    def kept(self, found: Pairs, among: np.ndarray | None, pks: np.ndarray,
             passed: np.ndarray | None = None) -> Pairs:
        """The candidates (item, other) a search of items `pks` found, as distinct
        (lo, hi) pairs: each pair once where the signal's search finds it from either
        side (`searched_after`; `once_in_pass` over `among`, by default `pks`), and each
        item's capped at `max_candidates_per_item` (`capped_pairs`). What the cap cut is
        added to `capped`: the searches cut, the bucket entries an index passed over
        (`passed`, per item of `pks`) and the candidates dropped."""
        if among is None and self.searched_after:
            among = np.sort(pks)
        pairs, cut, dropped = capped_pairs(found, among, self.settings.max_candidates_per_item)
        if passed is not None and passed.any():
            cut = np.union1d(cut, pks[passed > 0])
            self.capped["passed over"] += int(passed.sum())
        if len(cut):
            self.capped["searches"] += len(cut)
            self.capped["dropped"] += dropped
        return pairs

    def search_stored(self, session: Session, pks: np.ndarray, among: np.ndarray) -> Pairs:
        """Distinct candidate pairs (lo, hi) of stored items `pks`, as the chunk that
        wrote them would have found: the search an engine ran after writing. `among`
        (sorted): every item this pass searches (`once_in_pass`)."""
        pos, values = self.stored(session, pks.tolist())
        return self.candidates(self.index(session), np.fromiter(pos, np.int64, len(pos)), values, among)

    def extracted(self, items: Sequence[LoadedItem]) -> list[V | None]:
        """Each item's value: extracted where it was loaded, else by `extract` here."""
        todo = [li for li in items if self.name not in li.extracted]
        made = iter(self.extract(todo) if todo else ())
        return [li.extracted[self.name] if self.name in li.extracted else next(made) for li in items]

    def after_chunk(self) -> None:
        """Between chunks, outside any transaction (model refreshes)."""

    def load_models(self) -> str | None:
        """Load the models this signal's version names where that waits for a first use
        (an encoder), for a process that scores pairs for another that had the signal on;
        None once on, else why it is off here."""
        return None

    def wants_pixels(self) -> bool:
        """Whether this signal, on here, reads decoded pictures and keyframe images (the
        loader then keeps them for it instead of decoding twice)."""
        return False

    def release_part(self, version: str) -> str:
        """What of a version string the release defines (extractor, hash and sketch
        versions): signatures that differ there were made by another release, and only a
        re-sign makes them comparable. A signal whose version also names learned models
        leaves those out: a retrain or a refresh that changes them signs again itself."""
        return version

    def needs_resign(self, session: Session, version: str) -> bool:
        """Whether stored signatures of another release (`release_part`) are left for a
        re-sign: what a query asks before it searches (Platform.resign_stale)."""
        release = self.release_part(version)
        return any(self.release_part(v) != release for _, v in versions_stored(session, self.name))

    def follow_active(self) -> None:
        """Before an ingest: drop what another process's retrain made stale."""

    def catch_up(self, progress: bool = False) -> bool:
        """Before an ingest or a query: sign again stored items of another version (a
        release changed what makes this signal's values); True if any. Only a signal
        that can make its values again from the store does (`resigns`)."""
        return False

    def finish(self) -> None:
        """At the end of an ingest: save the index files, caught up with the store (under
        the write lock, so that two processes saving at once never mix their files)."""
        if self._index is not None and self._index_version is not None and not self.in_window:
            with self.sessions.begin() as session:
                take_write_lock(session, numbered=False)  # (files only: no write of the store)
                if self.version() == self._index_version:
                    self.index(session)
                    self.save_index(session)

    # --- the index, a cache of the store -------------------------------------------------

    def index(self, session: Session) -> Any:
        """The candidate index of the active version, caught up with every signature the
        store holds (other processes' writes included): opened from its files when their
        stamp agrees with the store, else rebuilt from the stored signatures; then the
        signatures written since it was last caught up are added."""
        version = self.version()
        if self.in_window:
            self._window = self._window or SharedIndex(self)
            self._index, self._index_version = self._window.index(session, version), version
            return self._index
        if self._index is None or self._index_version != version:
            self._index, self._seq = self.open_index(session, version)
            self._index_version = version
        self._catch_up_index(session, version)
        return self._index

    @property
    def in_window(self) -> bool:
        """Whether this signal's index lives in the shared window (`window_store`)."""
        return self.shared and bool(self.settings.window_store)

    def confirmed(self, session: Session, search: Callable[[Any], Pairs]) -> Pairs:
        """`search(index)` of items this transaction just indexed (`indexed_write`); in a
        shared window, run again over a rebuilt one when Redis lost the window before
        the search was over (signals/shared_window.py)."""
        if self._window is None:
            return search(self._index)
        return self._window.confirmed(session, search)

    def open_index(self, session: Session, version: str, kind: str | None = None) -> tuple[Any, int]:
        """The index of the signatures of `kind` (the signal's own by default; the text
        signal's second slot while a refresh signs), and the write it is caught up with:
        from its files when their stamp agrees with the store (opened, not read whole:
        index/runs.py), else rebuilt from the stored signatures. A file that went missing
        between reading the stamp and opening it (another process saved meanwhile and
        deleted what its new stamp no longer names) gets one more look at the stamp
        before the rebuild. Every change of a signature is a write that moves
        `last_write`, so a stamp whose `seq` is the last write vouches for its files as
        they are."""
        kind = kind or self.name
        for _ in range(2):
            stamp = read_stamp(self.folder, stamp_name(kind))
            if stamp is None or not all(stamp.get(k) == v for k, v in self.index_stamp(version).items()) \
                    or not isinstance(stamp.get("seq"), int):
                break
            # Nothing written since the save (the usual case for a query, and for an
            # ingest after an ingest): nothing was replaced either, and the count (a scan
            # of the version's signatures) is not needed.
            # Deleted items are counted from the deletion log, and evicted ones are not
            # counted once evicted: catching up takes them out.
            if stamp["seq"] != last_write(session) \
                    and count_signatures_through(session, kind, version, stamp["seq"]) \
                    + deleted_through(session, kind, version, stamp["seq"]) != stamp.get("count"):
                break
            parts = load_parts(self.folder, stamp, self.index_parts)
            if parts is not None:
                return self.index_from_parts(parts), stamp["seq"]
        through = last_write(session)  # (read first: what is written after, is caught up)
        return self.rebuilt_index(session, kind, version), through

    def rebuilt_index(self, session: Session, kind: str, version: str, index: Any = None) -> Any:
        """An index of every stored signature of `kind` and `version` (no usable files):
        a new one, or the empty `index` given, filled."""
        index = self.new_index() if index is None else index
        stored = load_signatures(session, kind, version)
        if stored:
            self.index_add(index, np.fromiter(stored, np.int64, len(stored)),
                           self.unpack_many(list(stored.values())))
        return index

    def _catch_up_index(self, session: Session, version: str) -> None:
        self._seq = self.caught_up(session, self._index, self.name, version, self._seq)

    def caught_up(self, session: Session, index: Any, kind: str, version: str, seq: int) -> int:
        """Bring `index` up to date with what was written to `kind` since write `seq`:
        items deleted or evicted (behind every window) since taken out, then another
        process's items added, or the values of items another process changed (taken out
        first). Returns the write the index is now caught up with."""
        through = last_write(session)
        if through == seq:
            return seq
        gone = np.union1d(deleted_since(session, kind, version, seq), evicted_since(session, kind, version, seq))
        if len(gone):
            self.index_remove(index, gone)
        new = signatures_since(session, kind, version, seq)
        if new:
            pks = np.fromiter(new, np.int64, len(new))
            self.index_remove(index, pks)
            self.index_add(index, pks, self.unpack_many(list(new.values())))
        return through

    def indexed_write(self, session: Session) -> None:
        """After this transaction added its own values to the index: the index holds
        everything up to this write. A shared window lost meanwhile is rebuilt, from the
        store as this transaction sees it (its own writes included)."""
        self._seq = session.info["write_seq"]
        if self.in_window:
            self._window.written(session, self._seq)

    def index_stamp(self, version: str) -> dict[str, Any]:
        """What made the index files, which must still be what this signal runs with: the
        signature version (a signal adds its index's own parameters)."""
        return {"version": version}

    def index_from_parts(self, parts: dict[str, Any]) -> Any:
        """The index from its loaded parts (one part: the part itself)."""
        (index,) = parts.values()
        return index

    def parts_of(self, index: Any) -> dict[str, Any]:
        (name,) = self.index_parts
        return {name: index}

    def save_index(self, session: Session, index: Any = None, kind: str | None = None,
                   version: str | None = None, seq: int | None = None) -> None:
        """Save an index caught up to write `seq` with its stamp: the active one by
        default, or another slot's (`kind`, `version`, `seq`)."""
        kind, version = kind or self.name, version or self._index_version
        seq = self._seq if seq is None else seq
        save_cached(self.folder, stamp_name(kind), {
            **self.index_stamp(version), "seq": seq,
            "count": count_signatures_through(session, kind, version, seq)},
            self.parts_of(self._index if index is None else index))

    # --- scoring pairs -------------------------------------------------------------------

    def stored(self, session: Session, pks: Sequence[int]) -> tuple[dict[int, int], Any]:
        """({item pk: row}, batch of their values) of these items under the active version."""
        version = self.version()
        found = load_signatures(session, self.name, version, list(pks)) if version is not None else {}
        return {pk: i for i, pk in enumerate(found)}, self.unpack_many(list(found.values()))

    def pair_values(self, session: Session, a: np.ndarray, b: np.ndarray) -> SignalValues:
        """This signal's calibrated score of each pair (a[i], b[i]), with its raw figures;
        NaN where either item lacks the signal (or the signal is off)."""
        if not len(a):
            return SignalValues(np.full(0, np.nan))
        pos, batch = self.stored(session, np.unique(np.concatenate([a, b])).tolist())
        return self.score_stored(session, a, b, pos, batch)

    def score_stored(self, session: Session, a: np.ndarray, b: np.ndarray,
                     pos: dict[int, int], batch: Any) -> SignalValues:
        """`pair_values` from loaded values ({item pk: row of `batch`}): NaN where either
        item of a pair is not among them."""
        values = np.full(len(a), np.nan)
        if not pos:  # (most signals for most candidates: a text corpus has no pictures)
            return SignalValues(values)
        ra = np.array([pos.get(pk, -1) for pk in a.tolist()], np.int64)
        rb = np.array([pos.get(pk, -1) for pk in b.tolist()], np.int64)
        have = (ra >= 0) & (rb >= 0)
        if not have.any():
            return SignalValues(values)
        raw, details = self.similarity(self.take(batch, ra[have]), self.take(batch, rb[have]))
        raw, details = self.adjust(session, a[have], b[have], raw, details)
        values[have] = self.calibrate(raw)
        return SignalValues(values, {key: _spread(col, have) for key, col in details.items()})

    def adjust(self, session: Session, a: np.ndarray, b: np.ndarray, raw: np.ndarray,
               details: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """A last say on stored pairs' raw similarity (the text signal's decision words)."""
        return raw, details

    def scoring_version(self) -> str | None:
        """What a pair's score under this signal depends on: its signatures' version,
        and whatever `adjust` reads besides them."""
        return self.version()

    # --- queries -------------------------------------------------------------------------

    def query_only_weights(self) -> dict[str, float]:
        """Fusion weights of the query-only signals `queries` adds (none by default)."""
        return {}

    def queries(self, probe: LoadedItem) -> dict[str, dict[int, tuple[float, dict[str, float]]]]:
        """{signal name: query results}: this signal's, and any query-only signal it
        serves (CLIP's text-to-picture search)."""
        return {self.name: self.query(probe)}

    def query(self, probe: LoadedItem) -> dict[int, tuple[float, dict[str, float]]]:
        """{item pk: (score, raw figures)} of the stored items the index proposes for a
        probe that is not stored, scored as a pair would be."""
        if self.version() is None or not self.index_parts:
            return {}
        (value,) = self.extract([probe])
        if value is None:
            return {}
        with self.sessions() as session:
            _, pks = self.search(self.index(session), [value])
            pos, batch = self.stored(session, np.unique(pks).tolist())
        found = np.fromiter(pos, np.int64, len(pos))
        raw, details = self.similarity([value] * len(found), self.take(batch, np.arange(len(found))))
        scores = self.calibrate(raw)
        return {pk: (float(scores[i]), {k: float(details[k][i]) for k in self.query_figures})
                for i, pk in enumerate(found.tolist())}

    def query_found(self, probe: LoadedItem, pks: Sequence[int]
                    ) -> dict[int, tuple[float, dict[str, float]]]:
        """For a signal without an index (dom): the probe scored against the stored items
        the other signals' queries found, as it scores the pairs they find at ingest. A
        signal with an index scored its own candidates in `query`."""
        if self.index_parts or self.version() is None or not len(pks):
            return {}
        (value,) = self.extract([probe])
        if value is None:
            return {}
        with self.sessions() as session:
            pos, batch = self.stored(session, list(pks))
        if not pos:
            return {}
        found = list(pos)
        raw, details = self.similarity([self.unpack(self.pack(value))] * len(found),
                                       self.take(batch, np.arange(len(found))))
        scores = self.calibrate(raw)
        return {pk: (float(scores[i]), {k: float(details[k][i]) for k in self.query_figures})
                for i, pk in enumerate(found)}


def capped_pairs(found: Pairs, among: np.ndarray | None, limit: int) -> tuple[Pairs, np.ndarray, int]:
    """Candidate pairs (item, other) as distinct (lo, hi) rows, with the items whose
    candidates the cap cut and how many it dropped.

    `among` (sorted; None: no such pass): each pair once in a pass that searches every
    item of `among`, kept by the later one's search only (`once_in_pass`).

    The cap: each item keeps at most `limit` candidates before it (lower pks) and `limit`
    after it, the earliest first, as an exact-duplicate group pairs each member with its
    earliest ones. A page repeated across a crawl then costs each copy `limit` pairs, not
    one for every other copy; its copies stay linked, through the earliest. The cap reads
    only pks, so a search at each chunk and one after writing cut the same candidates.
    """
    mine, other = found[:, 0], found[:, 1]
    keep = (mine != other) & once_in_pass(mine, other, among)
    mine, other, _ = distinct_pairs(mine[keep], other[keep])  # (sorted by item, then other)
    if not len(mine):
        return np.zeros((0, 2), np.int64), mine, 0
    # An item's candidates before it come first, those after it next: a rank within each.
    after = other > mine
    start = np.ones(len(mine), bool)
    start[1:] = (mine[1:] != mine[:-1]) | (after[1:] != after[:-1])
    first = np.flatnonzero(start)
    rank = np.arange(len(mine)) - np.repeat(first, np.diff(np.append(first, len(mine))))
    over = rank >= limit
    cut = np.unique(mine[over])
    return candidate_pairs(mine[~over], other[~over]), cut, int(over.sum())


def once_in_pass(mine: np.ndarray, other: np.ndarray, among: np.ndarray | None) -> np.ndarray:
    """Which candidates (mine[i], other[i]) to keep so that a pass that searches every item
    of `among` (sorted) has each pair once: a pair of two of them is kept by the later
    one's search only (a search finds a pair from either side). None: all."""
    if among is None or not len(among):
        return np.ones(len(mine), bool)
    at = np.minimum(np.searchsorted(among, other), len(among) - 1)
    return (among[at] != other) | (other < mine)


def stamp_name(kind: str) -> str:
    """The name an index of a signature kind's values is saved under ("text:next" ->
    "text-next")."""
    return kind.replace(":", "-")


def _spread(column: np.ndarray, have: np.ndarray) -> np.ndarray:
    """A column of figures for the pairs in `have`, zero for the others."""
    out = np.zeros(len(have), np.asarray(column).dtype if len(column) else np.float64)
    out[have] = column
    return out
