"""Deletion: a deleted item leaves no trace in pairs, clusters, indexes or query results,
in this process or in any other; its labels stay, marked, and still teach fusion; index
files saved before stay usable; deleting twice, or as a dry run, changes nothing."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import func, select

from helpers import pair_map
from mmdedup import Platform
from mmdedup.review.labels import deleted_pair_decisions
from mmdedup.store.schema import Asset, Item, Pair, Signature

TEXTS = [
    "the river rose overnight and the old bridge at the mill was closed to all traffic until engineers can inspect it",
    "council votes to fund a new library in the north district after a long debate about the budget for next year",
    "a late goal gave the home side a narrow win in the derby and sent the fans into the streets to celebrate",
    "researchers found that the new alloy keeps its strength at high temperatures which could help jet engines",
]


def items(copies: int = 3, meta: dict | None = None) -> list[dict]:
    """Each text with `copies` near copies (a word changed): groups t0.*, t1.*, ..."""
    out = []
    for i, text in enumerate(TEXTS):
        for c in range(copies + 1):
            words = text.split()
            if c:
                words[c * 3] = f"changed{c}"
            out.append({"id": f"t{i}.{c}", "text": " ".join(words), "meta": {"desk": f"d{i}", **(meta or {})}})
    return out


def pictures(folder: Path, photos: dict) -> list[dict]:
    """Two photos and a re-compressed copy of each."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in ("astronaut", "coffee"):
        for copy, quality in (("", 95), ("-copy", 40)):
            path = folder / f"{name}{copy}.jpg"
            Image.fromarray(photos[name]).save(path, quality=quality)
            out.append({"id": f"{name}{copy}", "images": [str(path)]})
    return out


def touching(p: Platform, gone: set[str]) -> dict[str, list]:
    """What of the store still names any of `gone`."""
    with p.sessions() as session:
        pks = {pk for (pk,) in session.execute(select(Item.pk).where(Item.id.in_(gone)))}
        rows = session.scalar(select(func.count()).select_from(Signature).where(Signature.item_pk.in_(pks))) or 0
        rows += session.scalar(select(func.count()).select_from(Asset).where(Asset.item_pk.in_(pks))) or 0
    return {"items": sorted(pks), "rows": [rows] if rows else [],
            "pairs": [k for k in pair_map(p) if set(k) & gone],
            "clusters": [c.members for c in p.clusters() if set(c.members) & gone]}


def found_by_query(p: Platform, photos_folder: Path) -> set[str]:
    ids = {m.id for text in TEXTS for m in p.query(text, k=20)}
    return ids | {m.id for m in p.query(image=photos_folder / "astronaut.jpg", k=20)}


def test_a_deleted_item_leaves_no_trace_here_nor_in_a_process_that_had_it_open(
        home: Path, db_url: str, tmp_path: Path, photos: dict, monkeypatch) -> None:
    """One process has the indexes in memory when another deletes: its pairs, clusters,
    queries and next ingest no longer see the items, and neither does a new process
    opening the index files saved before (which it opens, not rebuilds)."""
    import mmdedup.signals.base as base

    folder = tmp_path / "pictures"
    with Platform.open(home, db_url) as p:
        p.ingest(items() + pictures(folder, photos))
        p.label("t0.0", "t0.1", decision="duplicate")
        p.label("astronaut", "astronaut-copy", decision="duplicate")
        before = pair_map(p)
    assert ("t0.0", "t0.1") in before and ("astronaut", "astronaut-copy") in before
    gone = {"t0.1", "t2.0", "astronaut-copy"}
    with Platform.open(home, db_url) as watcher:
        assert gone <= found_by_query(watcher, folder)  # its indexes are now in memory
        with Platform.open(home, db_url) as deleter:
            report = deleter.delete(sorted(gone))
        assert sorted(report.ids) == sorted(gone) and report.labels == 2
        assert report.pairs == sum(1 for k in before if set(k) & gone)
        assert not found_by_query(watcher, folder) & gone
        assert touching(watcher, gone) == {"items": [], "rows": [], "pairs": [], "clusters": []}
        assert {k: v["score"] for k, v in pair_map(watcher).items()} == \
            {k: v["score"] for k, v in before.items() if not set(k) & gone}
        # A new process opens the index files saved before the deletion (it does not
        # rebuild the indexes) and takes the deleted items out as it catches up.
        rebuilt: list[str] = []
        original = base.Signal.rebuilt_index
        monkeypatch.setattr(base.Signal, "rebuilt_index", lambda self, session, kind, version: rebuilt.append(
            kind) or original(self, session, kind, version))
        with Platform.open(home, db_url) as fresh:
            assert not found_by_query(fresh, folder) & gone
        assert rebuilt == []
        # The watcher's next ingest brings copies of what went: they pair with what is
        # left, never with a deleted item.
        again = [{"id": "t2.new", "text": TEXTS[2]}]
        watcher.ingest(again)
        assert ("t2.1", "t2.new") in pair_map(watcher)
        assert touching(watcher, gone)["pairs"] == []


