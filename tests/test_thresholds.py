"""Adaptive thresholds: each content signal's medium tier follows the scores of its recent
pairs (mean - 2 sd, within the floor and the tiers around it), recomputed every
`adaptive_every` items, kept in the store's history and in force in every process; the
strong tier never moves, and fixed thresholds (the default) are untouched."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np

from mmdedup import Platform


def copies(start: int, n: int, seed: int) -> list[dict]:
    """n texts, each followed by a copy with 1 to 25 of its 80 words replaced."""
    rng = random.Random(seed)
    vocabulary = [f"word{k}" for k in range(5000)]
    out = []
    for i in range(start, start + n):
        words = [rng.choice(vocabulary) for _ in range(80)]
        out.append({"id": f"o{i}", "text": " ".join(words)})
        for j in rng.sample(range(80), 1 + i % 25):
            words[j] = rng.choice(vocabulary)
        out.append({"id": f"c{i}", "text": " ".join(words)})
    return out


ADAPTIVE = 'thresholds = "adaptive"\nadaptive_every = 80\nadaptive_sigmas = 3\n'


def expected_cutoff(scores: list[float], sigmas: float = 3.0) -> float:
    return min(max(float(np.mean(scores) - sigmas * np.std(scores, ddof=1)), 0.7), 0.9)


def assert_tiers(p: Platform, cut: float) -> None:
    for x in p.pairs():
        assert x.tier == ("strong" if x.score >= 0.9 else "medium" if x.score >= cut else "weak")
    assert {(x.a, x.b) for x in p.pairs("medium")} == {(x.a, x.b) for x in p.pairs() if x.score >= cut}


def test_the_medium_tier_follows_the_recent_duplicates(home: Path, db_url: str, cli) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(ADAPTIVE)
    first, second = copies(0, 40, 1), copies(40, 40, 2)
    with Platform.open(home, db_url) as p:
        report = p.ingest(first)
        scores = [x.score for x in p.pairs() if x.kind == "text-reuse" and x.score >= 0.7]
        assert len(scores) >= 20
        cut = expected_cutoff(scores)
        assert 0.7 < cut < 0.8  # (these copies spread wide: under the fixed 0.8)
        assert set(report.adapted) == {"text-reuse"} and abs(report.adapted["text-reuse"] - cut) < 1e-9
        assert "medium tier adapted: text-reuse" in report.summary()
        # The tiers follow at once: medium from the cut-off, strong where it was.
        assert_tiers(p, cut)
        assert any(cut <= x.score < 0.8 for x in p.pairs())
        # Not due again before another 80 items.
        assert p.ingest(second[:20]).adapted == {}
    with Platform.open(home, db_url) as p:  # (another process: the cut-off is the store's)
        assert_tiers(p, cut)
        later = p.ingest(second[20:])
        assert set(later.adapted) == {"text-reuse"}
    rc, out, _ = cli("thresholds", "--format", "json")
    history = json.loads(out)
    assert rc == 0 and [h["kind"] for h in history] == ["text-reuse", "text-reuse"]
    assert abs(history[0]["cutoff"] - cut) < 1e-4 and history[0]["pairs"] == len(scores)
    assert history[1]["through_item"] > history[0]["through_item"]


def test_the_cutoff_stays_between_the_floor_and_the_strong_tier(home: Path, db_url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(ADAPTIVE.replace("adaptive_sigmas = 3", "adaptive_sigmas = 50"))
    with Platform.open(home, db_url) as p:
        assert p.ingest(copies(0, 40, 1)).adapted == {"text-reuse": 0.7}  # (tier_weak is over the 0.6 floor)


def test_fixed_thresholds_record_nothing(home: Path, db_url: str) -> None:
    with Platform.open(home, db_url) as p:
        report = p.ingest(copies(0, 60, 1))
        assert report.adapted == {} and p.thresholds() == []
        assert {(x.a, x.b) for x in p.pairs("medium")} == {(x.a, x.b) for x in p.pairs() if x.score >= 0.8}


def test_a_stream_decides_under_the_cutoff_in_force(home: Path, db_url: str) -> None:
    """The decisions of the records after the first `adaptive_every` say the tier of the
    cut-off computed from those before them."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(ADAPTIVE + "stream_batch = 20\n")
    records = copies(0, 40, 1) + copies(40, 40, 2)
    proc = subprocess.run([sys.executable, "-m", "mmdedup", "--home", str(home), "--db", db_url, "ingest", "-"],
                          input="".join(json.dumps(r) + "\n" for r in records), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    said = [json.loads(line) for line in proc.stdout.splitlines()]
    with Platform.open(home, db_url) as p:
        first = p.thresholds()[0]
    assert first["through_item"] == 80
    later = [d for d in said[80:] if d["status"] == "near-duplicate"]
    cut = first["cutoff"]
    assert later and all(d["tier"] == ("strong" if d["score"] >= 0.9 else "medium" if d["score"] >= cut else "weak")
                         for d in later)
    assert any(cut <= d["score"] < 0.8 for d in later)
