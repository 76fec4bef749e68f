"""The review loop's learning: word weights from labels, retrain, rollback, the job lock."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from mmdedup import Platform
from mmdedup.config import Settings
from mmdedup.learn import weights
from mmdedup.store.locks import LockBusy, job_lock

from conftest import write_manifest

SETTINGS = Settings()

BODIES = [
    "市生态环境局关于华兴建材有限公司水泥粉磨站扩建项目环境影响报告书的批复。经研究，{d}你单位扩建项目。"
    "项目选址位于城东新区，总投资约八千万元，请严格落实污染防治措施。",
    "市交通运输局关于东方物流股份有限公司仓储设施建设的批复。经研究，{d}你单位仓储设施建设。"
    "项目用地面积两万平方米，请按规定办理施工许可手续。",
    "市水务局关于长河水电站取水许可申请的批复。经研究，{d}你单位取水许可申请。"
    "取水量每年三百万立方米，取水口位于江北开发区。",
    "市教育局关于蓝天幼儿园办学许可申请的批复。经研究，{d}你单位办学许可申请。"
    "园舍面积两千平方米，设班级九个，请做好安全管理工作。",
    "市卫生健康委员会关于和平社区卫生服务中心执业登记变更的批复。经研究，{d}你单位执业登记变更。"
    "变更后床位二十张，请按规定公示。",
    "市住房和城乡建设局关于金桥房地产开发有限公司预售许可的批复。经研究，{d}你单位预售许可申请。"
    "预售房屋共三百套，请在售楼处公示许可内容。",
]
UNSEEN = [
    "市文化广电旅游局关于星光文化传媒有限公司户外演出申请的批复。经研究，{d}你单位户外演出申请。"
    "演出地点位于滨江公园，观众不超过五千人。",
    "市市场监督管理局关于青山食品有限公司生产许可延续的批复。经研究，{d}你单位生产许可延续申请。"
    "生产车间位于河西工业园，请加强食品安全管理。",
]
REPOSTS = [
    ("发布时间：2024年3月5日 来源：晚报 责任编辑：王芳", "发布时间：2024年6月18日 来源：新华网 责任编辑：李娜"),
    ("发布时间：2023年1月9日 来源：人民网 责任编辑：张伟", "发布时间：2023年11月2日 来源：晚报 责任编辑：王芳"),
]


# A house decision no built-in lexicon holds (grade A / grade C): only labels teach it.
YES, NO = "评为甲级", "评为丙级"


def notice_items() -> tuple[list[dict], list[tuple[str, str]], list[tuple[str, str]]]:
    """Items, train pairs (decisive words), unseen pairs with the same decisive words."""
    items, train, unseen = [], [], []
    for group, bodies in ((train, BODIES), (unseen, UNSEEN)):
        for i, body in enumerate(bodies):
            a, b = f"{len(items)}-yes", f"{len(items)}-no"
            items += [{"id": a, "text": body.format(d=YES)}, {"id": b, "text": body.format(d=NO)}]
            group.append((a, b))
    return items, train, unseen


def tiers(p: Platform, pairs: list[tuple[str, str]]) -> list[str | None]:
    found = {(x["a"], x["b"]): x["tier"] for x in p.pairs()}
    return [found.get(pair) for pair in pairs]


# --- word weights ----------------------------------------------------------------------


def test_distinct_labels_raise_the_words_that_differ_and_duplicates_lower_theirs() -> None:
    pairs = [(BODIES[i].format(d="给予批准"), BODIES[i].format(d="不予批准"), False) for i in range(4)]
    pairs += [(f"{x}。{BODIES[0].format(d='给予批准')}", f"{y}。{BODIES[0].format(d='给予批准')}", True)
              for x, y in REPOSTS]
    learned = weights.learn(pairs, SETTINGS).as_dict()
    assert learned["给予"] == learned["不予"] == SETTINGS.word_weight_max  # bounded
    assert learned["王芳"] < 1 and learned["晚报"] < 1 and learned["18"] < 1
    assert "批准" not in learned  # shared by every pair, moved too little to keep
    # a word that both separates and changes between duplicates is pulled both ways
    both = weights.learn(pairs + [("a 晚报 b", "a 晚报 晚报 b", False)] * 2, SETTINGS).as_dict()
    assert both.get("晚报", 1.0) > learned["晚报"]


def test_counts_matter_and_many_differing_words_spread_one_label() -> None:
    learned = weights.learn([("the order must not be appealed and shall be granted",
                              "the order must not be appealed and shall not be granted", False)], SETTINGS)
    assert learned.as_dict()["not"] > 2  # "not" occurs once more: that is the difference
    far = weights.learn([("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu",
                          "nu xi omicron pi rho sigma tau upsilon phi chi psi omega", False)], SETTINGS)
    assert max(far.as_dict().values()) < 2  # 24 differing words share one label


def test_no_labels_no_weights_and_versions_are_stable() -> None:
    assert weights.learn([], SETTINGS) is weights.UNIT
    pairs = [(BODIES[0].format(d="给予批准"), BODIES[0].format(d="不予批准"), False)]
    assert weights.learn(pairs, SETTINGS).version == weights.learn(list(pairs), SETTINGS).version


# --- retrain, rollback, lock -------------------------------------------------------------


@pytest.fixture
def labelled(platform: Platform, tmp_path: Path) -> tuple[Platform, list, list]:
    items, train, unseen = notice_items()
    platform.ingest(write_manifest(tmp_path / "c", items))
    for a, b in train:
        platform.label(a, b, duplicate=False, reviewer="r1")
    return platform, train, unseen


def test_retrain_sends_unseen_decisive_pairs_below_medium_and_is_idempotent(labelled) -> None:
    p, train, unseen = labelled
    assert set(tiers(p, unseen)) <= {"strong", "medium"}  # the classic mistake
    report = p.retrain()
    assert report.versions["words"][0] != report.versions["words"][1] and report.resigned
    assert all(t is None or t == "weak" for t in tiers(p, unseen + train))
    assert report.tier_changes[("strong", "none")] + report.tier_changes[("medium", "none")] >= 2
    assert "甲级 1.00->20.00" in report.summary() and "丙级 1.00->20.00" in report.summary()
    again = p.retrain()
    assert not again.changed and not again.resigned and again.rescored_pairs == 0
    assert "nothing changed" in again.summary()


def test_the_summary_agrees_with_itself(labelled) -> None:
    """Its label counts are the decisions in force, every pair whose tier moved was
    re-scored, and a rollback does not claim there are no labels."""
    p, train, _ = labelled
    report = p.retrain()
    moved = sum(n for (a, b), n in report.tier_changes.items() if a != b)
    assert moved and report.rescored_pairs >= moved
    assert f"labels in force: distinct {len(train)}" in report.summary()
    assert f"pairs re-scored: {report.rescored_pairs}" in report.summary()
    back = p.retrain(rollback=True)
    assert "labels in force" not in back.summary() and back.rescored_pairs >= moved


def test_query_applies_decisive_words_too(labelled) -> None:
    p, train, unseen = labelled
    text = UNSEEN[0].format(d=NO)
    yes_id = unseen[0][0]
    assert any(r["id"] == yes_id and r["score"] >= 0.8 for r in p.query(text, k=5))
    p.retrain()
    assert not any(r["id"] == yes_id and r["score"] >= 0.7 for r in p.query(text, k=5))


def test_rollback_restores_the_previous_scores(labelled, home: Path, db_url: str) -> None:
    p, _, _ = labelled
    before = p.pairs()
    p.retrain()
    assert p.pairs() != before
    report = p.retrain(rollback=True)
    assert report.rolled_back and report.resigned
    assert p.pairs() == before
    with Platform.open(home, db_url) as fresh:  # what a new process sees
        assert fresh.signal("text").signer.words is weights.UNIT or not fresh.signal("text").signer.words.words
        assert fresh.pairs() == before
    with pytest.raises(LookupError):
        p.retrain(rollback=True)


def test_labels_and_models_survive_reopening(labelled, home: Path, db_url: str) -> None:
    p, train, unseen = labelled
    p.retrain()
    after = p.pairs()
    with Platform.open(home, db_url) as fresh:
        assert fresh.pairs() == after
        assert fresh.signal("text").signer.version == p.signal("text").signer.version
        assert fresh.stats()["labels"] == {"distinct": len(train)}


def test_a_second_retrain_exits_with_a_clear_message_or_waits(labelled, cli) -> None:
    p, _, _ = labelled
    engine = p.sessions.kw["bind"]
    with job_lock(engine, "retrain"):
        with pytest.raises(LockBusy, match=f"another retrain is running \\(.*{os.getpid()}"):
            p.retrain()
        rc, out, err = cli("retrain")
        assert rc == 3 and "another retrain is running" in err and out == ""
    # a waiting run goes ahead once the holder lets go
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with job_lock(engine, "retrain"):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        threading.Timer(0.5, release.set).start()
        assert p.retrain(wait_seconds=30).changed
    finally:
        release.set()
        holder.join()


def test_concurrent_retrains_never_both_run(platform: Platform) -> None:
    """Many takers at once: the database lets exactly one hold the lock at a time."""
    holders: list[str] = []
    overlap: list[bool] = []
    active = threading.Lock()

    def take(name: str) -> None:
        try:
            with job_lock(platform.sessions.kw["bind"], "retrain", wait_seconds=20, poll=0.05):
                if not active.acquire(blocking=False):
                    overlap.append(True)
                    return
                holders.append(name)
                threading.Event().wait(0.1)
                active.release()
        except LockBusy:
            pass

    threads = [threading.Thread(target=take, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlap and sorted(holders) == ["t0", "t1", "t2", "t3"]


def test_the_scheduled_job_logs_one_json_line_and_reports_a_busy_lock(
        labelled, home: Path, db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import retrain_job

    p, _, _ = labelled
    assert retrain_job.main(["--home", str(home), "--db", db_url]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "done" and record["resigned"] and record["changed"]
    assert record["versions"]["words"]["before"] == "default"
    assert {"from": "strong", "to": "none"} in [{k: c[k] for k in ("from", "to")}
                                                for c in record["tier_changes"]]
    with job_lock(p.sessions.kw["bind"], "retrain"):
        assert retrain_job.main(["--home", str(home), "--db", db_url, "--wait", "0"]) == 3
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "busy" and f":{os.getpid()} since" in record["error"]


def test_a_long_lived_process_follows_a_retrain_made_elsewhere(labelled, home: Path, db_url: str,
                                                                tmp_path: Path) -> None:
    p, _, unseen = labelled
    stale_version = p.signal("text").signer.version
    with Platform.open(home, db_url) as elsewhere:
        elsewhere.retrain()
        fresh_version = elsewhere.signal("text").signer.version
    assert fresh_version != stale_version
    text = UNSEEN[1].format(d=NO)
    p.ingest(write_manifest(tmp_path / "later", [{"id": "late", "text": text}]))
    assert p.signal("text").signer.version == fresh_version
    assert not any({x["a"], x["b"]} == {"late", unseen[1][0]} for x in p.pairs())


def test_a_platform_kept_open_queries_under_a_retrain_made_elsewhere(labelled, home: Path, db_url: str) -> None:
    """A query server keeps its platform open: its answers follow the models another
    process made active, as a platform opened afterwards would."""
    p, _, unseen = labelled
    text = UNSEEN[0].format(d=NO)
    yes_id = unseen[0][0]
    assert any(r["id"] == yes_id and r["score"] >= 0.8 for r in p.query(text, k=5))
    with Platform.open(home, db_url) as elsewhere:
        elsewhere.retrain()
        fresh = [m.as_dict() for m in elsewhere.query(text, k=5)]
    assert [m.as_dict() for m in p.query(text, k=5)] == fresh
    assert not any(r["id"] == yes_id and r["score"] >= 0.7 for r in fresh)
