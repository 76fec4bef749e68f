"""The `mmdedup` command: argument parsing and output formatting over `Platform`.

jsonl and csv are for scripts (one record a line, stable keys); table is for people.
Errors a user can fix, and a store that cannot be opened, read or written, print one line
on stderr (what is wrong, what to do) and exit with status 2; output cut short by its
reader (`| head`) ends quietly.

This module holds the parser and `main`; commands.py runs each command, output.py
formats what they print.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import sys
from datetime import datetime
from typing import NoReturn, Sequence

from ..config import TIERS
from ..report import DEFAULT_MAX_CLUSTERS, DEFAULT_MAX_PAIRS
from ..terminal import printable

DESCRIPTION = ("Find near-duplicate texts, web pages, pictures and videos; review the\n"
               "doubtful pairs in the terminal and learn from the decisions.")
EPILOG = """a first run:
  mmdedup --home store ingest corpus/manifest.jsonl   (or a folder)
  mmdedup --home store pairs
  mmdedup --home store clusters

`mmdedup COMMAND --help` says more of each command."""
# The commands that only read: they open the store read-only, create and migrate nothing,
# and answer on a store this user may not write.
READ_ONLY = {"stats", "pairs", "clusters", "report", "failures", "labels", "query", "serve"}


class Parser(argparse.ArgumentParser):
    """argparse, with what it echoes of the command line printed safely."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {printable(message)}\n")


def positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"takes 1 or more, not {n}")
    return n


