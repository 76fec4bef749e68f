"""A signal defined only here (the ratio of two texts' lengths) flows through ingest,
pairs, fusion, queries, the CLI and the report with no edit outside this file: the signal
contract (signals/base.py) and the registry are the only places a signal plugs into."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np
import pytest

from mmdedup import Platform
from mmdedup.config import SignalSettings
from mmdedup.input.items import LoadedItem
from mmdedup.signals import registry
from mmdedup.signals.base import Signal


class LengthIndex:
    """Stored lengths in a sorted array: candidates are items whose length is within the
    ratio, found by binary search."""

    def __init__(self, pks: np.ndarray | None = None, lengths: np.ndarray | None = None) -> None:
        self.pks = np.zeros(0, np.int64) if pks is None else pks
        self.lengths = np.zeros(0, np.float64) if lengths is None else lengths

    def save(self, folder: Path, prefix: str, on_disk: dict[str, Any] | None) -> dict[str, Any]:
        """The whole index in a file of a name of its own, each time; the manifest names it."""
        name = f"{prefix}.{time.time_ns()}.npz"
        with open(folder / name, "wb") as fh:
            np.savez(fh, pks=self.pks, lengths=self.lengths)
        return {"file": name}

    @classmethod
    def load(cls, folder: Path, manifest: dict[str, Any]) -> LengthIndex:
        with np.load(folder / manifest["file"]) as data:
            return cls(data["pks"], data["lengths"])


@dataclass(frozen=True)
class LengthSettings(SignalSettings):
    weight: float = 0.4
    calibration: tuple = ((0.0, 0.0), (0.9, 0.5), (1.0, 1.0))
    min_ratio: float = 0.95


class LengthRatio(Signal):
    """min(len a, len b) / max(len a, len b) of the two items' texts."""

    name = "length_ratio"
    settings_type = LengthSettings
    medium = "length"
    kind = "length-reuse"
    index_parts: ClassVar = {"lengths": LengthIndex.load}
    query_figures = ("ratio",)

    def version(self) -> str:
        return "len1"

    def extract(self, items: Sequence[LoadedItem]) -> list[float | None]:
        return [float(len(li.signal_text)) if li.signal_text.strip() else None for li in items]

    def pack(self, value: float) -> bytes:
        return np.float64(value).tobytes()

    def unpack(self, blob: bytes) -> float:
        return float(np.frombuffer(blob, np.float64)[0])

    def new_index(self) -> LengthIndex:
        return LengthIndex()

    def index_add(self, index: LengthIndex, pks: np.ndarray, values: list[float]) -> None:
        order = np.argsort(np.concatenate([index.lengths, values]), kind="stable")
        index.pks = np.concatenate([index.pks, pks])[order]
        index.lengths = np.concatenate([index.lengths, values])[order]

    def index_remove(self, index: LengthIndex, pks: np.ndarray) -> None:
        keep = ~np.isin(index.pks, pks)
        index.pks, index.lengths = index.pks[keep], index.lengths[keep]

    def search(self, index: LengthIndex, values: list[float]) -> tuple[np.ndarray, np.ndarray]:
        lo = np.searchsorted(index.lengths, np.asarray(values) * self.config.min_ratio)
        hi = np.searchsorted(index.lengths, np.asarray(values) / self.config.min_ratio, side="right")
        rows = np.repeat(np.arange(len(values)), hi - lo)
        found = np.concatenate([index.pks[a:b] for a, b in zip(lo, hi)]) if len(values) else []
        return rows.astype(np.int64), np.asarray(found, np.int64)

    def similarity(self, a: list[float], b: list[float]) -> tuple[np.ndarray, dict[str, Any]]:
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        ratio = np.minimum(a, b) / np.maximum(a, b)
        return ratio, {"ratio": ratio}


@pytest.fixture
def length_signal():
    registry.register(LengthRatio)
    yield LengthRatio
    registry.unregister(LengthRatio.name)


TEXT = "The harbour authority opened the new ferry terminal on Monday morning. " * 3
# Another text, 97% as long: length ratio 0.97, calibrated to 0.85 (the medium tier).
OTHER = ("A committee of the city council reviewed the annual budget plan today. " * 3)[:207]


