"""Decision words: the built-in polarity lexicon from the first ingest, and learned
decisive words that move a score by degrees without vetoing texts that lack them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmdedup import Platform
from mmdedup.extract.hashing import hash_strings
from mmdedup.extract.polarity import NO_LEARNED, DecisionSpots, decision_share, lexicon
from mmdedup.extract.tokens import tokenize

from conftest import write_manifest

ZH = ("市生态环境局关于华兴建材有限公司水泥粉磨站扩建项目环境影响报告书的批复。你单位报送的申请收悉。"
      "项目选址位于城东新区，总投资约八千万元。经研究，{d}你单位扩建项目。请严格落实污染防治措施，"
      "自收到本批复之日起三十日内办理相关手续。")
EN = ("Ashford Borough Council. Notice of decision on the application for a two-storey rear extension at "
      "12 Mill Lane. Objections were received from nine neighbouring residents. The application {d} "
      "subject to the conditions in the schedule. Works must begin within three years of this notice.")
REPOST = "发布时间：2024年3月5日 来源：晚报 浏览次数：812\n{body}\n（责任编辑：王芳）"


def spots(text: str) -> DecisionSpots:
    return DecisionSpots.of(hash_strings(tokenize(text)), lexicon())


@pytest.mark.parametrize("a, b, flips", [
    (ZH.format(d="给予批准"), ZH.format(d="不予批准"), True),
    (ZH.format(d="同意"), ZH.format(d="不同意"), True),
    (ZH.format(d="给予批准"), ZH.format(d="准予批准"), False),  # same polarity
    (ZH.format(d="不予批准"), ZH.format(d="予以驳回"), False),
    (EN.format(d="shall be granted"), EN.format(d="shall not be granted"), True),
    (EN.format(d="is approved"), EN.format(d="is rejected"), True),
    (EN.format(d="is approved"), EN.format(d="is granted"), False),
    (EN.format(d="is not refused"), EN.format(d="is approved"), False),  # double negation
])
def test_opposite_polarity_at_one_spot_is_a_change_and_a_synonym_is_not(a: str, b: str, flips: bool) -> None:
    assert decision_share(spots(a), spots(b), 0.5, NO_LEARNED) == (0.5 if flips else 0.0)


def test_a_text_lacking_a_negation_elsewhere_is_not_a_change() -> None:
    """A repost cut short loses its later sentences, negators included: the frames of
    those sentences are gone too, so nothing is compared there."""
    full = ZH.format(d="给予批准") + "如对本决定不服，不得拒绝检查，可在六十日内申请行政复议。"
    assert decision_share(spots(full), spots(ZH.format(d="给予批准")), 0.5, NO_LEARNED) == 0.0
    shuffled = "。".join(reversed(full.split("。")))
    assert decision_share(spots(full), spots(shuffled), 0.5, NO_LEARNED) == 0.0


def tiers(p: Platform) -> dict[frozenset, str]:
    return {frozenset((x["a"], x["b"])): x["tier"] for x in p.pairs()}


def test_opposite_decisions_are_below_medium_from_the_first_ingest(platform: Platform, tmp_path: Path) -> None:
    items = [{"id": "zh-yes", "text": ZH.format(d="给予批准")}, {"id": "zh-no", "text": ZH.format(d="不予批准")},
             {"id": "zh-repost", "text": REPOST.format(body=ZH.format(d="准予批准"))},
             {"id": "en-yes", "text": EN.format(d="shall be granted")},
             {"id": "en-no", "text": EN.format(d="shall not be granted")},
             {"id": "en-same", "text": EN.format(d="is approved")}]
    platform.ingest(write_manifest(tmp_path / "c", items))
    found = tiers(platform)
    assert found.get(frozenset(("zh-yes", "zh-no"))) in (None, "weak")
    assert found.get(frozenset(("en-yes", "en-no"))) in (None, "weak")
    assert found[frozenset(("zh-yes", "zh-repost"))] == "strong"  # 准予 for 给予: same polarity
    assert found[frozenset(("en-yes", "en-same"))] in ("strong", "medium")
    # ... and so does a query
    hits = {r["id"]: r["score"] for r in platform.query(ZH.format(d="不予批准"), k=5)}
    assert hits["zh-no"] >= 0.9 and hits.get("zh-yes", 0.0) < 0.8


BODIES = [ZH.replace("华兴建材有限公司水泥粉磨站扩建项目环境影响报告书", name) for name in (
    "东方物流股份有限公司仓储设施建设", "长河水电站取水许可申请", "蓝天幼儿园办学许可申请", "和平社区卫生服务中心执业登记变更")]


def test_labels_on_decision_words_do_not_veto_a_synonym(platform: Platform, tmp_path: Path) -> None:
    """Reviewers reject 给予/不予 pairs until both words are at the ceiling: a faithful
    repost that says 准予批准 for 给予批准 keeps its tier."""
    items = [{"id": f"{i}-{k}", "text": body.format(d=d)}
             for i, body in enumerate(BODIES) for k, d in (("yes", "给予批准"), ("no", "不予批准"))]
    items += [{"id": "orig", "text": ZH.format(d="给予批准")},
              {"id": "repost", "text": REPOST.format(body=ZH.format(d="准予批准"))}]
    platform.ingest(write_manifest(tmp_path / "c", items))
    before = tiers(platform)[frozenset(("orig", "repost"))]
    for i in range(len(BODIES)):
        platform.label(f"{i}-yes", f"{i}-no", duplicate=False, reviewer="r")
    report = platform.retrain()
    assert "给予 1.00->20.00" in report.summary()
    assert tiers(platform)[frozenset(("orig", "repost"))] == before == "strong"


def test_learned_words_move_a_score_by_degrees(platform: Platform, tmp_path: Path) -> None:
    """A house decision no lexicon holds (grade A / grade C): one label moves an unseen
    pair a little, three take it below medium, and none takes its whole score."""
    house = ("评为甲级", "评为丙级")
    items = [{"id": f"{i}-{k}", "text": body.format(d=d)}
             for i, body in enumerate(BODIES) for k, d in zip(("yes", "no"), house)]
    items += [{"id": "u-yes", "text": ZH.format(d=house[0])}, {"id": "u-no", "text": ZH.format(d=house[1])}]
    platform.ingest(write_manifest(tmp_path / "c", items))

    def score() -> float:  # (a query scores every candidate, stored pairs stop at pair_floor)
        return {r["id"]: r["score"] for r in platform.query(ZH.format(d=house[1]), k=20)}.get("u-yes", 0.0)

    scores = [score()]
    for i in range(3):
        platform.label(f"{i}-yes", f"{i}-no", duplicate=False, reviewer="r")
        platform.retrain()
        scores.append(score())
    assert scores[0] >= 0.9
    assert scores[0] > scores[1] > scores[3]
    assert scores[1] >= 0.8 > scores[3] > 0.2, scores
