"""TF-IDF term weights: document frequencies from the store, frozen into versions
(the model itself: extract/term_weights.py).

Why frozen versions: a signature is only comparable with signatures made under the same
weights, so the weights a batch is signed with must not drift while it is being signed.
When the corpus has grown enough (`tfidf_min_docs`, then every `tfidf_refresh_growth`-fold)
the document frequencies are counted again from the stored token sequences, a new version
is frozen and everything is re-signed; the growth factor keeps the total re-signing work
linear in the corpus. Until the corpus is large enough, jieba's shipped IDF table is the
prior (it knows Chinese words; any other word gets its median IDF).

With corpus frequencies, idf = log((N + 1) / (df + 1)): a word on every page (a site
template, a boilerplate footer) has weight exactly 0 and drops out of the signatures.

Terms are keyed by their 64-bit token hash: lookups over a whole batch are one
`searchsorted`, with no per-token Python.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy.orm import Session

from ..extract.term_weights import TfidfModel
from ..store.db import activate_version
from ..store.models import add_doc_freqs


def freeze(session: Session, keys: np.ndarray, df: np.ndarray, n_docs: int) -> TfidfModel:
    """Store a new version from document frequencies and make it the active one; an
    identical version already stored is re-activated instead."""
    model = TfidfModel.from_counts(keys, df, n_docs)
    row, created = activate_version(session, "tfidf", model.version,
                                    {"n_docs": n_docs, "terms": int(len(keys))})
    if not created:
        return model
    add_doc_freqs(session, row.pk, model.keys, df[np.argsort(keys)])
    return model
