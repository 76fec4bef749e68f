"""A TF-IDF refresh in bounded steps: each chunk does refresh work in proportion to its
own texts, no pair is ever scored across versions, and the end state is the one a whole
refresh after the chunk that reached the point gives: the same model, the same signatures,
every designed near-duplicate found, whether its texts came before, during or after."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from mmdedup import Platform
from mmdedup.signals.text_refresh import MOVES_A_TEXT, NEXT_KIND, PAIRS_A_TEXT, PENDING_KIND, refresh_rate
from mmdedup.store.schema import ModelVersion, Signature
from mmdedup.store.signatures import version_names

CHUNK = 20
MIN_DOCS = 100


def corpus(n: int, seed: int = 0) -> tuple[list[dict], set[tuple[str, str]]]:
    """`n` texts of Zipf words; every sixth a near copy (two words changed) of a text a
    few dozen before it, so copies and originals arrive before, during and after the
    refresh. Returns (items in order, designed pairs)."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}z" for i in range(4000)])
    p = 1 / np.arange(1, 4001) ** 0.9
    p /= p.sum()
    items, designed = [], set()
    for i in range(n):
        if i % 6 == 5 and i > 40:
            src = int(rng.integers(i - 40, i - 1))
            words = items[src]["text"].split()
            for j in rng.integers(0, len(words), 2):
                words[j] = f"edit{i}"
            items.append({"id": f"d{i:04d}", "text": " ".join(words)})
            designed.add((items[src]["id"], f"d{i:04d}"))
        else:
            items.append({"id": f"d{i:04d}", "text": " ".join(rng.choice(vocab, 120, p=p))})
    return items, designed


def store(folder: Path, db_url: str, at_once: int) -> Platform:
    folder.mkdir(exist_ok=True)
    (folder / "config.toml").write_text(
        f"tfidf_min_docs = {MIN_DOCS}\ningest_chunk = {CHUNK}\ntfidf_refresh_at_once = {at_once}\n")
    return Platform.open(folder, db_url)


def outcome(p: Platform) -> tuple[str, dict, set]:
    with p.sessions() as session:
        model = session.scalar(select(ModelVersion.version).where(ModelVersion.kind == "tfidf",
                                                                  ModelVersion.active.is_(True)))
        names = version_names(session)
        sigs = {(r.item_pk, r.kind): (names[r.version_id], bytes(r.value)) for r in session.scalars(select(Signature))}
    pairs = {tuple(sorted((x.a, x.b))) for x in p.pairs("weak")}
    return model, sigs, pairs


def assert_one_version_a_pair(p: Platform, items: list[dict], resigned: set[int]) -> None:
    """Mid-refresh: a pair of two re-signed texts scores as the pending signer signs both,
    any other pair as the active signer signs both (never one of each)."""
    text = p.signal("text")
    pending = text.refresher.pending
    assert pending is not None
    with p.sessions() as session:
        rows = session.execute(select(Signature.item_pk).where(Signature.kind == "text")
                               .order_by(Signature.item_pk)).scalars().all()
    by_pk = dict(zip(rows, (x["text"] for x in items)))  # pks follow ingest order
    old = [pk for pk in rows if pk not in resigned][:3]
    new = sorted(resigned)[:3]
    pairs = [(new[0], new[1]), (new[2], old[0]), (old[1], old[2])]
    a = np.array([x for x, _ in pairs], np.int64)
    b = np.array([y for _, y in pairs], np.int64)
    with p.sessions() as session:
        got = text.pair_values(session, a, b).values
    for i, (x, y) in enumerate(pairs):
        signer = pending.signer if x in resigned and y in resigned else text.signer
        sk = signer.sign([by_pk[x], by_pk[y]])
        raw, _ = text.similarity(sk.take(np.array([0])), sk.take(np.array([1])))
        assert got[i] == pytest.approx(float(text.calibrate(raw)[0])), (x, y)
    assert pending.signer.version != text.signer.version


def second_url(db_url: str, tmp_path: Path) -> str:
    if db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'reference.db'}"
    pytest.skip("the reference store needs a second database (run on SQLite)")



def count_work(text, work: list[tuple[int, int]]) -> None:  # noqa: ANN001
    """Record, after each chunk, (texts of the chunk, refresh work done after it)."""
    original = text.after_chunk

    def counted() -> None:
        texts, before = text._chunk_texts, sum(text.refresher.work.values())
        original()
        work.append((texts, sum(text.refresher.work.values()) - before))

    text.after_chunk = counted

