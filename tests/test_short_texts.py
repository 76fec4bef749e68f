"""Short texts: the text signal's order-aware MinHash over character n-grams.

A 12-character Chinese post has about five words, so three word 3-grams: one changed
character and the sets are disjoint. Short texts (`is_short`) are shingled by character
n-grams instead (textsig.sign_tokens), which needs their texts wherever they are signed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from mmdedup import Platform
from mmdedup.extract.minhash import jaccard
from mmdedup.extract import text_sketches as textsig
from mmdedup.extract.hashing import hash_tokens
from mmdedup.extract.shingles import SHORT_CHARS, char_shingles, shingle_version, short_text_shingles
from mmdedup.extract.term_weights import prior_model
from mmdedup.extract.tokens import tokenize
from mmdedup.input.items import probe_item
from mmdedup.store.schema import Item, Signature, SignatureVersion
from mmdedup.extract.text_sketches import SHINGLE_N, TextSigner, stored_values, tokenize_texts, word_shingles
from mmdedup.signals.text_refresh import TOKENS_KIND

from helpers import sign_as

KIND = "text"

BJ = "今天北京天气晴朗适合出游"
BJ_EDIT = "今天北京天气晴朗适宜出游"  # one character changed
GZ = "今天广州天气多云不宜出游"  # same topic, another post
EN = "Storm closes schools across the region"
EN_EDIT = "Storm closes schools across the county"  # one word changed
EN_OTHER = "Heavy rain floods roads across the region"
LONG = ("The city council approved the new budget on Tuesday after a long debate. "
        "Funding for public libraries and parks rises by ten percent next year. "
        "Opposition members criticised the cuts to road maintenance and street lighting. "
        "The mayor said the plan balances growth with the needs of older residents.")


def word_jaccard(signer: TextSigner, a: str, b: str) -> float:
    """The `jaccard` detail before short texts had character n-grams: word 3-grams."""
    tokens = tokenize_texts([a, b])
    kept = tokens.hashes[signer.term_weights(tokens.hashes) > 0]
    assert len(kept) == len(tokens.hashes)  # (no dead words under the prior)
    m = stored_values(signer.minhash(word_shingles(tokens, SHINGLE_N)))
    return float(jaccard(m[:1], m[1:])[0])


def test_one_edit_of_a_short_post_is_a_strong_pair_and_another_post_is_not(platform: Platform) -> None:
    platform.ingest([{"id": k, "text": v} for k, v in
                     {"bj": BJ, "bj-edit": BJ_EDIT, "gz": GZ, "en": EN, "en-edit": EN_EDIT,
                      "en-other": EN_OTHER}.items()])
    pairs = {tuple(sorted((p["a"], p["b"]))): p for p in platform.pairs("weak")}
    signer = platform.signal("text").signer
    for a, b, before in (("bj", "bj-edit", word_jaccard(signer, BJ, BJ_EDIT)),
                         ("en", "en-edit", word_jaccard(signer, EN, EN_EDIT))):
        pair = pairs[(a, b)]
        assert pair["tier"] == "strong", pair
        # word 3-grams: 0.24 and 0.48; character n-grams: 0.71 and 0.66
        assert pair["details"]["text"]["jaccard"] >= before + 0.15, (pair, before)
    for a, b in (("bj", "gz"), ("bj-edit", "gz"), ("en", "en-other"), ("en-edit", "en-other")):
        assert pairs.get((a, b), {"tier": "weak"})["tier"] == "weak", pairs[(a, b)]
    # What a query sees is what ingest stored.
    hit = text_query(platform, BJ_EDIT)
    assert hit[platform_pk(platform, "bj-edit")]["jaccard"] == 1.0
    assert hit[platform_pk(platform, "bj")]["jaccard"] == pytest.approx(
        pairs[("bj", "bj-edit")]["details"]["text"]["jaccard"], abs=1e-4)


def text_query(platform: Platform, text: str) -> dict[int, dict[str, float]]:
    """{pk: raw figures} of the stored texts the text signal finds for `text`."""
    found = platform.signal("text").query(probe_item(text, None, None, platform.settings))
    return {pk: figures for pk, (_, figures) in found.items()}


def platform_pk(platform: Platform, external: str) -> int:
    with platform.sessions() as session:
        return session.scalar(select(Item.pk).where(Item.id == external))


def stored(platform: Platform, kind: str = KIND) -> dict[int, bytes]:
    with platform.sessions() as session:
        rows = session.execute(select(Signature.item_pk, SignatureVersion.version, Signature.value)
                               .join(SignatureVersion).where(Signature.kind == kind)).all()
    return {pk: (version, bytes(value)) for pk, version, value in rows}


def test_ingest_resign_refresh_and_query_sign_alike(platform: Platform, home: Path, db_url: str) -> None:
    texts = {"bj": BJ, "gz": GZ, "en": EN, "long": LONG, "mid": "Council approves budget for libraries and parks "
             "after a long and heated debate on Tuesday evening in the city hall",
             "title-only": "市教育局推行课后服务"}
    platform.ingest([{"id": k, "text": v} for k, v in texts.items()])
    pk = {k: platform_pk(platform, k) for k in texts}
    by_pk = {pk[k]: v for k, v in texts.items()}
    order = sorted(by_pk)

    def expected() -> dict[int, tuple[str, bytes]]:
        signer = platform.signal("text").signer
        sk = signer.sign([by_pk[p] for p in order])
        return {p: (signer.version, sk.pack(i)) for i, p in enumerate(order)}

    at_ingest = stored(platform)
    assert at_ingest == expected()
    # A re-sign reads stored tokens and, for the short ones, the texts.
    platform.signal("text").resign_all()
    assert stored(platform) == at_ingest
    # ... also where the stored tokens are stale and tokenised again on the way.
    with platform.sessions.begin() as session:
        sign_as(session, TOKENS_KIND, "old")
    platform.signal("text").resign_all()
    assert stored(platform) == at_ingest
    # A TF-IDF refresh: a new version, signed as `sign` (a query) signs.
    platform.signal("text").refresh()
    after = stored(platform)
    assert after != at_ingest and after == expected()
    for text in (BJ, EN, LONG):
        hit = text_query(platform, text)
        p = next(p for p, t in by_pk.items() if t == text)
        assert hit[p]["jaccard"] == 1.0 and hit[p]["wjaccard"] == 1.0
    # A process of its own reads the frequencies of the query's terms alone, and finds
    # and scores what the process holding the whole model does.
    edited = LONG.replace("Tuesday", "Wednesday") + " and one more sentence of words nobody stored"
    with Platform.open(home, db_url) as fresh:
        assert text_query(fresh, edited) == text_query(platform, edited) != {}
        assert fresh.signal("text")._signer is None


def test_short_texts_use_character_ngrams_and_long_texts_word_3grams() -> None:
    signer = TextSigner(prior_model())
    assert shingle_version(SHINGLE_N) in signer.version
    texts = [BJ, LONG, EN, LONG.replace("Tuesday", "Wednesday")]
    tokens = tokenize_texts(texts)
    sk = signer.sign_tokens(tokens, texts)
    # Short ones: a MinHash of their character n-grams (`short_text_shingles`).
    short = [0, 2]
    chars = hash_tokens([short_text_shingles(texts[i], int(tokens.lengths[i])) for i in short])
    assert np.array_equal(sk.minhash[short], stored_values(signer.minhash(chars)))
    # Long ones: bit for bit the word 3-gram MinHash of their tokens, as before; the
    # texts of documents of SHORT_CHARS tokens or more are never needed.
    long = [1, 3]
    assert (tokens.lengths[long] >= SHORT_CHARS).all()
    long_tokens = tokenize_texts([texts[i] for i in long])
    assert np.array_equal(sk.minhash[long], stored_values(signer.minhash(word_shingles(long_tokens, SHINGLE_N))))
    alone = signer.sign_tokens(long_tokens)
    for name in ("simhash", "wminhash", "minhash", "empty"):
        assert np.array_equal(getattr(alone, name), getattr(sk, name)[long]), name
    assert np.array_equal(signer.sign_tokens(tokens, [BJ, None, EN, None]).minhash, sk.minhash)


def test_only_the_order_aware_minhash_of_short_texts_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    signer = TextSigner(prior_model())
    texts = [BJ, LONG, EN, "", GZ]
    new = signer.sign(texts)
    # Signing as before this change: no document is shingled by characters.
    monkeypatch.setattr(textsig, "short_char_shingles",
                        lambda lengths, texts: (np.zeros(0, np.intp), hash_tokens([])))
    old = signer.sign(texts)
    for name in ("simhash", "wminhash", "empty"):
        assert np.array_equal(getattr(old, name), getattr(new, name)), name
    assert np.array_equal(old.minhash[[1, 3]], new.minhash[[1, 3]])  # long, and no words at all
    assert (old.minhash[[0, 2, 4]] != new.minhash[[0, 2, 4]]).any(axis=1).all()


def test_a_short_document_without_its_text_cannot_be_signed() -> None:
    signer = TextSigner(prior_model())
    tokens = tokenize_texts([LONG, BJ])
    with pytest.raises(ValueError, match="fewer than 30 tokens"):
        signer.sign_tokens(tokens)
    with pytest.raises(ValueError, match="document 1"):
        signer.sign_tokens(tokens, [LONG, None])
    with pytest.raises(ValueError, match="aligned"):
        signer.sign_tokens(tokens, [BJ])
    # A text of 8 to 29 tokens may still be short by its characters: its text is needed.
    mid = "a b c d e f g h i j"
    with pytest.raises(ValueError):
        signer.sign_tokens(tokenize_texts([mid]))
    assert signer.sign_tokens(tokenize_texts([mid]), [mid]).minhash.shape == (1, 128)


def test_short_chinese_post_uses_character_bigrams() -> None:
    post = "今天天气很好我们去公园玩"  # 12 characters
    assert len(post) == 12
    features = lambda text: short_text_shingles(text, len(tokenize(text)))  # noqa: E731
    sh = features(post)
    assert sh == char_shingles(post, 2) and len(sh) == 11
    near = features("今天天气真好我们去公园玩")
    other = features("股市大跌投资者损失惨重啊")
    j = lambda x, y: len(set(x) & set(y)) / len(set(x) | set(y))  # noqa: E731
    assert j(sh, near) > 0.6
    assert j(sh, other) == 0.0
    assert features("Storm closes schools") == char_shingles("stormclosesschools", 3)  # not Chinese: trigrams
    # A long text is not short: it keeps its word 3-grams (textsig signs those from token hashes).
    long_text = "The quick brown fox jumps over the lazy dog near the river bank every single morning"
    assert features(long_text) is None
