"""What the commands print: tables for people, JSON Lines and CSV for scripts.

Everything printed passes through the terminal module: tables and messages show control
characters in item data as escapes (`\\x1b`), JSON stays the same JSON with them escaped,
and CSV is escaped when it goes to a terminal and left as the data in a pipe or a file.
"""

from __future__ import annotations

import csv
import json
import sys
from typing import Any, Callable, Iterable, Sequence

from ..terminal import json_printable, printable

# rich and the signal registry are imported where a table or a pairs CSV is printed: a
# query answered by a server (query_server.py) prints JSON without the platform's imports.


class DataOut:
    """stdout for a machine format (json, jsonl, csv), written through as it comes."""

    def __init__(self, fmt: str) -> None:
        self.out = sys.stdout
        self.fix: Callable[[str], str] | None = None
        if fmt in ("json", "jsonl"):
            self.fix = json_printable
        elif self.out.isatty():
            self.fix = lambda text: printable(text, lines=True)

    def write(self, text: str) -> int:
        return self.out.write(self.fix(text) if self.fix else text)


def say(text: object, *, err: bool = False) -> None:
    """A message for people, on stdout (or stderr), control characters escaped."""
    print(printable(text, lines=True), file=sys.stderr if err else sys.stdout)


def print_pairs_csv(pairs: Iterable[dict[str, Any]]) -> None:
    """Pairs as CSV on stdout: a, b, score, tier, kind and a column per signal."""
    from ..signals.registry import listed_names

    names = listed_names()
    writer = csv.writer(DataOut("csv"), lineterminator="\n")
    writer.writerow(["a", "b", "score", "tier", "kind", *names])
    for p in pairs:
        writer.writerow([p["a"], p["b"], p["score"], p["tier"], p["kind"],
                         *("" if p["signals"][s] is None else p["signals"][s] for s in names)])


def fmt_signals(signals: dict[str, Any], names: Sequence[str]) -> list[str]:
    return ["-" if signals.get(s) is None else f"{signals[s]:.2f}" for s in names]


def print_jsonl(records: Iterable[dict[str, Any]]) -> None:
    out = DataOut("jsonl")
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


def print_json(value: Any, indent: int | None = None) -> None:
    DataOut("json").write(json.dumps(value, ensure_ascii=False, indent=indent) + "\n")


def print_matches(matches: list[dict[str, Any]], listed: Sequence[str], fmt: str) -> None:
    """A query's matches (`Match.as_dict()`), with a column for each listed signal and any
    query-only signal they carry (clip_text: a text matched to pictures)."""
    if fmt == "json":
        print_json(matches)
        return
    names = [*listed, *sorted({s for m in matches for s in m["signals"] if s not in listed})]
    print_table(["id", "score", *names],
                [[m["id"], f"{m['score']:.3f}", *fmt_signals(m["signals"], names)] for m in matches],
                f"{len(matches)} matches")


def print_table(columns: list[str], rows: list[list[str]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # The reader left: end as every other output does (cli.main), not with rich's exit.
            raise BrokenPipeError

    # Cells are Text, not strings: rich would read "[red]" in an id as markup.
    table = Table(title=Text(printable(title)), title_justify="left")
    for column in columns:
        table.add_column(Text(printable(column)), overflow="fold")
    for row in rows:
        table.add_row(*(Text(printable(cell, lines=True)) for cell in row))
    _Console(width=max(120, Console().width)).print(table)


__all__ = ["DataOut", "fmt_signals", "print_json", "print_jsonl", "print_matches", "print_pairs_csv",
           "print_table", "say"]
