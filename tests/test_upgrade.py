"""A query right after an upgrade answers as a store ingested under the new release would.

An upgrade is simulated as the image tests do: the store is ingested under an "earlier
release" (another version string, and values that release would have made differently:
every sketch or code zero, which would pair everything with everything), then opened by
this code. Signatures of other versions are never compared, so without a re-sign a query
finds nothing (checked here too, so these tests can fail); with it, the answers, scores
and stored pairs are those of a fresh store ingested by this release.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any, Callable

import pytest
from PIL import Image, ImageOps
from skimage import data

from mmdedup import Platform
from mmdedup.extract import text_sketches
from mmdedup.extract.text_sketches import TextSigner, TextSketches
from mmdedup.signals.image import ImageSignal
from mmdedup.store.signatures import versions_stored

_SYLLABLES = ("ka", "lo", "mi", "ran", "te", "su", "vo", "qua", "dre", "pil", "ns", "or", "bel", "fu")
WORDS = sorted({a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES})  # (2,744)


def corpus(seed: int = 7, bases: int = 12) -> tuple[list[dict[str, Any]], list[str]]:
    """Stored items (each base text and two near copies) and query texts (a third near copy
    of some bases, never stored)."""
    rng = random.Random(seed)
    items, probes = [], []

    def near(words: list[str]) -> str:
        out = list(words)
        for i in rng.sample(range(len(out)), max(1, len(out) // 20)):
            out[i] = rng.choice(WORDS)
        return " ".join(out)

    for b in range(bases):
        words = [rng.choice(WORDS) for _ in range(rng.randint(60, 120))]
        items.append({"id": f"t{b}", "text": " ".join(words)})
        items += [{"id": f"t{b}-c{c}", "text": near(words)} for c in range(2)]
        if b % 3 == 0:
            probes.append(near(words))
    probes.append(" ".join(rng.choice(WORDS) for _ in range(80)))  # (a new text)
    return items, probes


def zero_sketches(sign: Callable[..., TextSketches]) -> Callable[..., TextSketches]:
    def signed(self: TextSigner, *args: Any, **kwargs: Any) -> TextSketches:
        sk = sign(self, *args, **kwargs)
        return TextSketches(sk.simhash * 0, sk.wminhash * 0, sk.minhash * 0, sk.empty)
    return signed


def ingest_as_earlier_release(monkeypatch: pytest.MonkeyPatch, home: Path, url: str, source: Any) -> None:
    """Ingest under a tokenizer/hash version this release does not have, whose text
    sketches and picture codes are all zero."""
    current = ImageSignal.extract

    def zero(codes: Any) -> Any:
        return None if codes is None else type(codes)(codes.scales * 0, codes.dhash * 0,
                                                      codes.errors)

    with monkeypatch.context() as old:
        old.setattr(text_sketches, "HASH_VERSION", "lanes64-an-earlier-release")
        old.setattr(TextSigner, "sign_tokens", zero_sketches(TextSigner.sign_tokens))
        old.setattr(ImageSignal, "version", lambda self: "img0-an-earlier-release")
        old.setattr(ImageSignal, "extract", lambda self, items: [zero(c) for c in current(self, items)])
        with Platform.open(home, url) as before:
            before.ingest(source)
            assert before.pairs()  # (zero values pair everything: the earlier release's pairs)


def answers(platform: Platform, probes: list[str], **kw: Any) -> list[list[tuple[str, float]]]:
    return [[(m.id, round(m.score, 6)) for m in platform.query(p, k=50, **kw)] for p in probes]


def pair_set(platform: Platform) -> dict[tuple[str, str], float]:
    return {(p.a, p.b): round(p.score, 6) for p in platform.pairs("weak")}


@pytest.fixture
def fresh_texts(new_store: Callable[[str], tuple[Path, str]]) -> tuple[list[dict], list[str], list, dict]:
    """The corpus, the probes, and what a store ingested by this release answers."""
    items, probes = corpus()
    home, url = new_store("fresh")
    with Platform.open(home, url) as fresh:
        fresh.ingest(items)
        want, pairs = answers(fresh, probes), pair_set(fresh)
    assert all(want[:-1]) and pairs  # (every near copy is found)
    return items, probes, want, pairs


def test_a_query_after_an_upgrade_answers_as_a_fresh_store(
        home: Path, db_url: str, fresh_texts: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opened read-only, as `mmdedup query` opens it: the texts are signed again under the
    new version before the first answer, and written, so the next process answers at once
    (nothing stale is left, and the stored pairs are the fresh store's too)."""
    items, probes, want, pairs = fresh_texts
    ingest_as_earlier_release(monkeypatch, home, db_url, items)
    with Platform.open(home, db_url, read_only=True) as after:
        assert answers(after, probes) == want
    with Platform.open(home, db_url, read_only=True) as again:
        version = again.signal("text").version()
        with again.sessions() as session:
            assert {v for k, v in versions_stored(session) if k == "text"} == {version}
        assert again.resign_stale() == []
        assert answers(again, probes) == want
        assert pair_set(again) == pairs


