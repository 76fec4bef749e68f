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
from .extract.text import TokenBatch
from .items import LoadedItem, text_for_signals
from .score.pairs import SignalFn, candidate_pairs, existing_pairs
from .learn.tfidf import PRIOR_VERSION, active_model, count_documents, freeze, merge_counts
from .ingest import Scorer
from .store.schema import Item, Signature
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


class TextStage:
    def __init__(self, home: Path, sessions: sessionmaker[Session], settings: Settings) -> None:
        self.folder = home / "index"
        self.sessions = sessions
        self.settings = settings
        self._signer: TextSigner | None = None
        self._index: TextIndex | None = None
        self.scorer: Scorer | None = None  # set by the Platform: scores pairs with every signal
        self.refreshes = 0

    def signal(self) -> SignalFn:
        return text_signal(self.signer, self.settings)

    # --- state ---------------------------------------------------------------------------

    @property
    def signer(self) -> TextSigner:
        if self._signer is None:
            with self.sessions() as session:
                self._signer = TextSigner(active_model(session))
        return self._signer

    def index(self, session: Session) -> TextIndex:
        if self._index is None or self._index.version != self.signer.version:
            self._index = TextIndex.open(self.folder, self.signer.version, self.settings, session)
        return self._index

    # --- ingest --------------------------------------------------------------------------

    def on_chunk(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> np.ndarray | None:
        index = self.index(session)
        texts = [(pk, li.signal_text) for pk, li in changed]
        gone = [pk for pk, t in texts if not t.strip()]
        if gone:
            index.remove(np.asarray(gone, np.int64))
        texts = [(pk, t) for pk, t in texts if t.strip()]
        if not texts:
            return None
        pks = np.fromiter((pk for pk, _ in texts), np.int64, len(texts))
        tokens = tokenize_texts([t for _, t in texts])
        store_tokens(session, pks, tokens)
        return sign_and_index(session, pks, tokens, self.signer, index)

    def after_chunk(self) -> None:
        if self.needs_refresh():
            self.refresh()

    def finish(self) -> None:
        if self._index is not None:
            with self.sessions() as session:
                self._index.save(session)

    # --- TF-IDF refresh ------------------------------------------------------------------

    def needs_refresh(self) -> bool:
        model = self.signer.model
        with self.sessions() as session:
            n = session.scalar(select(func.count()).select_from(Item).where(Item.text_hash.is_not(None))) or 0
        if model.version == PRIOR_VERSION:
            return n >= self.settings.tfidf_min_docs
        return n >= self.settings.tfidf_refresh_growth * model.n_docs

    def refresh(self) -> None:
        """Count document frequencies over the stored token sequences, freeze them as the
        active TF-IDF version, and re-sign and re-pair every text under it."""
        counts = (np.zeros(0, np.uint64), np.zeros(0, np.int64))
        n_docs = 0
        for _, tokens in self._scan_tokens():
            docs = [tokens.doc(i) for i in range(tokens.n_docs)]
            counts = merge_counts(counts, count_documents(docs))
            n_docs += sum(1 for d in docs if len(d))
        with self.sessions.begin() as session:
            model = freeze(session, counts[0], counts[1], n_docs)
        self._signer = TextSigner(model)
        self.resign_all()
        self.refreshes += 1

    def resign_all(self) -> None:
        """Re-sign every stored text under the active signer, then re-score its new
        candidates together with the pairs it already had (scores move with the weights;
        a pair that no longer reaches the weak tier is removed)."""
        self._index = TextIndex(self.folder, self.signer.version, self.settings)
        for pks, tokens in self._scan_tokens():
            with self.sessions.begin() as session:
                found = sign_and_index(session, pks, tokens, self.signer, self._index)
                if self.scorer is not None:
                    both = np.concatenate([found, existing_pairs(session, pks.tolist())])
                    self.scorer(session, candidate_pairs(both[:, 0], both[:, 1]))
        self.finish()

    def _scan_tokens(self) -> Iterator[tuple[np.ndarray, TokenBatch]]:
        """(pks, token sequences) of every item with text, in pk order, a chunk at a time.
        Items whose stored tokens are missing or of another tokenizer version are
        tokenised again (and stored) on the way."""
        version = tokens_version()
        last = 0
        while True:
            with self.sessions.begin() as session:
                rows = session.execute(
                    select(Item.pk, Item.title, Item.text, Item.page_text, Signature.version,
                           Signature.value)
                    .outerjoin(Signature, (Signature.item_pk == Item.pk) & (Signature.kind == TOKENS_KIND))
                    .where(Item.pk > last, Item.text_hash.is_not(None))
                    .order_by(Item.pk).limit(SCAN_CHUNK)).all()
                if not rows:
                    return
                last = rows[-1][0]
                stale = [i for i, r in enumerate(rows) if r[4] != version]
                fresh = {}
                if stale:
                    redo = tokenize_texts([text_for_signals(*rows[i][1:4]) for i in stale])
                    redo_pks = np.array([rows[i][0] for i in stale], np.int64)
                    store_tokens(session, redo_pks, redo)
                    fresh = {i: redo.doc(j) for j, i in enumerate(stale)}
            docs = [fresh[i] if i in fresh else np.frombuffer(r[5], np.uint64) for i, r in enumerate(rows)]
            yield (np.array([r[0] for r in rows], np.int64), TokenBatch.from_arrays(docs))

    # --- queries -------------------------------------------------------------------------

    def query(self, texts: list[str]) -> list[dict[int, dict[str, float]]]:
        with self.sessions() as session:
            return query_scores(session, texts, self.signer, self.index(session), self.settings)
