"""Sections of one long legal document share its rare vocabulary (party names, defined
terms, statutes) but not its sentences: that is topical overlap, not text re-use, while a
copy of a section keeps its word runs and stays re-use."""

from __future__ import annotations

import random
import sys
from itertools import combinations
from pathlib import Path

import pytest

from mmdedup import Platform

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))
import legal_sections as bench  # noqa: E402  (the benchmark's documents)


def light_edit(sentences: list[str], rng: random.Random, zh: bool) -> str:
    """The section with about 2% of its words changed, in its rare vocabulary (a name
    misspelt, a defined term retyped): never a word that decides (shall / shall not)."""
    if zh:
        chars = list("".join(sentences))
        at = [i for i, c in enumerate(chars) if c in bench._ZH_CHARS]
        for i in rng.sample(at, max(1, len(chars) // 50)):
            chars[i] = "某"
        return "".join(chars)
    words = " ".join(sentences).split(" ")
    at = [i for i, w in enumerate(words) if i and w[:1].isupper() and not words[i - 1].endswith(".")]
    for i in rng.sample(at, max(1, len(words) // 50)):
        words[i] = words[i][::-1].capitalize()
    return " ".join(words)


@pytest.fixture(scope="module")
def paired(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[tuple[str, str], str], dict[str, str], list]:
    """{(a, b) sorted: tier} of one English contract's and one Chinese statute's sections
    and copies of some, ingested into a fresh store; each item's document; the copies."""
    rng = random.Random(7)
    texts: dict[str, str] = {}
    doc: dict[str, str] = {}
    copies: list[tuple[str, str]] = []
    for lang, make in (("en", bench.en_document), ("zh", bench.zh_document)):
        zh = lang == "zh"
        _, sections = make(rng)
        join = "" if zh else " "
        for k, sentences in enumerate(sections):
            texts[f"{lang}-s{k}"] = join.join(sentences)
            doc[f"{lang}-s{k}"] = lang
        for k in rng.sample(range(len(sections)), 3):
            head, body = sections[k][:1], sections[k][1:]
            shuffled = body[:]
            rng.shuffle(shuffled)
            for kind, text in (("edited", light_edit(sections[k], rng, zh)),
                               ("shuffled", join.join(head + shuffled))):
                texts[f"{lang}-s{k}-{kind}"] = text
                doc[f"{lang}-s{k}-{kind}"] = lang
                copies.append((f"{lang}-s{k}", f"{lang}-s{k}-{kind}"))
    with Platform.open(tmp_path_factory.mktemp("legal")) as platform:
        platform.ingest([{"id": i, "text": t} for i, t in texts.items()])
        found = {tuple(sorted((p.a, p.b))): p.tier for p in platform.pairs("weak")}
    return found, doc, copies


def test_sections_of_one_document_are_not_re_use(paired) -> None:
    found, doc, _ = paired

    def section(item: str) -> str:  # (a copy is of its section: "en-s3-edited" -> "en-s3")
        return "-".join(item.split("-")[:2])

    sections = [(a, b) for a, b in combinations(sorted(doc), 2) if doc[a] == doc[b] and section(a) != section(b)]
    assert len(sections) > 400
    at_medium = [p for p in sections if found.get(p) in ("strong", "medium")]
    assert at_medium == []


def test_an_edited_or_shuffled_copy_of_a_section_stays_re_use(paired) -> None:
    found, _, copies = paired
    assert len(copies) == 12
    missed = [c for c in copies if found.get(tuple(sorted(c))) not in ("strong", "medium")]
    assert missed == []


def test_the_raw_rule_is_part_of_what_pairs_were_scored_under(home: Path, db_url: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Stored pairs scored under another rule are another scoring's (a retrain re-scores them)."""
    with Platform.open(home, db_url) as platform:
        default = platform.signal("text").scoring_version()
    monkeypatch.setenv("MMDEDUP_TEXT_REUSE_SLOPE", "3")
    with Platform.open(home, db_url) as platform:
        assert platform.signal("text").scoring_version() != default


@pytest.fixture(scope="module")
def contracts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The benchmark's corpus (seed 1) in a store of its own."""
    texts, _, _ = bench.corpus(1, 8, 6)
    home = tmp_path_factory.mktemp("contracts")
    with Platform.open(home) as platform:
        platform.ingest([{"id": i, "text": t} for i, t in texts.items()])
    return home, texts


def test_shared_stock_phrases_at_other_places_do_not_back_re_use(contracts) -> None:
    """Two sections of one contract whose sketches called them re-use (weighted Jaccard
    0.58, a fifth of their 3-grams shared: its stock phrases) stay under medium once their
    texts are read, at ingest and to a query, while every copy of the benchmark but the
    one the decision lexicon halves (a replaced "terminate") stays re-use."""
    home, texts = contracts
    with Platform.open(home) as platform:
        found = {tuple(sorted((p.a, p.b))): p.tier for p in platform.pairs("weak")}
        assert found.get(("en3-s0", "en3-s30")) in (None, "weak")
        hits = {m.id: m.score for m in platform.query(texts["en3-s30"], k=50)}
        assert platform.settings.tier(hits.get("en3-s0", 0.0)) in (None, "weak")
        copy = next(k for k in sorted(texts) if k.startswith("en3-") and k.endswith("-sentences-shuffled"))
        hits = {m.id: m.score for m in platform.query(texts[copy], k=50)}
        assert platform.settings.tier(hits[copy.removesuffix("-sentences-shuffled")]) in ("strong", "medium")
        copies = [p for p in found if p[1].startswith(p[0] + "-")]
        assert len(copies) >= 55
        assert sum(found[p] in ("strong", "medium") for p in copies) >= 55
