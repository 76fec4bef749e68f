"""The exact order check of text re-use: a copy keeps its passages in one order, while
texts that share only stock phrases have them at unrelated offsets."""

from __future__ import annotations

import random

from mmdedup import Platform
from mmdedup.extract.alignment import ALIGN_N, Grams, aligned_share
from mmdedup.extract.text_sketches import tokenize_texts, word_shingles

STOCK = ["any claim relating to the", "on or before the", "in accordance with the",
         "subject to clause", "shall promptly notify", "to the extent permitted by"]


def words(rng: random.Random, k: int) -> list[str]:
    return [rng.choice("abcdefghijklmnopqrstuvwxyz") + str(rng.randrange(400)) for _ in range(k)]


def sentences(rng: random.Random, k: int) -> list[str]:
    """Sentences of fresh words, each with two stock phrases at random places."""
    out = []
    for _ in range(k):
        w = words(rng, rng.randrange(10, 16))
        for phrase in rng.sample(STOCK, 2):
            w.insert(rng.randrange(len(w) + 1), phrase)
        out.append(" ".join(w) + ".")
    return out


def tokens(text: str) -> Grams:
    batch = tokenize_texts([text])
    return Grams.of(word_shingles(batch, ALIGN_N).doc(0), int(batch.lengths[0]))


def test_a_copy_keeps_its_passages_however_it_was_edited() -> None:
    rng = random.Random(3)
    original = sentences(rng, 12)
    text = " ".join(original)
    assert aligned_share(tokens(text), tokens(text)) == 1.0
    shuffled = original[:]
    rng.shuffle(shuffled)
    assert aligned_share(tokens(text), tokens(" ".join(shuffled))) > 0.85
    flat = text.split(" ")
    for rate, least in ((0.05, 0.8), (0.2, 0.35)):  # words replaced, one in 20 and one in 5
        edited = [w if rng.random() > rate else "zz" + str(rng.randrange(10**6)) for w in flat]
        assert aligned_share(tokens(text), tokens(" ".join(edited))) > least
    cut = " ".join(original[: len(original) * 2 // 3])  # a copy cut short, quoted under a header
    quoted = "Filed under the annex. " + text
    assert aligned_share(tokens(cut), tokens(text)) > 0.9
    assert aligned_share(tokens(text), tokens(quoted)) > 0.9


def test_stock_phrases_at_other_places_are_no_passage() -> None:
    rng = random.Random(5)
    a, b = " ".join(sentences(rng, 12)), " ".join(sentences(rng, 12))
    assert aligned_share(tokens(a), tokens(b)) < 0.1


def test_words_put_in_or_left_out_keep_a_passage_whole() -> None:
    """A repost that adds or drops a word here and there, in a long text or in one short
    sentence (whose stop words the tokens leave out: ten tokens)."""
    rng = random.Random(9)
    text = " ".join(sentences(rng, 10))
    flat = text.split(" ")
    for at in sorted(rng.sample(range(len(flat)), 12), reverse=True):
        if rng.random() < 0.5:
            del flat[at]
        else:
            flat.insert(at, "extra" + str(at))
    assert aligned_share(tokens(text), tokens(" ".join(flat))) > 0.8
    a = "Researchers at the university have developed a battery that charges in five minutes and lasts for a thousand cycles."
    b = "Researchers at the university developed a new battery that charges in five minutes and lasts for two thousand cycles."
    assert aligned_share(tokens(a), tokens(b)) > 0.5


def test_an_empty_text_shares_nothing() -> None:
    assert aligned_share(tokens(""), tokens("some words here")) == 0.0
    assert aligned_share(tokens("some words here"), tokens("")) == 0.0


def test_a_short_repost_with_words_put_in_and_left_out_stays_strong(tmp_path) -> None:
    """Its 3-gram estimate backs its weighted Jaccard only narrowly, so its texts are read:
    ten tokens on one passage with a word left out and one put in."""
    a = "Researchers at the university have developed a battery that charges in five minutes and lasts for a thousand cycles."
    b = "Researchers at the university developed a new battery that charges in five minutes and lasts for two thousand cycles."
    with Platform.open(tmp_path) as platform:
        platform.ingest([{"id": "a", "text": a}, {"id": "b", "text": b}])
        (pair,) = platform.pairs("weak")
    assert pair.tier == "strong" and pair.details["text"]["aligned"] >= 0.5
