"""TF-IDF refreshes a step at a time: no chunk of an ingest waits for the whole store.

A refresh counts document frequencies over every stored text, freezes them as a TF-IDF
version, and signs every text again under it. Done at once, that is work in proportion
to the store, between two chunks: a stall that grows with the store. Here it is a
sequence of steps, one after each chunk, each bounded by the chunk's own size (`budget`):

- count: the texts stored when the refresh point was reached (pk <= `through`) are
  tokenised and counted a batch a step, the counts added to the frequencies of a pending
  model row (kind "tfidf-pending"); after the last batch they are frozen as a version,
  unless signing again under it would hardly change a signature (`change`,
  `worth_signing`: a corpus whose words keep their frequencies as it grows),
  in which case the active weights stay, judged on the texts counted;
- sign: every text stored by then is signed again under the pending version, a batch a
  step, into a second signature slot (kind "text:next": a signature row is keyed by item
  and kind, so the active version's row stays where it is), indexed in a pending index,
  and its candidates there scored. Texts ingested meanwhile are signed under both
  versions, searched in both indexes, so they are found against every stored text at
  once. A pair whose two texts both have pending signatures is scored under the pending
  version, any other under the active one (`TextSignal.pair_values`): never across;
- switch, after the last batch: the pending version becomes the active one, and the
  pending index the active index (no rebuild);
- tidy: the pending signatures move into the "text" slot (replacing the old version's)
  and every scored pair is scored again under the new version, a batch a step, as the
  all-at-once refresh re-scored the pairs it touched. Until then, reads of a version look
  in both slots (`TextSignal.stored`, `rebuilt_index`).

The state (phase, cursor, the pending frequencies) is in the store and every step runs
under the write lock, so a killed process, a second ingest, or the next run continue it.
A retrain or a re-sign of every text (new word weights) cancels a pending refresh: it
counts and signs everything itself.

The rate: a refresh reached at n texts must be done (count n, sign about n plus what
arrives meanwhile) before the store grows by `tfidf_refresh_growth` (g) to the next
point. With r texts of refresh work per text ingested, counting takes n / r new texts and
signing (n + n / r) / r, so 2 / r + 1 / r^2 = 0.8 (g - 1) spreads a refresh over 80% of
the interval: work per ingested text stays nearly constant (a refresh is nearly always
running) rather than a burst, and a margin is left for tidying. A store of at most
`tfidf_refresh_at_once` texts refreshes whole after the chunk that reached the point,
as before: its cost is bounded by that setting, not by the store.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from sqlalchemy.orm import Session

from ..extract.term_weights import PRIOR_VERSION, TfidfModel, count_documents
from ..extract.text_sketches import TextSigner, sketch_change, tokenize_texts
from ..index.cache import drop_cached
from ..input.items import text_for_signals
from ..score.pairs import candidate_pairs
from ..store import models
from ..store.db import activate_version
from ..store.items import last_text_pk, newest_texts, scan_texts
from ..store.pairs import stale_pairs
from ..store.schema import ModelVersion
from ..store.signatures import (
    delete_other_versions,
    move_signatures,
)
from .base import stamp_name
from .shared_window import SharedIndex

if TYPE_CHECKING:
    from .text import TextSignal

PENDING_KIND = "tfidf-pending"
NEXT_KIND = "text:next"  # the second slot of text signatures, while a refresh runs
TOKENS_KIND = "tokens"  # token sequences older stores kept per text: deleted a batch a step
_COUNTING, _TIDY = "counting", "tidy"  # the pending row's version in those phases
# Tidying moves signature rows and re-scores pairs, a step's units a multiple of its budget.
# A move (about 40 us) is cheaper than a text signed again, searched and its pairs scored
# (150-250 us), a pair re-scored and rewritten (about 100 us) not by as much: at 16 of
# each a text, a step at 100,000 texts took 2 s after a 1 s chunk. At 8 moves a text, a
# tidy of every text stored at the switch (6.6 times those at the refresh point) takes 1.3
# times the refresh point's texts to arrive, so count, sign and tidy together (6.9) end
# before the next point (7, at growth 8); pairs (about one a text in eight) at 2 a text
# are done sooner.
MOVES_A_TEXT = 8
PAIRS_A_TEXT = 2
SAMPLE = 1000  # texts a refresh judges its new weights on (`Refresher.change`)


def worth_signing(change: np.ndarray, min_change: float) -> bool:
    """Whether new TF-IDF counts should be signed, from the change they would make to a
    sample of texts (`Refresher.change`): a pair's estimate moves by at most the sum of
    its two texts' changes, so a mean under `min_change` keeps the typical pair within
    twice that, under the estimate's own noise. A text changed ten times as much as that
    mean allows marks a part of the corpus that moved (a new site template, a new topic)
    which the mean of the rest would hide: then the counts are signed too."""
    return bool(len(change) == 0 or change.mean() >= min_change or change.max() >= 10 * min_change)


# Steps whose batches an engine's workers sign ahead of the writer (`Refresher._sign_ahead`).
AHEAD = 4


def sign_stored(sessions: Any, signer: TextSigner, after: int, through: int, limit: int) -> dict[int, tuple[bytes, bytes]]:
    """{pk: (digest of its text, packed sketch)} of the next `limit` texts stored after pk
    `after` (up to `through`), signed under `signer`: a refresh's next batch, signed on an
    engine's worker (`Workers.submit`) while the writer writes the chunk in between."""
    with sessions() as session:
        rows = scan_texts(session, after, through, limit)
    texts = [text_for_signals(*r[1:]) for r in rows]
    sk = signer.sign_tokens(tokenize_texts(texts), texts)
    return {r[0]: (text_digest(t), sk.pack(i)) for i, (r, t) in enumerate(zip(rows, texts))}