def test_a_refresh_in_steps_ends_where_a_whole_refresh_does(db_url: str, tmp_path: Path,
) -> None:
    items, designed = corpus(760)
    with store(tmp_path / "whole", second_url(db_url, tmp_path), at_once=10**9) as p:
        p.ingest(items)
        reference = outcome(p)
    assert designed <= reference[2]

    with store(tmp_path / "steps", db_url, at_once=0) as p:
        work: list[tuple[int, int]] = []  # (texts of the chunk, refresh work after it)
        count_work(p.signal("text"), work)
        # Half now; a "killed" process (closed between two chunks) leaves the refresh to
        # the next one.
        p.ingest(items[:400])
        with p.sessions() as session:
            pending = session.scalar(select(ModelVersion).where(ModelVersion.kind == PENDING_KIND))
            assert pending is not None and pending.params["phase"] == "sign"
            resigned = set(session.scalars(select(Signature.item_pk).where(Signature.kind == NEXT_KIND)))
        assert_one_version_a_pair(p, items[:400], resigned)
        rate = refresh_rate(p.settings.tfidf_refresh_growth)
    # The pending index was saved with the active one: the next process opens it from its
    # files instead of reading every text signed so far, and its files go with the refresh.
    index = tmp_path / "steps" / "index"
    assert (index / "text-next-index.json").exists()
    with store(tmp_path / "steps", db_url, at_once=0) as p:
        text = p.signal("text")
        count_work(text, work)
        rebuilt: list[str] = []
        original = text.rebuilt_index
        text.rebuilt_index = lambda session, kind, version: rebuilt.append(kind) or original(session, kind, version)
        p.ingest(items[400:])
        assert NEXT_KIND not in rebuilt
        result = outcome(p)
        with p.sessions() as session:  # the index kept through the tidy holds every text once
            held = text.index(session)
            signed = set(session.scalars(select(Signature.item_pk).where(Signature.kind == "text")))
        assert set(held.lsh.ids().tolist()) == set(held.hamming.ids().tolist()) == signed
        with p.sessions() as session:
            assert session.scalar(select(ModelVersion).where(ModelVersion.kind == PENDING_KIND)) is None
            assert not session.scalar(select(Signature.item_pk).where(Signature.kind == NEXT_KIND).limit(1))
    assert not list(index.glob("text-next*"))
    # Each chunk's refresh work is bounded by its own texts, whatever the store holds
    # (a phase ending starts the next in the same step: at most three phases' budgets, the
    # tidy's moves and pairs counted at their multiples of a text).
    assert any(w for _, w in work)
    for texts, w in work:
        assert w <= 3 * (MOVES_A_TEXT + PAIRS_A_TEXT) * math.ceil(rate * texts), (texts, w)
    # Same model, same signatures, every designed pair; any other pair a whole refresh
    # found is found too.
    assert result[0] == reference[0]
    assert result[1] == reference[1]
    assert designed <= result[2]
    assert reference[2] <= result[2]


def test_work_per_chunk_does_not_grow_with_the_store(db_url: str, tmp_path: Path) -> None:
    """Refresh work per chunk is a fixed multiple of the chunk's texts: no chunk does
    work in proportion to the store (the whole refresh, at once)."""
    items, _ = corpus(500, seed=4)
    with store(tmp_path / "s", db_url, at_once=0) as p:
        text = p.signal("text")
        per_chunk: list[int] = []
        original = text.after_chunk

        def counted() -> None:
            before = text.refresher.work["counted"] + text.refresher.work["signed"]
            original()
            per_chunk.append(text.refresher.work["counted"] + text.refresher.work["signed"] - before)

        text.after_chunk = counted
        p.ingest(items)
        budget = math.ceil(refresh_rate(p.settings.tfidf_refresh_growth) * CHUNK)
        assert max(per_chunk) <= 2 * budget  # one phase's batch, and the next's first
        assert sum(per_chunk) >= MIN_DOCS  # the refresh did run


def test_a_small_ingest_into_a_store_far_from_its_next_refresh_counts_nothing(
        db_url: str, tmp_path: Path, monkeypatch) -> None:
    """Whether a refresh is due is first judged by the largest pk of a text (an upper
    bound of the texts stored): counting every text is for when the bound reaches it."""
    import mmdedup.signals.text as text_signal

    items, _ = corpus(200)
    with store(tmp_path / "s", db_url, at_once=10**9) as p:
        p.ingest(items[:180])
        assert p.signal("text").signer.model.n_docs >= MIN_DOCS  # refreshed once
    counted: list[int] = []
    original = text_signal.count_texts
    monkeypatch.setattr(text_signal, "count_texts", lambda session: counted.append(1) or original(session))
    with store(tmp_path / "s", db_url, at_once=10**9) as p:
        assert p.ingest(items[180:]).new == 20
    assert not counted


