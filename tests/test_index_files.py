"""Index files: saved a segment at a time, opened without being read whole, and never
trusted when a save did not finish or a file is damaged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mmdedup import Platform
from mmdedup.index import runs
from mmdedup.index.cache import load_parts, read_stamp, save_cached
from mmdedup.index.hamming import HammingIndex
from mmdedup.index.lsh import BandLSH

from helpers import pair_map

LOADERS = {"codes": HammingIndex.load, "bands": BandLSH.load}


def near(codes: np.ndarray, sigs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Copies with 0-5 code bits flipped and 5% of signature positions changed."""
    flips = np.zeros(len(codes), np.uint64)
    for i, k in enumerate(rng.integers(0, 6, len(codes))):
        for bit in rng.choice(64, size=k, replace=False):
            flips[i] |= np.uint64(1) << np.uint64(bit)
    edited = sigs.copy()
    mask = rng.random(sigs.shape) < 0.05
    edited[mask] = rng.integers(0, 2**32, int(mask.sum()), dtype=np.uint32)
    return codes ^ flips, edited


def fresh(ids: np.ndarray, codes: np.ndarray, sigs: np.ndarray) -> tuple[HammingIndex, BandLSH]:
    lsh = BandLSH(0.5, 64)
    lsh.add(ids, sigs)
    return HammingIndex.from_arrays(ids, codes), lsh


def answers(hamming: HammingIndex, lsh: BandLSH, codes: np.ndarray, sigs: np.ndarray) -> tuple:
    hits = hamming.search(codes, 3)
    wide = hamming.search(codes[:20], 12)  # the exhaustive scan
    c = lsh.query(sigs)
    order = np.lexsort((c.ids, c.query))
    return (hits.query.tolist(), hits.ids.tolist(), hits.dist.tolist(), wide.ids.tolist(),
            c.query[order].tolist(), c.ids[order].tolist())


