"""Several processes on one store, and processes killed mid-work, give what one clean
sequential run gives: concurrent ingests see each other's items, an ingest beside a retrain
ends on the retrained models, and a retrain killed at any moment is finished by the next
one, with no lock left behind."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session, sessionmaker

from mmdedup import Platform
from mmdedup.store.locks import LockBusy, job_lock, take_write_lock
from mmdedup.store.schema import IngestRun, ModelVersion
from mmdedup.store.signatures import versions_stored

from conftest import write_manifest
from helpers import finish, mmdedup, pairs_by_ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))
from concurrent_ingest import corpus  # noqa: E402  (the corpus the benchmark runs at scale)

# Prior TF-IDF weights throughout (no refresh): a model counted over whatever texts the
# store holds at that moment would differ between orders of work, legitimately; the
# refresh race has a test of its own below.
FIXED_TFIDF = {"MMDEDUP_TFIDF_MIN_DOCS": "1000000"}


def state(home: Path, url: str) -> dict[str, Any]:
    """Active model versions, signature versions in use, and the lock being free."""
    engine = create_engine(url)
    with engine.connect() as conn:
        models = dict(conn.execute(select(ModelVersion.kind, ModelVersion.version)
                                   .where(ModelVersion.active.is_(True))).all())
        versions = versions_stored(Session(conn))
    with job_lock(engine, "retrain"):  # free at once: LockBusy otherwise
        pass
    engine.dispose()
    models.pop("retrain", None)  # (a run's record names its time)
    return {"models": models, "signature_versions": versions}


def test_two_ingests_at_once_find_every_pair_a_sequential_run_finds(new_store, tmp_path: Path) -> None:
    first, second = corpus(300)
    m1 = write_manifest(tmp_path / "m1", first)
    m2 = write_manifest(tmp_path / "m2", second)
    env = {**FIXED_TFIDF, "MMDEDUP_INGEST_CHUNK": "15"}

    home, url = new_store("seq")
    Platform.open(home, url).close()
    finish(mmdedup(home, url, "ingest", str(m1), env=env))
    finish(mmdedup(home, url, "ingest", str(m2), env=env))
    expected = pairs_by_ids(home, url)
    assert len(expected) >= 300  # every original has its copy

    home2, url2 = new_store("par")
    Platform.open(home2, url2).close()
    # Both start while the store's write lock is held here, so both are under way before
    # either writes a chunk.
    engine = create_engine(url2)
    with sessionmaker(engine).begin() as session:
        take_write_lock(session)
        procs = [mmdedup(home2, url2, "ingest", str(m), env=env) for m in (m2, m1)]
        time.sleep(3)
    outputs = [finish(p) for p in procs]
    assert pairs_by_ids(home2, url2) == expected
    # a wait is said once a run, not once a chunk
    assert all(o.count("waiting for another process writing to this store") <= 1 for o in outputs)
    # and they ran side by side, each chunk after the other's
    with engine.connect() as conn:
        runs = conn.execute(select(IngestRun.started_at, IngestRun.finished_at)).all()
    engine.dispose()
    assert len(runs) == 2 and max(r[0] for r in runs) < min(r[1] for r in runs)
    # and a rerun of either changes nothing
    finish(mmdedup(home2, url2, "ingest", str(m1), env=env))
    assert pairs_by_ids(home2, url2) == expected


def test_two_stores_in_one_database_never_wait_for_each_other(new_store) -> None:
    """Locks belong to a store (a schema of its own on PostgreSQL), not to the server."""
    (home_a, url_a), (home_b, url_b) = new_store("a"), new_store("b")
    Platform.open(home_a, url_a).close()
    Platform.open(home_b, url_b).close()
    engine_a, engine_b = create_engine(url_a), create_engine(url_b)
    try:
        with job_lock(engine_a, "retrain"):
            with job_lock(engine_b, "retrain"):  # LockBusy if it were the same lock
                pass
            with pytest.raises(LockBusy):
                with job_lock(create_engine(url_a), "retrain"):
                    pass
        with sessionmaker(engine_a).begin() as a, sessionmaker(engine_b).begin() as b:
            take_write_lock(a)
            waited: list[str] = []
            take_write_lock(b, on_wait=waited.append)
            assert waited == []
    finally:
        engine_a.dispose()
        engine_b.dispose()


def test_ingests_crossing_a_tfidf_refresh_together_leave_no_stale_signature(
        new_store, tmp_path: Path) -> None:
    """Both cross the refresh point: one refreshes and re-signs, the other follows its
    model; no crash, every text on the active model, every duplicate pair found."""
    first, second = corpus(150, seed=3)
    m1 = write_manifest(tmp_path / "m1", first)
    m2 = write_manifest(tmp_path / "m2", second)
    env = {"MMDEDUP_INGEST_CHUNK": "10", "MMDEDUP_TFIDF_MIN_DOCS": "120"}
    home, url = new_store("tfidf")
    Platform.open(home, url).close()
    procs = [mmdedup(home, url, "ingest", str(m), env=env) for m in (m1, m2)]
    for p in procs:
        finish(p)
    with Platform.open(home, url) as p:
        active = p.signal("text").signer.version
        assert p.signal("text").signer.model.n_docs >= 120  # the corpus model, not the prior
        found = {tuple(sorted((x.a, x.b))) for x in p.pairs("weak")}
    st = state(home, url)
    assert {v for k, v in st["signature_versions"] if k == "text"} == {active}
    assert {(f"a{i:06d}", f"b{i:06d}") for i in range(150)} <= found


def labelled_store(home: Path, url: str, records: list[dict], tmp_path: Path) -> None:
    """A store of `records` with reviewers' labels on a few pairs: some near copies
    confirmed as duplicates, others called distinct, so a retrain moves word weights and
    fits fusion."""
    manifest = write_manifest(tmp_path / f"lab-{home.name}", records)
    with Platform.open(home, url) as p:
        p.ingest(manifest)
        for i in range(0, 40, 5):
            p.label(f"a{i:06d}", f"b{i:06d}", duplicate=True)
        for i in range(1, 40, 5):
            p.label(f"a{i:06d}", f"b{i:06d}", duplicate=False)


RETRAIN_ENV = {**FIXED_TFIDF, "MMDEDUP_FUSION_MIN_LABELS": "3", "MMDEDUP_INGEST_CHUNK": "25"}


def retrain_until_killed(home: Path, url: str, after: float | None) -> tuple[float, bool]:
    """Start a retrain, wait until it holds its lock (its work has begun), then kill it
    `after` seconds later (None: let it finish). Returns the seconds it worked and
    whether the kill landed before it finished."""
    engine = create_engine(url)
    # (--wait: the look below takes the lock for a moment, which a retrain that does not
    # wait would meet as another retrain's)
    proc = mmdedup(home, url, "retrain", "--wait", "30", env=RETRAIN_ENV)
    try:
        while proc.poll() is None:
            try:
                with job_lock(engine, "retrain"):
                    pass
            except LockBusy:
                break
            time.sleep(0.01)
        started = time.monotonic()
        if after is None:
            finish(proc)
        else:
            time.sleep(after)
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
        return time.monotonic() - started, proc.returncode == -signal.SIGKILL
    finally:
        engine.dispose()


def test_a_retrain_killed_at_any_moment_is_finished_by_the_next(new_store, tmp_path: Path) -> None:
    first, second = corpus(400, seed=5)
    records = first + second
    home, url = new_store("ref")
    labelled_store(home, url, records, tmp_path)
    took, _ = retrain_until_killed(home, url, None)
    expected, expected_state = pairs_by_ids(home, url), state(home, url)

    killed = 0
    for k, share in enumerate((0.1, 0.3, 0.5, 0.7, 0.9)):
        home_k, url_k = new_store(f"k{k}")
        labelled_store(home_k, url_k, records, tmp_path)
        killed += retrain_until_killed(home_k, url_k, took * share)[1]
        again = mmdedup(home_k, url_k, "retrain", "--wait", "0", env=RETRAIN_ENV)
        finish(again)  # not refused: the killed run's lock died with it
        assert pairs_by_ids(home_k, url_k) == expected, f"killed at {share:.0%} of a run"
        assert state(home_k, url_k) == expected_state
    assert killed >= 3  # most kills landed inside the run


def test_an_ingest_beside_a_retrain_ends_on_the_retrained_models(new_store, tmp_path: Path) -> None:
    first, second = corpus(250, seed=9)
    before, after = first + second[:200], second[200:]
    later = write_manifest(tmp_path / "later", after)

    home, url = new_store("seq")
    labelled_store(home, url, before, tmp_path)
    finish(mmdedup(home, url, "retrain", env=RETRAIN_ENV))
    finish(mmdedup(home, url, "ingest", str(later), env=RETRAIN_ENV))
    expected, expected_state = pairs_by_ids(home, url), state(home, url)

    for k, delay in enumerate((0.0, 0.8, 1.6)):
        home_k, url_k = new_store(f"c{k}")
        labelled_store(home_k, url_k, before, tmp_path)
        retrain = mmdedup(home_k, url_k, "retrain", env=RETRAIN_ENV)
        time.sleep(delay)
        ingest = mmdedup(home_k, url_k, "ingest", str(later), env=RETRAIN_ENV)
        finish(ingest)
        finish(retrain)
        assert pairs_by_ids(home_k, url_k) == expected, f"ingest started {delay} s into the retrain"
        assert state(home_k, url_k) == expected_state