def iso_time(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 time (e.g. 2026-01-31 "
                                         "or 2026-01-31T08:00:00+01:00)") from None


def meta_values(items: Sequence[str]) -> dict[str, str]:
    """--meta KEY=VALUE options as {key: value}."""
    meta = dict(item.split("=", 1) for item in items if "=" in item)
    if len(meta) != len(items):
        raise ValueError("--meta takes KEY=VALUE")
    return meta


def store_options(parser: argparse.ArgumentParser, default: object) -> None:
    """--home and --db, before the command or after it."""
    parser.add_argument("--home", default=default, metavar="DIR",
                        help="folder of the store: the SQLite database, index files and "
                             "config.toml (env MMDEDUP_HOME, default ./.mmdedup)")
    parser.add_argument("--db", default=default, metavar="URL",
                        help="database URL, e.g. postgresql+psycopg://user@host/db "
                             "(env MMDEDUP_DATABASE_URL, default SQLite in --home)")


class _Version(argparse.Action):
    """--version, the installed package's, read only when asked: reading package metadata
    costs every other command a tenth of its start."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("mmdedup")
        except PackageNotFoundError:  # run from a checkout that was never installed
            found = "(not installed)"
        print(f"mmdedup {found}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="mmdedup", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version)
    store_options(parser, None)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands")

    def command(name: str, help: str) -> argparse.ArgumentParser:  # noqa: A002
        p = sub.add_parser(name, help=help, description=help[:1].upper() + help[1:] + ".")
        store_options(p, argparse.SUPPRESS)
        return p

    p = command("ingest", "ingest a manifest (.jsonl), a folder or one file; or a stream of "
                          "JSON Lines (- for standard input, or --follow FILE), a decision a line")
    p.add_argument("source", help="MANIFEST.jsonl, FOLDER (one item per file), FILE (one item), "
                                  "- (JSON Lines on standard input) or the file to --follow")
    p.add_argument("--follow", action="store_true",
                   help="read the JSON Lines file as it grows and is rotated, resuming after the "
                        "last committed line when started again (until Ctrl-C, SIGTERM or --idle)")
    p.add_argument("--out", metavar="FILE",
                   help="a stream's decision lines go to this file (exactly once across restarts "
                        "with --follow) instead of standard output")
    p.add_argument("--idle", type=float, default=0.0, metavar="SECONDS",
                   help="with --follow: stop after this many seconds without a new line (default: never)")
    p.add_argument("--id-prefix", default="", metavar="PREFIX",
                   help="put PREFIX before every item id (a folder's ids are the paths inside "
                        "it: a prefix keeps two folders with the same file names apart)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--workers", type=positive, default=1,
                   help="processes in all: with N > 1, N - 1 extract chunks ahead while one "
                        "writes (default 1: everything in one process)")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local: this machine (default); ray: the source read and extracted in "
                        "blocks on a Ray cluster (the ray extra; every worker must reach the "
                        "files and the store)")
    p.add_argument("--ray-address", metavar="auto|HOST:PORT",
                   help="the Ray cluster of --engine ray (default: $RAY_ADDRESS, else a "
                        "cluster of this machine started for the run)")

    p = command("delete", "delete items: their signatures, pairs and index entries go, their "
                          "labels stay, marked as about a deleted item")
    p.add_argument("ids", nargs="*", metavar="ID", help="ids of the items to delete")
    p.add_argument("--file", metavar="IDS", help="a file of item ids, one a line (- reads standard input)")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="the items whose meta has this value (repeatable: all must match)")
    p.add_argument("--before", type=iso_time, metavar="TIME",
                   help="the items whose time is before this ISO time (UTC unless it says): "
                        "their time_field, else when they were ingested")
    p.add_argument("--dry-run", action="store_true", help="say what would go, delete nothing")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table: a line for people (default); json: what went, ids included")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = command("expire", "delete the items older than their content class's retention "
                          "(keep under [windows] in config.toml); every ingest does it too")
    p.add_argument("--dry-run", action="store_true", help="say what would go, delete nothing")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table: a line for people (default); json: what went, ids included")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = command("pairs", "scored duplicate pairs, best first")
    p.add_argument("--min-tier", choices=TIERS, default="weak",
                   help="the lowest tier listed (default %(default)s: every pair)")
    p.add_argument("--format", choices=("table", "jsonl", "csv"), default="table",
                   help="table for people (default), jsonl or csv for scripts")

    p = command("clusters", "duplicate groups, each with its canonical member")
    p.add_argument("--format", choices=("table", "jsonl"), default="table",
                   help="table for people (default), jsonl for scripts")

    p = command("label", "record a reviewer decision on one pair, or import many with --file")
    p.add_argument("a", nargs="?", help="id of one item of the pair")
    p.add_argument("b", nargs="?", help="id of the other")
    decision = p.add_mutually_exclusive_group()
    decision.add_argument("--duplicate", action="store_true", help="A and B are duplicates")
    decision.add_argument("--distinct", action="store_true", help="A and B are not duplicates")
    decision.add_argument("--unsure", action="store_true",
                          help="no decision: the pair stays for other reviewers")
    p.add_argument("--file", default=None, metavar="PATH",
                   help="import labels: CSV with header a,b,decision[,reviewer][,created_at] "
                        "or JSON Lines {a, b, decision, reviewer?, created_at?}")
    p.add_argument("--format", choices=("csv", "jsonl"), default=None,
                   help="of --file (default: by its extension)")
    p.add_argument("--reviewer", default=None,
                   help="default: $MMDEDUP_REVIEWER or the login (for --file: rows naming none)")

    p = command("labels", "reviewer labels: a table, or every label for scripts with --export")
    p.add_argument("--export", action="store_true",
                   help="every label as jsonl or csv (a, b, decision, reviewer, created_at); "
                        "`label --file` imports it back")
    p.add_argument("--format", choices=("jsonl", "csv"), default=None,
                   help="of --export: jsonl (default) or csv")
    p.add_argument("--out", default=None, metavar="PATH",
                   help="write the export to this file (default stdout)")

    p = command("review", "decide review-queue pairs in the terminal, one key each")
    p.add_argument("--reviewer", default=None, help="default: $MMDEDUP_REVIEWER or the login")
    p.add_argument("--limit", type=int, default=None, help="stop after N decisions")
    p.add_argument("--tiers", default=None,
                   help="comma-separated tiers the queue holds, in order "
                        "(default: review_tiers in config, medium)")

    p = command("failures", "inputs that could not be ingested, with the reason")
    p.add_argument("--all", action="store_true", help="include failures a rerun resolved")
    p.add_argument("--format", choices=("table", "jsonl"), default="table",
                   help="table for people (default), jsonl for scripts")

    p = command("query", "nearest stored items to a text, picture, video or page, without "
                         "ingesting it")
    p.add_argument("--text", help="a text to look for")
    p.add_argument("--image", help="path of a picture")
    p.add_argument("--video", help="path of a video")
    p.add_argument("--html", help="path of a web page")
    p.add_argument("--k", type=positive, default=10, help="at most this many (default %(default)s)")
    p.add_argument("--min-score", type=float, default=0.0,
                   help="leave out matches fused below this score (default 0)")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="keep items whose meta has this value (repeatable)")
    p.add_argument("--since", type=iso_time, help="ingested at or after (ISO time)")
    p.add_argument("--until", type=iso_time, help="ingested at or before (ISO time)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table for people (default), json (a list) for scripts")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (of a store signed again after an upgrade)")

    p = command("serve", "keep the store open and answer `mmdedup query` on it from this "
                         "process, until stopped (Ctrl-C or SIGTERM)")
    p.add_argument("--idle", type=float, default=0.0, metavar="SECONDS",
                   help="stop after this many seconds without a query (default: never)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (of a store signed again after an upgrade)")

    p = command("stats", "counts of items, pairs, labels and failures")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table for people (default), json for scripts")

    p = command("thresholds", "the medium tier each pair kind got under adaptive thresholds, and its history")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table for people (default), json for scripts")

    p = command("report", "a self-contained HTML report of clusters and the review queue")
    p.add_argument("--out", required=True, help="the HTML file to write")
    p.add_argument("--max-pairs", type=int, default=DEFAULT_MAX_PAIRS,
                   help="review-queue pairs shown (default %(default)s)")
    p.add_argument("--max-clusters", type=int, default=DEFAULT_MAX_CLUSTERS,
                   help="clusters shown, largest first (default %(default)s)")
    p.add_argument("--root", default=None,
                   help="folder that relative file paths of items ingested from Python are "
                        "relative to (manifest and folder items need none)")

    p = command("retrain", "retrain TF-IDF, word weights and fusion from the store and the "
                           "labels; re-sign and re-score what changed")
    p.add_argument("--rollback", action="store_true",
                   help="re-activate the models in force before the last retrain")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="wait this long for a retrain already running (default: exit at once)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        # A character the terminal's encoding cannot take is written as an escape, not a crash.
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    # A lost database connection is said in one line (`problem`); psycopg would add its
    # own warning of the pipeline it could not close on the way out.
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "labels" and args.format and not (args.export or args.out):
        parser.error(f"labels: --format is the format of --export (labels --export --format "
                     f"{args.format})")
    try:
        status = run(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # The reader left (`mmdedup pairs | head`): stop quietly, with the status of a
        # program that SIGPIPE ended, as a C tool would.
        _drop_stdout()
        return 128 + signal.SIGPIPE


def run(args: argparse.Namespace) -> int:
    """The command, with what goes wrong around it said in one line and status 2. The
    platform is imported here, not with the parser: `--help` and a usage error answer at
    once, without loading the store, the signals and their libraries; a query a server
    answers (query_server.py) never loads them."""
    if args.command == "query":
        status = ask_server(args)
        if status is not None:
            return status
    from ..api import Platform
    from .commands import COMMANDS

    platform = None
    try:
        with Platform.open(args.home, args.db, read_only=args.command in READ_ONLY) as platform:
            return COMMANDS[args.command](platform, args)
    except BrokenPipeError:
        raise
    except Exception as exc:
        said = problem(exc, platform)
        if said is None:
            raise
        return fail(said)


def ask_server(args: argparse.Namespace) -> int | None:
    """A query answered by a server of the store (its status), or None where none answers."""
    from .output import print_matches
    from .query_server import ask, query_request

    try:
        answer = ask(args.home, args.db, query_request(args))
    except ValueError as exc:
        return fail(exc)
    if answer is None:
        return None
    if "error" in answer:
        return fail(answer["error"])
    print_matches(answer["matches"], answer["listed"], args.format)
    return 0


def problem(exc: BaseException, platform: object) -> str | None:
    """What the command says of an exception (one line), or None for a defect."""
    from ..api import EngineUnavailable, StoreError, UnknownItem, store_problem

    if isinstance(exc, (StoreError, UnknownItem, ValueError, FileNotFoundError, EngineUnavailable)):
        return str(exc)
    if isinstance(exc, OSError):
        return os_problem(exc)
    return store_problem(exc, platform.url) if platform is not None else None


def fail(message: object) -> int:
    print(f"mmdedup: error: {printable(message)}", file=sys.stderr)
    return 2


def os_problem(exc: OSError) -> str:
    where = f" {exc.filename}" if exc.filename else ""
    if exc.errno == errno.ENOSPC:
        return (f"no space left on the device, writing{where}: free some space and run the "
                "command again (work committed so far is kept)")
    return f"{exc.strerror or exc}:{where}" if where else str(exc.strerror or exc)


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the flush at exit finds no closed pipe to complain of."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


__all__ = ["build_parser", "main"]
