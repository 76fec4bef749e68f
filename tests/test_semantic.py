"""The semantic signal through ingest with the offline MiniLM model: embeddings stored and
indexed, the signal fused into pairs with its cosine; off where configured off."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from mmdedup import Platform
from mmdedup.store.schema import Signature

pytest.importorskip("sentence_transformers")

TEXTS = [
    {"id": "a", "text": "The city council rejected the proposal to build a new stadium downtown on Tuesday "
                        "after a long debate about costs and traffic."},
    {"id": "b", "text": "On Tuesday the city council rejected the proposal to build a new downtown stadium "
                        "after a long debate about traffic and costs."},
    {"id": "c", "text": "The football final ended in a draw after extra time on Saturday evening."},
]


def semantic_rows(platform: Platform) -> int:
    with platform.sessions() as session:
        return session.scalar(select(func.count()).select_from(Signature).where(Signature.kind == "semantic"))


def test_semantic_signal_on(home: Path, db_url: str) -> None:
    (home / "config.toml").write_text('semantic = "on"\n')
    with Platform.open(home, db_url) as platform:
        platform.ingest(TEXTS)
        assert platform.signal("semantic").off_reason is None
        assert semantic_rows(platform) == 3
        pairs = {frozenset((p["a"], p["b"])): p for p in platform.pairs("weak")}
    pair = pairs[frozenset(("a", "b"))]
    assert pair["signals"]["semantic"] >= 0.8 and pair["details"]["semantic"]["cosine"] >= 0.9
    assert not any("c" in key for key in pairs)


def test_semantic_signal_off(home: Path, db_url: str) -> None:
    (home / "config.toml").write_text('semantic = "off"\n')
    with Platform.open(home, db_url) as platform:
        platform.ingest(TEXTS)
        assert semantic_rows(platform) == 0
        (pair,) = platform.pairs("weak")
    assert "semantic" not in pair["signals"]