def test_an_extra_signal_flows_through_ingest_pairs_fusion_query_and_report(length_signal, home, db_url,
                                                                             cli, tmp_path):
    # Its settings are read like any signal's, from its own table.
    (home / "config.toml").write_text("[signals.length_ratio]\nweight = 0.6\n")
    items = [{"id": "a", "text": TEXT}, {"id": "b", "text": OTHER},
             {"id": "short", "text": "A much shorter text about something else."}]
    with Platform.open(home, db_url) as p:
        assert p.signal("length_ratio").config.weight == 0.6
        report = p.ingest(items)
        assert report.new == 3
        pairs = {(x.a, x.b): x for x in p.pairs("weak")}
        # Two unrelated texts of nearly one length: the extra signal alone found them, and
        # fusion made it their score and kind (it is a content signal).
        pair = pairs[("a", "b")]
        assert pair.signals["length_ratio"] == pytest.approx(0.859, abs=1e-3)
        assert pair.signals["text"] < 0.7
        assert pair.score == pair.signals["length_ratio"]
        assert pair.kind == "length-reuse" and pair.tier == "medium"
        assert pair.as_dict()["details"]["length_ratio"] == {"ratio": pytest.approx(0.9718, abs=1e-4)}
        assert not any("short" in key for key in pairs)

        # A query scores stored items with it, fused with the others.
        found = {m.id: m for m in p.query(OTHER.upper(), k=5)}
        assert found["b"].signals["length_ratio"] == 1.0
        assert found["b"].details["ratio"] == 1.0
        assert found["b"].score == 1.0
        assert found["a"].signals["length_ratio"] == pytest.approx(0.859, abs=1e-3)

        # The report's review queue shows the medium pair with the signal's score.
        out = tmp_path / "report.html"
        p.report(out)
        html = out.read_text(encoding="utf-8")
        assert "<tr><td>length_ratio</td><td>0.859</td><td class=\"muted\">ratio 0.9718</td></tr>" in html

    # The CLI's pairs lines carry it (a signal not listed as a column appears where present).
    rc, out, _ = cli("pairs", "--format", "jsonl")
    lines = [json.loads(x) for x in out.splitlines()]
    assert {"a": "a", "b": "b"}.items() <= lines[0].items()
    assert lines[0]["signals"]["length_ratio"] == pytest.approx(0.859, abs=1e-3)

    # A rerun opens its index from the saved files (the stamp agrees with the store).
    stamp = json.loads((home / "index" / "length_ratio-index.json").read_text())
    assert (home / "index" / stamp["parts"]["lengths"]["file"]).is_file()
    with Platform.open(home, db_url) as p:
        assert p.ingest(items).unchanged == 3
        assert {(x.a, x.b) for x in p.pairs("weak")} == set(pairs)


def test_unknown_signal_settings_are_refused(tmp_path):
    (tmp_path / "config.toml").write_text("[signals.image]\nradiu = 3\n")
    with pytest.raises(ValueError, match=r"\[signals.image\] has unknown key\(s\) radiu"):
        Platform.open(tmp_path)
    (tmp_path / "config.toml").write_text("[signals.nosuch]\nweight = 3\n")
    with pytest.raises(ValueError, match="unknown signal"):
        Platform.open(tmp_path)


def test_old_flat_keys_are_read_with_a_deprecation_message(tmp_path, caplog):
    (tmp_path / "config.toml").write_text("image_radius = 8\nfusion_weights = {text = 0.7}\n")
    with caplog.at_level("WARNING", logger="mmdedup"), Platform.open(tmp_path) as p:
        assert p.signal("image").config.radius == 8
        assert p.signal("text").config.weight == 0.7
    assert "`image_radius` is deprecated: write it as `radius` under [signals.image]" in caplog.text


def test_signal_settings_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MMDEDUP_TEXT_SIMHASH_RADIUS", "5")
    with Platform.open(tmp_path) as p:
        assert p.signal("text").config.simhash_radius == 5
