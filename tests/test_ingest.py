"""Ingest through the API: content, idempotence, updates, and every kind of bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from mmdedup import Platform

from conftest import write_manifest


def make_image(path: Path, color: tuple[int, int, int] = (200, 30, 30)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (32, 24), color).save(path)
    return path


def test_manifest_ingest_stores_items_and_assets(platform: Platform, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    make_image(corpus / "img" / "a.png")
    (corpus / "pages").mkdir(parents=True)
    (corpus / "pages" / "p.html").write_text("<html><body><p>hello</p></body></html>")
    manifest = write_manifest(corpus, [
        {"id": "t1", "title": "标题", "text": "中文内容，English words.", "meta": {"source": "x"}},
        {"id": "i1", "images": ["img/a.png"]},
        {"id": "h1", "html": "pages/p.html"},
    ])
    report = platform.ingest(manifest)
    assert (report.new, report.failed) == (3, 0)
    stats = platform.stats()
    assert stats["items"] == 3
    assert stats["assets"] == {"image": 1, "html": 1}


def test_reingest_same_content_does_nothing(platform: Platform, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "c", [{"id": "a", "text": "one"}, {"id": "b", "text": "two"}])
    platform.ingest(manifest)
    again = platform.ingest(manifest)
    assert (again.new, again.updated, again.unchanged) == (0, 0, 2)
    assert platform.stats()["items"] == 2


def test_a_rerun_decodes_and_tokenises_only_what_changed(platform: Platform, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Unchanged items are read and fingerprinted, then left: their pictures are not
    decoded nor their texts tokenised again (a rerun of a batch costs little more than
    reading it)."""
    import mmdedup.pipeline.ingest as ingest

    Image.new("RGB", (64, 48), "red").save(tmp_path / "red.png")
    records = [{"id": "a", "text": "one text"}, {"id": "b", "images": ["red.png"]},
               {"id": "c", "title": "a title", "text": "three"}]
    manifest = write_manifest(tmp_path, records)
    platform.ingest(manifest)
    finished: list[str] = []
    real = ingest.finish_item
    monkeypatch.setattr(ingest, "finish_item",
                        lambda read, *a, **k: finished.append(read.item.id) or real(read, *a, **k))
    again = platform.ingest(manifest)
    assert (again.new, again.updated, again.unchanged) == (0, 0, 3) and finished == []
    records[2]["title"] = "another title"  # meta and titles count as content too
    again = platform.ingest(write_manifest(tmp_path, records))
    assert (again.updated, again.unchanged) == (1, 2) and finished == ["c"]


def test_changed_content_updates_item_and_its_pairs(platform: Platform, tmp_path: Path) -> None:
    first = write_manifest(tmp_path / "c", [{"id": "a", "text": "same words"},
                                            {"id": "b", "text": "Same  words"}])
    platform.ingest(first)
    assert [(p["a"], p["b"]) for p in platform.pairs()] == [("a", "b")]
    second = write_manifest(tmp_path / "c", [{"id": "b", "text": "now something else"}], "m2.jsonl")
    report = platform.ingest(second)
    assert (report.new, report.updated) == (0, 1)
    assert platform.pairs() == []
    assert platform.clusters() == []


def test_folder_ingest_one_item_per_file(platform: Platform, tmp_path: Path) -> None:
    folder = tmp_path / "drop"
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "a.txt").write_text("防汛通知：各地加强防汛。", encoding="utf-8")
    (folder / "notes" / "b.txt").write_text("防汛通知:各地加强防汛.", encoding="utf-8")
    (folder / "bad.txt").write_bytes(b"\xff\xfe\xfa not utf-8")
    (folder / "empty.txt").write_bytes(b"")
    (folder / "data.bin").write_bytes(b"\x00\x01")
    make_image(folder / "pic.png")
    (folder / ".hidden").write_text("ignored")
    report = platform.ingest(folder)
    assert report.new == 3
    reasons = {f["key"]: f["reason"] for f in platform.failures()}
    assert reasons == {"bad.txt": "invalid_utf8", "empty.txt": "empty_content",
                       "data.bin": "unsupported_type"}
    assert platform.clusters() == [{"canonical": "notes/a.txt", "members": ["notes/a.txt", "notes/b.txt"]}]


@pytest.fixture
def bad_manifest(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    make_image(corpus / "ok.png")
    make_image(tmp_path / "outside.png")
    (corpus / "fake.png").write_text("this is not a picture")
    (corpus / "big.png").write_bytes(b"\x89PNG" + b"\x00" * 5000)
    (corpus / "a_directory.png").mkdir()
    manifest = write_manifest(corpus, [
        {"id": "good-1", "text": "a perfectly good item"},
        '{"id": "broken", "text": ',
        {"title": "no id here", "text": "x"},
        {"id": "good-1", "text": "the same id again"},
        {"id": "missing", "images": ["nowhere.png"]},
        {"id": "dir", "images": ["a_directory.png"]},
        {"id": "escape", "images": ["../outside.png"]},
        {"id": "empty", "text": "  \u3000 "},
        {"id": "big", "images": ["big.png"]},
        {"id": "fake", "images": ["fake.png"]},
        {"id": "badfield", "images": "ok.png", "meta": "not an object"},
        {"id": "good-2", "images": ["ok.png"]},
    ])
    with manifest.open("ab") as fh:
        fh.write(b'{"id": "latin1", "text": "caf\xe9"}\n')
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / "config.toml").write_text("max_file_bytes = 4096\n")
    return manifest


