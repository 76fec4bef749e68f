"""Two ingests at once on one store against the same two ingests one after the other.

The corpus is N originals in one manifest and, in the other, for each original a near
copy (three of forty words changed) or an exact copy (every fifth), plus an unrelated
text: every duplicate pair crosses the two manifests, so a writer that did not see the
other's items would miss it. Both runs use the prior TF-IDF weights (a model counted over
whatever the store holds at the moment of a refresh legitimately differs between orders of
work). Prints the pairs each run found, how many pairs differ between them, and the wall
and CPU seconds of both.

    python scripts/bench/concurrent_ingest.py [--n 10000] [--db URL] [--chunk 500]

`--db` names an empty PostgreSQL database; each run gets a schema of its own there and
drops it after. Without it each run has a SQLite store in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import uuid
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

from mmdedup import Platform

sys.path.insert(0, str(Path(__file__).parent))
from timing import child_seconds  # noqa: E402


def corpus(n: int, seed: int = 11) -> tuple[list[dict], list[dict]]:
    """(originals, copies and unrelated texts): every duplicate pair crosses the two."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(4, 9))) for _ in range(20000)]
    first, second = [], []
    for i in range(n):
        words = rng.choices(vocab, k=40)
        first.append({"id": f"a{i:06d}", "text": " ".join(words)})
        copy = list(words)
        if i % 5:
            for j in rng.sample(range(40), 3):
                copy[j] = rng.choice(vocab)
        second.append({"id": f"b{i:06d}", "text": " ".join(copy)})
        second.append({"id": f"c{i:06d}", "text": " ".join(rng.choices(vocab, k=40))})
    return first, second


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def store(folder: Path, db: str | None, name: str) -> tuple[Path, str, str | None]:
    home = folder / name
    if db is None:
        return home, f"sqlite:///{home / 'store.db'}", None
    schema = f"bench_{name}_{uuid.uuid4().hex[:8]}"
    with create_engine(db).begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(db).update_query_dict({"options": f"-csearch_path={schema}"})
    return home, url.render_as_string(hide_password=False), schema


def run(home: Path, url: str, manifests: list[Path], together: bool, chunk: int) -> tuple[float, float]:
    """Ingest the manifests (at once or one after the other); wall and children's CPU s."""
    Platform.open(home, url).close()  # migrated before the clock starts
    env = {**os.environ, "MMDEDUP_TFIDF_MIN_DOCS": "100000000", "MMDEDUP_INGEST_CHUNK": str(chunk)}
    cmd = [sys.executable, "-m", "mmdedup", "--home", str(home), "--db", url, "ingest", "--no-progress"]
    return child_seconds(*([*cmd, str(m)] for m in manifests), env=env, together=together)


def pairs(home: Path, url: str) -> dict[tuple[str, str], tuple]:
    with Platform.open(home, url, read_only=True) as p:
        return {tuple(sorted((x.a, x.b))): (round(x.score, 6), x.tier) for x in p.pairs("weak")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="originals (the corpus is 3n texts)")
    parser.add_argument("--db", default=None, help="an empty PostgreSQL database (default: SQLite)")
    parser.add_argument("--chunk", type=int, default=500, help="ingest_chunk of both runs")
    args = parser.parse_args()
    first, second = corpus(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        manifests = [write(folder / "first.jsonl", first), write(folder / "second.jsonl", second)]
        found, schemas = {}, []
        for name, together in (("sequential", False), ("concurrent", True)):
            home, url, schema = store(folder, args.db, name)
            schemas.append(schema)
            wall, cpu = run(home, url, manifests, together, args.chunk)
            found[name] = pairs(home, url)
            crossing = sum(1 for a, b in found[name] if a[1:] == b[1:] and a[0] == "a" and b[0] == "b")
            print(f"{name:>10}: {len(found[name]):,} pairs ({crossing:,} of {args.n:,} designed "
                  f"duplicates), {wall:.1f} s wall, {cpu:.1f} s CPU")
        seq, con = found["sequential"], found["concurrent"]
        differ = sum(seq.get(k) != con.get(k) for k in set(seq) | set(con))
        print(f"pairs that differ between the two runs: {differ}")
        if args.db:
            with create_engine(args.db).begin() as conn:
                for schema in schemas:
                    conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


if __name__ == "__main__":
    main()