def test_without_the_re_sign_a_query_after_an_upgrade_finds_nothing(
        home: Path, db_url: str, fresh_texts: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the re-sign mends: the old signatures are never compared, so the answers are
    empty (the behaviour before it)."""
    items, probes, want, _ = fresh_texts
    ingest_as_earlier_release(monkeypatch, home, db_url, items)
    monkeypatch.setattr(Platform, "resign_stale", lambda self, progress=False: [])
    with Platform.open(home, db_url, read_only=True) as after:
        assert answers(after, probes) == [[]] * len(probes)


def test_the_query_command_after_an_upgrade(cli: Callable[..., tuple[int, str, str]], home: Path,
                                           db_url: str, fresh_texts: tuple,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    items, probes, want, pairs = fresh_texts
    ingest_as_earlier_release(monkeypatch, home, db_url, items)
    rc, out, err = cli("query", "--text", probes[0], "--k", "50", "--format", "json")
    assert rc == 0, err
    assert [(m["id"], round(m["score"], 4)) for m in json.loads(out)] == [(i, round(s, 4)) for i, s in want[0]]
    rc, out, _ = cli("pairs", "--format", "jsonl")
    assert rc == 0
    assert {(p["a"], p["b"]) for p in map(json.loads, out.splitlines())} == set(pairs)


def test_the_re_sign_shows_its_progress(home: Path, db_url: str, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    items, _ = corpus()
    ingest_as_earlier_release(monkeypatch, home, db_url, items)
    capsys.readouterr()
    with Platform.open(home, db_url, read_only=True) as after:
        assert after.resign_stale(progress=True) == ["text"]
    err = capsys.readouterr().err
    assert "sign texts again" in err and f"/{len(items)} " in err  # (the bar, and its total)


def test_two_processes_opening_an_upgraded_store_sign_it_once(
        home: Path, db_url: str, fresh_texts: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two queries at once after an upgrade: one signs, the other waits for it and finds
    nothing left to sign; both answer as the fresh store."""
    items, probes, want, _ = fresh_texts
    ingest_as_earlier_release(monkeypatch, home, db_url, items)
    signed: list[list[str]] = []
    got: list[list] = []
    failed: list[BaseException] = []

    def query() -> None:
        try:
            with Platform.open(home, db_url, read_only=True) as p:
                signed.append(p.resign_stale())
                got.append(answers(p, probes))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    threads = [threading.Thread(target=query) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failed, failed
    assert sorted(signed) == [[], ["text"]]
    assert got == [want, want]


@pytest.fixture
def pictures(tmp_path: Path) -> Path:
    folder = tmp_path / "img"
    folder.mkdir()
    astro, coffee = Image.fromarray(data.astronaut()), Image.fromarray(data.coffee())
    astro.save(folder / "astro.png")
    astro.resize((256, 256)).save(folder / "astro-small.jpg", quality=40)
    ImageOps.mirror(astro).save(folder / "astro-mirror.png")
    coffee.save(folder / "coffee.png")
    Image.fromarray(data.chelsea()).save(folder / "cat.png")
    return folder


def test_a_picture_query_after_an_upgrade_answers_as_a_fresh_store(
        home: Path, db_url: str, pictures: Path, tmp_path: Path,
        new_store: Callable[[str], tuple[Path, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    probe = tmp_path / "probe.jpg"
    Image.fromarray(data.astronaut()).rotate(90, expand=True).save(probe, quality=40)
    fresh_home, fresh_url = new_store("fresh")
    with Platform.open(fresh_home, fresh_url) as fresh:
        fresh.ingest(pictures)
        want = [(m.id, round(m.score, 6)) for m in fresh.query(image=probe, k=10)]
    assert {i for i, _ in want} == {"astro.png", "astro-small.jpg", "astro-mirror.png"}
    ingest_as_earlier_release(monkeypatch, home, db_url, pictures)
    (pictures / "cat.png").rename(tmp_path / "cat-moved.png")  # (a file gone since its ingest)
    with Platform.open(home, db_url, read_only=True) as after:
        assert [(m.id, round(m.score, 6)) for m in after.query(image=probe, k=10)] == want
        assert [(f["key"], f["reason"]) for f in after.failures()] == [("cat.png", "missing_file")]
    # The next process does not read every file that failed again: the next ingest does.
    with Platform.open(home, db_url, read_only=True) as again:
        assert again.resign_stale() == []
        assert [(m.id, round(m.score, 6)) for m in again.query(image=probe, k=10)] == want


def test_a_store_that_cannot_be_written_answers_and_says_why(
        home: Path, db_url: str, fresh_texts: tuple, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Where the re-sign cannot write (a store read-only for this user), the query still
    answers, and a warning says the answers miss the items an earlier release signed."""
    from mmdedup.store.errors import StoreError

    items, probes, _, _ = fresh_texts
    ingest_as_earlier_release(monkeypatch, home, db_url, items)

    def refused(self: Platform, progress: bool, names: Any = None) -> list[str]:
        # (what store/errors.py makes of the driver's "attempt to write a readonly database")
        raise StoreError("cannot write the store: it is read-only for this user")

    monkeypatch.setattr(Platform, "_catch_up", refused)
    with Platform.open(home, db_url, read_only=True) as after:
        with caplog.at_level("WARNING", logger="mmdedup"):
            assert answers(after, probes) == [[]] * len(probes)
    said = [r.getMessage() for r in caplog.records if "earlier version" in r.getMessage()]
    assert len(said) == 1 and "text" in said[0] and "cannot be written" in said[0]


def test_texts_of_other_models_are_left_to_the_retrain_signing_them(platform: Platform) -> None:
    """Signatures that differ only in their TF-IDF or word-weight model are those a retrain
    or a TF-IDF refresh signs again itself (as it goes, under its own lock): a query does
    not start a second full re-sign beside it."""
    from helpers import sign_as

    items, _ = corpus()
    platform.ingest(items)
    version = platform.signal("text").version()
    other = "|".join("tfidf=a-model-being-replaced" if p.startswith("tfidf=") else p for p in version.split("|"))
    assert other != version
    with platform.sessions.begin() as session:
        sign_as(session, "text", other)
    assert platform.resign_stale() == []
    with platform.sessions() as session:
        assert {v for k, v in versions_stored(session) if k == "text"} == {other}
