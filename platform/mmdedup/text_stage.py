"""The text signal's life in a store: signing at ingest, TF-IDF refreshes, queries.

Owns the state that outlives one chunk: the active signer (TF-IDF model + word weights)
and the candidate indexes, opened lazily so commands that never touch text (labels,
clusters) never load jieba's IDF table or an index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from .config import Settings
from .extract.shingles import SHORT_CHARS
from .extract.tokenbatch import TokenBatch
from .items import LoadedItem, text_for_signals
from .score.pairs import SignalFn, candidate_pairs, existing_pairs
from .learn import weights as word_weights
from .learn.tfidf import PRIOR_VERSION, active_model, count_documents, freeze, merge_counts
from .ingest import Scorer
from .store.schema import Item, ModelVersion, Signature
from .textsig import KIND as TEXT_KIND
from .textsig import (
    TOKENS_KIND,
    TextIndex,
    TextSigner,
    query_scores,
    sign_and_index,
    store_tokens,
    text_signal,
    tokenize_texts,
    tokens_version,
)

SCAN_CHUNK = 2000
_TOKEN_BYTES = 8  # a stored token: one uint64 hash


class TextStage:
    def __init__(self, home: Path, sessions: sessionmaker[Session], settings: Settings) -> None:
        self.folder = home / "index"
        self.sessions = sessions
        self.settings = settings
        self._signer: TextSigner | None = None
        self._index: TextIndex | None = None
        self.scorer: Scorer | None = None  # set by the Platform: scores pairs with every signal
        self.refreshes = 0
        self._texts: int | None = None  # texts in the store, at most (see needs_refresh)
        self._caught_up: str | None = None  # signer version whose stale signatures were redone

    def signal(self) -> SignalFn:
        return text_signal(self.signer, self.settings)

    # --- state ---------------------------------------------------------------------------

    @property
    def signer(self) -> TextSigner:
        if self._signer is None:
            with self.sessions() as session:
                self._signer = TextSigner(active_model(session), word_weights.active(session))
        return self._signer

    def follow_active(self) -> None:
        """Drop the signer if another process (a retrain) changed the active models, so
        this long-lived stage never signs under superseded ones."""
        if self._signer is None:
            return
        with self.sessions() as session:
            active = dict(session.execute(select(ModelVersion.kind, ModelVersion.version).where(
                ModelVersion.kind.in_(("tfidf", word_weights.KIND)), ModelVersion.active.is_(True))).all())
        mine = {"tfidf": self._signer.model.version, word_weights.KIND: self._signer.words.version}
        if any(active.get(k, v) != v for k, v in mine.items()):
            self._signer = None
            self._index = None

    def reload(self) -> bool:
        """Re-read the active TF-IDF model and word weights (a retrain or rollback changed
        them); True if stored text signatures are of another version, i.e. texts must be
        signed again (also after a re-sign that a crash cut short)."""
        self._signer = None
        return self._has_stale_signatures()

    def _has_stale_signatures(self) -> bool:
        """Whether any stored text signature is of another version than the signer's."""
        with self.sessions() as session:
            return session.scalar(select(Signature.item_pk).where(
                Signature.kind == TEXT_KIND, Signature.version != self.signer.version).limit(1)) is not None

    def catch_up(self) -> bool:
        """Sign again, before an ingest adds texts, every stored text whose signature is of
        another version than the signer's (a new release changed the tokenizer or the
        sketches, or a re-sign was cut short): signatures of other versions are never
        compared, so those items would otherwise drop out of text pairing. Checked once
        per signer version in a process; True if texts were signed again."""
        version = self.signer.version
        if self._caught_up == version:
            return False
        stale = self._has_stale_signatures()
        if stale:
            self.resign_all()
        self._caught_up = version
        return stale

    def index(self, session: Session) -> TextIndex:
        if self._index is None or self._index.version != self.signer.version:
            self._index = TextIndex.open(self.folder, self.signer.version, self.settings, session)
        return self._index

    # --- ingest --------------------------------------------------------------------------

    def on_chunk(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> np.ndarray | None:
        index = self.index(session)
        gone = [pk for pk, li in changed if not li.signal_text.strip()]
        if gone:
            index.remove(np.asarray(gone, np.int64))
        texts = [(pk, li) for pk, li in changed if li.signal_text.strip()]
        if not texts:
            return None
        pks = np.fromiter((pk for pk, _ in texts), np.int64, len(texts))
        if self._texts is not None:
            self._texts += len(texts)
        # Extraction tokenised plain texts already (maybe in a worker); pages are done here.
        todo = [li for _, li in texts if li.tokens is None]
        if todo:
            for li, doc in zip(todo, _docs(tokenize_texts([li.signal_text for li in todo]))):
                li.tokens = doc
        tokens = TokenBatch.from_arrays([li.tokens for _, li in texts])
        store_tokens(session, pks, tokens, fresh=True)
        return sign_and_index(session, pks, tokens, [li.signal_text for _, li in texts], self.signer, index,
                              fresh=True)

    def after_chunk(self) -> None:
        if self.needs_refresh():
            self.refresh()

    def finish(self) -> None:
        if self._index is not None:
            with self.sessions() as session:
                self._index.save(session)

    # --- TF-IDF refresh ------------------------------------------------------------------

    def needs_refresh(self) -> bool:
        """Counting the texts costs a scan of the items table; each chunk only adds to an
        upper bound (texts signed since the last count), and the store is counted again
        only once that bound reaches the next refresh point."""
        model = self.signer.model
        due = (self.settings.tfidf_min_docs if model.version == PRIOR_VERSION
               else self.settings.tfidf_refresh_growth * model.n_docs)
        if self._texts is not None and self._texts < due:
            return False
        with self.sessions() as session:
            self._texts = session.scalar(select(func.count()).select_from(Item).where(
                Item.text_hash.is_not(None))) or 0
        return self._texts >= due

    def refresh(self) -> None:
        """Count document frequencies over the stored token sequences, freeze them as the
        active TF-IDF version, and re-sign and re-pair every text under it."""
        keys, df, n_docs = self.count_frequencies()
        with self.sessions.begin() as session:
            model = freeze(session, keys, df, n_docs)
        self._signer = TextSigner(model, self.signer.words)
        self.resign_all()
        self.refreshes += 1

    def count_frequencies(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(term hashes, document frequencies, documents) over every stored text."""
        counts = (np.zeros(0, np.uint64), np.zeros(0, np.int64))
        n_docs = 0
        for _, tokens, _ in self._scan_tokens(texts=False):
            counts = merge_counts(counts, count_documents(tokens))
            n_docs += int(np.count_nonzero(tokens.lengths))
        return counts[0], counts[1], n_docs

    def resign_all(self) -> None:
        """Re-sign every stored text under the active signer, then re-score its new
        candidates together with the pairs it already had (scores move with the weights;
        a pair that no longer reaches the weak tier is removed)."""
        self._index = TextIndex(self.folder, self.signer.version, self.settings)
        for pks, tokens, texts in self._scan_tokens():
            with self.sessions.begin() as session:
                found = sign_and_index(session, pks, tokens, texts, self.signer, self._index)
                if self.scorer is not None:
                    both = np.concatenate([found, existing_pairs(session, pks.tolist())])
                    self.scorer(session, candidate_pairs(both[:, 0], both[:, 1]))
        self.finish()

    def _scan_tokens(self, *, texts: bool = True) -> Iterator[tuple[np.ndarray, TokenBatch, list[str | None]]]:
        """(pks, token sequences, texts) of every item with text, in pk order, a chunk at
        a time. Items whose stored tokens are missing or of another tokenizer version are
        tokenised again (and stored) on the way. `texts`: also the texts of the items
        with fewer than SHORT_CHARS tokens, which signing needs (`sign_tokens`); the
        other entries are None (all of them without `texts`)."""
        version = tokens_version()
        last = 0
        while True:
            with self.sessions.begin() as session:
                # Texts are read only for the items that must be tokenised again and
                # (signing) those of fewer than SHORT_CHARS tokens: most items of most
                # scans need just the stored sequences.
                rows = session.execute(
                    select(Item.pk, Signature.version, Signature.value)
                    .outerjoin(Signature, (Signature.item_pk == Item.pk) & (Signature.kind == TOKENS_KIND))
                    .where(Item.pk > last, Item.text_hash.is_not(None))
                    .order_by(Item.pk).limit(SCAN_CHUNK)).all()
                if not rows:
                    return
                last = rows[-1][0]
                stale = [i for i, r in enumerate(rows) if r[1] != version]
                # Stale items, and (for signing) those short enough that their sketches
                # may need character n-grams: one query for both. A stale item's text
                # is kept whatever its new length (it costs nothing more).
                wanted = stale + [i for i, r in enumerate(rows)
                                  if texts and r[1] == version and len(r[2]) < SHORT_CHARS * _TOKEN_BYTES]
                found: dict[int, str] = {}
                if wanted:
                    found = {pk: text_for_signals(*parts) for pk, *parts in session.execute(
                        select(Item.pk, Item.title, Item.text, Item.page_text)
                        .where(Item.pk.in_([rows[i][0] for i in wanted])))}
                fresh = {}
                if stale:
                    redo = tokenize_texts([found[rows[i][0]] for i in stale])
                    redo_pks = np.array([rows[i][0] for i in stale], np.int64)
                    store_tokens(session, redo_pks, redo)
                    fresh = {i: redo.doc(j) for j, i in enumerate(stale)}
            docs = [fresh[i] if i in fresh else np.frombuffer(r[2], np.uint64) for i, r in enumerate(rows)]
            given = [found.get(r[0]) if texts else None for r in rows]
            yield (np.array([r[0] for r in rows], np.int64), TokenBatch.from_arrays(docs), given)

    # --- queries -------------------------------------------------------------------------

    def query(self, texts: list[str]) -> list[dict[int, dict[str, float]]]:
        with self.sessions() as session:
            return query_scores(session, texts, self.signer, self.index(session), self.settings)


def _docs(batch: TokenBatch) -> list[np.ndarray]:
    return [batch.doc(i) for i in range(batch.n_docs)]