def test_labels_outlive_their_items_marked_and_still_teach_fusion(platform: Platform, cli) -> None:
    platform.ingest(items())
    platform.label("t0.0", "t0.1", decision="duplicate")
    platform.label("t0.0", "t1.0", decision="distinct")
    platform.label("t0.1", "t0.2", decision="unsure")
    scores = {k: v["signals"] for k, v in pair_map(platform).items()}
    platform.delete(["t0.1"])
    labels = {(r["a"], r["b"]): r for r in platform.labels()}
    assert labels[("t0.0", "t0.1")]["deleted"] == ["b"]
    assert labels[("t0.1", "t0.2")]["deleted"] == ["a"]
    assert "deleted" not in labels[("t0.0", "t1.0")]
    with platform.sessions() as session:
        taught = deleted_pair_decisions(session)
    # The duplicate decision on the deleted pair keeps the scores it had ('unsure' decides nothing).
    assert taught == [({k: v for k, v in scores[("t0.0", "t0.1")].items() if v is not None}, "duplicate")]
    # Deleting the other side too keeps the label, now about two deleted items.
    platform.delete(["t0.0"])
    rc, out, _ = cli("labels", "--export")
    exported = [json.loads(line) for line in out.splitlines()]
    assert rc == 0 and [r.get("deleted") for r in exported] == [["a", "b"], ["a"], ["a"]]
    with platform.sessions() as session:
        assert len(deleted_pair_decisions(session)) == 2
    # An item ingested again under a deleted id is a new item: the old labels stay about
    # the deleted one.
    platform.ingest([{"id": "t0.1", "text": TEXTS[3]}])
    assert all(r.get("deleted") for r in platform.labels() if "t0.1" in (r["a"], r["b"]))


def test_a_dry_run_changes_nothing_and_deleting_twice_deletes_nothing_more(platform: Platform) -> None:
    platform.ingest(items())
    before = (pair_map(platform), platform.stats())
    dry = platform.delete(["t1.0", "t1.1", "nope"], dry_run=True)
    assert dry.ids == ["t1.0", "t1.1"] and dry.missing == ["nope"] and dry.pairs > 0
    assert (pair_map(platform), platform.stats()) == before
    done = platform.delete(["t1.0", "t1.1", "nope"])
    assert (done.ids, done.pairs, done.missing) == (dry.ids, dry.pairs, dry.missing)
    after = (pair_map(platform), platform.stats())
    again = platform.delete(["t1.0", "t1.1"])
    assert again.ids == [] and again.missing == ["t1.0", "t1.1"] and again.pairs == 0
    assert (pair_map(platform), platform.stats()) == after
    assert after[1]["items"] == before[1]["items"] - 2


