"""Adaptive against fixed thresholds on one stream whose duplicates drift: precision and
recall of the near-duplicate decisions (medium tier or above) as each item arrived.

The stream: PHASES phases of 1,000 texts (12-20 sentences of 8-15 Zipf-distributed words
each). In every phase a fifth of the texts are duplicates of an earlier original, a tenth
are related texts that share 40-60% of an original's sentences and write the rest anew
(the same notice template with other content: not duplicates), and the rest are new
originals. A duplicate is the original with some words replaced, a line of source
boilerplate added and, half the time, two sentences swapped; the share of words replaced
drifts: 2-8% in the first half of the phases (light reposts), 10-22% in the second (heavy
re-edits).

The same stream is ingested 100 texts a call into two stores (SQLite): one with the fixed
tiers (medium 0.8), one with `thresholds = "adaptive"` (every 1,000 items, mean - 2 sd,
floor 0.6). A pair is judged with the medium tier in force when its later item arrived
(the store's history of cut-offs), as a stream's decision line said it. True pairs: an
original and its duplicates, and two duplicates of one original; recall is over the
planted (original, duplicate) pairs.

    python scripts/bench/thresholds.py [--phases 6] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from text_quality import make_vocab, zipf_words  # noqa: E402

from mmdedup import Platform  # noqa: E402

PER_PHASE = 1000
BATCH = 100


def sentence(rng: np.random.Generator, vocab: list[str]) -> str:
    return " ".join(zipf_words(rng, vocab, int(rng.integers(8, 16)))) + "."


def make_stream(phases: int, seed: int) -> tuple[list[dict], dict[str, int], list[tuple[str, str]], list[int]]:
    """(records, family of each duplicate and original, planted (original, duplicate)
    pairs, phase of each record)."""
    rng, pick = np.random.default_rng(seed), random.Random(seed)
    vocab = make_vocab(random.Random(seed))
    originals: list[tuple[str, list[str]]] = []
    records, family, planted, phase_of = [], {}, [], []
    for phase in range(phases):
        heavy = phase >= phases // 2
        for i in range(PER_PHASE):
            n = len(records)
            roll = pick.random()
            if originals and roll < 0.2:
                source_id, sentences = pick.choice(originals[-2000:])
                words = " ".join(sentences).split(" ")
                share = pick.uniform(0.10, 0.22) if heavy else pick.uniform(0.02, 0.08)
                for pos in pick.sample(range(len(words)), max(1, int(len(words) * share))):
                    words[pos] = pick.choice(vocab)
                text = " ".join(words)
                if pick.random() < 0.5:
                    parts = text.split(". ")
                    k = pick.randrange(len(parts) - 1)
                    parts[k], parts[k + 1] = parts[k + 1], parts[k]
                    text = ". ".join(parts)
                text += f"\nSource: wire service, desk {pick.randrange(50)}."
                item_id = f"dup{n}"
                family[item_id] = family[source_id]
                planted.append((source_id, item_id))
            elif originals and roll < 0.3:
                _, sentences = pick.choice(originals[-2000:])
                kept = pick.uniform(0.4, 0.6)
                text = " ".join(s if pick.random() < kept else sentence(rng, vocab) for s in sentences)
                item_id = f"rel{n}"
            else:
                sentences = [sentence(rng, vocab) for _ in range(int(rng.integers(12, 21)))]
                text = " ".join(sentences)
                item_id = f"orig{n}"
                family[item_id] = n
                originals.append((item_id, sentences))
            records.append({"id": item_id, "text": text})
            phase_of.append(phase)
    return records, family, planted, phase_of


def run(home: Path, config: str, records: list[dict]) -> tuple[list, list[dict], float, float]:
    """(pairs, cut-off history, wall s, CPU s) of the stream ingested BATCH records a call."""
    home.mkdir()
    (home / "config.toml").write_text(config)
    wall, cpu = time.perf_counter(), time.process_time()
    with Platform.open(home) as p:
        for start in range(0, len(records), BATCH):
            p.ingest(records[start:start + BATCH])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        return p.pairs(), p.thresholds(), wall, cpu


def judged(pairs: list, history: list[dict], arrival: dict[str, int], fixed: float) -> set[tuple[str, str]]:
    """The pairs at medium or above under the medium tier in force when the later item
    arrived (item pks run in arrival order from 1)."""
    out = set()
    for x in pairs:
        later = max(arrival[x.a], arrival[x.b]) + 1
        cut = fixed
        for row in history:
            if row["kind"] == x.kind and row["through_item"] < later:
                cut = row["cutoff"]
        if x.score >= cut:
            out.add((x.a, x.b) if arrival[x.a] < arrival[x.b] else (x.b, x.a))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phases", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    records, family, planted, phase_of = make_stream(args.phases, args.seed)
    arrival = {r["id"]: i for i, r in enumerate(records)}
    print(f"{len(records)} texts in {args.phases} phases; {len(planted)} planted duplicates "
          f"(2-8% of words replaced, from phase {args.phases // 2 + 1} 10-22%), "
          f"{sum(r['id'].startswith('rel') for r in records)} related texts (not duplicates)")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, config in (("fixed", ""), ("adaptive", 'thresholds = "adaptive"\n')):
            pairs, history, wall, cpu = run(Path(tmp) / name, config, records)
            results[name] = judged(pairs, history, arrival, 0.8)
            print(f"{name}: {wall:.1f} s wall, {cpu:.1f} s CPU; medium tier cut-offs: "
                  + (", ".join(f"{h['cutoff']:.3f} (after item {h['through_item']})" for h in history) or "0.8 fixed"))
    print("| phase | edits | fixed precision | fixed recall | adaptive precision | adaptive recall |")
    print("|---|---|---|---|---|---|")
    for phase in [*range(args.phases), None]:
        def of_phase(pair: tuple[str, str]) -> bool:
            return phase is None or phase_of[arrival[pair[1]]] == phase
        wanted = [p for p in planted if of_phase(p)]
        row = [str(phase + 1) if phase is not None else "all",
               ("10-22%" if phase >= args.phases // 2 else "2-8%") if phase is not None else "-"]
        for name in ("fixed", "adaptive"):
            found = [p for p in results[name] if of_phase(p)]
            true = [p for p in found if p[0] in family and p[1] in family and family[p[0]] == family[p[1]]]
            precision = len(true) / len(found) if found else 1.0
            recall = sum(p in results[name] for p in wanted) / len(wanted) if wanted else 1.0
            row += [f"{precision:.1%} ({len(found) - len(true)} false)", f"{recall:.1%}"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
