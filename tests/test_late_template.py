"""A site template that arrives late: once a passage recurs across many texts it leaves
their signatures, those stored before included, so different articles in one template are
not duplicates while edited copies of one article still are; and a story reposted many
times, word for word or edited, keeps every word."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from mmdedup import Platform
from mmdedup.extract.text_sketches import tokenize_texts
from mmdedup.extract.winnowing import K, W, Anchors, Passages, RecentAnchors, anchors, strip

VOCAB = [f"w{i}" for i in range(3000)]


def words(rng: random.Random, n: int) -> list[str]:
    return [VOCAB[min(int(rng.paretovariate(0.9)), len(VOCAB)) - 1] if rng.random() < 0.3 else rng.choice(VOCAB)
            for _ in range(n)]


def edited(text: list[str], rng: random.Random, rate: float) -> list[str]:
    out = list(text)
    for i in rng.sample(range(len(out)), max(1, int(rate * len(out)))):
        out[i] = rng.choice(VOCAB)
    return out


def recurring(texts: list[str], min_texts: int) -> tuple[object, np.ndarray, object]:
    """(tokens, whether each anchor is in at least min_texts texts, anchors)."""
    tokens = tokenize_texts(texts)
    found = anchors(tokens)
    held = Counter(found.distinct().hashes.tolist())
    return tokens, np.array([held[h] >= min_texts for h in found.hashes.tolist()]), found


def test_a_shared_passage_gives_the_same_anchors_whatever_surrounds_it() -> None:
    rng = random.Random(1)
    passage = words(rng, W + K + 40)
    a, b = (" ".join(words(rng, 50) + passage + words(rng, 50)) for _ in range(2))
    alone = anchors(tokenize_texts([a]))
    batch = anchors(tokenize_texts([b, a]))
    np.testing.assert_array_equal(alone.hashes, batch.of(1)[0])  # a text's anchors are its own
    both = batch.distinct()
    assert len(np.intersect1d(both.of(0)[0], both.of(1)[0])) >= 3


def test_anchors_are_the_smallest_k_gram_of_every_window() -> None:
    """The batch kernel against winnowing written out text by text (k-grams unique, as
    real text's 64-bit k-gram hashes are; short texts: one window)."""
    from mmdedup.extract.tokenbatch import TokenBatch
    from mmdedup.extract.winnowing import _kgrams

    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 2 ** 63, size=int(n), dtype=np.uint64) for n in rng.integers(0, 150, size=400)]
    found = anchors(TokenBatch.from_arrays(docs))
    for i, doc in enumerate(docs):
        grams = _kgrams(doc)
        windows = [grams[j:j + W] for j in range(max(len(grams) - W + 1, 1 if len(grams) else 0))]
        want = sorted({j + int(np.argmin(w)) for j, w in enumerate(windows)})
        np.testing.assert_array_equal(found.of(i)[1], want)
        np.testing.assert_array_equal(found.of(i)[0], grams[want])


def test_the_template_leaves_the_text_and_the_article_stays() -> None:
    rng = random.Random(2)
    template = words(rng, 600)
    bodies = [words(rng, 150) for _ in range(25)]
    texts = [" ".join(template[:300] + body + template[300:]) for body in bodies]
    tokens, recurs, found = recurring(texts, 20)
    out, changed = strip(tokens, found, recurs, 4, 0.1)
    assert changed.all()
    assert all(150 <= n <= 150 + 2 * 2 * (K + W) for n in out.lengths.tolist())  # a little template edge at most
    body = tokenize_texts([" ".join(bodies[0])]).hashes
    assert np.isin(body, out.doc(0)).all()


@pytest.mark.parametrize(("rate", "intro"), [(0.0, 0), (0.01, 0), (0.05, 0), (0.15, 0), (0.01, 20)])
def test_a_story_reposted_many_times_keeps_its_words(rate: float, intro: int) -> None:
    """Word for word, edited, or under a line of the outlet's own."""
    rng = random.Random(3)
    story = words(rng, 400)
    texts = [" ".join(words(rng, intro) + (edited(story, rng, rate) if rate else story)) for _ in range(30)]
    tokens, recurs, found = recurring(texts, 20)
    out, changed = strip(tokens, found, recurs, 4, 0.1)
    assert not changed.any()


def test_recent_counts_forget_texts_past_the_window() -> None:
    """An anchor recurs while enough of the recent texts hold it; a text's repeats count
    once."""
    recent = RecentAnchors(window=4)
    texts = lambda *ts: Anchors.join([np.asarray(t, np.uint64) for t in ts]).distinct()  # noqa: E731
    assert recent.add(texts([1, 2, 2], [1, 3]), 3).tolist() == []
    assert recent.add(texts([1], [4]), 3).tolist() == [1]  # 1 in three of four texts
    assert recent.add(texts([5], [5]), 3).tolist() == []  # the first two texts left
    assert recent.add(texts([5]), 3).tolist() == [5]
    held = texts([7, 9], [], [8])
    assert held.any_in(np.asarray([8, 9], np.uint64)).tolist() == [True, False, True]


