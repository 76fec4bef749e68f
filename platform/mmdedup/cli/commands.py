"""The commands: one function each, `mmdedup COMMAND` runs COMMANDS[COMMAND]."""

from __future__ import annotations

import argparse
import os
import sys

from ..api import DECISIONS, DeleteReport, LockBusy, Platform
from ..signals.registry import listed_names
from . import meta_values
from .output import DataOut, fmt_signals, print_json, print_jsonl, print_matches, print_pairs_csv, print_table, say
from .query_server import query_request, run_query, serve, start_server


def cmd_ingest(platform: Platform, args: argparse.Namespace) -> int:
    show = not args.no_progress and sys.stderr.isatty()
    if args.ray_address and args.engine != "ray":
        raise ValueError("--ray-address is for --engine ray")
    if args.source == "-" or args.follow:
        return stream(platform, args)
    if args.out or args.idle:
        raise ValueError("--out and --idle are for a stream (ingest - or ingest FILE --follow)")
    report = platform.ingest(args.source, progress=show, workers=args.workers,
                             id_prefix=args.id_prefix, engine=args.engine,
                             ray_address=args.ray_address)
    say(report.summary())
    if report.engine["name"] == "ray" and report.engine.get("blocks"):
        e = report.engine
        gpus = f" and {e['gpus']} GPU{'s' if e['gpus'] != 1 else ''} encoding pictures" if e["gpus"] else ""
        made = ", ".join(f"{n} {name}" for name, n in e["extracted"].items())
        made = f" (values made there: {made})" if made else ""
        say(f"ray engine: {e['blocks']} blocks, {e['records']} records read and extracted on "
            f"{e['cpus']} CPUs{gpus}{made} in {e['seconds']:.1f} s", err=True)
        for name, s in e.get("searched", {}).items():
            say(f"ray engine: {s['items']} items searched by {name} in {s['tasks']} tasks: "
                f"{s['candidates']} candidate pairs scored there, {s['pairs']} kept, "
                f"in {s['seconds']:.1f} s", err=True)
    if report.failed:
        say("see `mmdedup failures` for the reasons; a rerun retries them", err=True)
    return 0


def stream(platform: Platform, args: argparse.Namespace) -> int:
    """`ingest -` and `ingest FILE --follow`: decision lines on stdout (or --out), the
    summary on stderr; Ctrl-C and SIGTERM end it after the batch being written."""
    import signal
    import threading

    if args.engine != "local" or args.workers != 1:
        raise ValueError("a stream runs on the local engine, in one process")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    report = platform.stream(args.source, follow=args.follow, out=args.out, idle=args.idle,
                             id_prefix=args.id_prefix, stop=stop)
    made = ", ".join(f"{n} {status}" for status, n in sorted(report.engine["decisions"].items()))
    say(f"{report.summary()}; decisions: {made or 'none'}", err=True)
    return 0


def cmd_delete(platform: Platform, args: argparse.Namespace) -> int:
    ids = list(args.ids)
    if args.file:
        ids += read_ids(args.file)
        if not ids and not (args.meta or args.before):
            raise ValueError(f"{args.file} names no item (one id a line): nothing to delete")
    report = platform.delete(ids, meta=meta_values(args.meta), before=args.before, dry_run=args.dry_run,
                             progress=not args.no_progress and sys.stderr.isatty())
    return print_deleted(report, args)


def cmd_expire(platform: Platform, args: argparse.Namespace) -> int:
    return print_deleted(platform.expire(dry_run=args.dry_run,
                                         progress=not args.no_progress and sys.stderr.isatty()), args)


def print_deleted(report: DeleteReport, args: argparse.Namespace) -> int:
    """What a delete or expire did: a line (a dry run lists the ids first), or JSON."""
    if args.format == "json":
        print_json(report.as_dict(), indent=2)
    else:
        if args.dry_run:
            for id_ in report.ids:
                say(id_)
        say(report.summary(), err=args.dry_run)
    return 0


def read_ids(path: str) -> list[str]:
    """The ids of a file (or standard input), one a line; blank lines skipped."""
    if path == "-":
        lines = sys.stdin.read().splitlines()
    else:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    return [line.strip() for line in lines if line.strip()]


def cmd_pairs(platform: Platform, args: argparse.Namespace) -> int:
    pairs = (p.as_dict() for p in platform.iter_pairs(args.min_tier))  # streamed, as JSON Lines and CSV are
    names = listed_names()
    if args.format == "jsonl":
        print_jsonl(pairs)
    elif args.format == "csv":
        print_pairs_csv(pairs)
    else:
        pairs = list(pairs)
        print_table(["a", "b", "score", "tier", "kind", *names],
                    [[p["a"], p["b"], f"{p['score']:.3f}", p["tier"], p["kind"],
                      *fmt_signals(p["signals"], names)] for p in pairs], f"{len(pairs)} pairs")
    return 0


