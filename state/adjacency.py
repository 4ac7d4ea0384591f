"""A compact, incrementally updated co-occurrence adjacency.

Each node's row is two numpy arrays, neighbour indices (int32, sorted) and
pair counts (int32): 8 bytes per directed entry, 16 per edge, plus about
200 bytes per node for the two array objects, where a dict of dicts costs
over 150 bytes per edge. A query reads a row as it is (no copy, no cache
to invalidate).

A turn updates its concepts' rows with one sorted merge per row
(`add_clique`), not one insertion per pair, so the numpy call overhead is
paid once per concept per turn. Rows are replaced, never resized in place,
so a row handed to a reader stays valid.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

_EMPTY_IDX = np.zeros(0, dtype=np.int32)
_EMPTY_CNT = np.zeros(0, dtype=np.int32)


class Adjacency:
    def __init__(self) -> None:
        self._idx: list[np.ndarray] = []
        self._cnt: list[np.ndarray] = []
        self.edges = 0

    def add_node(self) -> int:
        self._idx.append(_EMPTY_IDX)
        self._cnt.append(_EMPTY_CNT)
        return len(self._idx) - 1

    def __len__(self) -> int:
        return len(self._idx)

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(neighbour indices, pair counts) of node i, sorted by neighbour (read-only)."""
        return self._idx[i], self._cnt[i]

    def degree(self, i: int) -> int:
        return len(self._idx[i])

    def neighbours(self, i: int) -> list[int]:
        return self._idx[i].tolist()

    def items(self, i: int) -> Iterator[tuple[int, int]]:
        return zip(self._idx[i].tolist(), self._cnt[i].tolist())

    def count(self, i: int, j: int) -> int:
        idx = self._idx[i]
        pos = int(np.searchsorted(idx, j))
        return int(self._cnt[i][pos]) if pos < len(idx) and idx[pos] == j else 0

    def add_clique(self, nodes: Iterable[int], increment: int = 1) -> None:
        """+increment on the count of every pair of distinct `nodes` (a turn's concepts)."""
        members = np.unique(np.fromiter(nodes, dtype=np.int32))
        if len(members) < 2:
            return
        for i in members.tolist():
            others = members[members != i]
            self._merge(i, others, np.full(len(others), increment, dtype=np.int32))

    def add(self, a: int, b: int, count: int) -> None:
        """+count on the pair (a, b), both directions (loading stored pairs)."""
        self._merge(a, np.array([b], dtype=np.int32), np.array([count], dtype=np.int32))
        self._merge(b, np.array([a], dtype=np.int32), np.array([count], dtype=np.int32))

    def _merge(self, i: int, others: np.ndarray, increments: np.ndarray) -> None:
        idx, cnt = self._idx[i], self._cnt[i]
        pos = np.searchsorted(idx, others)
        found = pos < len(idx)
        found[found] = idx[pos[found]] == others[found]
        if found.all():
            cnt = cnt.copy()
            cnt[pos] += increments
            self._cnt[i] = cnt
            return
        # Each new undirected edge is merged from both ends: count it at its lower end.
        self.edges += int(np.count_nonzero(~found & (others > i)))
        merged_idx = np.insert(idx, pos[~found], others[~found])
        merged_cnt = np.insert(cnt, pos[~found], 0)
        where = np.searchsorted(merged_idx, others)
        merged_cnt[where] += increments
        self._idx[i], self._cnt[i] = merged_idx, merged_cnt

    def remove(self, a: int, b: int) -> bool:
        """Drop the edge (a, b); whether it existed."""
        existed = self._drop(a, b)
        self._drop(b, a)
        self.edges -= existed
        return existed

    def _drop(self, i: int, j: int) -> bool:
        idx = self._idx[i]
        pos = int(np.searchsorted(idx, j))
        if pos < len(idx) and idx[pos] == j:
            self._idx[i] = np.delete(idx, pos)
            self._cnt[i] = np.delete(self._cnt[i], pos)
            return True
        return False

    def clear(self, i: int) -> list[int]:
        """Drop every edge of node i; its former neighbours."""
        neighbours = self._idx[i].tolist()
        for j in neighbours:
            self._drop(j, i)
        self.edges -= len(neighbours)
        self._idx[i], self._cnt[i] = _EMPTY_IDX, _EMPTY_CNT
        return neighbours

    def resident_bytes(self) -> int:
        """Bytes of the row arrays' data (not the Python objects around them)."""
        return sum(a.nbytes for a in self._idx) + sum(a.nbytes for a in self._cnt)
