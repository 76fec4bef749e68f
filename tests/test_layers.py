"""extract/ is the pure layer: bytes and strings in, arrays out. It imports neither the
settings nor the store, so every limit and threshold it uses is a parameter its callers
pass from one place (config.Settings), and nothing in it can read or write a database."""

from __future__ import annotations

import ast
from pathlib import Path

import mmdedup.extract

EXTRACT = Path(mmdedup.extract.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """The mmdedup modules a file imports, resolved to absolute names."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "mmdedup.extract".rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)
    return {m for m in out if m.startswith("mmdedup")}


def test_extract_imports_neither_config_nor_store() -> None:
    files = sorted(EXTRACT.glob("*.py"))
    assert len(files) > 5
    for path in files:
        for module in imported_modules(path):
            assert not module.startswith(("mmdedup.config", "mmdedup.store")), f"{path.name} imports {module}"