def judged_store(folder: Path, db_url: str, min_change: float) -> Platform:
    """Refresh points at every doubling, in steps, with `tfidf_refresh_min_change` set."""
    folder.mkdir(exist_ok=True)
    (folder / "config.toml").write_text(
        f"tfidf_min_docs = {MIN_DOCS}\ningest_chunk = {CHUNK}\ntfidf_refresh_at_once = 0\n"
        f"tfidf_refresh_growth = 2.0\ntfidf_refresh_min_change = {min_change}\n")
    return Platform.open(folder, db_url)


def test_a_refresh_point_whose_counts_would_hardly_change_a_signature_signs_nothing_again(
        db_url: str, tmp_path: Path) -> None:
    """At a refresh point, the new counts are judged by how much signing again under them
    would change the newest texts' signatures: under `tfidf_refresh_min_change` no text is
    signed again (the active weights stay, every signature and pair as it was), and the
    next point is counted from the texts counted then, not at once again. At or over it,
    the refresh signs every text again, as before."""
    items, designed = corpus(380, seed=2)
    with judged_store(tmp_path / "kept", db_url, min_change=1.0) as p:
        text = p.signal("text")
        p.ingest(items[:180])  # the first corpus fit (from jieba's prior: always signed)
        model, sigs, _ = outcome(p)
        signed = text.refresher.work["signed"]
        assert signed >= MIN_DOCS
        p.ingest(items[180:300])  # the point at twice the first fit's texts: counted, judged
        counted = text.refresher.work["counted"]
        assert text.refresher.work["judged"] == 1
        with p.sessions() as session:
            row = session.scalar(select(ModelVersion).where(ModelVersion.kind == "tfidf",
                                                            ModelVersion.active.is_(True)))
            judged, change = row.params["judged"], row.params["change"]
            assert session.scalar(select(ModelVersion).where(ModelVersion.kind == PENDING_KIND)) is None
        assert judged >= 2 * MIN_DOCS and 0 < change < 1 and change <= row.params["largest_change"]
        p.ingest(items[300:])  # under twice the judged texts: nothing counted again
        assert text.refresher.work["counted"] == counted
        kept = outcome(p)
    assert text.refresher.work["signed"] == signed
    assert kept[0] == model
    assert {k: v for k, v in kept[1].items() if k in sigs} == sigs
    assert designed <= kept[2]

    # The same texts with the threshold at the change measured: signed again.
    with judged_store(tmp_path / "signed", second_url(db_url, tmp_path), min_change=change) as p:
        p.ingest(items)
        text = p.signal("text")
        assert text.refresher.work["judged"] == 0
        assert text.refresher.work["signed"] >= signed + judged
        again = outcome(p)
    assert again[0] != model
    assert designed <= again[2]


def test_a_part_of_the_corpus_that_moved_is_signed_even_when_the_average_hardly_changed() -> None:
    """The mean change of the sample must be under the setting, and no text changed ten
    times as much: a few texts of a new site template among many stable ones are signed."""
    from mmdedup.signals.text_refresh import worth_signing

    stable = np.full(1000, 0.004)
    assert not worth_signing(stable, 0.01)
    assert worth_signing(stable, 0.004)  # (at the mean: signed)
    moved = stable.copy()
    moved[:20] = 0.2  # 2% of the texts: the mean is still 0.008
    assert moved.mean() < 0.01 and worth_signing(moved, 0.01)
    assert worth_signing(np.zeros(0), 0.01)  # nothing to judge by: signed
    assert worth_signing(stable, 0.0)


def test_an_ingest_starting_as_another_switches_versions_signs_nothing_back(
        db_url: str, tmp_path: Path) -> None:
    """An ingest that read the models just before another ingest's refresh switched them
    and tidied: catching up must follow the new version, not take every text the refresh
    signed for stale and sign it back under the old one."""
    items, designed = corpus(2 * MIN_DOCS)
    with store(tmp_path / "s", db_url, at_once=10**9) as late:
        old = late.signal("text").signer.version  # read as this ingest starts
        with store(tmp_path / "s", db_url, at_once=10**9) as first:
            first.ingest(items)  # reaches the refresh point: refreshed whole, tidied
            active = first.signal("text").signer.version
        assert active != old
        assert late.signal("text").catch_up() is False
        model, sigs, pairs = outcome(late)
    assert {name for (_, kind), ((_, name), _) in sigs.items() if kind == "text"} == {active}
    assert designed <= pairs
