"""The layers call downwards only, every SQL statement lives in store/, and every package
ships.

cli -> api -> pipeline / review / learn / report -> signals -> input, extract, index,
score -> store; `terminal` (text made safe to print) serves cli and review. extract,
index and score are pure: bytes, strings and arrays in, arrays out; they import neither
the settings nor the store, so every limit and threshold they use is a parameter their
callers pass from one place, and nothing in them can read or write a database. A package
missing from pyproject's list would import from a checkout and fail once installed.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import mmdedup

PACKAGE = Path(mmdedup.__file__).parent
ROOT = PACKAGE.parents[1]

# What each part may import (besides itself and `results`, plain data every layer returns).
ALLOWED = {
    "store": set(),
    "extract": set(),
    "index": set(),
    "score": set(),
    "config": set(),
    "terminal": set(),
    "input": {"config", "extract"},
    "signals": {"config", "input", "extract", "index", "score", "store"},
    "pipeline": {"config", "input", "extract", "score", "signals", "store"},
    "learn": {"config", "input", "extract", "score", "signals", "store", "review"},
    "review": {"config", "input", "extract", "score", "signals", "store", "terminal"},
    "report": {"config", "input", "extract", "score", "signals", "store", "review"},
    "api": {"config", "input", "extract", "index", "score", "signals", "store", "pipeline",
            "learn", "review", "report"},
    "cli": {"api", "config", "signals", "report", "review", "learn", "terminal"},
}
# The parts whose every module must leave SQL to store/.
SQL_FREE = set(ALLOWED) - {"store"}


def part_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imported(path: Path) -> set[str]:
    """The mmdedup parts a module imports, relative imports resolved."""
    package = ["mmdedup", *path.relative_to(PACKAGE).parent.parts]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names = [module] if node.module else [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "mmdedup" and len(parts) > 1:
                out.add(parts[1])
    return out


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if part_of(p) in ALLOWED)


def test_layers_import_downwards_only() -> None:
    found = modules()
    assert len(found) > 40
    wrong = []
    for path in found:
        part = part_of(path)
        for other in imported(path) - {part, "results"}:
            if other not in ALLOWED[part]:
                wrong.append(f"{path.relative_to(PACKAGE)} imports mmdedup.{other}")
    assert not wrong, "\n".join(wrong)


def test_extract_index_and_score_are_pure() -> None:
    for path in modules():
        if part_of(path) in ("extract", "index", "score"):
            assert not imported(path) & {"config", "store"}, path


_SQL = re.compile(r"\bsqlalchemy\b(?!\.orm\b|\.exc\b)|\bexec_driver_sql\b|\"(SELECT|INSERT|UPDATE|DELETE) ")


def test_every_sql_statement_is_in_store() -> None:
    """Outside store/, sqlalchemy serves only as session types and errors."""
    wrong = [f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
             for path in modules() if part_of(path) in SQL_FREE
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if _SQL.search(line)]
    assert not wrong, "\n".join(wrong)


def test_every_package_ships() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    packages = {".".join(("mmdedup", *p.parent.relative_to(PACKAGE).parts))
                for p in PACKAGE.rglob("__init__.py")}
    assert packages <= listed, sorted(packages - listed)