def text_digest(text: str) -> bytes:
    """What tells whether a text signed ahead is the text stored now (Python's own str
    hash differs between processes)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def refresh_rate(growth: float) -> float:
    """Texts of refresh work (counted or signed) per text ingested (module docstring)."""
    a = 0.8 * (growth - 1)
    return (1 + math.sqrt(1 + a)) / a


@dataclass
class Pending:
    """This process's view of a refresh in its sign phase: the pending signer and index.
    The signer is read when first used: a process that only queries never signs under it."""

    tfidf: str  # the pending TF-IDF version
    load: Callable[[], TextSigner]
    index: Any = None
    seq: int = 0  # the last write the pending index has caught up with
    window: SharedIndex | None = None  # where the index is, in a shared window

    @cached_property
    def signer(self) -> TextSigner:
        return self.load()


class Refresher:
    """The refresh steps of one text signal (see the module docstring)."""

    def __init__(self, signal: TextSignal) -> None:
        self.signal = signal
        self.pending: Pending | None = None
        # Work done, by kind ("counted", "signed", "moved", "rescored"), for tests and
        # benchmarks: what bounds a step is counted, not timed.
        self.work: Counter[str] = Counter()
        # Batches signed ahead on the engine's workers under the pending signer, as sent
        # to them once (its version, the reference): the tasks not taken yet, what they
        # signed not used yet ({pk: (text digest, packed sketch)}), and the pk through
        # which they were asked.
        self._shared: tuple[str, Any] | None = None
        self._ahead: list[Any] = []
        self._taken: dict[int, tuple[bytes, bytes]] = {}
        self._asked = 0

    # --- state ---------------------------------------------------------------------------

    @staticmethod
    def row(session: Session) -> ModelVersion | None:
        return models.pending_row(session, PENDING_KIND)

    def follow(self, session: Session) -> None:
        """Take up the refresh as the store has it: the pending signer in the sign phase
        (its index caught up with what other processes signed), none otherwise."""
        row = self.row(session)
        phase = row.params.get("phase") if row is not None else None
        if phase != "sign":
            self.pending = None
            return
        if self.pending is None or self.pending.tfidf != row.version:
            self.pending = Pending(row.version, partial(self._signer, row.pk, int(row.params["n_docs"])))

    def _signer(self, model_pk: int, n_docs: int) -> TextSigner:
        with self.signal.sessions() as session:
            keys, df = models.doc_freqs(session, model_pk)
        return TextSigner(TfidfModel.from_counts(keys, df, n_docs), self.signal.signer.words, self.signal.passages)

    def pending_index(self, session: Session) -> Any:
        """The pending index, caught up with every pending signature in the store."""
        p = self.pending
        assert p is not None
        if self.signal.in_window:
            p.window = p.window or SharedIndex(self.signal, NEXT_KIND)
            p.index = p.window.index(session, p.signer.version)
            return p.index
        if p.index is None:
            # (from the files a process saved, else rebuilt: as the active index)
            p.index, p.seq = self.signal.open_index(session, p.signer.version, NEXT_KIND)
        p.seq = self.signal.caught_up(session, p.index, NEXT_KIND, p.signer.version, p.seq)
        return p.index

    def save_pending(self, session: Session) -> None:
        """Save the pending index while the store's refresh signs under this process's
        pending version (under the write lock); drop its files when no refresh signs."""
        row = self.row(session)
        p = self.pending
        if row is not None and row.params.get("phase") == "sign":
            if p is not None and p.index is not None and row.version == p.tfidf and p.window is None:
                self.pending_index(session)
                self.signal.save_index(session, p.index, NEXT_KIND, p.signer.version, p.seq)
        else:
            drop_cached(self.signal.folder, stamp_name(NEXT_KIND))

    def sign_pending(self, session: Session, pks: np.ndarray, tokens: Any, texts: list[str | None],
                     sketches: Any = None, search: bool = True) -> np.ndarray:
        """Sign texts under the pending version into the second slot (`sketches`: what
        the pending signer made of them already, where they were loaded), index them in
        the pending index and return their candidate pairs there (none if not `search`:
        an engine searches them after writing)."""
        p = self.pending
        assert p is not None
        found = self.signal.sign_into(session, p.signer, NEXT_KIND, self.pending_index(session),
                                      pks, tokens, texts, sketches=sketches, search=search)
        p.seq = session.info["write_seq"]
        if p.window is not None:
            p.window.written(session, p.seq)
        return found

    # --- steps ---------------------------------------------------------------------------

    def start(self, session: Session) -> ModelVersion:
        """A refresh point reached: a pending row counting the texts stored now."""
        active = models.active_version(session, "tfidf") or PRIOR_VERSION
        return models.new_row(session, PENDING_KIND, _COUNTING, {
            "phase": "count", "cursor": 0, "through": last_text_pk(session), "n_docs": 0,
            "base": active, "words": self.signal.signer.words.version})

    def cancel(self, session: Session) -> None:
        """Drop a pending refresh (its signatures in the second slot go with the next
        tidy, or with the re-sign that cancels it)."""
        row = self.row(session)
        if row is not None:
            models.delete_row(session, row)
        self.pending = None

    def step(self, session: Session, budget: int, start: bool) -> bool:
        """One step of at most about `budget` texts a phase (under the write lock);
        `start`: begin a refresh if none runs. True if a refresh or tidy is still under way."""
        row = self.row(session)
        if row is not None and row.params.get("phase") != "tidy" and (
                row.params.get("base") != (models.active_version(session, "tfidf") or PRIOR_VERSION)
                or row.params.get("words") != self.signal.signer.words.version):
            self.cancel(session)  # a retrain made other models active meanwhile
            row = None
        if row is None:
            if not start:
                return False
            row = self.start(session)
        for _ in range(4):  # a phase that ends lets the next one start in the same step
            phase = row.params["phase"]
            if phase == "count":
                if not self._count(session, row, budget):
                    return True
            elif phase == "sign":
                if not self._sign(session, row, budget):
                    return True
            else:
                return self._tidy(session, row, budget)
            row = self.row(session)
            if row is None:
                return False
        return True

    def _count(self, session: Session, row: ModelVersion, budget: int) -> bool:
        params = row.params
        rows = scan_texts(session, params["cursor"], params["through"], budget)
        tokens = tokenize_texts([text_for_signals(*r[1:]) for r in rows])
        keys, counts = count_documents(tokens)
        models.add_doc_freq_counts(session, row.pk, keys, counts)
        self.work["counted"] += len(rows)
        params = {**params, "n_docs": params["n_docs"] + int(np.count_nonzero(tokens.lengths)),
                  "cursor": rows[-1][0] if rows else params["cursor"]}
        row.params = params
        if len(rows) == budget:
            return False
        # Every text counted: freeze.
        keys, df = models.doc_freqs(session, row.pk)
        n_docs = params["n_docs"]
        if n_docs == 0:
            self.cancel(session)
            return True
        model = TfidfModel.from_counts(keys, df, n_docs)
        if model.version == params["base"]:  # the same frequencies as the active model's
            self.cancel(session)
            return True
        if params["base"] != PRIOR_VERSION:
            change = self.change(session, model, params["through"])
            if not worth_signing(change, self.signal.settings.tfidf_refresh_min_change):
                # The active weights stay, judged on the texts counted now.
                active = models.active_row(session, "tfidf")
                active.params = {**active.params, "judged": n_docs, "change": float(change.mean()),
                                 "largest_change": float(change.max())}
                self.work["judged"] += 1
                self.cancel(session)
                return True
        row.version = model.version
        row.params = {"n_docs": n_docs, "terms": int(len(keys)), "phase": "sign", "cursor": 0,
                      "through": last_text_pk(session), "base": params["base"], "words": params["words"]}
        session.flush()
        signer = TextSigner(model, self.signal.signer.words, self.signal.passages)
        self.pending = Pending(model.version, lambda: signer)
        return True

    def change(self, session: Session, model: TfidfModel, through: int) -> np.ndarray:
        """How much signing again under `model` would change each of the newest `SAMPLE`
        texts' signatures (`sketch_change`; the newest are those the active weights have
        seen least), signed under the active signer and under `model` with the same words."""
        rows = newest_texts(session, through, SAMPLE)
        texts = [text_for_signals(*r[1:]) for r in rows]
        tokens = tokenize_texts(texts)
        now = self.signal.signer
        return sketch_change(now.sign_tokens(tokens, texts), TextSigner(model, now.words, now.passages).sign_tokens(tokens, texts))

    def _sign(self, session: Session, row: ModelVersion, budget: int) -> bool:
        self.follow(session)
        params = row.params
        rows = scan_texts(session, params["cursor"], params["through"], budget)
        if rows:
            texts = [text_for_signals(*r[1:]) for r in rows]
            pks = np.array([r[0] for r in rows], np.int64)
            ahead = self._signed_ahead(pks, texts)
            found = self.sign_pending(session, pks, tokenize_texts(texts) if ahead is None else None, texts,
                                      sketches=ahead)
            if self.signal.rescore is not None and len(found):
                self.signal.rescore(session, candidate_pairs(found[:, 0], found[:, 1]))
            self.work["signed"] += len(rows)
            row.params = {**params, "cursor": rows[-1][0]}
        if len(rows) == budget:
            self._sign_ahead(rows[-1][0], params["through"], budget)
            return False
        self._switch(session, row)
        return True

    def _sign_ahead(self, after: int, through: int, budget: int) -> None:
        """Have the engine's workers sign the batches of the next steps (`sign_stored`),
        `AHEAD` of them, each a span of pks as wide as this step's budget: the workers run
        them between the blocks already queued, so the one a step needs is signed by then."""
        workers, p = self.signal.workers, self.pending
        if workers is None or p is None:
            return
        version = p.signer.version
        if self._shared is None or self._shared[0] != version:
            self._shared = (version, workers.share(p.signer))
            self._asked, self._ahead, self._taken = after, [], {}
        self._asked = max(self._asked, after)
        while self._asked < min(through, after + AHEAD * budget):
            end = min(through, self._asked + budget)
            self._ahead.append(workers.submit(sign_stored, self._shared[1], self._asked, end, end - self._asked))
            self._asked = end

    def _signed_ahead(self, pks: np.ndarray, texts: list[str]) -> Any:
        """This step's sketches under the pending signer, taken from what the workers have
        signed ahead by now (the writer never waits for them), where they signed these
        texts as they are now; the others (a text changed since, a batch not done yet) are
        signed here. None when nothing was signed ahead."""
        p = self.pending
        if p is None or self._shared is None or self._shared[0] != p.signer.version:
            return None
        waiting = []
        for handle in self._ahead:
            if not handle.done():
                waiting.append(handle)
                continue
            try:
                self._taken.update(handle.result())
            except Exception:  # noqa: BLE001, S110 - a worker lost: its texts are signed here
                pass
        self._ahead = waiting
        got = [self._taken.pop(pk, None) for pk in pks.tolist()]
        for pk in [pk for pk in self._taken if pk <= pks[-1]]:
            del self._taken[pk]  # (texts no longer stored, or no longer texts)
        blobs = [g[1] if g is not None and g[0] == text_digest(t) else None for g, t in zip(got, texts)]
        missing = [i for i, blob in enumerate(blobs) if blob is None]
        if len(missing) == len(blobs):
            return None
        if missing:
            rest = [texts[i] for i in missing]
            here = p.signer.sign_tokens(tokenize_texts(rest), rest)
            for j, i in enumerate(missing):
                blobs[i] = here.pack(j)
        self.work["signed ahead"] += len(blobs) - len(missing)
        return self.signal.unpack_many(blobs)

    def _switch(self, session: Session, row: ModelVersion) -> None:
        """Every text signed under the pending version: make it the active one, hand the
        pending index over as the active index, and leave the tidying to the next steps."""
        p = self.pending
        assert p is not None
        self.pending_index(session)
        version = row.version
        if models.version_row(session, "tfidf", version) is not None:
            models.delete_row(session, row)  # (an identical version stored before)
        else:
            row.kind = "tfidf"
            row.params = {"n_docs": row.params["n_docs"], "terms": row.params["terms"]}
            session.flush()
        activate_version(session, "tfidf", version)
        models.new_row(session, PENDING_KIND, _TIDY, {"phase": "tidy", "signer": p.signer.version,
                                                      "after": [-1, -1]})
        self.signal.adopt(p.signer, p.index, session.info["write_seq"])
        self.pending = None
        self.signal.refreshes += 1

    def _tidy(self, session: Session, row: ModelVersion, budget: int) -> bool:
        """Move pending signatures into place and re-score pairs, a batch a step; True
        while there is more."""
        limit, pair_limit = budget * MOVES_A_TEXT, budget * PAIRS_A_TEXT
        params = row.params
        # The active index holds the moved values already (the pending index it was, or
        # files saved since, or a rebuild that read both slots): caught up with the writes
        # before this one, it is caught up with this one too, and does not take every
        # moved text out and in again.
        current = self.signal.version() == params["signer"]
        if current:
            self.signal.index(session)
        moved = move_signatures(session, NEXT_KIND, self.signal.name, params["signer"], limit)
        if current:
            self.signal.indexed_write(session)
        moved += delete_other_versions(session, NEXT_KIND, [params["signer"]], limit - moved) if moved < limit else 0
        self.work["moved"] += moved
        after = tuple(params["after"])
        pairs = stale_pairs(session, "", after, pair_limit)  # every scored pair, in key order
        if len(pairs) and self.signal.rescore is not None:
            self.signal.rescore(session, pairs)
            self.work["rescored"] += len(pairs)
        if moved < limit and len(pairs) < pair_limit:
            models.delete_row(session, row)
            return False
        row.params = {**params, "after": pairs[-1].tolist() if len(pairs) else list(after)}
        return True

    def tidying(self, session: Session) -> bool:
        row = self.row(session)
        return row is not None and row.params.get("phase") == "tidy"

    @staticmethod
    def drop_tokens(session: Session, limit: int) -> int:
        """Delete stored token sequences (older stores), at most `limit` a call."""
        return delete_other_versions(session, TOKENS_KIND, [], limit)
