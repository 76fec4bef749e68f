"""What the commands print: tables for people, JSON Lines and CSV for scripts."""

from __future__ import annotations

import csv
import json
import sys
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from ..signals.registry import listed_names


def print_pairs_csv(pairs: list[dict[str, Any]]) -> None:
    """Pairs as CSV on stdout: a, b, score, tier, kind and a column per signal."""
    names = listed_names()
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(["a", "b", "score", "tier", "kind", *names])
    for p in pairs:
        writer.writerow([p["a"], p["b"], p["score"], p["tier"], p["kind"],
                         *("" if p["signals"][s] is None else p["signals"][s] for s in names)])


def fmt_signals(signals: dict[str, Any], names: Sequence[str]) -> list[str]:
    return ["-" if signals.get(s) is None else f"{signals[s]:.2f}" for s in names]


def print_jsonl(records: list[dict[str, Any]]) -> None:
    out = sys.stdout
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


def print_table(columns: list[str], rows: list[list[str]], title: str) -> None:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console(width=max(120, Console().width)).print(table)


__all__ = ["fmt_signals", "print_jsonl", "print_pairs_csv", "print_table"]
