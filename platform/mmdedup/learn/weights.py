"""Learned word weights: per-word multipliers on TF-IDF weights, taught by reviewers.

Why: TF-IDF knows how rare a word is, not whether it decides anything. Two notices that
differ only in "不予批准" / "给予批准" (approved / rejected, shall / shall not) share almost
every word, so every sketch calls them duplicates; a repost with a new date line and an
editor's name differs in words that decide nothing, so it scores lower than it should.
Labels say which words matter:

- a pair labelled *distinct*: the words that differ between the two texts separated them,
  so they gain weight; the words the two share misled the sketches, so they lose a little
  (a quarter of a unit, spread over all shared words of the pair);
- a pair labelled *duplicate*: the words that differ (dates, editors, sources) decided
  nothing, so they lose weight.

A label is one unit of evidence for each differing word while at most FEW_WORDS differ; a
pair differing in more words spreads the unit over them (two different texts called
distinct say nothing about any one of their words).

Each word's evidence is a net count (gains minus losses over all labels in force); the
multiplier is exp(step * net), bounded to [word_weight_min, word_weight_max], so a few
labels move a word and no number of labels can make it vanish from everything or outweigh
a whole text. A word at the floor is dropped from the sketches, as a template word is. A
word above 1 is decisive in proportion to log(m) / log(max) (its share, scaled to at most
the text signal's `learned_share`): it stays out of the sketches, and a pair whose texts
hold different decisive words at one spot keeps only (1 - share) of its text similarity
(extract/polarity.py), so that one differing decisive word separates two texts of any
length alike (a plain multiplier would be diluted by a long text), while a text that
merely lacks the word elsewhere, or says it with a lexicon word of the same polarity,
keeps its score. A
retrain recomputes the multipliers from all labels in force, so a corrected label corrects
the weights; each result is stored as a new model version (the history: every version and
its words stay in `word_weights`, and `mmdedup retrain --rollback` re-activates the one
before).
"""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np
from sqlalchemy.orm import Session

from ..config import Settings
from ..extract.term_weights import UNIT, WordWeights
from ..extract.tokens import tokenize
from ..store.db import activate_version
from ..store.models import add_word_weights

KIND = "words"
_MAX_WORD = 255  # the column's width; longer tokens (no real word) are not learned
SHARED_SHARE = 0.25  # how much a distinct pair's shared words lose, relative to one step
FEW_WORDS = 8  # up to this many differing words, each gets a whole unit of a label
MIN_LOG_MOVE = 0.05  # smaller moves (a word shared by one distinct pair) are not kept


def evidence(pairs: list[tuple[str, str, bool]]) -> Counter[str]:
    """Net count per word over labelled pairs (text a, text b, duplicate?)."""
    net: Counter[str] = Counter()
    for text_a, text_b, duplicate in pairs:
        a, b = Counter(tokenize(text_a)), Counter(tokenize(text_b))
        # Counts, not sets: "shall not" beside "must not" differs from "shall" beside
        # "must not" in how often "not" occurs.
        differ = {w for w in a.keys() | b.keys() if a[w] != b[w]}
        # One label is one unit of evidence per word while few words differ; a pair that
        # differs in many words says little about each, so the unit is spread over them.
        step = (-1.0 if duplicate else 1.0) / max(1.0, len(differ) / FEW_WORDS)
        for word in differ:
            net[word] += step
        shared = (a.keys() & b.keys()) - differ
        if not duplicate and shared:
            share = SHARED_SHARE / len(shared)
            for word in shared:
                net[word] -= share
    return net


def learn(pairs: list[tuple[str, str, bool]], settings: Settings) -> WordWeights:
    """Multipliers from labelled pairs; words whose net evidence is ~0 stay at 1.0."""
    net = evidence(pairs)
    lo, hi = np.log(settings.word_weight_min), np.log(settings.word_weight_max)
    words = sorted(w for w, n in net.items() if abs(n) >= 1e-9 and len(w) <= _MAX_WORD)
    if not words:
        return UNIT
    logm = np.clip(settings.word_weight_step * np.array([net[w] for w in words]), lo, hi)
    keep = np.abs(logm) >= MIN_LOG_MOVE
    words = [w for w, k in zip(words, keep.tolist()) if k]
    mult = np.exp(logm[keep]).astype(np.float32)
    digest = hashlib.sha256("\n".join(f"{w}\t{m:.4f}" for w, m in zip(words, mult.tolist()))
                            .encode("utf-8")).hexdigest()[:10]
    return (WordWeights(f"ww-{digest}", tuple(words), mult, settings.word_weight_min,
                        settings.word_weight_max) if words else UNIT)


def activate(session: Session, weights: WordWeights, params: dict | None = None) -> None:
    """Store `weights` as a version (once) and make it the active one."""
    row, created = activate_version(session, KIND, weights.version, {
        "words": len(weights.words), "floor": weights.floor, "ceiling": weights.ceiling,
        **(params or {})})
    if created:
        add_word_weights(session, row.pk, [(w, float(m)) for w, m in
                                           zip(weights.words, weights.multipliers.tolist())])


def moved(old: WordWeights, new: WordWeights, top: int = 20) -> list[tuple[str, float, float]]:
    """The words whose multiplier changed most (by log ratio): (word, old, new)."""
    a, b = old.as_dict(), new.as_dict()
    changes = [(w, a.get(w, 1.0), b.get(w, 1.0)) for w in set(a) | set(b)]
    changes = [c for c in changes if abs(np.log(c[2] / c[1])) > 1e-3]
    changes.sort(key=lambda c: (-abs(np.log(c[2] / c[1])), c[0]))
    return changes[:top]
