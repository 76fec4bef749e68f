"""A run killed mid-batch loses nothing: the rerun completes it, nothing missing or doubled."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, func, select, text

from mmdedup import Platform
from mmdedup.store.schema import Item, Pair

from conftest import write_manifest

N = 12_000


def test_kill_mid_run_then_rerun(tmp_path: Path, db_url: str) -> None:
    # Every 10th item repeats the previous one's text: N/10 exact pairs when complete. The
    # others are ten words drawn at random, unrelated to each other (texts differing only
    # in a number would be near-duplicates).
    rng = random.Random(7)
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(4, 9))) for _ in range(5000)]
    texts = [" ".join(rng.choices(vocab, k=10)) for _ in range(N)]
    records = [{"id": f"doc-{i:05d}", "text": texts[i - (i % 10 == 9)]} for i in range(N)]
    manifest = write_manifest(tmp_path / "c", records)
    home = tmp_path / "home"
    Platform.open(home, db_url).close()  # migrate first, so the child starts writing at once
    env = {**os.environ, "MMDEDUP_INGEST_CHUNK": "200"}
    cmd = [sys.executable, "-m", "mmdedup", "--home", str(home), "--db", db_url, "ingest", str(manifest)]
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    engine = create_engine(db_url)
    killed_at = 0
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and child.poll() is None:
            with engine.connect() as conn:
                killed_at = conn.execute(select(func.count()).select_from(Item)).scalar_one()
            if killed_at >= 2000:
                child.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
        child.wait(timeout=30)
    finally:
        engine.dispose()
    assert child.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert 0 < killed_at < N

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    engine = create_engine(db_url)
    with engine.connect() as conn:
        ids = conn.execute(select(Item.id)).scalars().all()
        pairs = conn.execute(select(Pair.a_pk, Pair.b_pk)).all()
        pair_items = conn.execute(text(
            "SELECT a.id, b.id FROM pairs p JOIN items a ON a.pk = p.a_pk JOIN items b ON b.pk = p.b_pk"
        )).all()
    engine.dispose()
    assert len(ids) == N and len(set(ids)) == N
    assert len(pairs) == N // 10 and len(set(pairs)) == len(pairs)
    assert all(int(b[4:]) == int(a[4:]) + 1 and int(b[4:]) % 10 == 9 for a, b in pair_items)
