"""The `mmdedup` command: argument parsing and output formatting over `Platform`.

jsonl and csv are for scripts (one record a line, stable keys); table is for people.
Errors a user can fix print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from datetime import datetime
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from .api import DECISIONS, SIGNAL_NAMES, LockBusy, Platform
from .config import TIERS
from .report import DEFAULT_MAX_CLUSTERS, DEFAULT_MAX_PAIRS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mmdedup", description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=None,
                        help="folder for the SQLite database and index files "
                             "(env MMDEDUP_HOME, default ./.mmdedup)")
    parser.add_argument("--db", default=None,
                        help="database URL, e.g. postgresql+psycopg://user@host/db "
                             "(env MMDEDUP_DATABASE_URL, default SQLite in --home)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="ingest a manifest (.jsonl) or a folder")
    p.add_argument("source", help="MANIFEST.jsonl or FOLDER")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--workers", type=int, default=1,
                   help="processes in all: with N > 1, N - 1 extract chunks ahead while one "
                        "writes (default 1: everything in one process)")

    p = sub.add_parser("pairs", help="scored duplicate pairs")
    p.add_argument("--min-tier", choices=TIERS, default="weak")
    p.add_argument("--format", choices=("table", "jsonl", "csv"), default="table")

    p = sub.add_parser("clusters", help="duplicate groups")
    p.add_argument("--format", choices=("table", "jsonl"), default="table")

    p = sub.add_parser("label", help="record a reviewer decision on one pair, or import "
                                        "many with --file")
    p.add_argument("a", nargs="?")
    p.add_argument("b", nargs="?")
    decision = p.add_mutually_exclusive_group()
    decision.add_argument("--duplicate", action="store_true")
    decision.add_argument("--distinct", action="store_true")
    decision.add_argument("--unsure", action="store_true")
    p.add_argument("--file", default=None, metavar="PATH",
                   help="import labels: CSV with header a,b,decision[,reviewer][,created_at] "
                        "or JSON Lines {a, b, decision, reviewer?, created_at?}")
    p.add_argument("--format", choices=("csv", "jsonl"), default=None,
                   help="of --file (default: by its extension)")
    p.add_argument("--reviewer", default=None,
                   help="default: $MMDEDUP_REVIEWER or the login (for --file: rows naming none)")

    p = sub.add_parser("labels", help="reviewer labels: a table, or every label for scripts "
                                         "with --export")
    p.add_argument("--export", action="store_true",
                   help="every label as jsonl or csv (a, b, decision, reviewer, created_at); "
                        "`label --file` imports it back")
    p.add_argument("--format", choices=("jsonl", "csv"), default="jsonl", help="of --export")
    p.add_argument("--out", default=None, help="write the export to this file (default stdout)")

    p = sub.add_parser("review", help="decide review-queue pairs in the terminal, one key each")
    p.add_argument("--reviewer", default=None, help="default: $MMDEDUP_REVIEWER or the login")
    p.add_argument("--limit", type=int, default=None, help="stop after N decisions")
    p.add_argument("--tiers", default=None,
                   help="comma-separated tiers the queue holds, in order "
                        "(default: review_tiers in config, medium)")

    p = sub.add_parser("failures", help="inputs that could not be ingested, with the reason")
    p.add_argument("--all", action="store_true", help="include failures a rerun resolved")
    p.add_argument("--format", choices=("table", "jsonl"), default="table")

    p = sub.add_parser("query", help="nearest stored items to a text, picture or page, "
                                        "without ingesting it")
    p.add_argument("--text")
    p.add_argument("--image", help="path of a picture")
    p.add_argument("--video", help="path of a video")
    p.add_argument("--html", help="path of a web page")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--min-score", type=float, default=0.0)
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="keep items whose meta has this value (repeatable)")
    p.add_argument("--since", type=datetime.fromisoformat, help="ingested at or after (ISO time)")
    p.add_argument("--until", type=datetime.fromisoformat, help="ingested at or before (ISO time)")
    p.add_argument("--format", choices=("json", "table"), default="json")

    p = sub.add_parser("stats", help="counts of items, pairs, labels and failures")
    p.add_argument("--format", choices=("table", "json"), default="table")

    p = sub.add_parser("report", help="a self-contained HTML report of clusters and the "
                                         "review queue")
    p.add_argument("--out", required=True, help="the HTML file to write")
    p.add_argument("--max-pairs", type=int, default=DEFAULT_MAX_PAIRS,
                   help="review-queue pairs shown (default %(default)s)")
    p.add_argument("--max-clusters", type=int, default=DEFAULT_MAX_CLUSTERS,
                   help="clusters shown, largest first (default %(default)s)")
    p.add_argument("--root", default=None,
                   help="folder that relative file paths of items ingested from Python are "
                        "relative to (manifest and folder items need none)")

    p = sub.add_parser("retrain", help="retrain TF-IDF, word weights and fusion from the store "
                                          "and the labels; re-sign and re-score what changed")
    p.add_argument("--rollback", action="store_true",
                   help="re-activate the models in force before the last retrain")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="wait this long for a retrain already running (default: exit at once)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with Platform.open(args.home, args.db) as platform:
            return COMMANDS[args.command](platform, args)
    except (KeyError, ValueError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"mmdedup: error: {message}", file=sys.stderr)
        return 2


def cmd_ingest(platform: Platform, args: argparse.Namespace) -> int:
    show = not args.no_progress and sys.stderr.isatty()
    report = platform.ingest(args.source, progress=show, workers=args.workers)
    print(report.summary())
    if report.failed:
        print("see `mmdedup failures` for the reasons; a rerun retries them", file=sys.stderr)
    return 0


def cmd_pairs(platform: Platform, args: argparse.Namespace) -> int:
    pairs = platform.pairs(args.min_tier)
    if args.format == "jsonl":
        _jsonl(pairs)
    elif args.format == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(["a", "b", "score", "tier", "kind", *SIGNAL_NAMES])
        for p in pairs:
            writer.writerow([p["a"], p["b"], p["score"], p["tier"], p["kind"],
                             *("" if p["signals"][s] is None else p["signals"][s] for s in SIGNAL_NAMES)])
    else:
        _table(["a", "b", "score", "tier", "kind", *SIGNAL_NAMES],
               [[p["a"], p["b"], f"{p['score']:.3f}", p["tier"], p["kind"],
                 *_fmt_signals(p["signals"])] for p in pairs], f"{len(pairs)} pairs")
    return 0


def cmd_clusters(platform: Platform, args: argparse.Namespace) -> int:
    clusters = platform.clusters()
    if args.format == "jsonl":
        _jsonl(clusters)
    else:
        _table(["canonical", "size", "members"],
               [[c["canonical"], str(len(c["members"])), ", ".join(c["members"])] for c in clusters],
               f"{len(clusters)} clusters")
    return 0


def cmd_label(platform: Platform, args: argparse.Namespace) -> int:
    decision = next((d for d in DECISIONS if getattr(args, d)), None)
    if args.file:
        if args.a or args.b or decision:
            raise ValueError("label --file takes no pair and no decision: they are in the file")
        report = platform.import_labels(args.file, reviewer=args.reviewer, fmt=args.format)
        for error in report.errors:
            print(f"{args.file}:{error.line}: {error.reason}: {error.detail}", file=sys.stderr)
        print(report.summary())
        return 1 if report.errors else 0
    if not (args.a and args.b) or decision is None:
        raise ValueError("label needs A B and one of --duplicate, --distinct, --unsure "
                         "(or --file PATH)")
    platform.label(args.a, args.b, decision=decision, reviewer=args.reviewer)
    print(f"{args.a} ~ {args.b}: {decision}")
    return 0


def cmd_labels(platform: Platform, args: argparse.Namespace) -> int:
    if args.export or args.out:
        if args.out:
            n = platform.export_labels(args.out, args.format)
            print(f"wrote {n} labels to {args.out}", file=sys.stderr)
        else:
            platform.export_labels(sys.stdout, args.format)
        return 0
    labels = platform.labels()
    _table(["a", "b", "decision", "reviewer", "at"],
           [[r["a"], r["b"], r["decision"], r["reviewer"], r["created_at"]] for r in labels],
           f"{len(labels)} labels")
    return 0


def cmd_review(platform: Platform, args: argparse.Namespace) -> int:
    from .review.screen import run_review

    tiers = [t.strip() for t in args.tiers.split(",") if t.strip()] if args.tiers else None
    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit takes a positive number")
    return run_review(platform, reviewer=args.reviewer, limit=args.limit, tiers=tiers)


def cmd_failures(platform: Platform, args: argparse.Namespace) -> int:
    failures = platform.failures(include_resolved=args.all)
    if args.format == "jsonl":
        _jsonl(failures)
    else:
        _table(["source", "key", "reason", "detail"],
               [[os.path.basename(f["source"]), f["key"], f["reason"], f["detail"]] for f in failures],
               f"{len(failures)} failures")
    return 0


def cmd_query(platform: Platform, args: argparse.Namespace) -> int:
    meta = dict(item.split("=", 1) for item in args.meta if "=" in item)
    if len(meta) != len(args.meta):
        raise ValueError("--meta takes KEY=VALUE")
    results = platform.query(args.text, image=args.image, video=args.video, html=args.html, k=args.k,
                             min_score=args.min_score, meta=meta, since=args.since, until=args.until)
    if args.format == "json":
        print(json.dumps(results, ensure_ascii=False))
    else:
        # query-only signals (clip_text: a text matched to pictures) get columns when present
        extra = sorted({s for r in results for s in r["signals"] if s not in SIGNAL_NAMES})
        names = [*SIGNAL_NAMES, *extra]
        _table(["id", "score", *names],
               [[r["id"], f"{r['score']:.3f}", *_fmt_signals(r["signals"], names)]
                for r in results], f"{len(results)} matches")
    return 0


def cmd_stats(platform: Platform, args: argparse.Namespace) -> int:
    stats = platform.stats()
    if args.format == "json":
        print(json.dumps(stats, ensure_ascii=False, indent=2))
        return 0
    rows = []
    for key, value in stats.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
        rows.append([key, str(value)])
    _table(["what", "count"], rows, "mmdedup store")
    return 0


def cmd_report(platform: Platform, args: argparse.Namespace) -> int:
    summary = platform.report(args.out, max_pairs=args.max_pairs,
                              max_clusters=args.max_clusters, root=args.root)
    print(f"wrote {summary['path']}: {summary['clusters_shown']} of {summary['clusters']} "
          f"clusters, {summary['review_shown']} of {summary['review_queue']} pairs to review")
    return 0


def cmd_retrain(platform: Platform, args: argparse.Namespace) -> int:
    try:
        report = platform.retrain(rollback=args.rollback, wait_seconds=args.wait)
    except LockBusy as exc:
        print(f"mmdedup: {exc}", file=sys.stderr)
        return 3
    except LookupError as exc:  # nothing to roll back
        print(f"mmdedup: error: {exc.args[0]}", file=sys.stderr)
        return 2
    print(report.summary())
    return 0


COMMANDS = {"ingest": cmd_ingest, "pairs": cmd_pairs, "clusters": cmd_clusters,
            "label": cmd_label, "failures": cmd_failures, "query": cmd_query,
            "stats": cmd_stats, "report": cmd_report, "labels": cmd_labels,
            "review": cmd_review, "retrain": cmd_retrain}


def _fmt_signals(signals: dict[str, Any], names: Sequence[str] = SIGNAL_NAMES) -> list[str]:
    return ["-" if signals.get(s) is None else f"{signals[s]:.2f}" for s in names]


def _jsonl(records: list[dict[str, Any]]) -> None:
    out = sys.stdout
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


def _table(columns: list[str], rows: list[list[str]], title: str) -> None:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console(width=max(120, Console().width)).print(table)


if __name__ == "__main__":
    raise SystemExit(main())