EXPECTED_REASONS = {
    "line 2": "malformed_json",
    "line 3": "missing_id",
    "good-1": "duplicate_id",
    "missing": "missing_file",
    "dir": "unreadable_file",
    "escape": "path_escape",
    "empty": "empty_content",
    "big": "too_large",
    "fake": "not_an_image",
    "badfield": "invalid_field",
    "line 13": "invalid_utf8",
}


def test_each_bad_input_fails_with_its_reason_and_the_batch_goes_on(
    bad_manifest: Path, tmp_path: Path, db_url: str
) -> None:
    with Platform.open(tmp_path / "home", db_url) as platform:
        report = platform.ingest(bad_manifest)
        assert report.new == 2
        assert report.failed == len(EXPECTED_REASONS)
        failures = platform.failures()
    assert {f["key"]: f["reason"] for f in failures} == EXPECTED_REASONS
    details = {f["key"]: f["detail"] for f in failures}
    assert "4096" in details["big"] and "outside" in details["escape"]
    assert "line 4" in details["good-1"]


def test_rerun_retries_failures_and_resolves_fixed_ones(
    bad_manifest: Path, tmp_path: Path, db_url: str
) -> None:
    with Platform.open(tmp_path / "home", db_url) as platform:
        platform.ingest(bad_manifest)
        make_image(bad_manifest.parent / "nowhere.png", (1, 2, 3))
        report = platform.ingest(bad_manifest)
        assert report.new == 1  # the item whose file now exists
        open_keys = [f["key"] for f in platform.failures()]
        assert "missing" not in open_keys
        assert sorted(open_keys) == sorted(set(EXPECTED_REASONS) - {"missing"})
        # The history lists each record once: the mended one resolved, the others still open.
        history = platform.failures(include_resolved=True)
        assert [f["key"] for f in history if f["resolved"]] == ["missing"]
        assert sorted(f["key"] for f in history) == sorted(EXPECTED_REASONS)


def test_api_items_and_dicts(platform: Platform, tmp_path: Path) -> None:
    from mmdedup import Item

    make_image(tmp_path / "pics" / "x.png")
    report = platform.ingest(
        [Item(id="a", text="hello world"), {"id": "b", "images": ["x.png"]}, {"id": 7, "text": "seven"},
         {"text": "no id"}],
        root=tmp_path / "pics",
    )
    assert (report.new, report.failed) == (3, 1)
    assert platform.failures()[0]["reason"] == "missing_id"


def test_oversized_image_dimensions_are_refused(platform: Platform, tmp_path: Path) -> None:
    # A tiny file that declares a huge canvas: refused before any pixel is decoded.
    Image.new("1", (9000, 9000)).save(tmp_path / "bomb.png", optimize=True)
    report = platform.ingest([{"id": "bomb", "images": ["bomb.png"]}], root=tmp_path)
    assert report.failed == 1
    assert platform.failures()[0]["reason"] == "too_large"


def test_worker_processes_give_the_same_store(tmp_path: Path, db_url: str) -> None:
    """Extraction in worker processes (several chunks, the next ones extracted while the
    current one is written; with two extractors they take chunks in turn) ends in the same
    items, pairs and failures as in-process."""
    corpus = shutil.copytree(Path(__file__).resolve().parents[1] / "samples" / "corpus",
                             tmp_path / "corpus")
    records = [json.loads(line) for line in (corpus / "manifest.jsonl").read_text().splitlines()]
    records += [{"id": "missing", "images": ["img/nowhere.png"]}, {"id": "empty", "text": "  "}]
    manifest = write_manifest(corpus, records)
    results = []
    for workers, url in ((1, f"sqlite:///{tmp_path / 'one.db'}"), (2, db_url),
                         (3, f"sqlite:///{tmp_path / 'three.db'}")):
        with Platform.open(tmp_path / f"home{workers}", url) as p:
            object.__setattr__(p.settings, "ingest_chunk", 4)
            report = p.ingest(manifest, workers=workers)
            results.append((report.as_dict(), p.pairs(),
                             sorted((f["id"], f["reason"]) for f in p.failures())))
    assert results[0] == results[1] == results[2]
    assert results[1][0]["failed"] == 2 and results[1][0]["new"] == len(records) - 2


def test_fingerprint_json_is_the_json_it_stands_for() -> None:
    """The fingerprint's shortcut for long plain texts gives json.dumps's exact string, so
    stores fingerprinted before it still see their items as unchanged."""
    import random

    from mmdedup.input.items import _fingerprint_json, _json

    rng = random.Random(1)
    alphabet = 'ab "\\\t\n\x01\x7fé中\u2028'
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        parts = [rng.choice([None, "title", text]), text, rng.choice([{}, {"z": 1, "a": text}]),
                 [("image", "a.png", "00ff")]]
        assert _fingerprint_json(parts) == _json(parts)