def test_runs_of_adds_removes_and_saves_answer_as_one_fresh_index(tmp_path: Path, monkeypatch) -> None:
    """Each run opens the index from its files, adds, replaces and removes entries and
    saves (a segment, a folded segment, main again after a merge or a compaction): opened
    again, it proposes exactly what an index built at once from the same entries does."""
    monkeypatch.setattr(runs, "_MIN_TAIL", 300)  # merges and folds at test sizes
    rng = np.random.default_rng(5)
    live: dict[int, tuple[np.uint64, np.ndarray]] = {}
    next_id = 0
    hamming, lsh = HammingIndex(), BandLSH(0.5, 64)
    for run in range(14):
        if run:
            parts = load_parts(tmp_path, read_stamp(tmp_path, "t"), LOADERS)
            assert parts is not None
            hamming, lsh = parts["codes"], parts["bands"]
        n = int(rng.integers(50, 400))
        codes = rng.integers(0, 2**64, n, dtype=np.uint64)
        sigs = rng.integers(0, 2**32, (n, 64), dtype=np.uint32)
        if live:  # some new items are near copies of stored ones
            old = rng.choice(list(live), size=min(n // 3, len(live)), replace=False)
            c, s = near(np.array([live[i][0] for i in old]), np.stack([live[i][1] for i in old]), rng)
            codes[:len(old)], sigs[:len(old)] = c, s
        ids = np.arange(next_id, next_id + n, dtype=np.int64)
        next_id += n
        if live and run % 3 == 1:  # replace stored items (re-signed): same ids, new values
            redo = np.sort(rng.choice(list(live), size=min(40, len(live)), replace=False))
            ids[:len(redo)] = redo
            ids = np.sort(ids)
        hamming.add(ids, codes)
        lsh.add(ids, sigs)
        hamming.search(codes[:1], 3)  # the chunk tables exist from the first run on
        live.update({int(i): (c, s) for i, c, s in zip(ids, codes, sigs)})
        if run in (5, 9):  # removals: at 9 past a quarter, so compactions renumber
            gone = rng.choice(list(live), size=len(live) // (8 if run == 5 else 3), replace=False)
            hamming.remove(gone)
            lsh.remove(gone)
            for i in gone.tolist():
                del live[i]
        save_cached(tmp_path, "t", {"seq": run}, {"codes": hamming, "bands": lsh})
        named = {f for m in read_stamp(tmp_path, "t")["parts"].values() for f in _named(m)}
        assert _files(tmp_path) == named  # nothing left behind
    stamp = read_stamp(tmp_path, "t")
    assert len(stamp["parts"]["bands"]["segments"]) <= runs.MAX_SEGMENTS
    opened = load_parts(tmp_path, stamp, LOADERS)
    keys = np.array(sorted(live), np.int64)
    codes = np.array([live[i][0] for i in keys.tolist()], np.uint64)
    sigs = np.stack([live[i][1] for i in keys.tolist()])
    probe_codes, probe_sigs = near(codes, sigs, rng)
    probe_codes, probe_sigs = np.concatenate([codes, probe_codes]), np.concatenate([sigs, probe_sigs])
    assert answers(opened["codes"], opened["bands"], probe_codes, probe_sigs) == \
        answers(*fresh(keys, codes, sigs), probe_codes, probe_sigs)
    assert sorted(opened["codes"].ids().tolist()) == sorted(opened["bands"].ids().tolist()) == keys.tolist()


def _named(manifest) -> list[str]:
    """The file names a manifest holds."""
    if isinstance(manifest, dict):
        return [f for v in manifest.values() for f in _named(v)]
    if isinstance(manifest, list):
        return [f for v in manifest for f in _named(v)]
    return [manifest] if isinstance(manifest, str) and manifest.endswith(".npy") else []


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("t-*") if p.name != "t-index.json"}


class Killed(Exception):
    pass


class KilledMidSave:
    """A part whose save writes some of its files, then the process dies."""

    def __init__(self, index: BandLSH) -> None:
        self.index = index

    def save(self, folder: Path, prefix: str, on_disk) -> None:
        self.index.save(folder, prefix, on_disk)
        raise Killed


def test_a_save_killed_half_way_leaves_the_previous_index(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    ids = np.arange(500, dtype=np.int64)
    codes = rng.integers(0, 2**64, 500, dtype=np.uint64)
    sigs = rng.integers(0, 2**32, (500, 64), dtype=np.uint32)
    hamming, lsh = fresh(ids[:300], codes[:300], sigs[:300])
    save_cached(tmp_path, "t", {"seq": 1}, {"codes": hamming, "bands": lsh})
    before = answers(hamming, lsh, codes, sigs)
    hamming.add(ids[300:], codes[300:])
    lsh.add(ids[300:], sigs[300:])
    with pytest.raises(Killed):
        save_cached(tmp_path, "t", {"seq": 2}, {"codes": hamming, "bands": KilledMidSave(lsh)})
    stamp = read_stamp(tmp_path, "t")
    assert stamp["seq"] == 1  # the stamp still vouches for the first save only
    opened = load_parts(tmp_path, stamp, LOADERS)
    assert answers(opened["codes"], opened["bands"], codes, sigs) == before
    # the next save finishes, and the files of the killed one are gone
    save_cached(tmp_path, "t", {"seq": 3}, {"codes": opened["codes"], "bands": opened["bands"]})
    stamp = read_stamp(tmp_path, "t")
    assert _files(tmp_path) == {f for m in stamp["parts"].values() for f in _named(m)}


@pytest.mark.parametrize("damage", ["missing", "truncated", "foreign"])
def test_a_damaged_file_is_never_opened(tmp_path: Path, damage: str, monkeypatch) -> None:
    monkeypatch.setattr(runs, "_MIN_TAIL", 50)  # the runs are in main (memory-mapped when opened)
    rng = np.random.default_rng(3)
    hamming, lsh = fresh(np.arange(200, dtype=np.int64), rng.integers(0, 2**64, 200, dtype=np.uint64),
                         rng.integers(0, 2**32, (200, 64), dtype=np.uint32))
    hamming.search(np.zeros(1, np.uint64), 3)
    save_cached(tmp_path, "t", {"seq": 1}, {"codes": hamming, "bands": lsh})
    stamp = read_stamp(tmp_path, "t")
    assert stamp["parts"]["bands"]["main"]["end"] == 200
    target = tmp_path / stamp["parts"]["bands"]["main"]["runs"]
    if damage == "missing":
        target.unlink()
    elif damage == "truncated":
        target.write_bytes(target.read_bytes()[:200])
    else:  # another index's file under this name
        np.save(target, np.zeros((3, 7), np.uint64))
    assert load_parts(tmp_path, stamp, LOADERS) is None


TEXTS = [
    "the river rose overnight and the old bridge at the mill was closed to all traffic until engineers can inspect it",
    "council votes to fund a new library in the north district after a long debate about the budget for next year",
    "a late goal gave the home side a narrow win in the derby and sent the fans into the streets to celebrate",
    "researchers found that the new alloy keeps its strength at high temperatures which could help jet engines",
]


def variants(k: int) -> list[dict]:
    """Texts and near copies of them (a word changed), in ingest order."""
    items = []
    for i in range(k):
        base = TEXTS[i % len(TEXTS)].split()
        base[i % len(base)] = f"word{i}"
        items.append({"id": f"t{i}", "text": " ".join(base) + f" story {i // len(TEXTS)}"})
    return items


def test_a_store_ingested_in_several_runs_pairs_and_answers_as_one_run(tmp_path: Path, db_url: str) -> None:
    """Ingests in five processes' worth of runs (each opens the index files its
    predecessor saved and saves a segment) find the same pairs as one run, and a query
    through the opened files answers as one through an index rebuilt from the store."""
    items = variants(40)
    with Platform.open(tmp_path / "one", f"sqlite:///{tmp_path / 'one.db'}") as one:
        one.ingest(items)
        expected = pair_map(one)
    home = tmp_path / "runs"
    for start in range(0, len(items), 8):
        with Platform.open(home, db_url) as p:
            p.ingest(items[start:start + 8])
    stamp = read_stamp(home / "index", "text")
    assert stamp is not None and stamp["parts"]["lsh"]["segments"]  # saved a segment at a time
    with Platform.open(home, db_url) as p:
        assert {k: (v["score"], v["tier"]) for k, v in pair_map(p).items()} == \
            {k: (v["score"], v["tier"]) for k, v in expected.items()}
        probe = TEXTS[1] + " story 9"
        opened = [(m.id, m.score) for m in p.query(probe, k=50)]
    for f in (home / "index").glob("text-*"):
        f.unlink()
    with Platform.open(home, db_url) as p:
        assert [(m.id, m.score) for m in p.query(probe, k=50)] == opened and opened


def test_a_query_after_an_ingest_trusts_the_saved_index_without_counting(tmp_path: Path, db_url: str,
                                                                       monkeypatch) -> None:
    """Saving index files is not a write of the store: the stamps carry the store's last
    write, so the next process opens the files without counting the signatures (a scan of
    a million rows at a million texts)."""
    import mmdedup.signals.base as base

    with Platform.open(tmp_path / "h", db_url) as p:
        p.ingest(variants(12))
    counted: list[str] = []
    original = base.count_signatures_through
    monkeypatch.setattr(base, "count_signatures_through",
                        lambda session, kind, *a: counted.append(kind) or original(session, kind, *a))
    with Platform.open(tmp_path / "h", db_url) as p:
        assert p.query(TEXTS[1], k=3)
    assert not counted
