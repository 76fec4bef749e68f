"""A site template that arrives late: texts stored first, then texts all wrapped in one
new template, through the product.

text_quality.py's template experiment wraps every text from the start. Here the store
first holds `--plain` unrelated plain texts (so the TF-IDF weights are fitted without the
template), then takes text_quality.py's corpus (150 originals of 400 words, their
variants with 1%, 5% and 15% of the words changed, 150 unrelated texts), every text of it
wrapped in one new 600-word site template (300 words before, 300 after, one run of words
with no line break), in chunks of `--chunk`. Counted over the wrapped texts: pairs between
different families at each tier (of 279,975), and original-variant pairs found (of 450).

Rows, each a fresh SQLite store through `Platform.ingest` / `Platform.pairs`:
- passages off: `passage_min_texts` past any count (no anchor recurs), which is what the
  product did before recurring passages left the signatures; also after a manual
  `retrain` (TF-IDF counted again over every stored text);
- passages on: the defaults;
- the baseline of the same run: a plain 64-bit word SimHash at Hamming radius 3 over the
  wrapped texts (text_quality.py's).

`--cost N` prints instead what finding the anchors costs a text beside tokenising and
signing it (CPU ms a text, N texts of 400 words, one process): the price every plain text
pays at ingest, template or not.

    python scripts/bench/late_template.py [--seed 1] [--plain 1000] [--chunk 2000] [--cost N]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from text_quality import baseline_pairs, make_vocab, template_corpus, zipf_words  # noqa: E402

from mmdedup import Platform  # noqa: E402

OFF = str(10 ** 9)
TIERS = ("strong", "medium", "weak")


def count(found: dict[tuple[str, str], str], family: dict[str, int],
          positives: list[tuple[str, str]]) -> tuple[dict[str, int], dict[str, int]]:
    """(false pairs by tier, original-variant pairs found at that tier or above)."""
    false = {t: 0 for t in TIERS}
    for (a, b), tier in found.items():
        if a in family and b in family and family[a] != family[b]:
            false[tier] += 1
    found_at = {t: 0 for t in TIERS}
    rank = {t: i for i, t in enumerate(TIERS)}
    for a, b in positives:
        tier = found.get(tuple(sorted((a, b))))
        for t in TIERS:
            if tier is not None and rank[tier] <= rank[t]:
                found_at[t] += 1
    return false, found_at


def run(plain: dict[str, str], wrapped: dict[str, str], chunk: int, passages: bool,
        retrain: bool) -> tuple[dict[tuple[str, str], str], float, float]:
    env = {"MMDEDUP_TEXT_PASSAGE_MIN_TEXTS": None if passages else OFF, "MMDEDUP_INGEST_CHUNK": str(chunk)}
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    try:
        with tempfile.TemporaryDirectory() as home, Platform.open(home) as platform:
            wall, cpu = time.perf_counter(), time.process_time()
            platform.ingest([{"id": i, "text": t} for i, t in plain.items()])
            platform.ingest([{"id": i, "text": t} for i, t in wrapped.items()])
            if retrain:
                platform.retrain()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            return {tuple(sorted((p["a"], p["b"]))): p["tier"] for p in platform.pairs("weak")}, wall, cpu
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def cost(n: int, seed: int) -> None:
    from mmdedup.extract.term_weights import prior_model
    from mmdedup.extract.text_sketches import TextSigner, tokenize_texts
    from mmdedup.extract.winnowing import anchors

    rng = np.random.default_rng(seed)
    vocab = make_vocab(random.Random(seed))
    texts = [" ".join(zipf_words(rng, vocab, 400)) for _ in range(n)]
    signer = TextSigner(prior_model())
    spent = {}
    for step in ("tokenise", "anchors", "sign"):
        start = time.process_time()
        for _ in range(3):
            if step == "tokenise":
                tokens = tokenize_texts(texts)
            elif step == "anchors":
                anchors(tokens)
            else:
                signer.sign_tokens(tokens, texts)
        spent[step] = (time.process_time() - start) / 3 / n * 1e3
    print(f"{n} texts of 400 words, CPU ms a text: tokenise {spent['tokenise']:.3f}, sign {spent['sign']:.3f}, "
          f"anchors {spent['anchors']:.3f} ({spent['anchors'] / (spent['tokenise'] + spent['sign']):.2f}x "
          "tokenising and signing)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--plain", type=int, default=1000, help="plain texts stored before the template arrives")
    ap.add_argument("--chunk", type=int, default=2000, help="ingest_chunk: texts a commit")
    ap.add_argument("--cost", type=int, default=0, help="measure the anchors' cost on this many texts instead")
    args = ap.parse_args()
    if args.cost:
        cost(args.cost, args.seed)
        return
    docs, family, positives, template = template_corpus(args.seed)
    rng = np.random.default_rng(args.seed + 100)
    vocab = make_vocab(random.Random(args.seed))
    plain = {f"p{i}": " ".join(zipf_words(rng, vocab, 400)) for i in range(args.plain)}
    wrapped_words = {i: template[:300] + w + template[300:] for i, w in docs.items()}
    wrapped = {i: " ".join(w) for i, w in wrapped_words.items()}
    print(f"{args.plain} plain texts stored, then {len(wrapped)} wrapped in one 600-word template; "
          f"chunk {args.chunk}, seed {args.seed}")
    print("| method | false strong | false medium | false weak | variants >= medium (of 450) "
          "| variants >= weak | wall s | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    base = baseline_pairs(wrapped_words, 3)
    false, found = count({tuple(sorted(p)): "strong" for p in base}, family, positives)
    print(f"| plain word SimHash, k=3 | {false['strong']:,} | - | - | {found['strong']} | - | - | - |")
    for name, passages, retrain in (("mmdedup, passages off", False, False),
                                    ("mmdedup, passages off, then retrain", False, True),
                                    ("mmdedup (recurring passages out)", True, False),
                                    ("mmdedup (recurring passages out), then retrain", True, True)):
        pairs, wall, cpu = run(plain, wrapped, args.chunk, passages, retrain)
        false, found = count(pairs, family, positives)
        print(f"| {name} | {false['strong']:,} | {false['medium']:,} | {false['weak']:,} | {found['medium']} "
              f"| {found['weak']} | {wall:.1f} | {cpu:.1f} |", flush=True)


if __name__ == "__main__":
    main()