def test_nothing_recurs_nothing_changes() -> None:
    tokens = tokenize_texts(["one two three four five six seven eight nine ten eleven twelve"] * 3)
    assert Passages().strip(tokens) is tokens


def wrapped_corpus(seed: int) -> tuple[dict[str, str], dict[str, str], list[tuple[str, str]]]:
    """(plain texts stored first, texts in one new 600-word template, (article, its copy))."""
    rng = random.Random(seed)
    template = words(rng, 600)
    plain = {f"p{i}": " ".join(words(rng, 300)) for i in range(30)}
    wrapped, copies = {}, []
    for i in range(25):
        body = words(rng, 250)
        wrapped[f"a{i}"] = " ".join(template[:300] + body + template[300:])
        if i % 2 == 0:
            wrapped[f"a{i}-copy"] = " ".join(template[:300] + edited(body, rng, 0.03) + template[300:])
            copies.append((f"a{i}", f"a{i}-copy"))
    return plain, dict(sorted(wrapped.items(), key=lambda kv: rng.random())), copies


def tiers(platform: Platform) -> dict[tuple[str, str], str]:
    return {tuple(sorted((p["a"], p["b"]))): p["tier"] for p in platform.pairs("weak")}


@pytest.mark.parametrize("workers", [1, 2])
def test_different_articles_in_a_late_template_are_not_duplicates(home, db_url, monkeypatch, workers) -> None:
    """Chunks of 5: the first texts in the template are stored before it recurs, and are
    signed again once it does; with 2 workers, another process tokenises the texts."""
    monkeypatch.setenv("MMDEDUP_INGEST_CHUNK", "5")
    plain, wrapped, copies = wrapped_corpus(4)
    with Platform.open(home, db_url) as platform:
        platform.ingest([{"id": k, "text": t} for k, t in plain.items()])
        platform.ingest([{"id": k, "text": t} for k, t in wrapped.items()], workers=workers)
        found = tiers(platform)
        article = {k: k.split("-")[0] for k in wrapped}
        false = [p for p, tier in found.items() if p[0] in article and p[1] in article
                 and article[p[0]] != article[p[1]]]
        assert false == []
        assert all(found.get(tuple(sorted(c))) in ("strong", "medium") for c in copies)
        # A query in the template finds the article's copy, and no other article.
        key, text = next((k, t) for k, t in wrapped.items() if k.endswith("-copy"))
        answers = platform.query(text=text)
        assert {m["id"] for m in answers if m["score"] >= 0.8} == {key, key.split("-")[0]}  # itself, its article


def test_passages_off_the_template_makes_every_pair(home, db_url, monkeypatch) -> None:
    """What the product did before, and does with passage_min_texts past any count."""
    monkeypatch.setenv("MMDEDUP_TEXT_PASSAGE_MIN_TEXTS", str(10 ** 9))
    plain, wrapped, _ = wrapped_corpus(4)
    with Platform.open(home, db_url) as platform:
        platform.ingest([{"id": k, "text": t} for k, t in plain.items()])
        platform.ingest([{"id": k, "text": t} for k, t in wrapped.items()])
        false = Counter(tier for p, tier in tiers(platform).items() if p[0].split("-")[0] != p[1].split("-")[0])
        assert false["strong"] + false["medium"] >= 10, false


def test_a_chinese_template_leaves_the_text(home, db_url, monkeypatch) -> None:
    """Words from jieba, not spaces: a site's header and footer around Chinese news, no
    line break between them and the article."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))
    from text_quality import zh_docs

    monkeypatch.setenv("MMDEDUP_INGEST_CHUNK", "8")
    rng = random.Random(5)
    docs = ["".join(d) for d in zh_docs(rng, n=66, topics=4)]
    header, footer = docs[0], docs[1]  # the site's own lines, the same on every page
    articles = [docs[i] + docs[i + 1] for i in range(2, 66, 2)]  # about 200 words each
    texts = {f"a{i}": header + body + footer for i, body in enumerate(articles)}
    for i in range(0, len(articles), 4):  # copies: a sentence of the article dropped
        sentences = [s + "。" for s in articles[i].split("。") if s]
        texts[f"a{i}-copy"] = header + "".join(sentences[:-1]) + footer
    with Platform.open(home, db_url) as platform:
        platform.ingest([{"id": k, "text": t} for k, t in texts.items()])
        found = tiers(platform)
    false = [p for p in found if p[0].split("-")[0] != p[1].split("-")[0]]
    assert false == []
    assert all(found.get((f"a{i}", f"a{i}-copy")) in ("strong", "medium") for i in range(0, len(articles), 4))
