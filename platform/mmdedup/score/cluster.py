"""Duplicate groups: connected components over accepted pairs.

A pair joins two items when it is strong (and no medium the two share clearly disagrees)
or a reviewer called it a duplicate, unless a reviewer called it distinct (the latest
decision on a pair wins).

The pairs arrive from the store in batches and are never all held: a store of a hundred
million items has tens of millions of strong pairs, and a Python object per pair would
need more memory than the items' own rows. The components are a union-find forest in one
numpy array indexed by item key (8 bytes a key up to the largest), whose roots each
batch joins with scipy's connected components over the batch's roots: a union-find per
batch, merged into the forest (the roots are always the smallest member, so merging
needs no ranks).
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components


def components(batches: Iterable[np.ndarray]) -> list[list[int]]:
    """Groups of two or more nodes joined by the edges, given as batches of (k, 2) arrays
    of non-negative node numbers; each group sorted, ordered by first member."""
    parent = np.zeros(0, np.int64)  # a node's parent; a root is its own, and its group's smallest
    for edges in batches:
        if not len(edges):
            continue
        top = int(edges.max()) + 1
        if top > len(parent):
            parent = np.concatenate([parent, np.arange(len(parent), top)])
        roots, at = np.unique(_roots(parent, edges), return_inverse=True)
        at = at.reshape(edges.shape)
        graph = coo_matrix((np.ones(len(at), np.int8), (at[:, 0], at[:, 1])), shape=(len(roots), len(roots)))
        _, group = connected_components(graph, directed=False)
        _, first = np.unique(group, return_index=True)  # roots are sorted: a group's first is its smallest
        joined = roots[first][group]
        parent[roots] = joined
        parent[edges.ravel()] = joined[at.ravel()]  # the batch's nodes straight to their root
    while len(parent) and not np.array_equal(up := parent[parent], parent):
        parent = up
    members = np.flatnonzero(np.bincount(parent, minlength=len(parent))[parent] > 1)
    by_root = members[np.argsort(parent[members], kind="stable")]
    cuts = np.flatnonzero(np.diff(parent[by_root])) + 1
    return [g.tolist() for g in np.split(by_root, cuts)] if len(members) else []


def _roots(parent: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Each node's root (pointer jumping: a path is at most a few batches long)."""
    found = parent[nodes]
    while not np.array_equal(up := parent[found], found):
        found = up
    return found


def accepted_edges(strong: Iterable[np.ndarray], decisions: dict[tuple[int, int], str]) -> Iterator[np.ndarray]:
    """Edges, in batches as `strong` gives them: the strong pairs (less any whose items
    share a medium that clearly disagrees: store/queries.py `strong_edges`), less those
    reviewers rejected, then the pairs reviewers confirmed.

    A strong pair whose other medium clearly disagrees stays a pair of its kind, but
    joins no group: otherwise one picture re-used under story A and story A re-posted
    under another picture would chain items that share nothing into one group.
    """
    distinct = _keys(_edges([pair for pair, decision in decisions.items() if decision == "distinct"]))
    for edges in strong:
        yield edges[~np.isin(_keys(edges), distinct)]
    yield _edges([pair for pair, decision in decisions.items() if decision == "duplicate"])


def _edges(pairs: list[tuple[int, int]]) -> np.ndarray:
    return np.array(pairs, np.int64).reshape(-1, 2)


def _keys(edges: np.ndarray) -> np.ndarray:
    """Each edge as one comparable value (a record of its two ends)."""
    return np.ascontiguousarray(edges, np.int64).view([("a", np.int64), ("b", np.int64)]).ravel()
