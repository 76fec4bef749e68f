"""Duplicate groups: connected components over accepted pairs.

A pair joins two items when it is strong or a reviewer called it a duplicate, unless a
reviewer called it distinct (the latest decision on a pair wins). Components are found with
union-find (path halving, union by size), linear in the number of edges.
"""

from __future__ import annotations

from typing import Iterable


def components(edges: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Groups of two or more nodes joined by `edges`, each sorted, ordered by first member."""
    parent: dict[int, int] = {}
    size: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        if size.get(ra, 1) < size.get(rb, 1):
            ra, rb = rb, ra
        parent[rb] = ra
        size[ra] = size.get(ra, 1) + size.get(rb, 1)

    groups: dict[int, list[int]] = {}
    for node in parent:
        groups.setdefault(find(node), []).append(node)
    return sorted((sorted(g) for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def accepted_edges(
    pairs: Iterable[tuple[int, int, str | None]], decisions: dict[tuple[int, int], str]
) -> list[tuple[int, int]]:
    """Edges from strong pairs and confirmed labels, less those reviewers rejected."""
    edges = {(a, b) for a, b, tier in pairs if tier == "strong"}
    for pair, decision in decisions.items():
        if decision == "duplicate":
            edges.add(pair)
        elif decision == "distinct":
            edges.discard(pair)
    return sorted(edges)