def cmd_clusters(platform: Platform, args: argparse.Namespace) -> int:
    clusters = [c.as_dict() for c in platform.clusters()]
    if args.format == "jsonl":
        print_jsonl(clusters)
    else:
        print_table(["canonical", "size", "members"],
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
            say(f"{args.file}:{error.line}: {error.reason}: {error.detail}", err=True)
        say(report.summary())
        return 1 if report.errors else 0
    if not (args.a and args.b) or decision is None:
        raise ValueError("label needs A B and one of --duplicate, --distinct, --unsure "
                         "(or --file PATH)")
    platform.label(args.a, args.b, decision=decision, reviewer=args.reviewer)
    say(f"{args.a} ~ {args.b}: {decision}")
    return 0


def cmd_labels(platform: Platform, args: argparse.Namespace) -> int:
    if args.export or args.out:
        fmt = args.format or "jsonl"
        if args.out:
            n = platform.export_labels(args.out, fmt)
            say(f"wrote {n} labels to {args.out}", err=True)
        else:
            platform.export_labels(DataOut(fmt), fmt)
        return 0
    labels = platform.labels()

    def side(r: dict, name: str) -> str:
        return f"{r[name]} (deleted)" if name in r.get("deleted", ()) else r[name]

    print_table(["a", "b", "decision", "reviewer", "at"],
                [[side(r, "a"), side(r, "b"), r["decision"], r["reviewer"], r["created_at"]] for r in labels],
                f"{len(labels)} labels")
    return 0


def cmd_review(platform: Platform, args: argparse.Namespace) -> int:
    from ..review.screen import run_review

    tiers = [t.strip() for t in args.tiers.split(",") if t.strip()] if args.tiers else None
    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit takes a positive number")
    return run_review(platform.review_session(args.reviewer, tiers), limit=args.limit,
                      pair_report=platform.pair_report)


def cmd_failures(platform: Platform, args: argparse.Namespace) -> int:
    failures = platform.failures(include_resolved=args.all)
    if args.format == "jsonl":
        print_jsonl(failures)
    else:
        print_table(["source", "key", "reason", "detail"],
                    [[os.path.basename(f["source"]), f["key"], f["reason"], f["detail"]] for f in failures],
                    f"{len(failures)} failures")
    return 0


def cmd_query(platform: Platform, args: argparse.Namespace) -> int:
    # Items an earlier release signed are signed again first, with a bar where one shows.
    platform.resign_stale(progress=not args.no_progress and sys.stderr.isatty())
    print_matches(run_query(platform, query_request(args)), listed_names(), args.format)
    sys.stdout.flush()
    start_server(args.home, args.db, platform.settings.query_server_idle)
    return 0


def cmd_serve(platform: Platform, args: argparse.Namespace) -> int:
    import signal

    from . import problem

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # (the socket is removed on the way out)
    platform.resign_stale(progress=not args.no_progress and sys.stderr.isatty())
    try:
        serve(platform, args.home, lambda exc: problem(exc, platform), idle=args.idle,
              ready=lambda path: say(f"answering `mmdedup query` on {path}; Ctrl-C stops", err=True))
    except KeyboardInterrupt:
        pass
    return 0


def cmd_stats(platform: Platform, args: argparse.Namespace) -> int:
    stats = platform.stats()
    if args.format == "json":
        print_json(stats, indent=2)
        return 0
    rows = []
    for key, value in stats.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
        rows.append([key, str(value)])
    print_table(["what", "count"], rows, "mmdedup store")
    return 0


def cmd_thresholds(platform: Platform, args: argparse.Namespace) -> int:
    history = platform.thresholds()
    if args.format == "json":
        print_json(history, indent=2)
        return 0
    mode = platform.settings.thresholds
    print_table(["kind", "through item", "pairs", "mean", "sd", "medium tier", "at"],
                [[r["kind"], str(r["through_item"]), str(r["pairs"]), f"{r['mean']:.3f}", f"{r['std']:.3f}",
                  f"{r['cutoff']:.3f}", r["at"]] for r in history],
                f"adaptive medium tiers ({mode} thresholds in force; fixed medium {platform.settings.tier_medium})")
    return 0


def cmd_report(platform: Platform, args: argparse.Namespace) -> int:
    summary = platform.report(args.out, max_pairs=args.max_pairs,
                              max_clusters=args.max_clusters, root=args.root)
    say(f"wrote {summary['path']}: {summary['clusters_shown']} of {summary['clusters']} "
        f"clusters, {summary['review_shown']} of {summary['review_queue']} pairs to review")
    return 0


def cmd_retrain(platform: Platform, args: argparse.Namespace) -> int:
    try:
        report = platform.retrain(rollback=args.rollback, wait_seconds=args.wait)
    except LockBusy as exc:
        say(f"mmdedup: {exc}", err=True)
        return 3
    except LookupError as exc:  # nothing to roll back
        say(f"mmdedup: error: {exc.args[0]}", err=True)
        return 2
    say(report.summary())
    return 0


COMMANDS = {"ingest": cmd_ingest, "delete": cmd_delete, "expire": cmd_expire, "pairs": cmd_pairs, "clusters": cmd_clusters,
            "label": cmd_label, "failures": cmd_failures, "query": cmd_query, "serve": cmd_serve,
            "stats": cmd_stats, "thresholds": cmd_thresholds, "report": cmd_report, "labels": cmd_labels,
            "review": cmd_review, "retrain": cmd_retrain}


__all__ = ["COMMANDS"]
