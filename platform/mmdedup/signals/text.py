"""The `text` signal: TF-IDF weighted sketches of an item's text, and their life in a store.

What it keeps beyond the contract's shared work (signals/base.py):
- no token sequences: re-weighting and re-signing tokenise the stored text again. A
  stored sequence is 8 bytes a token (about 3.2 KB for a 400-word text, more than the
  sketches and everything else an item costs the store together), while tokenising and
  hashing a plain text again costs about what reading and unpacking its stored sequence
  did (docs/benchmarks.md, "TF-IDF refresh without a stall"); Chinese text is the
  exception (jieba is slower), paid only when texts are re-signed. Stores that hold
  sequences (kind "tokens") have them deleted a batch a chunk;
- the active signer (TF-IDF model and learned word weights, extract/text_sketches.py),
  loaded lazily, so commands that never touch text never load jieba's IDF table;
- TF-IDF refreshes: once `tfidf_min_docs` texts are stored, then at each
  `tfidf_refresh_growth`-fold growth, document frequencies are counted over the stored
  texts, frozen as a version, and every text re-signed and re-paired under it, a bounded
  step after each chunk (text_refresh.py);
- decision words (extract/polarity.py): a pair whose texts hold phrases of opposite
  polarity at one spot ("不予批准" / "给予批准"), from the built-in lexicon, or different
  words reviewers found decisive, keeps only part of its raw similarity;
- shared passages (extract/alignment.py): a pair whose weighted Jaccard its 3-gram
  estimate backs only narrowly is checked on its texts' word order, and keeps the
  weighted figure only as far as the share of them on shared passages backs it.

Its index is a SimHash Hamming index plus band LSH over the weighted MinHash, and the low
bits of both MinHashes, which rule out candidates in memory (`reachable`).
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, Sequence

import numpy as np
from sqlalchemy.orm import Session
from tqdm import tqdm

from ..config import Calibration, Knots, Number, SignalSettings, setting
from ..extract.term_weights import PRIOR_VERSION, UNIT, TfidfModel, WordWeights, count_documents, merge_counts, prior_model
from ..extract.alignment import ALIGN_N, ALIGN_VERSION, Grams, aligned_share
from ..extract.shingles import is_short
from ..extract.tokenbatch import TokenBatch
from ..extract.winnowing import Anchors, Passages, RecentAnchors, anchors, kept_tokens
from ..extract.polarity import LEXICON_VERSION, DecisionSpots, Learned, decision_share, lexicon, mark_scan, spots_of
from ..extract.text_sketches import (
    NUM_PERM,
    PASSAGE_MARGIN,
    RAW_VERSION,
    REUSE_BASE,
    REUSE_SLOPE,
    TextSigner,
    TextSketches,
    needs_passages,
    passage_backed,
    raw_similarity,
    signer_version,
    similarity,
    tokenize_texts,
    word_shingles,
)
from ..index.bbit import BitRows, agreeing, low_bits
from ..index.hamming import HammingIndex
from ..index.lsh import BandLSH, optimal_params
from ..index.redis_window import RedisBands, RedisHamming, RedisRows, SharedWindow
from ..index.slots import distinct_pairs
from ..input.items import LoadedItem, text_for_signals
from ..score.pairs import candidate_pairs
from ..store import models, unsearched
from ..store.db import activate_version
from ..store.locks import take_write_lock
from ..store.anchors import add_recurring, recurring_anchors
from ..store.items import count_texts, last_text_pk, newest_texts, scan_texts, texts_of
from ..store.pairs import pairs_touching
from ..store.signatures import delete_other_versions, has_any, has_other_version, load_signatures, replace_signatures
from ..score.calibration import calibrate_at_most
from ..score.pairs import SignalValues
from .base import Signal
from .text_refresh import NEXT_KIND, PENDING_KIND, TOKENS_KIND, Refresher, refresh_rate

WORDS_KIND = "words"  # the model kind of learned word weights
ANCHORS = "anchors"  # a worker's extracted value beside the sketches: the text's distinct anchors
SPOTS_KEPT = 20_000  # texts whose decision spots stay in memory (`TextSignal._kept`)
_SCAN = 2000  # texts a batch when every text is read (a retrain's count and re-sign)


@dataclass(frozen=True)
class TextSettings(SignalSettings):
    weight: float = 0.5
    # Raw similarity: the weighted Jaccard of TF-IDF terms, as far as the Jaccard of word
    # 3-grams backs it (`reuse_base`, `reuse_slope` below), or that Jaccard. Checked, not
    # replaced, by the fit: on the labelled text sets (topical notices included) the map
    # has precision 1.0 at medium and strong, and it keeps a
    # review band (raw 0.55-0.65) that the isotonic fit, on synthetic sets that separate
    # cleanly, squeezes to 0.001 (docs/benchmarks.md, "Signal calibration").
    calibration: Calibration = setting((
        (0.0, 0.0), (0.3, 0.5), (0.45, 0.7), (0.55, 0.8), (0.65, 0.9), (1.0, 1.0)), Knots(0, 1))
    # The weighted Jaccard counts only as far as the word 3-grams back it: raw =
    # max(jaccard, min(wjaccard, reuse_base + reuse_slope * jaccard)) (text_sketches.py
    # `raw_similarity`), and for a pair they back narrowly, as far as the share of its
    # texts on shared passages does (`passage_backed`). Sections of one document share
    # its rare words and stock phrases, not its sentences.
    reuse_base: float = setting(REUSE_BASE, Number(float, 0, 1))
    reuse_slope: float = setting(REUSE_SLOPE, Number(float, 0))
    # Candidates: LSH over the first `lsh_perms` positions of the weighted MinHash, bands
    # and rows chosen for weighted Jaccard >= `lsh_threshold` (88 positions give 22 bands
    # of 4 rows, 185 bytes a document: with the Hamming index, inside a 300-byte budget at
    # a million documents), and SimHash codes within `simhash_radius` bits.
    lsh_threshold: float = setting(0.4, Number(float, 0, 1, lo_open=True, hi_open=True))
    lsh_perms: int = setting(88, Number(int, 1, NUM_PERM))
    simhash_radius: int = setting(3, Number(int, 0, 64))
    # Decision words (extract/polarity.py): the share of a pair's raw similarity taken by
    # a spot where its texts decide apart by the lexicon (0.5: two notices identical but
    # for the decision fall from strong to weak, still logged as related), and the most a
    # word reviewers made decisive can take at the ceiling of its evidence (learned words
    # move a score by degrees; none takes a pair's whole similarity).
    polarity_share: float = setting(0.5, Number(float, 0, 1))
    learned_share: float = setting(0.75, Number(float, 0, 1, hi_open=True))
    # Passages repeated across many texts (a site template around every text) leave the
    # sketches (extract/winnowing.py): a winnowed word k-gram in at least
    # `passage_min_texts` of the last `passage_window` plain texts recurs; a run of at
    # least `passage_min_run` recurring anchors is taken out of a text that keeps novel
    # runs of twice as many anchors over at least `passage_min_left` of its tokens. When
    # anchors start to recur, the last `passage_recheck` texts stored before are signed
    # again without them (and a new process counts those texts first).
    passage_min_texts: int = setting(20, Number(int, lo=2))
    passage_window: int = setting(5000, Number(int, lo=1))
    passage_min_run: int = setting(4, Number(int, lo=1))
    passage_min_left: float = setting(0.1, Number(float, 0, 1))
    passage_recheck: int = setting(2000, Number(int, lo=0))
    LEGACY: ClassVar = {"text_calibration": "calibration", "text_lsh_threshold": "lsh_threshold",
                        "text_lsh_perms": "lsh_perms", "text_simhash_radius": "simhash_radius"}


@dataclass
class _KeptText:
    """A stored text's decision words in order (`MarkScan`), and its decision spots once
    a pair needed them (`spots_for`)."""

    hash: int
    marks: tuple[str, ...]
    spots: DecisionSpots | None = None


def spots_for(entries: dict[int, _KeptText], texts: dict[int, str], learned: Learned) -> None:
    """Make the decision spots these entries lack, their texts tokenised as one batch."""
    todo = [pk for pk, e in entries.items() if e.spots is None]
    if todo:
        made = spots_of(tokenize_texts([texts[pk] for pk in todo]), lexicon(), learned)
        for pk, spots in zip(todo, made):
            entries[pk].spots = spots


class _KeptSpots(OrderedDict):
    """`_KeptText` by item pk, oldest first, and the learned words they were made with."""

    words: WordWeights | None = None
    made: Learned | None = None


def load_tfidf(session: Session, terms: np.ndarray | None = None) -> TfidfModel:
    """The active TF-IDF model (jieba's prior until one was frozen); with `terms`, just
    the frequencies of those term hashes, which weigh them as the whole model does: what
    signing a query needs, where the whole table grows with the store's vocabulary."""
    row = models.active_row(session, "tfidf")
    if row is None or row.version == PRIOR_VERSION:
        return prior_model()
    keys, df = models.doc_freqs(session, row.pk, terms)
    model = TfidfModel.from_counts(keys, df, int(row.params["n_docs"]))
    return TfidfModel(row.version, model.n_docs, model.keys, model.idf, model.default)


def load_word_weights(session: Session) -> WordWeights:
    """The active learned word weights (every multiplier 1.0 until a retrain set some)."""
    row = models.active_row(session, WORDS_KIND)
    if row is None or row.version == UNIT.version:
        return UNIT
    rows = models.word_weights(session, row.pk)
    return WordWeights(row.version, tuple(r[0] for r in rows),
                       np.array([r[1] for r in rows], np.float32), float(row.params.get("floor", 0.0)),
                       float(row.params.get("ceiling", 1.0)))


def freeze(session: Session, keys: np.ndarray, df: np.ndarray, n_docs: int) -> TfidfModel:
    """Store a TF-IDF version from document frequencies and make it the active one (an
    identical version already stored is re-activated instead). Frozen, because a signature
    is only comparable with signatures made under the same weights: the weights a batch is
    signed with must not drift while it is being signed. A refresh under way is dropped:
    these frequencies are over every text, and everything is re-signed under them."""
    pending = models.pending_row(session, PENDING_KIND)
    if pending is not None:
        models.delete_row(session, pending)
    model = TfidfModel.from_counts(keys, df, n_docs)
    row, created = activate_version(session, "tfidf", model.version,
                                    {"n_docs": n_docs, "terms": int(len(keys))})
    if created:
        models.add_doc_freqs(session, row.pk, model.keys, df[np.argsort(keys)])
    return model


@dataclass
class TextIndex:
    """The Hamming index of the SimHash codes and the band LSH of the weighted MinHash,
    and the low bits of both MinHashes of every text, which rule out in memory the
    candidates that could not reach `pair_floor` (`TextSignal.reachable`)."""

    hamming: HammingIndex
    lsh: BandLSH
    bits: BitRows


def sketch_bits(sk: TextSketches) -> np.ndarray:
    """A text's row of `TextIndex.bits`: the low bits of its weighted and its plain MinHash."""
    return np.concatenate([low_bits(sk.wminhash), low_bits(sk.minhash)], axis=1)


BITS_WIDTH = 2 * -(-NUM_PERM // 2)  # bytes of a `sketch_bits` row: two MinHashes, two positions a byte


class TextSignal(Signal[TextSketches, TextSettings]):
    name = "text"
    settings_type = TextSettings
    medium = "text"
    kind = "text-reuse"
    listed = True
    exact_parts = ("text", "html")
    index_parts: ClassVar = {"simhash": HammingIndex.load, "lsh": BandLSH.load, "bits": BitRows.load}
    query_figures = ("wjaccard", "jaccard")
    searched_after = True
    shared = True
    resigns = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._signer: TextSigner | None = None
        self._version: str | None = None  # the active signer's version, known before it loads
        self.refreshes = 0
        self._texts: int | None = None  # texts in the store, at most (see needs_refresh)
        self._judged: int | None = None  # texts the active TF-IDF weights were judged on
        self._caught_up: str | None = None  # signer version whose stale signatures were redone
        self.refresher = Refresher(self)
        self._chunk_texts = 0  # texts signed by the chunk just written: its refresh budget
        self._signing: TextSigning | None = None  # the signers in force, as workers take them
        # New texts by where their sketches were made ("here", "worker"; under a refresh's
        # pending signer, "pending, here" and "pending, worker"): for tests and benchmarks,
        # which must see the workers' sketches taken, not made again here.
        self.signed: Counter[str] = Counter()
        self._spots = _KeptSpots()  # decision spots of stored texts (`_kept`)
        self._passages: Passages | None = None
        self._recent: RecentAnchors | None = None  # anchors of the recent texts (`prepare`)
        self._anchor_memo: OrderedDict[int, tuple[int, tuple]] = OrderedDict()  # pk -> (text hash, `_stored_anchors`)

    # --- the signer ----------------------------------------------------------------------

    @property
    def passages(self) -> Passages:
        """The recurring passages every signer of this signal takes out: the anchors the
        store holds as found in `passage_min_texts` texts, read once, then kept up to date
        by this process's ingests (`prepare`)."""
        if self._passages is None:
            s = self.config
            with self.sessions() as session:
                held = recurring_anchors(session, s.passage_min_texts)
            self._passages = Passages(s.passage_min_run, s.passage_min_left, held)
        return self._passages

    @property
    def signer(self) -> TextSigner:
        if self._signer is None:
            with self.sessions() as session:
                self._signer = TextSigner(load_tfidf(session), load_word_weights(session), self.passages)
        return self._signer

    def version(self) -> str:
        """The active signer's version, from the active models' names: a command that
        only asks (the scorer's stamp, a picture-only ingest) never loads the TF-IDF table."""
        if self._signer is not None:
            return self._signer.version
        if self._version is None:
            with self.sessions() as session:
                active = models.active_versions(session, ("tfidf", WORDS_KIND))
            self._version = signer_version(active.get("tfidf", PRIOR_VERSION), active.get(WORDS_KIND, UNIT.version))
        return self._version

    def release_part(self, version: str) -> str:
        """The version less its TF-IDF and word-weight models ("tfidf=...", "ww=..."):
        texts signed under other models are a retrain's or a refresh's to sign again
        (and are, as they go), not a query's."""
        return "|".join(p for p in version.split("|") if not p.startswith(("tfidf=", "ww=")))

    def _drop_signer(self) -> None:
        """Forget the active models (read again when next needed)."""
        self._signer = self._version = self._judged = None

    def follow_active(self) -> None:
        """Drop the signer if another process (a retrain) changed the active models, so
        this long-lived signal never signs under superseded ones."""
        with self.sessions() as session:
            if self._signer is None:
                self._version = None  # (named from the models active then: asked again)
                self.refresher.follow(session)
                return
            active = models.active_versions(session, ("tfidf", WORDS_KIND))
            mine = {"tfidf": self._signer.model.version, WORDS_KIND: self._signer.words.version}
            if any(active.get(k, v) != v for k, v in mine.items()):
                p = self.refresher.pending
                if p is not None and active.get("tfidf") == p.tfidf \
                        and active.get(WORDS_KIND, UNIT.version) == p.signer.words.version:
                    # Another process finished the refresh this one was signing along:
                    # its pending index, caught up, is the active index.
                    self.refresher.pending_index(session)
                    self.adopt(p.signer, p.index, p.seq)
                else:
                    self._drop_signer()
                    self._index = None
            self.refresher.follow(session)

    def adopt(self, signer: TextSigner, index: TextIndex, seq: int) -> None:
        """Make a refresh's signer and its pending index (caught up to write `seq`) the
        active ones, with no rebuild of the index."""
        self._signer, self._judged = signer, None
        self._index, self._index_version, self._seq = index, signer.version, seq
        if self.in_window:  # (its window is the store's, caught up at the next look)
            self._index = self._index_version = None

    def reload(self) -> bool:
        """Re-read the active TF-IDF model and word weights (a retrain or rollback changed
        them); True if stored text signatures are of another version, i.e. texts must be
        signed again (also after a re-sign that a crash cut short)."""
        self._drop_signer()
        return self._has_stale_signatures()

    def _has_stale_signatures(self) -> bool:
        with self.sessions() as session:
            return has_other_version(session, self.name, self.signer.version)

    def catch_up(self, progress: bool = False) -> bool:
        """Sign again, before an ingest adds texts or a query searches, every stored text
        whose signature is of another version than the active models' (a new release
        changed the tokenizer or the sketches, or a re-sign was cut short): signatures of
        other versions are never compared, so those items would otherwise drop out of
        text pairing and of every query's answers. Checked once per signer version in a
        process; True if texts were signed again. A store with no text signature has
        none to redo: the signer (its TF-IDF model) is not loaded. Judged under the write
        lock, after following the models: another ingest's refresh may switch versions
        at any moment, and a signer read before its switch would take every text it
        tidied for stale and sign them back under the old one. `progress`: a bar on
        stderr."""
        with self.sessions() as session:
            if not has_any(session, self.name):
                return False
        with self.sessions.begin() as session:
            take_write_lock(session)
            self._follow_refresh(session)
            version = self.signer.version
            if self._caught_up == version:
                return False
            if self.refresher.tidying(session):
                return False  # (the old version's signatures are the tidy's to replace)
            stale = has_other_version(session, self.name, version)
        if stale:
            self.resign_all(progress=progress)
        self._caught_up = version
        return stale

    # --- the contract's steps ------------------------------------------------------------

    def unpack_many(self, blobs: list[bytes]) -> TextSketches:
        return TextSketches.unpack(blobs)

    def take(self, batch: TextSketches, rows: np.ndarray) -> TextSketches:
        return batch.take(rows)

    def new_index(self) -> TextIndex:
        perms = min(self.config.lsh_perms, NUM_PERM)
        return TextIndex(HammingIndex(), BandLSH(self.config.lsh_threshold, perms), BitRows(BITS_WIDTH))

    def as_extracted(self, blob: bytes) -> dict[str, bytes]:
        """As `TextSigning` gives it: the packed sketches by signer version."""
        return {self.signer.version: blob}

    def shared_index(self, window: SharedWindow, prefix: str) -> TextIndex:
        perms = min(self.config.lsh_perms, NUM_PERM)
        return TextIndex(RedisHamming(window, f"{prefix}:h"), RedisBands(window, f"{prefix}:b", self.config.lsh_threshold, perms),
                         RedisRows(window, f"{prefix}:r", BITS_WIDTH))

    def index_from_parts(self, parts: dict[str, Any]) -> TextIndex:
        return TextIndex(parts["simhash"], parts["lsh"], parts["bits"])

    def parts_of(self, index: TextIndex) -> dict[str, Any]:
        return {"simhash": index.hamming, "lsh": index.lsh, "bits": index.bits}

    def index_stamp(self, version: str) -> dict[str, Any]:
        """The usual stamp and the LSH's bands and rows (a changed threshold rebuilds)."""
        bands, rows = optimal_params(self.config.lsh_threshold, min(self.config.lsh_perms, NUM_PERM))
        return {**super().index_stamp(version), "lsh": [bands, rows]}

    def index_add(self, index: TextIndex, pks: np.ndarray, sk: TextSketches) -> None:
        live = ~sk.empty
        pks, sk = pks[live], sk.take(live)
        index.hamming.add(pks, sk.simhash)
        index.lsh.add(pks, sk.wminhash[:, : index.lsh.num_perm])
        index.bits.add(pks, sketch_bits(sk))

    def index_remove(self, index: TextIndex, pks: np.ndarray) -> None:
        index.hamming.remove(pks)
        index.lsh.remove(pks)
        index.bits.remove(pks)

    def search(self, index: TextIndex, sk: TextSketches) -> tuple[np.ndarray, np.ndarray]:
        """(query row, item pk) pairs from either index, deduplicated."""
        return distinct_pairs(*self._hits(index, sk)[:2])[:2]

    def _hits(self, index: TextIndex, sk: TextSketches, first: int | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query row, item pk) of what either index proposes, not yet distinct (a pair
        the SimHash probe and several bands find is listed as often), and the band
        bucket entries each query passed over (`first`: `BandLSH.query`). The SimHash
        buckets are not cut: a 16-bit chunk is shared by many unrelated texts in a large
        store, and its candidates are checked against the whole code before any is kept."""
        hits = index.hamming.search(sk.simhash, self.config.simhash_radius)
        cand = index.lsh.query(sk.wminhash[:, : index.lsh.num_perm], distinct=False, first=first)
        return np.concatenate([hits.query, cand.query]), np.concatenate([hits.ids, cand.ids]), cand.passed

    def similarity(self, a: TextSketches, b: TextSketches) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        sims = similarity(a, b, self.config.reuse_base, self.config.reuse_slope)
        return sims["raw"], {key: sims[key] for key in ("wjaccard", "jaccard", "simhash_bits")}

    def adjust(self, session: Session, a: np.ndarray, b: np.ndarray, raw: np.ndarray,
               details: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Decision words: a pair whose texts decide apart at some spot keeps only
        (1 - share) of its raw similarity. Looked at only where the raw similarity could
        still reach `pair_floor` (lowering a pair already below it changes nothing kept),
        and past a scan of the two texts' decision words (`MarkScan`), only where those
        differ."""
        share = np.zeros(len(raw))
        aligned = np.full(len(raw), np.nan)
        look = np.flatnonzero(raw >= self._floor_raw)
        if len(look):
            learned = self._learned(self.signer.words)
            kept, texts = self._kept(session, np.concatenate([a[look], b[look]]), learned)
            raw = raw.copy()
            narrow = self._narrow(raw, details["jaccard"])
            check = [i for i in look.tolist() if narrow[i] and a[i] in texts and b[i] in texts]
            if check:
                grams = _grams_of(np.concatenate([a[check], b[check]]), texts)
                check = [i for i in check if grams[a[i]] is not None and grams[b[i]] is not None]
                aligned[check] = self._check_passages(raw, details["jaccard"], check,
                                                      [grams[x] for x in a[check].tolist()],
                                                      [grams[y] for y in b[check].tolist()])
            look = np.array([i for i in look.tolist() if a[i] in kept and b[i] in kept
                             and kept[a[i]].marks != kept[b[i]].marks], np.int64)
            if len(look):
                spots_for({pk: kept[pk] for pk in np.concatenate([a[look], b[look]]).tolist()}, texts, learned)
                share[look] = [self._share(kept[x].spots, kept[y].spots, learned)
                               for x, y in zip(a[look].tolist(), b[look].tolist())]
        # the share taken, where decision words took some, and the aligned share of the
        # pairs whose texts were read for it (details of those pairs only)
        return raw * (1 - share), {**details, "decisive": np.where(share > 0, share, np.nan),
                                   "aligned": aligned}

    def _narrow(self, raw: np.ndarray, j: np.ndarray) -> np.ndarray:
        return needs_passages(raw, j, self.config.reuse_base, self.config.reuse_slope)

    def _check_passages(self, raw: np.ndarray, j: np.ndarray, rows: list[int],
                        left: list[Grams], right: list[Grams]) -> np.ndarray:
        """Lower these rows of `raw` (in place) as far as the share of their texts on
        shared passages backs them (`passage_backed`); that share of each row."""
        aligned = np.array([aligned_share(x, y) for x, y in zip(left, right)])
        raw[rows] = passage_backed(raw[rows], j[rows], aligned, self.config.reuse_base, self.config.reuse_slope)
        return aligned

    @property
    def _floor_raw(self) -> float:
        """The least raw similarity whose calibrated score reaches `pair_floor`."""
        grid = np.linspace(0.0, 1.0, 1001)
        reach = np.flatnonzero(self.calibrate(grid) >= self.settings.pair_floor)
        return float(grid[reach[0]]) if len(reach) else 1.0

    def _learned(self, words: WordWeights) -> Learned:
        """The learned decisive words, one object per word weights (the spots kept were
        made with it)."""
        if self._spots.words is not words:  # (spots kept were made with the words before)
            self._spots.clear()
            self._spots.words, self._spots.made = words, Learned.of(words, self.config.learned_share)
        return self._spots.made

    def _share(self, x: DecisionSpots, y: DecisionSpots, learned: Learned) -> float:
        return decision_share(x, y, self.config.polarity_share, learned)

    def _kept(self, session: Session, pks: np.ndarray, learned: Learned
              ) -> tuple[dict[int, _KeptText], dict[int, str]]:
        """The decision words of these stored items' texts, and the texts, read from the
        store. Kept for the last SPOTS_KEPT texts, by item and text, under the learned
        words they were made with: a text is scored against each of its copies as they
        arrive, and again by a refresh, and its spots need it tokenised again (texts
        keep no token sequences in the store), which for Chinese costs more than all the
        rest; a text changed since (by any process) is looked at again."""
        kept = self._spots
        scan = mark_scan(learned.words)
        out, texts = {}, {}
        for pk, *parts in texts_of(session, np.unique(pks).tolist()):
            text = text_for_signals(*parts)
            if not text.strip():
                continue
            h = hash(text)
            entry = kept.get(pk)
            if entry is None or entry.hash != h:
                entry = kept[pk] = _KeptText(h, scan(text))
            out[pk], texts[pk] = entry, text
            kept.move_to_end(pk)
        while len(kept) > SPOTS_KEPT:
            kept.popitem(last=False)
        return out, texts

    def scoring_version(self) -> str:
        """Pairs are scored with the decision lexicon and the raw-similarity rule besides
        the signatures: a new lexicon or rule makes stored pairs another scoring's (a
        retrain re-scores them)."""
        c = self.config
        return (f"{self.version()}|{LEXICON_VERSION}|{RAW_VERSION}:{c.reuse_base:g},{c.reuse_slope:g}"
                f"|{ALIGN_VERSION}m{PASSAGE_MARGIN:g}")

    def stored(self, session: Session, pks: Sequence[int]) -> tuple[dict[int, int], Any]:
        """As the contract's, from either signature slot: after a refresh switched
        versions, its signatures move into the "text" slot a batch a step."""
        version = self.version()
        found = load_signatures(session, self.name, version, list(pks))
        if len(found) < len(pks):
            rest = [pk for pk in pks if pk not in found]
            found.update(load_signatures(session, NEXT_KIND, version, rest))
        return {pk: i for i, pk in enumerate(found)}, self.unpack_many(list(found.values()))

    def rebuilt_index(self, session: Session, kind: str, version: str, index: Any = None) -> TextIndex:
        """As the contract's; the active index also takes the signatures of its version
        still in the second slot (a refresh switched versions and its tidy has not moved
        them all yet). Index files saved since hold them already."""
        index = super().rebuilt_index(session, kind, version, index)
        extra = load_signatures(session, NEXT_KIND, version) if kind == self.name else {}
        if extra:
            pks = np.fromiter(extra, np.int64, len(extra))
            self.index_remove(index, pks)
            self.index_add(index, pks, self.unpack_many(list(extra.values())))
        return index

    def finish(self) -> None:
        """As the contract's, and the pending index of a refresh in its sign phase is
        saved too (under "text-next"), so that the next process opens it instead of
        reading every text signed so far; once no refresh signs, its files go."""
        super().finish()
        with self.sessions.begin() as session:
            take_write_lock(session, numbered=False)
            self.refresher.save_pending(session)

    def pair_values(self, session: Session, a: np.ndarray, b: np.ndarray) -> SignalValues:
        """As the contract's; while a refresh signs texts under a pending version, a pair
        whose two texts both have pending signatures is scored under it instead (a pair is
        always scored with signatures of one version)."""
        out = super().pair_values(session, a, b)
        p = self.refresher.pending
        if p is None or not len(a):
            return out
        found = load_signatures(session, NEXT_KIND, p.signer.version, np.unique(np.concatenate([a, b])).tolist())
        pending = self.score_stored(session, a, b, {pk: i for i, pk in enumerate(found)},
                                    self.unpack_many(list(found.values())))
        both = ~np.isnan(pending.values)
        out.values[both] = pending.values[both]
        for key, col in pending.details.items():
            if key in out.details:
                out.details[key][both] = col[both]
            else:
                out.details[key] = col
        return out

    # --- ingest --------------------------------------------------------------------------

    def prepare(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> list[int]:
        """Count the anchors of the chunk's plain texts among the recent texts. A text that
        holds anchors that recur is signed here (a worker signed it under what it knew
        then); stored texts that hold anchors which start to recur only now (the first
        texts of a new template came before it was known) are returned, to be signed
        again, where they lose a passage by it."""
        s = self.config
        texts = [li for _, li in changed if li.page is None and li.signal_text.strip()
                 and (li.tokens is not None or self.name not in li.extracted
                      or ANCHORS in li.extracted[self.name])]  # (not exact repeats given their values)
        if not texts:
            return []
        chunk = {pk for pk, _ in changed}

        def stored() -> list[tuple[int, str]]:  # the texts stored last, newest first
            return [(pk, text_for_signals(*parts)) for pk, *parts in
                    newest_texts(session, max(chunk), s.passage_recheck) if pk not in chunk]

        if self._recent is None:  # a new process counts the texts stored last first
            self._recent = RecentAnchors(s.passage_window)
            last = Anchors.join([hashes for _, hashes, _ in reversed(self._stored_anchors(stored()))])
            self._recent.add(last.distinct(), s.passage_min_texts)
        held = chunk_anchors(texts, self.name)
        passages = self.passages
        now = self._recent.add(held, s.passage_min_texts)
        started = now[~passages.recurs(now)]
        if len(started):
            add_recurring(session, started, s.passage_min_texts)
            passages.add(started)
        if len(passages.recurring):
            for li, hit in zip(texts, held.any_in(passages.recurring).tolist()):
                if hit:
                    li.extracted.pop(self.name, None)
        if not len(started):
            return []
        again = []
        last = stored()
        for (pk, _), (length, hashes, positions) in zip(last, self._stored_anchors(last)):
            if np.isin(hashes, started).any() and kept_tokens(length, positions, passages.recurs(hashes),
                                                              passages.min_run, passages.min_left) is not None:
                again.append(pk)
        return again

    def _stored_anchors(self, stored: list[tuple[int, str]]) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(tokens, anchors, their positions) of stored texts, remembered while a text stays
        the same: the same texts are looked at again each time anchors start to recur."""
        memo = self._anchor_memo
        keys = [hash(text) for _, text in stored]
        todo = [i for i, ((pk, _), key) in enumerate(zip(stored, keys)) if memo.get(pk, (None,))[0] != key]
        if todo:
            tokens = tokenize_texts([stored[i][1] for i in todo])
            found = anchors(tokens)
            for j, i in enumerate(todo):
                memo[stored[i][0]] = (keys[i], (int(tokens.lengths[j]), *found.of(j)))
        out = [memo[pk][1] for pk, _ in stored]
        while len(memo) > 2 * max(self.config.passage_recheck, 1):  # oldest first out
            memo.popitem(last=False)
        return out

    def on_chunk(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> np.ndarray | None:
        index = self.index(session)
        gone = [pk for pk, li in changed if not li.signal_text.strip()]
        if gone:
            self.index_remove(index, np.asarray(gone, np.int64))
            if self.refresher.pending is not None:
                self.index_remove(self.refresher.pending_index(session), np.asarray(gone, np.int64))
        texts = [(pk, li) for pk, li in changed if li.signal_text.strip()]
        if not texts:
            return None
        pks = np.fromiter((pk for pk, _ in texts), np.int64, len(texts))
        if self._texts is not None:
            self._texts += len(texts)
        self._chunk_texts += len(texts)
        signal_texts = [li.signal_text for _, li in texts]
        pending = self.refresher.pending
        loaded = [li for _, li in texts]
        signed = self._signed_by_workers(loaded, self.signer)
        signed_pending = self._signed_by_workers(loaded, pending.signer) if pending is not None else None
        self.signed["here" if signed is None else "worker"] += len(texts)
        if pending is not None:
            self.signed["pending, here" if signed_pending is None else "pending, worker"] += len(texts)
        tokens = None
        if signed is None or (pending is not None and signed_pending is None):
            # Extraction tokenised plain texts already (in a worker, which sends no
            # tokens once it signed them); pages are done here.
            tokens = token_batch(loaded)
        found = self._sign(session, pks, tokens, signal_texts, fresh=True, sketches=signed,
                           search=not self.defer)
        if self.defer:
            unsearched.add(session, self.name, pks)
        if pending is not None:
            # A refresh is signing: new texts are signed under both versions, and found in
            # both indexes (those the refresh has not reached yet find them when it does).
            found = np.concatenate([found, self.refresher.sign_pending(session, pks, tokens, signal_texts,
                                                                       signed_pending, search=not self.defer)])
        return found

    def restate(self, session: Session, pks: np.ndarray) -> np.ndarray | None:
        """Stored texts that changed (pages cleaned again of their site's side matter),
        signed again under the active version (and a refresh's pending one), with their
        new candidates and the pairs they had: a pair their old text made falls when
        scored again."""
        rows = [(pk, text_for_signals(*parts)) for pk, *parts in texts_of(session, pks.tolist())]
        rows = [(pk, t) for pk, t in rows if t.strip()]
        if not rows:
            return None
        pks = np.fromiter((pk for pk, _ in rows), np.int64, len(rows))
        texts = [t for _, t in rows]
        tokens = tokenize_texts(texts)
        found = self._sign(session, pks, tokens, texts, search=not self.defer)
        if self.defer:
            unsearched.add_again(session, self.name, pks)
        if self.refresher.pending is not None:
            found = np.concatenate([found, self.refresher.sign_pending(session, pks, tokens, texts,
                                                                       search=not self.defer)])
        return np.concatenate([found, pairs_touching(session, pks.tolist())])

    def search_stored(self, session: Session, pks: np.ndarray, among: np.ndarray) -> np.ndarray:
        """As the contract's, and, while a refresh signs, in its pending index too (those
        of the items signed under its version), as the chunk that wrote them searched."""
        found = super().search_stored(session, pks, among)
        p = self.refresher.pending
        if p is None:
            return found
        stored = load_signatures(session, NEXT_KIND, p.signer.version, pks.tolist())
        if not stored:
            return found
        mine = np.fromiter(stored, np.int64, len(stored))
        more = self.candidates(self.refresher.pending_index(session), mine,
                               self.unpack_many(list(stored.values())), among)
        both = np.concatenate([found, more])
        return candidate_pairs(both[:, 0], both[:, 1])

    def _signed_by_workers(self, items: list[LoadedItem], signer: TextSigner) -> TextSketches | None:
        """The sketches under `signer` that the workers which loaded these texts made
        (`TextSigning`), if they made them for every one; else None, to sign here (a
        TF-IDF refresh changed the signers since, or the engine signs nothing elsewhere)."""
        blobs = [(li.extracted.get(self.name) or {}).get(signer.version) for li in items]
        have = [i for i, b in enumerate(blobs) if b is not None]
        if len(have) in (0, len(blobs)):
            return self.unpack_many(blobs) if have else None
        # Some came signed (exact repeats given their original's): the rest are signed
        # here, and the two put back in the batch's order.
        todo = [i for i, b in enumerate(blobs) if b is None]
        sub = [items[i] for i in todo]
        parts = (self.unpack_many([blobs[i] for i in have]),
                 signer.sign_tokens(token_batch(sub), [li.signal_text for li in sub]))
        order = np.argsort(np.array(have + todo))
        return TextSketches(*(np.concatenate([getattr(p, f) for p in parts])[order]
                              for f in ("simhash", "wminhash", "minhash", "empty")))

    def worker_extract(self) -> TextSigning:
        """Plain texts signed where they are loaded, under the signers in force (the
        active one, and a refresh's pending one while it signs): one object while they
        stay, so an engine sends them again only once a refresh changed them."""
        pending = self.refresher.pending
        signers = (self.signer, *((pending.signer,) if pending is not None else ()))
        if self._signing is None or self._signing.signers != signers:
            self._signing = TextSigning(signers)
        return self._signing

    def _sign(self, session: Session, pks: np.ndarray, tokens: TokenBatch | None,
              texts: Sequence[str | None] | None, *, fresh: bool = False,
              sketches: TextSketches | None = None, search: bool = True) -> np.ndarray:
        """Sign items under the active signer into the "text" slot and the active index,
        and return candidate pairs (n, 2) with indexed items and with each other."""
        return self.sign_into(session, self.signer, self.name, self.index(session), pks, tokens, texts,
                              fresh=fresh, sketches=sketches, search=search)

    def sign_into(self, session: Session, signer: TextSigner, kind: str, index: TextIndex,
                  pks: np.ndarray, tokens: TokenBatch | None, texts: Sequence[str | None] | None, *,
                  fresh: bool = False, sketches: TextSketches | None = None,
                  search: bool = True) -> np.ndarray:
        """Sign items from their token sequences (and the texts of those with fewer than
        SHORT_CHARS tokens, see `TextSigner.sign_tokens`) under `signer`, store the
        sketches in slot `kind`, index them in `index`, and return candidate pairs (n, 2)
        with indexed items and with each other: the active version's signing, and a
        refresh's under its pending one (text_refresh.py). `sketches`: what `signer`
        made of them already, where they were loaded. `search` False: none returned
        (an engine searches them after writing, `search_stored`). Signed into the
        active slot, the active index then holds this write (`indexed_write`)."""
        sk = sketches if sketches is not None else signer.sign_tokens(tokens, texts)
        replace_signatures(session, kind, signer.version,
                           ((pk, sk.pack(i)) for i, pk in enumerate(pks.tolist())), fresh=fresh)
        self.index_remove(index, pks)
        live = ~sk.empty
        pks, sk = pks[live], sk.take(live)
        self.index_add(index, pks, sk)
        if kind == self.name:
            self.indexed_write(session)
            if search:
                return self.confirmed(session, lambda index: self.candidates(index, pks, sk))
        return self.candidates(index, pks, sk) if search else np.zeros((0, 2), np.int64)

    def candidates(self, index: TextIndex, pks: np.ndarray, sk: TextSketches,
                   among: np.ndarray | None = None) -> np.ndarray:
        """As the contract's, less the empty texts and what could not reach the floor
        (`reachable`), the band buckets cut at the cap too (`_hits`)."""
        if sk.empty.any():
            live = ~sk.empty
            pks, sk = pks[live], sk.take(live)
        q, other, passed = self._hits(index, sk, self.settings.max_candidates_per_item)
        keep = self.reachable(index, sk, q, other)  # (before they are made distinct: most go)
        return self.kept(np.stack([pks[q[keep]], other[keep]], axis=1), among, pks, passed)

    def reachable(self, index: TextIndex, sk: TextSketches, q: np.ndarray, other: np.ndarray) -> np.ndarray:
        """Whether each candidate (row q[i] of `sk`, indexed item other[i]) could reach
        `pair_floor` on this signal: each of its two MinHash agreements is at most the
        agreement of their low bits (index/bbit.py), so its raw similarity (non-decreasing
        in both) is at most `raw_similarity` of those bounds, and its score at most that
        bound calibrated. A fused score is never above its best signal,
        so a candidate ruled out here is one the scorer would have dropped after reading
        both signatures from the store, unless a signal that proposes no candidates of its
        own (the page template, `dom`) lifts it: such pairs are left to the indexes of the
        signals that make them alike. Queries are not filtered: they list the best
        matches whatever their score."""
        if not len(q):
            return np.zeros(0, bool)
        # Candidates in item order: their rows are then read in the order they are held
        # (at a million texts, a random read of 128 bytes each was most of this step).
        by_item = np.argsort(other)
        have, theirs = index.bits.rows(other[by_item])
        mine = sketch_bits(sk)[q[by_item]]
        agree = agreeing(mine, theirs, parts=2) / NUM_PERM  # (the weighted MinHash, the plain one)
        bound = raw_similarity(agree[:, 0], agree[:, 1], self.config.reuse_base, self.config.reuse_slope)
        keep = np.empty(len(q), bool)
        keep[by_item] = ~have | (calibrate_at_most(bound, self.config.calibration) >= self.settings.pair_floor)
        return keep

    def after_chunk(self) -> None:
        """A bounded step of a TF-IDF refresh (text_refresh.py), its budget the texts the
        chunk signed; and a batch of the token sequences older stores kept, deleted."""
        texts, self._chunk_texts = self._chunk_texts, 0
        if texts == 0:
            return
        with self.sessions() as session:
            busy = self.refresher.row(session) is not None or has_any(session, TOKENS_KIND)
        due = not busy and self.needs_refresh()
        if not busy and not due:
            return
        budget = max(1, math.ceil(refresh_rate(self.settings.tfidf_refresh_growth) * texts))
        if due and self._texts is not None and self._texts <= self.settings.tfidf_refresh_at_once:
            self.refresh()  # a small store: the whole refresh now, as one bounded piece
            return
        with self.sessions.begin() as session:
            take_write_lock(session)
            self.refresher.drop_tokens(session, budget * 4)
            if self._follow_refresh(session):
                self.refresher.step(session, budget, start=due)

    def _follow_refresh(self, session: Session) -> bool:
        """Whether this process's models are the store's (a step under other models would
        sign under superseded ones); if not, they are dropped, to be read again."""
        active = models.active_versions(session, ("tfidf", WORDS_KIND))
        if (active.get("tfidf", PRIOR_VERSION) != self.signer.model.version
                or active.get(WORDS_KIND, UNIT.version) != self.signer.words.version):
            self._drop_signer()
            self._index = None
            self.refresher.pending = None
            return False
        return True

    # --- TF-IDF refresh ------------------------------------------------------------------

    def needs_refresh(self) -> bool:
        """Counting the texts costs a scan of an index over every text; each chunk only
        adds to an upper bound (texts signed since the last count), and the store is
        counted again only once that bound reaches the next refresh point. A process
        starts from the largest pk of a text (pks are handed out in order, so no fewer
        items were ever stored): a small ingest into a large store counts nothing."""
        if self._texts is None:
            with self.sessions() as session:
                self._texts = last_text_pk(session)
        if self._texts < self._refresh_point(None):
            return False
        with self.sessions() as session:
            if self._texts < self._refresh_point(session):  # (another process judged one since)
                return False
            self._texts = count_texts(session)
        return self._texts >= self._refresh_point(None)

    def _refresh_point(self, session: Session | None) -> float:
        """The store size at which a refresh is due: `tfidf_min_docs` under jieba's prior,
        else the growth factor times the texts the active weights were last judged on,
        those they were counted over or, where a later refresh point found that new counts
        would hardly change a signature (text_refresh.py), the texts counted then. Read
        from the store once, and again when `session` is given."""
        model = self.signer.model
        if model.version == PRIOR_VERSION:
            return self.settings.tfidf_min_docs
        if session is not None or self._judged is None:
            with (nullcontext(session) if session is not None else self.sessions()) as s:
                row = models.active_row(s, "tfidf")
            self._judged = max(model.n_docs, int(row.params.get("judged", 0)) if row is not None else 0)
        return self.settings.tfidf_refresh_growth * self._judged

    def refresh(self) -> None:
        """A whole TF-IDF refresh now (the one under way, or a new one): steps of `_SCAN`
        texts, each its own transaction, until the new version is active and tidied. If
        another process changed the models meanwhile (a process stepping along this
        refresh made its version active), this one follows them and finishes what is
        still under way (the tidy), starting nothing: left to the next chunks' steps, an
        ingest that ends first would leave texts on the old version."""
        start = True
        while True:
            with self.sessions.begin() as session:
                take_write_lock(session)
                if not self._follow_refresh(session):
                    start = False
                    continue
                if not self.refresher.step(session, _SCAN, start=start):
                    return
            start = False

    def count_frequencies(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(term hashes, document frequencies, documents) over every stored text (a
        retrain's count, all at once: a scheduled job)."""
        counts = (np.zeros(0, np.uint64), np.zeros(0, np.int64))
        n_docs = 0
        for _, tokens, _ in self._scan_texts():
            counts = merge_counts(counts, count_documents(tokens))
            n_docs += int(np.count_nonzero(tokens.lengths))
        return counts[0], counts[1], n_docs

    def resign_all(self, progress: bool = False) -> int:
        """Re-sign every stored text under the active signer, then re-score its new
        candidates together with the pairs it already had (scores move with the weights;
        a pair that no longer reaches `pair_floor` is removed). Returns how many pairs were
        scored: those it had and those found again. A refresh under way is dropped (with
        its signatures), and so are token sequences older stores kept: this signs
        everything under the models in force. `progress`: a bar of the texts signed, on
        stderr."""
        with self.sessions.begin() as session:
            take_write_lock(session)
            self.refresher.cancel(session)
            delete_other_versions(session, NEXT_KIND, [])
            delete_other_versions(session, TOKENS_KIND, [])
            total = count_texts(session) if progress else None
        self._index = self.new_index()
        self._index_version = self.signer.version
        self._seq = 0  # (the first batch adds what others signed under this version)
        rescored = 0
        bar = tqdm(total=total, unit="text", desc="sign texts again (new version)", disable=not progress,
                   leave=False)
        for pks, tokens, texts in self._scan_texts():
            with self.sessions.begin() as session:
                take_write_lock(session)
                # (a refresh another ingest starts meanwhile signs every text into its own
                # slot; once it switches, the batches left are signed under its version)
                self._follow_refresh(session)
                found = self._sign(session, pks, tokens, texts)
                if self.rescore is not None:
                    both = np.concatenate([found, pairs_touching(session, pks.tolist())])
                    pairs = candidate_pairs(both[:, 0], both[:, 1])
                    self.rescore(session, pairs)
                    # Each pair once, in the batch of its later item (where it is found).
                    rescored += int(np.isin(pairs[:, 1], pks).sum())
            bar.update(len(pks))
        bar.close()
        self.finish()
        return rescored

    def _scan_texts(self) -> Iterator[tuple[np.ndarray, TokenBatch, list[str]]]:
        """(pks, token sequences, texts) of every item with text, in pk order, `_SCAN` at
        a time, tokenised from the stored texts."""
        last = 0
        while True:
            with self.sessions() as session:
                rows = scan_texts(session, last, None, _SCAN)
            if not rows:
                return
            last = rows[-1][0]
            texts = [text_for_signals(*r[1:]) for r in rows]
            yield np.array([r[0] for r in rows], np.int64), tokenize_texts(texts), texts

    # --- queries -------------------------------------------------------------------------

    def query(self, probe: LoadedItem) -> dict[int, tuple[float, dict[str, float]]]:
        """Stored texts the index proposes for the probe's, scored as pairs are. A process
        that has not loaded the signer (a query of its own) signs with the frequencies of
        the probe's terms alone (`load_tfidf`)."""
        text = probe.signal_text
        if not text.strip():
            return {}
        tokens = tokenize_texts([text])
        signer = self._signer
        if signer is None:
            with self.sessions() as session:
                signer = TextSigner(load_tfidf(session, tokens.hashes), load_word_weights(session), self.passages)
        sk = signer.sign_tokens(tokens, [text])
        out: dict[int, tuple[float, dict[str, float]]] = {}
        with self.sessions() as session:
            _, pks = self.search(self.index(session), sk)
            pos, stored = self.stored(session, np.unique(pks).tolist())
            found = np.fromiter(pos, np.int64, len(pos))
            if len(found):
                raw, details = self.similarity(sk.take(np.zeros(len(found), np.intp)),
                                               stored.take(np.fromiter(pos.values(), np.intp, len(pos))))
                learned = self._learned(signer.words)
                kept, texts = self._kept(session, found[raw >= self._floor_raw], learned)
                narrow = self._narrow(raw, details["jaccard"])
                check = [i for i, pk in enumerate(found.tolist()) if pk in texts and narrow[i]]
                (asked,) = _grams(tokens, [text]) if check else (None,)
                if asked is not None:
                    grams = _grams_of(found[check], texts)
                    check = [i for i in check if grams[found[i]] is not None]
                    self._check_passages(raw, details["jaccard"], check, [asked] * len(check),
                                         [grams[pk] for pk in found[check].tolist()])
                mine = mark_scan(learned.words)(text)
                differ = {pk: entry for pk, entry in kept.items() if entry.marks != mine}
                if differ:
                    spots_for(differ, texts, learned)
                    probe = DecisionSpots.of(tokens.doc(0), lexicon(), learned)
                    at = {pk: i for i, pk in enumerate(found.tolist())}
                    for pk, entry in differ.items():
                        raw[at[pk]] *= 1 - self._share(probe, entry.spots, learned)
                scores = self.calibrate(raw)
                out = {pk: (float(scores[i]), {k: float(details[k][i]) for k in self.query_figures})
                       for i, pk in enumerate(found.tolist())}
        return out


def _grams_of(pks: np.ndarray, texts: dict[int, str]) -> dict[int, Grams | None]:
    """{item pk: its text's n-grams for `aligned_share`, None for a short text}, the texts
    tokenised as one batch. A short text (`is_short`: a title, a caption) has character
    n-grams in its sketch, not word 3-grams, and too few words for a passage: its pairs
    keep their sketches' figure."""
    need = np.unique(pks).tolist()
    return dict(zip(need, _grams(tokenize_texts([texts[pk] for pk in need]), [texts[pk] for pk in need])))


def _grams(batch: TokenBatch, texts: Sequence[str]) -> list[Grams | None]:
    """`Grams` of each text of a token batch, None for a short one."""
    shingles = word_shingles(batch, ALIGN_N)
    return [None if is_short(text, batch.doc(k)) else Grams.of(shingles.doc(k), int(batch.lengths[k]))
            for k, text in enumerate(texts)]


def token_batch(items: Sequence[LoadedItem]) -> TokenBatch:
    """The items' token sequences as one batch, those not tokenised where they were
    loaded (pages, and texts a worker signed) tokenised now and kept on the item."""
    todo = [li for li in items if li.tokens is None]
    if todo:
        batch = tokenize_texts([li.signal_text for li in todo])
        for i, li in enumerate(todo):
            li.tokens = batch.doc(i)
    return TokenBatch.from_arrays([li.tokens for li in items])


@dataclass(frozen=True)
class TextSigning:
    """`TextSignal`'s signing where the items are loaded (a cluster's workers): each plain
    text's sketches under each signer in force, packed as stored and keyed by version,
    so that the writer takes those of the versions still in force when it writes. The
    token sequences are not sent back once signed: the writer needs them only for a text
    a refresh overtook on its way, and tokenises those again. Pages are left to the
    writer: their signal text loses their site's boilerplate there, which only the store
    knows."""

    signers: tuple[TextSigner, ...]

    def __call__(self, items: Sequence[LoadedItem]) -> list[dict[str, bytes] | None]:
        rows = [i for i, li in enumerate(items) if li.page is None and li.signal_text.strip()]
        out: list[dict[str, bytes] | None] = [None] * len(items)
        if not rows:
            return out
        texts = [items[i].signal_text for i in rows]
        tokens = token_batch([items[i] for i in rows])
        found = anchors(tokens)  # winnowed once: for the passages each signer takes out, and sent
        made = [(signer.version, signer.sign_tokens(tokens, texts, found)) for signer in self.signers]
        found = found.distinct()
        for j, i in enumerate(rows):
            out[i] = {version: sk.pack(j) for version, sk in made}
            out[i][ANCHORS] = found.of(j)[0].tobytes()
            items[i].tokens = None
        return out


def chunk_anchors(items: Sequence[LoadedItem], name: str) -> Anchors:
    """The plain texts' anchors, each once (`Anchors.distinct`): as the worker that signed a
    text found them, or from its tokens (tokenised now where they were not kept)."""
    blobs = [(li.extracted.get(name) or {}).get(ANCHORS) for li in items]
    todo = [i for i, b in enumerate(blobs) if b is None]
    parts = [np.frombuffer(b, np.uint64) if b is not None else None for b in blobs]
    if todo:
        found = anchors(token_batch([items[i] for i in todo])).distinct()
        for j, i in enumerate(todo):
            parts[i] = found.of(j)[0]
    return Anchors.join(parts)  # type: ignore[arg-type]
