"""scripts/ingest_media.py: crawl dumps (a folder of pages, a JSON Lines export) to items
with their pictures and video, in worker processes, resumable, with a summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from PIL import Image

from mmdedup import Platform

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import ingest_media  # noqa: E402

BODY = ("The river authority announced on Monday that the northern embankment will be "
        "raised by two metres before the flood season, after three winters of erosion "
        "near the old mill. Residents may comment on the plans until the end of the month.")


def page(title: str, body: str, *refs: str) -> str:
    tags = "".join(f'<img src="{r}">' if not r.endswith(".mp4") else f'<video><source src="{r}"></video>'
                   for r in refs)
    return (f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>"
            f"<p>{body}</p>{tags}</article></body></html>")


def picture(path: Path, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.effect_noise((96, 96), 40 + seed * 7).convert("RGB").resize((160, 160))
    img.save(path)


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    root = tmp_path / "dump"
    picture(root / "img" / "river.jpg", 1)
    picture(root / "cdn.example.com" / "photos" / "mill.png", 2)
    (root / "news").mkdir(parents=True)
    (root / "news" / "a.html").write_text(page("Embankment to be raised", BODY, "../img/river.jpg"))
    (root / "news" / "b.html").write_text(page("Embankment to be raised", BODY,
                                               "https://cdn.example.com/photos/mill.png"))
    (root / "news" / "c.html").write_text(page("Other story", "A bakery opened on the corner.",
                                               "../img/river.jpg", "../img/gone.jpg"))
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert ingest_media.main([*map(str, args), "--no-progress"]) == 0
    return capsys.readouterr().out


def test_folder_dump_pages_with_their_pictures(dump: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    out = run(capsys, dump, "--home", tmp_path / "home", "--db", db_url, "--workers", "2")
    assert "pages found: 3; already stored, skipped: 0" in out
    assert "3 new" in out and "references not found in the dump: image 1" in out
    with Platform.open(tmp_path / "home", db_url) as p:
        assert p.stats()["assets"] == {"html": 3, "image": 3}
        kinds = {(x["a"], x["b"]): x for x in p.pairs()}
    # Same body text under another picture (resolved through the URL mirror): text reuse.
    ab = kinds[("news/a.html", "news/b.html")]
    assert ab["tier"] == "strong" and ab["signals"]["text"] >= 0.9
    # Same picture under a different story: found by the image signal.
    ac = kinds[("news/a.html", "news/c.html")]
    assert ac["signals"]["image"] >= 0.9
    assert "duplicate pairs by tier" in out


def test_a_store_that_cannot_be_reached_is_one_line(dump: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import retrain_job

    down = "postgresql+psycopg://postgres@127.0.0.1:1/mmdedup"  # a closed port
    assert ingest_media.main([str(dump), "--home", str(tmp_path / "h"), "--db", down]) == 2
    err = capsys.readouterr().err
    assert "cannot reach" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert retrain_job.main(["--home", str(tmp_path / "h"), "--db", down]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "failed" and "cannot reach" in record["error"]


def test_rerun_skips_what_is_stored_and_picks_up_new_pages(
        dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    home = tmp_path / "home"
    run(capsys, dump, "--home", home, "--db", db_url, "--workers", "1")
    (dump / "news" / "d.html").write_text(page("Late story", "The ferry timetable changes in May."))
    out = run(capsys, dump, "--home", home, "--db", db_url, "--workers", "2")
    assert "pages found: 4; already stored, skipped: 3" in out and "1 new" in out
    out = run(capsys, dump, "--home", home, "--db", db_url, "--rescan")
    assert "0 new, 0 updated, 4 unchanged" in out


def test_jsonl_export_inline_html_meta_and_bad_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    root = tmp_path / "export"
    picture(root / "img" / "1.jpg", 3)
    lines = [
        json.dumps({"url": "https://a.example/1", "html": page("One", BODY, "img/1.jpg"),
                    "fetched_at": "2026-11-30T10:00:00Z", "status": 200}),
        "{not json",
        json.dumps({"url": "https://b.example/1", "text": BODY, "images": ["img/1.jpg"]}),
        json.dumps({"url": "https://c.example/x", "html_file": "missing.html"}),
    ]
    (root / "export.jsonl").write_text("\n".join(lines) + "\n")
    out = run(capsys, root / "export.jsonl", "--home", tmp_path / "home", "--db", db_url)
    assert "unreadable export lines: 1 (first: line 2" in out
    assert "2 new" in out and "1 failed" in out and "missing_file 1" in out
    with Platform.open(tmp_path / "home", db_url) as p:
        [hit] = [r for r in p.query(BODY, k=5, meta={"status": 200})]
        assert hit["id"] == "https://a.example/1"
        [failure] = p.failures()
        assert failure["id"] == "https://c.example/x"
        pair = p.pairs()[0]
        assert {pair["a"], pair["b"]} == {"https://a.example/1", "https://b.example/1"}
    # The failed page is not stored, so a rerun retries it; once its file exists it lands
    # and its failure is resolved.
    (root / "missing.html").write_text(page("Three", "The library extends its hours in winter."))
    out = run(capsys, root / "export.jsonl", "--home", tmp_path / "home", "--db", db_url)
    assert "already stored, skipped: 2" in out and "1 new" in out
    with Platform.open(tmp_path / "home", db_url) as p:
        assert p.failures() == []
