"""Stored pairs follow the tiers in force: tiers changed in config.toml or MMDEDUP_TIER_*
apply at once to `pairs`, `clusters`, `stats`, the report and the review queue; pairs
scored below the weak tier (down to `pair_floor`) come back when it is lowered, with no
re-ingest; and stores made before tiers were derived migrate, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest
from sqlalchemy import inspect, text

from conftest import write_manifest
from mmdedup import Platform
from mmdedup.config import Settings
from mmdedup.learn.fusion_fit import FusionModel
from mmdedup.learn.retrain import with_fusion
from mmdedup.store.db import downgrade, make_engine, migrate

SENTENCES = [
    "The city council approved the new budget on Tuesday after a long debate.",
    "Funding for public libraries and parks rises by ten percent next year.",
    "Opposition members criticised the cuts to road maintenance and street lighting.",
    "The mayor said the plan balances growth with the needs of older residents.",
    "The regional football final ended in a draw after extra time on Saturday evening.",
    "Fans travelled from across the country to watch the match at the national stadium.",
    "Both coaches praised the defence and said the replay would be decided on penalties.",
    "Ticket prices for the replay will be announced by the league next week.",
    "A powerful storm brought heavy rain and strong winds to the coast overnight.",
    "Several roads were closed after trees fell across them near the harbour.",
    "Power was cut to thousands of homes and engineers worked through the morning.",
    "Forecasters expect calmer weather to return by the weekend.",
]
BASE = " ".join(SENTENCES)
# Copies of one story with more and more words replaced: pairs from nearly equal down to
# well below the defaults' strong tier.
EDITED = (0, 10, 30, 50, 60, 70, 80, 90)
# Tiers an ingest runs under (only near-identical pairs reach them), and the ones a user
# lowers them to afterwards through the environment.
HIGH = {"tier_strong": 0.99, "tier_medium": 0.96, "tier_weak": 0.93}
LOW = {"tier_strong": 0.9, "tier_medium": 0.8, "tier_weak": 0.72}


def edited(k: int) -> str:
    words = BASE.split()
    for j in range(k):
        words[(j * 7919) % len(words)] = f"word{j}"
    return " ".join(words)


def items() -> list[dict]:
    out = [{"id": f"v{k:02d}", "text": edited(k)} for k in EDITED]
    # The same content as v00 (case aside): an exact pair, strong under any tiers.
    out.append({"id": "copy", "text": BASE.upper()})
    return out


def config(home: Path, tiers: dict[str, float]) -> None:
    (home / "config.toml").write_text("".join(f"{k} = {v}\n" for k, v in tiers.items()))


def listed(cli) -> list[dict]:
    rc, out, err = cli("pairs", "--format", "jsonl")
    assert rc == 0, err
    return [json.loads(line) for line in out.splitlines()]


def expected(stored: list[dict], tiers: dict[str, float]) -> list[dict]:
    """The stored pairs as `pairs` lists them under these tiers."""
    settings = Settings(**tiers)
    return [{**p, "tier": settings.tier(p["score"])} for p in stored
            if settings.tier(p["score"]) is not None]


def check_everything_follows(cli, home: Path, db_url: str, stored: list[dict],
                             tiers: dict[str, float]) -> None:
    want = expected(stored, tiers)
    by_tier = Counter(p["tier"] for p in want)
    assert set(by_tier) == {"strong", "medium", "weak"}, by_tier  # every tier is exercised
    assert listed(cli) == want

    rc, out, _ = cli("stats", "--format", "json")
    assert json.loads(out)["pairs"] == dict(by_tier)

    rc, out, _ = cli("clusters", "--format", "jsonl")
    strong = nx.Graph([(p["a"], p["b"]) for p in want if p["tier"] == "strong"])
    groups = sorted(sorted(g) for g in nx.connected_components(strong))  # ids sort as ingested
    assert [sorted(json.loads(line)["members"]) for line in out.splitlines()] == groups

    medium = [(p["a"], p["b"]) for p in want if p["tier"] == "medium"]  # best first already
    with Platform.open(home, db_url) as p:
        assert [(q["a"], q["b"], q["tier"]) for q in p.review_queue("ann")] == \
            [(a, b, "medium") for a, b in medium]
    report = home / "report.html"
    rc, out, _ = cli("report", "--out", str(report))
    assert rc == 0 and f"of {len(medium)} pairs to review" in out
    page = report.read_text(encoding="utf-8")
    for tier, n in by_tier.items():
        assert re.search(rf"tier-{tier}\">{tier}</span> pairs \(score &ge; {tiers['tier_' + tier]:g}\)"
                         rf"</th><td>{n:,}</td>", page), tier


def test_stored_pairs_follow_tiers_changed_in_config_and_environment(
        cli, home: Path, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    floor = Settings().pair_floor
    config(home, HIGH)
    rc, out, err = cli("ingest", str(write_manifest(tmp_path / "c", items())), "--no-progress")
    assert rc == 0, err
    high = listed(cli)
    assert high and all(p["score"] >= HIGH["tier_weak"] for p in high)
    assert any({p["a"], p["b"]} == {"v00", "copy"} and p["tier"] == "strong" for p in high)

    # Down to the floor: every pair stored shows, those scored below the weak tier of the
    # ingest included, without ingesting again.
    config(home, {**HIGH, "tier_weak": floor})
    stored = listed(cli)
    assert [p for p in stored if p["score"] >= HIGH["tier_weak"]] == high
    assert any(p["score"] < HIGH["tier_weak"] for p in stored)
    assert all(p["score"] >= floor for p in stored)

    # Lowered through the environment (over config.toml): pairs, stats, clusters, the
    # review queue and the report all follow at once.
    for key, value in LOW.items():
        monkeypatch.setenv(f"MMDEDUP_{key.upper()}", str(value))
    check_everything_follows(cli, home, db_url, stored, LOW)

    # The same tiers in config.toml.
    for key in LOW:
        monkeypatch.delenv(f"MMDEDUP_{key.upper()}")
    config(home, LOW)
    check_everything_follows(cli, home, db_url, stored, LOW)

    # Raised again: pairs below the new weak tier are hidden, not lost.
    config(home, HIGH)
    assert listed(cli) == high
    config(home, {**HIGH, "tier_weak": floor})
    assert listed(cli) == stored


def test_weak_tier_below_the_floor_is_refused(cli, home: Path, db_url: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    Platform.open(home, db_url).close()  # a store for `stats` to read
    floor = Settings().pair_floor
    config(home, {"tier_weak": floor / 2})
    rc, _, err = cli("stats")
    assert rc == 2 and "tier_weak" in err and "pair_floor" in err
    config(home, {})
    monkeypatch.setenv("MMDEDUP_TIER_WEAK", str(floor / 2))
    rc, _, err = cli("stats")
    assert rc == 2 and "tier_weak" in err and "pair_floor" in err
    # Lowering the floor with it is allowed.
    config(home, {"pair_floor": floor / 2})
    assert cli("stats")[0] == 0


def test_fitted_tiers_stay_within_the_configured_ones() -> None:
    """A fit never moves weak and only raises strong: configured tiers changed after the
    fit still bound the fitted ones."""
    model = FusionModel(weights={}, strong=0.93, medium=0.85, weak=0.7, n_duplicate=20,
                        n_distinct=20, fitted=True, reason="fitted")
    as_fitted = with_fusion(Settings(), model, {})
    assert (as_fitted.tier_strong, as_fitted.tier_medium, as_fitted.tier_weak) == (0.93, 0.85, 0.7)
    lowered = with_fusion(Settings(tier_strong=0.85, tier_medium=0.6, tier_weak=0.55), model, {})
    assert (lowered.tier_strong, lowered.tier_medium, lowered.tier_weak) == (0.93, 0.85, 0.55)
    raised = with_fusion(Settings(tier_strong=0.97, tier_medium=0.95, tier_weak=0.9), model, {})
    assert (raised.tier_strong, raised.tier_medium, raised.tier_weak) == (0.97, 0.9, 0.9)
    unfitted = dataclasses.replace(model, fitted=False)
    assert with_fusion(Settings(tier_weak=0.55), unfitted, {}) == Settings(tier_weak=0.55)


def test_stores_with_stored_tiers_migrate(db_url: str, home: Path) -> None:
    """A store from before tiers were derived: its pairs keep their scores and show the
    tiers in force; downgrading writes the tiers back from the scores."""
    engine = make_engine(db_url)
    try:
        migrate(engine, "0005")
        now = "2024-05-01 08:00:00"
        with engine.begin() as conn:
            for n, key in enumerate(("a", "b", "c", "d")):
                conn.execute(text("INSERT INTO items (pk, id, meta, content_key, fingerprint, status, "
                                  "created_at, updated_at) VALUES (:pk, :id, '{}', :id, :id, 'ok', "
                                  ":now, :now)"), {"pk": n + 1, "id": key, "now": now})
            for a, b, score, tier in ((1, 2, 0.95, "strong"), (1, 3, 0.85, "medium"),
                                      (2, 4, 0.75, "weak")):
                conn.execute(text("INSERT INTO pairs (a_pk, b_pk, score, tier, kind, signals, "
                                  "model_version, updated_at) VALUES (:a, :b, :s, :t, 'text-reuse', "
                                  "'{}', 'old', :now)"), {"a": a, "b": b, "s": score, "t": tier, "now": now})
        (home / "config.toml").write_text("tier_medium = 0.9\n")
        with Platform.open(home, db_url) as p:  # migrates to head
            assert [(x["a"], x["b"], x["tier"]) for x in p.pairs()] == [
                ("a", "b", "strong"), ("a", "c", "weak"), ("b", "d", "weak")]
        columns = {c["name"] for c in inspect(engine).get_columns("pairs")}
        assert "tier" not in columns and "score" in columns
        assert {i["name"]: i["column_names"] for i in inspect(engine).get_indexes("pairs")
                }.get("ix_pairs_score") == ["score"]
        downgrade(engine, "0005")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT a_pk, b_pk, tier FROM pairs ORDER BY a_pk, b_pk")).all() == [
                (1, 2, "strong"), (1, 3, "medium"), (2, 4, "weak")]
    finally:
        engine.dispose()