def test_the_command_chooses_by_id_file_meta_and_time(cli, platform: Platform, tmp_path: Path, capsys) -> None:
    platform.ingest(items(meta={"n": 5}))
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("t3.0\n\n t3.1 \n")
    rc, out, err = cli("delete", "--file", str(ids_file), "t3.2", "--format", "json")
    assert rc == 0 and sorted(json.loads(out)["ids"]) == ["t3.0", "t3.1", "t3.2"]
    # --meta: the text of a command line matches a number a manifest stored.
    rc, out, err = cli("delete", "--meta", "desk=d2", "--meta", "n=5", "--dry-run")
    assert rc == 0 and out.split() == ["t2.0", "t2.1", "t2.2", "t2.3"] and "would delete 4 items" in err
    rc, out, _ = cli("delete", "--meta", "desk=d2", "--meta", "n=6", "--format", "json")
    assert json.loads(out)["ids"] == []
    # --before: ingested before the time; a later ingest is not.
    cut = datetime.now(timezone.utc)
    platform.ingest([{"id": "late", "text": TEXTS[0] + " late edition"}])
    rc, out, _ = cli("delete", "--before", cut.isoformat(), "--meta", "desk=d0", "--format", "json")
    assert rc == 0 and sorted(json.loads(out)["ids"]) == ["t0.0", "t0.1", "t0.2", "t0.3"]
    rc, out, _ = cli("delete", "--before", (cut - timedelta(days=1)).isoformat(), "--format", "json")
    assert json.loads(out)["ids"] == []
    rc, out, err = cli("delete")
    assert rc == 2 and "delete needs item ids" in err
    with pytest.raises(SystemExit) as exited:
        cli("delete", "--before", "yesterday")
    assert exited.value.code == 2 and "not an ISO 8601 time" in capsys.readouterr().err
    rc, out, err = cli("delete", "--file", str(tmp_path / "missing.txt"))
    assert rc == 2 and "missing.txt" in err
    with platform.sessions() as session:
        left = set(session.scalars(select(Item.id)))
    assert left == {"t1.0", "t1.1", "t1.2", "t1.3", "t2.0", "t2.1", "t2.2", "t2.3", "t3.3", "late"}


def test_a_reused_key_is_a_new_item_to_every_index(home: Path, db_url: str) -> None:
    """SQLite gives a new item the key of the last one deleted: an index saved before
    must take the old item out before it puts the new one in."""
    with Platform.open(home, db_url) as p:
        p.ingest(items(copies=1))
    with Platform.open(home, db_url) as p:
        with p.sessions() as session:
            last = session.scalar(select(func.max(Item.pk)))
            assert session.scalar(select(Item.id).where(Item.pk == last)) == "t3.1"
        assert p.delete(["t3.1"]).ids == ["t3.1"]
        p.ingest([{"id": "other", "text": TEXTS[1] + " again"}])
        with p.sessions() as session:
            pks = dict(session.execute(select(Item.id, Item.pk)).all())
    assert pks["other"] == last or not db_url.startswith("sqlite")  # (PostgreSQL never reuses one)
    with Platform.open(home, db_url) as p:
        assert "t3.0" in {m.id for m in p.query(TEXTS[3], k=5)}
        found = {m.id for m in p.query(TEXTS[1] + " again", k=5)}
        assert "other" in found and "t3.1" not in found
        assert ("t1.0", "other") in pair_map(p) or ("other", "t1.0") in pair_map(p)
        with p.sessions() as session:
            assert not session.scalar(select(func.count()).select_from(Pair).where(
                Pair.a_pk.not_in(list(pks.values())) | Pair.b_pk.not_in(list(pks.values()))))


@pytest.mark.parametrize("where", ["a", "b"])
def test_a_pair_scored_elsewhere_is_not_written_once_its_item_is_deleted(platform: Platform, where: str) -> None:
    """The ray engine's workers score pairs outside the write lock: a deletion between
    their search and the write leaves nothing naming the deleted item."""
    from mmdedup.signals.scorer import Scored

    platform.ingest(items(copies=1))
    with platform.sessions() as session:
        pks = dict(session.execute(select(Item.id, Item.pk)).all())
    a, b = sorted((pks["t0.0"], pks["t0.1"]))
    record = {"a_pk": a, "b_pk": b, "score": 0.95, "kind": "text-reuse", "signals": {"text": 0.95},
              "details": None}
    platform.delete(["t0.0" if (where == "a") == (pks["t0.0"] == a) else "t0.1"])
    with platform.sessions.begin() as session:
        written = platform._scorer.write(session, Scored([record], []), elsewhere=True)
    assert written == []
    with platform.sessions() as session:
        assert not session.scalar(select(func.count()).select_from(Pair).where(Pair.a_pk == a, Pair.b_pk == b))
