"""Duplicate groups: connected components over accepted pairs.

A pair joins two items when it is strong (and no medium the two share clearly disagrees)
or a reviewer called it a duplicate, unless a reviewer called it distinct (the latest
decision on a pair wins). Components are found with
union-find (path halving, union by size), linear in the number of edges.
"""

from __future__ import annotations

from typing import Collection, Iterable


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
    pairs: Iterable[tuple[int, int, str | None, dict | None]],
    decisions: dict[tuple[int, int], str],
    disagree_below: float,
    content: Collection[str],
) -> list[tuple[int, int]]:
    """Edges from strong pairs and confirmed labels, less those reviewers rejected.

    A strong pair whose items share a medium that clearly disagrees (a content signal
    below `disagree_below`; `content` names the content signals) stays a pair of its
    kind, but joins no group: otherwise one picture re-used under story A and story A
    re-posted under another picture would chain items that share nothing into one group.
    """
    edges = {(a, b) for a, b, tier, signals in pairs
             if tier == "strong" and not _disagrees(signals or {}, disagree_below, content)}
    for pair, decision in decisions.items():
        if decision == "duplicate":
            edges.add(pair)
        elif decision == "distinct":
            edges.discard(pair)
    return sorted(edges)


def _disagrees(signals: dict, below: float, content: Collection[str]) -> bool:
    return any(v is not None and v < below for k, v in signals.items() if k in content)
