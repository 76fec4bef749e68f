"""The `mmdedup` command: argument parsing and output formatting over `Platform`.

jsonl and csv are for scripts (one record a line, stable keys); table is for people.
Errors a user can fix print one line on stderr and exit with status 2.

This module holds the parser and `main`; commands.py runs each command, output.py
formats what they print.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Sequence

from ..api import Platform, UnknownItem
from ..config import TIERS
from ..report import DEFAULT_MAX_CLUSTERS, DEFAULT_MAX_PAIRS
from .commands import COMMANDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mmdedup", description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=None,
                        help="folder for the SQLite database and index files "
                             "(env MMDEDUP_HOME, default ./.mmdedup)")
    parser.add_argument("--db", default=None,
                        help="database URL, e.g. postgresql+psycopg://user@host/db "
                             "(env MMDEDUP_DATABASE_URL, default SQLite in --home)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="ingest a manifest (.jsonl), a folder or one file")
    p.add_argument("source", help="MANIFEST.jsonl, FOLDER (one item per file) or FILE (one item)")
    p.add_argument("--id-prefix", default="", metavar="PREFIX",
                   help="put PREFIX before every item id (a folder's ids are the paths inside "
                        "it: a prefix keeps two folders with the same file names apart)")
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
    except (UnknownItem, ValueError, FileNotFoundError) as exc:
        message = exc
        print(f"mmdedup: error: {message}", file=sys.stderr)
        return 2


__all__ = ["build_parser", "main"]
