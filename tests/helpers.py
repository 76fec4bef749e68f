"""Plain helpers that several test files use (their fixtures are in conftest.py)."""

from __future__ import annotations

from mmdedup import Platform


def pair_map(platform: Platform) -> dict[tuple[str, str], dict]:
    """The platform's pairs of every tier, by their two ids in sorted order."""
    return {tuple(sorted((p["a"], p["b"]))): p for p in platform.pairs("weak")}
