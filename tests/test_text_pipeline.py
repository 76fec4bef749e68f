"""Text near-duplicates through the API: pairs, tiers, queries, TF-IDF refresh, versions."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from mmdedup import Platform
from mmdedup.store.schema import ModelVersion
from mmdedup.store.signatures import versions_stored
KIND = "text"  # the text signal's signatures

from helpers import pair_map, sign_as

NEWS = [
    "The city council approved the new budget on Tuesday after a long debate.",
    "Funding for public libraries and parks rises by ten percent next year.",
    "Opposition members criticised the cuts to road maintenance and street lighting.",
    "The mayor said the plan balances growth with the needs of older residents.",
    "A final vote on the transport levy is expected before the end of the month.",
]
OTHER = [
    "The regional football final ended in a draw after extra time on Saturday evening.",
    "Fans travelled from across the country to watch the match at the national stadium.",
    "Both coaches praised the defence and said the replay would be decided on penalties.",
]
ZH = ("国务院办公厅发布通知，要求各地加强夏季防汛工作。通知指出，今年汛期降雨偏多，"
      "各地要落实责任，做好人员转移和物资储备。水利部门将加强对重点水库的巡查。")


def test_shuffled_paragraphs_edited_words_and_new_date_line_are_near_duplicates(platform: Platform) -> None:
    shuffled = NEWS[:]
    random.Random(3).shuffle(shuffled)
    platform.ingest([
        {"id": "orig", "text": "\n\n".join(NEWS)},
        {"id": "shuffled", "text": "\n\n".join(shuffled)},
        {"id": "dated", "text": "Published 12 May 2024, 08:15.\n\n" + "\n\n".join(NEWS)},
        {"id": "edited", "text": "\n\n".join(NEWS).replace("Tuesday", "Wednesday").replace("ten", "twelve")},
        {"id": "sport", "text": "\n\n".join(OTHER)},
    ])
    pairs = pair_map(platform)
    for other in ("shuffled", "dated", "edited"):
        pair = pairs[tuple(sorted(("orig", other)))]
        assert pair["tier"] in ("strong", "medium"), pair
        assert pair["kind"] == "text-reuse"
    assert pairs[("orig", "shuffled")]["score"] >= 0.9  # same bag of words
    assert not any("sport" in key for key in pairs)


def test_same_topic_different_text_is_not_a_pair(platform: Platform) -> None:
    platform.ingest([
        {"id": "a", "text": "The city council approved the budget, raising library funding and park spending."},
        {"id": "b", "text": "Council members rejected a proposal to close two libraries and sell a park."},
    ])
    assert platform.pairs("weak") == []


def test_short_chinese_and_mixed_texts(platform: Platform) -> None:
    platform.ingest([
        {"id": "zh", "text": ZH},
        {"id": "zh-edit", "text": ZH.replace("夏季", "汛期").replace("物资储备", "物资准备")},
        {"id": "short", "text": "市教育局推行课后服务"},
        {"id": "short-2", "text": "市教育局全面推行课后服务"},
        {"id": "mixed", "text": "Apple 发布了新款 iPhone 15 手机，售价 5999 元起，9 月 22 日正式开售。"},
        {"id": "mixed-2", "text": "Apple发布新款iPhone 15手机，售价5999元起，9月22日开售。"},
    ])
    pairs = pair_map(platform)
    assert ("zh", "zh-edit") in pairs
    assert ("short", "short-2") in pairs
    assert ("mixed", "mixed-2") in pairs
    assert ("mixed", "zh") not in pairs


def test_query_finds_nearest_without_ingesting(platform: Platform) -> None:
    platform.ingest([{"id": "orig", "text": "\n".join(NEWS)}, {"id": "sport", "text": "\n".join(OTHER)}])
    before = platform.stats()["items"]
    results = platform.query(" ".join(NEWS[:4]) + " Reported by our city desk.", k=5)
    assert results[0]["id"] == "orig" and results[0]["score"] >= 0.7
    assert all(r["id"] != "sport" for r in results)
    exact = platform.query("\n".join(NEWS).upper())
    assert exact[0] == {"id": "orig", "score": 1.0, "signals": {"text": 1.0}, "details": {}}
    assert platform.stats()["items"] == before
    with pytest.raises(ValueError):
        platform.query("   ")


def test_cli_query(cli, tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "orig", "text": "\n".join(NEWS)}) + "\n")
    cli("ingest", str(manifest))
    rc, out, _ = cli("query", "--text", " ".join(NEWS[1:]), "--k", "3", "--format", "json")
    assert rc == 0
    assert json.loads(out)[0]["id"] == "orig"


def zipf_corpus(n: int, template: str, seed: int = 0) -> list[dict[str, str]]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}x" for i in range(3000)]
    p = 1 / np.arange(1, 3001) ** 0.8
    p /= p.sum()
    docs = []
    for i in range(n):
        body = " ".join(vocab[j] for j in rng.choice(3000, 150, p=p))
        docs.append({"id": f"d{i}", "text": f"{template} {body} {template}"})
    return docs


def test_tfidf_refresh_gives_template_words_no_weight(home: Path, db_url: str) -> None:
    (home / "config.toml").write_text("tfidf_min_docs = 40\ningest_chunk = 25\n")
    template = "home news sport weather contact us privacy policy subscribe login " * 8
    with Platform.open(home, db_url) as platform:
        docs = zipf_corpus(60, template)
        docs.append({"id": "copy", "text": docs[0]["text"].replace("w1x", "w2x", 2)})
        platform.ingest(docs)
        assert platform.signal("text").refreshes >= 1
        with platform.sessions() as session:
            active = session.scalar(select(ModelVersion).where(ModelVersion.kind == "tfidf",
                                                               ModelVersion.active.is_(True)))
            versions = {v for _, v in versions_stored(session, KIND)}
        assert active is not None and active.params["n_docs"] >= 40
        assert versions == {platform.signal("text").signer.version}
        weights = platform.signal("text").signer.term_weights(
            __import__("mmdedup.extract.hashing", fromlist=["hash_strings"]).hash_strings(["privacy", "subscribe"]))
        assert np.all(weights == 0)
        pairs = pair_map(platform)
        assert set(pairs) == {("copy", "d0")}


def test_signatures_of_another_version_are_never_compared(home: Path, db_url: str) -> None:
    """A query in a new process finds signatures another release made, signs them again
    first (tests/test_upgrade.py), and compares only signatures of its own version."""
    with Platform.open(home, db_url) as platform:
        platform.ingest([{"id": "orig", "text": "\n".join(NEWS)}])
        fresh = platform.query(" ".join(NEWS[1:]))
        with platform.sessions.begin() as session:
            sign_as(session, KIND, "other")
    with Platform.open(home, db_url) as platform:
        assert platform.query(" ".join(NEWS[1:])) == fresh
        with platform.sessions() as session:
            assert {v for _, v in versions_stored(session, KIND)} == {platform.signal("text").signer.version}


def test_index_is_rebuilt_when_files_disagree_with_the_store(home: Path, db_url: str) -> None:
    with Platform.open(home, db_url) as platform:
        platform.ingest([{"id": "orig", "text": "\n".join(NEWS)}])
    meta = home / "index" / "text-index.json"
    assert meta.exists()
    (home / "index" / "text-simhash.npz").write_bytes(b"garbage")
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "count": 99}))
    with Platform.open(home, db_url) as platform:
        assert platform.query(" ".join(NEWS[1:]))[0]["id"] == "orig"


def test_texts_without_words_ingest_and_pair_with_nothing(platform: Platform) -> None:
    report = platform.ingest([
        {"id": "punct", "text": "!!! ... ，。？"},
        {"id": "stop", "text": "the of and to a in 的 了 是"},
        {"id": "stop-2", "text": "a the of to and in 的 是 了"},
        {"id": "real", "text": "\n".join(NEWS)},
    ])
    assert (report.new, report.failed) == (4, 0)
    assert [p for p in platform.pairs("weak") if p["kind"] == "text-reuse"] == []


def test_a_chunk_ending_in_a_text_without_words_ingests(platform: Platform) -> None:
    # The last document of a signed batch empty, after ones with words.
    report = platform.ingest([{"id": "real", "text": "\n".join(NEWS)},
                              {"id": "stop", "text": "the of and to a in 的 了 是"}])
    assert (report.new, report.failed) == (2, 0)


def test_pairs_explain_the_text_signal(platform: Platform) -> None:
    platform.ingest([{"id": "a", "text": "\n".join(NEWS)},
                     {"id": "b", "text": "\n".join(NEWS[:4])}])
    (pair,) = platform.pairs("weak")
    text = pair["details"]["text"]
    assert set(text) == {"wjaccard", "jaccard", "simhash_bits"}
    assert 0 < text["wjaccard"] <= 1 and 0 <= text["simhash_bits"] <= 64


def test_query_filters_on_meta_and_time(platform: Platform, cli, tmp_path: Path) -> None:
    from datetime import datetime, timedelta, timezone

    platform.ingest([{"id": "gov", "text": "\n".join(NEWS), "meta": {"source": "gov"}},
                     {"id": "blog", "text": "\n".join(NEWS[::-1]), "meta": {"source": "blog"}}])
    probe = " ".join(NEWS)
    assert {r["id"] for r in platform.query(probe)} == {"gov", "blog"}
    assert [r["id"] for r in platform.query(probe, meta={"source": "blog"})] == ["blog"]
    now = datetime.now(timezone.utc)
    assert platform.query(probe, since=now + timedelta(hours=1)) == []
    assert len(platform.query(probe, until=now + timedelta(hours=1))) == 2
    rc, out, _ = cli("query", "--text", probe, "--meta", "source=gov", "--format", "json")
    assert rc == 0 and [r["id"] for r in json.loads(out)] == ["gov"]


def test_texts_signed_by_an_earlier_version_are_signed_again_before_an_ingest(home: Path, db_url: str) -> None:
    """After an upgrade that changes the signer's version, the stored texts are signed again
    when the next ingest starts, so a new copy still pairs with an old item."""
    with Platform.open(home, db_url) as p:
        p.ingest([{"id": "old", "text": " ".join(NEWS)}])
        with p.sessions.begin() as session:
            sign_as(session, KIND, "an-older-release")
    with Platform.open(home, db_url) as p:
        p.ingest([{"id": "new", "text": " ".join(NEWS[:4]) + " Published on 2 May."}])
        with p.sessions() as session:
            versions = {v for _, v in versions_stored(session, KIND)}
        assert versions == {p.signal("text").signer.version}
        assert ("new", "old") in pair_map(p)
