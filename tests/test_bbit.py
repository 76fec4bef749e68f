"""The low bits of MinHash positions rule out candidates in memory, and only those that
could never have been stored."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from mmdedup import Platform
from mmdedup.extract.text_sketches import similarity
from mmdedup.index.bbit import BitRows, agreeing, low_bits
from mmdedup.index.slots import Slots

from helpers import pair_map


def test_low_bit_agreement_bounds_the_agreement_of_the_signatures() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**32, (2000, 128), dtype=np.uint32)
    b = a.copy()
    share = rng.random(len(a))  # each pair agrees at a share of its positions
    change = rng.random(a.shape) > share[:, None]
    b[change] = rng.integers(0, 2**32, int(change.sum()), dtype=np.uint32)
    same = (a == b).sum(axis=1)
    bound = agreeing(low_bits(a), low_bits(b))
    assert (bound >= same).all()
    # and it is tight enough to tell unrelated signatures from alike ones: 4 bits agree
    # by chance at about 1/16 of the other positions
    assert np.abs(bound - same - (128 - same) / 16).mean() < 2.5


def test_word_and_byte_counts_of_agreeing_positions_are_equal() -> None:
    """Rows a multiple of 8 bytes wide are counted 16 positions a word, others a byte at a
    time: the same count, on contiguous rows and on the halves of wider ones."""
    from mmdedup.index.bbit import _AGREE

    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (500, 128), dtype=np.uint8)
    b = np.where(rng.random(a.shape) < 0.5, a, rng.integers(0, 256, a.shape, dtype=np.uint8)).astype(np.uint8)
    b[:, ::3] ^= np.uint8(0x10)  # one nibble of a byte differs, the other agrees
    for x, y in ((a, b), (a[:, :64], b[:, :64]), (a[:, 64:], b[:, 64:]), (a[:, :60], b[:, :60])):
        assert agreeing(x, y).tolist() == _AGREE[np.bitwise_xor(x, y)].sum(axis=1).tolist()
    halves = agreeing(a, b, parts=2)
    assert halves.tolist() == np.stack([agreeing(a[:, :64], b[:, :64]), agreeing(a[:, 64:], b[:, 64:])], 1).tolist()
    assert agreeing(a[:, :60], b[:, :60], parts=2).tolist() == \
        np.stack([agreeing(a[:, :30], b[:, :30]), agreeing(a[:, 30:60], b[:, 30:60])], 1).tolist()


def test_odd_widths_pack_every_position() -> None:
    a = np.array([[1, 2, 3]], np.uint32)
    b = np.array([[1, 2, 4]], np.uint32)
    assert low_bits(a).shape == (1, 2)
    assert agreeing(low_bits(a), low_bits(b)).tolist() == [3]  # (the pad nibble agrees too)
    assert agreeing(low_bits(a), low_bits(a + 16)).tolist() == [4]


def test_slot_positions_are_aligned_and_follow_removal_and_re_adding() -> None:
    slots = Slots()
    slots.append(np.array([5, 7, 9]))
    slots.kill(slots.find(np.array([7])))
    slots.append(np.array([3, 9]))  # out of order, and 9 again
    assert slots.position(np.array([9, 7, 5, 3, 4])).tolist() == [4, -1, 0, 3, -1]


def test_bit_rows_answer_by_id_through_removal_compaction_and_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    rows = rng.integers(0, 256, (100, 8), dtype=np.uint8)
    held = BitRows(8, compact_at=0.25)
    held.add(np.arange(100), rows)
    held.remove(np.arange(0, 100, 3))  # past a quarter dead: compacted
    held.add(np.array([200, 3]), rows[:2])  # a removed id comes back with another row
    manifest = held.save(tmp_path, "t")
    held.add(np.array([300]), rows[5:6])
    manifest = held.save(tmp_path, "t", manifest)  # a segment
    opened = BitRows.load(tmp_path, manifest)
    ids = np.array([1, 3, 6, 200, 300, 999])
    for index in (held, opened):
        have, got = index.rows(ids)
        assert have.tolist() == [True, True, False, True, True, False]
        assert (got[0] == rows[1]).all() and (got[1] == rows[1]).all() and (got[3] == rows[0]).all()
        assert (got[4] == rows[5]).all() and not got[[2, 5]].any()
    opened.remove(np.arange(4, 100))  # compacted: the memory-mapped rows copied out
    opened.add(np.array([400]), rows[7:8])
    have, got = opened.rows(np.array([1, 3, 200, 300, 400, 50]))
    assert have.tolist() == [True, True, True, True, True, False]
    assert (got[:5] == rows[[1, 1, 0, 5, 7]]).all()


def test_ruled_out_candidates_are_exactly_pairs_the_scorer_would_drop(tmp_path: Path) -> None:
    """Texts sharing every share of their words with a base text: none the scorer keeps is
    ruled out, and the unrelated ones are."""
    rng = np.random.default_rng(2)
    words = [f"w{i}" for i in range(3000)]
    base = rng.choice(words, 300)
    texts = [" ".join(base)]
    for share in np.linspace(0, 1, 60):
        t = np.where(rng.random(300) < share, base, rng.choice(words, 300))
        texts.append(" ".join(t))
    with Platform.open(tmp_path / "h", f"sqlite:///{tmp_path / 'd.db'}") as p:
        signal = p.signal("text")
        sk = signal.signer.sign(texts)
        index = signal.new_index()
        signal.index_add(index, np.arange(len(texts), dtype=np.int64), sk)
        q = np.zeros(len(texts) - 1, np.int64)  # the base text against every other
        other = np.arange(1, len(texts), dtype=np.int64)
        reachable = signal.reachable(index, sk.take(np.zeros(1, np.intp)), q, other)
        score = signal.calibrate(similarity(sk.take(q), sk.take(other))["raw"])
        floor = p.settings.pair_floor
        assert not (score[~reachable] >= floor).any()
        assert (~reachable).sum() >= 15 and (score >= floor).sum() >= 10  # both kinds are there
        sims = similarity(sk.take(q), sk.take(other))
        alike = np.maximum(sims["wjaccard"], sims["jaccard"])  # (alike by either figure)
        assert not reachable[alike < 0.15].any()  # unrelated texts never reach the store


def test_pairs_of_a_store_are_those_it_found_before_the_filter(tmp_path: Path) -> None:
    """An ingest stores the same pairs with the filter as with every candidate scored."""
    rng = np.random.default_rng(3)
    words = [f"v{i}" for i in range(800)]
    texts = [" ".join(rng.choice(words, 200)) for _ in range(60)]
    texts += [t.replace("v1 ", "v2 ", 3) for t in texts[:20]]
    items = [{"id": f"t{i}", "text": t} for i, t in enumerate(texts)]
    with Platform.open(tmp_path / "a", f"sqlite:///{tmp_path / 'a.db'}") as p:
        p.ingest(items)
        filtered = pair_map(p)
    with Platform.open(tmp_path / "b", f"sqlite:///{tmp_path / 'b.db'}") as p:
        signal = p.signal("text")
        signal.reachable = lambda index, sk, q, other: np.ones(len(q), bool)  # type: ignore[method-assign]
        p.ingest(items)
        every = pair_map(p)
    assert filtered == every and len(filtered) >= 20
