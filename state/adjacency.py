"""A compact, incrementally updated co-occurrence adjacency.

Each node's row is neighbour indices (int32, sorted), pair counts c(x, y)
(int32) and the pair's last co-occurrence (int64 µs since 1970): 16 bytes
per directed entry. Loaded rows sit in one CSR (indptr, indices, counts,
lasts) with no per-node objects; a row a turn changes is replaced by its
own arrays (a view rebuild folds those back into the CSR). A query reads a
row as it is (no copy, no cache to invalidate).

The adjacency holds every pair of its graph, so it is also where the pair
counts are kept while folding: the rows it changed (`take_dirty`) are
written to the store when the partition transaction settles
(`state.view.GraphView.row_records`), instead of reading, merging and
writing each stored row per turn.

A turn's clique (`add_clique`) is only queued; the queued cliques are
merged into their rows at the next read, all at once (every queued pair
counted, then each touched row merged with its pairs, in compiled loops:
`state.kernels`), so a fold that reads rows rarely (a decay tick, a
query) pays for a row once per read, not once per concept per turn. A merge adds the
number of cliques holding a pair to its count and keeps the later of its
last time and theirs (`processors.evolve.pair_after`). Rows are replaced,
never resized in place, so a row handed to a reader stays valid. A merge
tells `on_new_edges` which edges it created and the event time of the
first clique that held each (the graph files their due times).
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import numpy as np

from emgas.state import kernels

_EMPTY_IDX = np.zeros(0, dtype=np.int32)
_EMPTY_CNT = np.zeros(0, dtype=np.int32)
_EMPTY_LAST = np.zeros(0, dtype=np.int64)

Row = tuple[np.ndarray, np.ndarray, np.ndarray]  # (neighbours, counts, last µs)


class Adjacency:
    def __init__(self) -> None:
        # Rows as loaded: one CSR (indptr, indices, counts, lasts) for nodes < _base_n;
        # a row changed since, or of a newer node, lives in _rows instead.
        self._n = 0
        self._base_n = 0
        self._indptr = np.zeros(1, dtype=np.int64)
        self._base_idx = _EMPTY_IDX
        self._base_cnt = _EMPTY_CNT
        self._base_last = _EMPTY_LAST
        self._rows: dict[int, Row] = {}
        self._edges = 0
        # Cliques not merged yet, in chunks: (members of every clique, one after
        # another; each clique's size; its event time in s and in µs since 1970).
        self._queued: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._dirty: set[int] = set()  # rows changed since `take_dirty`
        # Told, at a merge, the edges it created: (ends a < b, the time of the first clique holding each).
        self.on_new_edges: Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None = None
        self._precounted = 0  # new edges of queued cliques already in _edges (the caller knew them)
        self._uncounted = False  # a queued clique whose new edges only a merge can count

    @property
    def edges(self) -> int:
        if self._uncounted:
            self._merge_queued()
        return self._edges

    @property
    def edges_at_least(self) -> int:
        """A lower bound of `edges` that merges nothing (queued turns only add edges)."""
        return self._edges

    @property
    def earliest_queued_s(self) -> float:
        """The earliest event time of a clique not merged yet (inf: none)."""
        return min((float(at_s.min()) for _, _, at_s, _ in self._queued), default=float("inf"))

    def add_node(self) -> int:
        self._n += 1
        return self._n - 1

    def add_nodes(self, count: int) -> None:
        self._n += count

    def __len__(self) -> int:
        return self._n

    def full_row(self, i: int) -> Row:
        """(neighbour indices, pair counts, last µs) of node i, sorted by neighbour (read-only)."""
        if self._queued:
            self._merge_queued()
        changed = self._rows.get(i)
        if changed is not None:
            return changed
        if i < self._base_n:
            lo, hi = self._indptr[i], self._indptr[i + 1]
            return self._base_idx[lo:hi], self._base_cnt[lo:hi], self._base_last[lo:hi]
        return _EMPTY_IDX, _EMPTY_CNT, _EMPTY_LAST

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(neighbour indices, pair counts) of node i, sorted by neighbour (read-only)."""
        idx, cnt, _ = self.full_row(i)
        return idx, cnt

    def _set(self, i: int, idx: np.ndarray, cnt: np.ndarray, last: np.ndarray) -> None:
        self._rows[i] = (idx, cnt, last)
        self._dirty.add(i)

    def take_dirty(self) -> set[int]:
        """The rows changed since the last call (queued cliques merged first)."""
        if self._queued:
            self._merge_queued()
        dirty, self._dirty = self._dirty, set()
        return dirty

    @property
    def has_changes(self) -> bool:
        """Whether a row changed (or a clique is queued) since `take_dirty`."""
        return bool(self._dirty or self._queued)

    def degree(self, i: int) -> int:
        return len(self.row(i)[0])

    def neighbours(self, i: int) -> list[int]:
        return self.row(i)[0].tolist()

    def items(self, i: int) -> Iterator[tuple[int, int]]:
        idx, cnt = self.row(i)
        return zip(idx.tolist(), cnt.tolist())

    def entries_at_least(self, minimum: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, neighbour, count) of every directed entry whose count is at
        least `minimum`, in row order (the rows compacted first: a filter on
        the arrays)."""
        if self._queued or self._rows or self._base_n != self._n:
            self.compact()
        rows = np.repeat(np.arange(self._n, dtype=np.int64), np.diff(self._indptr))
        keep = self._base_cnt >= minimum
        return rows[keep], self._base_idx[keep].astype(np.int64), self._base_cnt[keep]

    def count(self, i: int, j: int) -> int:
        found = self.pair(i, j)
        return 0 if found is None else found[0]

    def pair(self, i: int, j: int) -> tuple[int, int] | None:
        """(count, last µs) of the edge (i, j); None if there is none."""
        idx, cnt, last = self.full_row(i)
        pos = int(np.searchsorted(idx, j))
        if pos < len(idx) and idx[pos] == j:
            return int(cnt[pos]), int(last[pos])
        return None

    def add_clique(
        self, nodes: Iterable[int], increment: int = 1, new_edges: int | None = None, at_s: float = 0.0,
        at_us: int = 0,
    ) -> None:
        """+increment on the count of every pair of distinct `nodes` (a turn's
        concepts, at event time `at_s` seconds, `at_us` µs), last = max(last,
        at_us). `new_edges`: how many of those pairs are not edges yet, when
        the caller knows: the edge count then needs no merge."""
        members = np.unique(np.fromiter(nodes, dtype=np.int32))
        if len(members) < 2:
            return
        if increment == 1:
            self._queued.append((members, np.array([len(members)]), np.array([at_s]), np.array([at_us], dtype=np.int64)))
            if new_edges is None:
                self._uncounted = True
            else:
                self._edges += new_edges
                self._precounted += new_edges
            return
        added = 0
        for i in members.tolist():
            others = members[members != i]
            increments = np.full(len(others), increment, dtype=np.int32)
            added += int(np.count_nonzero(self._merge(i, others, increments, np.full(len(others), at_us))))
        self._edges += added // 2

    def add_cliques(self, members: np.ndarray, sizes: np.ndarray, at_s: np.ndarray, at_us: np.ndarray) -> None:
        """`add_clique` of many cliques at once: `members` holds each clique's
        nodes (distinct within it) one clique after another, `sizes` their
        counts, `at_s` / `at_us` their event times. Their new edges are counted at the merge."""
        keep = sizes >= 2
        if not keep.any():
            return
        if not keep.all():
            members = members[np.repeat(keep, sizes)]
            sizes, at_s, at_us = sizes[keep], at_s[keep], at_us[keep]
        self._queued.append((members.astype(np.int32), sizes.astype(np.int64), at_s, at_us.astype(np.int64)))
        self._uncounted = True

    def _merge_queued(self) -> None:
        """Merge every queued clique into its rows: the queued pairs counted
        (`kernels.queued_pairs`), then each touched row merged with its
        pairs (`kernels.merge_into_rows`), all in compiled loops."""
        if not self._queued:
            return
        chunks, self._queued = self._queued, []
        n = max(self._n, 1)
        members, sizes, at_s, at_us = chunks[0] if len(chunks) == 1 else tuple(np.concatenate(c) for c in zip(*chunks))
        pairs, counts, earliest, latest = kernels.queued_pairs(members, sizes, at_s, at_us, n)
        if not len(pairs):
            self._created(_EMPTY_IDX, _EMPTY_IDX, np.zeros(0))
            return
        row_of = pairs // n
        touched = np.unique(row_of)
        rows = touched.tolist()
        old = [self.full_row(i) for i in rows]  # the queue is empty now: no merge
        old_ptr = np.zeros(len(old) + 1, dtype=np.int64)
        np.cumsum(np.fromiter((len(idx) for idx, _, _ in old), dtype=np.int64, count=len(old)), out=old_ptr[1:])
        ptr, idx, cnt, last, created = kernels.merge_into_rows(
            old_ptr, np.concatenate([idx for idx, _, _ in old]), np.concatenate([cnt for _, cnt, _ in old]),
            np.concatenate([last for _, _, last in old]), touched, pairs, counts, latest, n,
        )
        bounds = ptr.tolist()
        for k, i in enumerate(rows):
            lo, hi = bounds[k], bounds[k + 1]
            # Copies, not views of the merge's arrays: a view would keep all of them
            # alive (hub rows included) for as long as any one of its rows is not replaced.
            self._set(i, idx[lo:hi].copy(), cnt[lo:hi].copy(), last[lo:hi].copy())
        # Each new edge is new at both ends: report it from its lower end.
        upper = created & (row_of < pairs % n)
        self._created(row_of[upper].astype(np.int32), (pairs[upper] % n).astype(np.int32), earliest[upper])

    def _created(self, a: np.ndarray, b: np.ndarray, at: np.ndarray) -> None:
        """After a merge: count the edges (a[k] < b[k]) it created, tell
        `on_new_edges`, and compact the rows if changed ones outnumber the rest."""
        self._edges += len(a) - self._precounted
        if len(a) and self.on_new_edges is not None:
            self.on_new_edges(a, b, at)
        self._precounted, self._uncounted = 0, False
        if len(self._rows) > self._n // 2 + 1024:
            self.compact()

    def compact(self) -> None:
        """Fold every changed row back into one CSR (rows handed out stay
        valid): the kept rows of the old CSR and the changed rows scattered
        into their new places in arrays, one Python step per changed row."""
        self._merge_queued()
        n, base_n = self._n, self._base_n
        changed = sorted(self._rows.items())
        rows = np.fromiter((i for i, _ in changed), dtype=np.int64, count=len(changed))
        sizes = np.fromiter((len(idx) for _, (idx, _, _) in changed), dtype=np.int64, count=len(changed))
        lengths = np.zeros(n, dtype=np.int64)
        lengths[:base_n] = np.diff(self._indptr[: base_n + 1])
        base_rows = np.repeat(np.arange(base_n, dtype=np.int64), lengths[:base_n])
        kept = np.ones(base_n, dtype=bool)
        kept[rows[rows < base_n]] = False
        lengths[rows] = sizes
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        total = int(indptr[-1])
        idx, cnt, last = np.empty(total, dtype=np.int32), np.empty(total, dtype=np.int32), np.empty(total, dtype=np.int64)
        old = kept[base_rows]
        to = indptr[base_rows[old]] + (np.arange(len(base_rows), dtype=np.int64) - self._indptr[base_rows])[old]
        idx[to], cnt[to], last[to] = self._base_idx[old], self._base_cnt[old], self._base_last[old]
        starts = np.cumsum(sizes) - sizes
        to = np.repeat(indptr[rows] - starts, sizes) + np.arange(int(sizes.sum()), dtype=np.int64)
        idx[to] = np.concatenate([r[0] for _, r in changed] + [_EMPTY_IDX])
        cnt[to] = np.concatenate([r[1] for _, r in changed] + [_EMPTY_CNT])
        last[to] = np.concatenate([r[2] for _, r in changed] + [_EMPTY_LAST])
        self._indptr, self._base_idx, self._base_cnt, self._base_last = indptr, idx, cnt, last
        self._base_n = n
        self._rows = {}

    def load(self, a: np.ndarray, b: np.ndarray, counts: np.ndarray, lasts: np.ndarray | None = None) -> None:
        """Set the rows from whole pair lists (a[k], b[k]) -> counts[k] (last
        co-occurrence lasts[k] µs), a != b, each pair once: what loading a
        stored graph needs, in one sort. Nothing is dirty after it."""
        if lasts is None:
            lasts = np.zeros(len(a), dtype=np.int64)
        src = np.concatenate([a, b]).astype(np.int64)
        dst = np.concatenate([b, a]).astype(np.int32)
        cnt = np.concatenate([counts, counts]).astype(np.int32)
        last = np.concatenate([lasts, lasts]).astype(np.int64)
        order = np.lexsort((dst, src))
        self._base_idx, self._base_cnt, self._base_last = dst[order], cnt[order], last[order]
        self._indptr = np.searchsorted(src[order], np.arange(self._n + 1)).astype(np.int64)
        self._base_n = self._n
        self._rows = {}
        self._dirty = set()
        self._queued = []
        self._precounted, self._uncounted = 0, False
        self._edges = len(a)

    def add(self, a: int, b: int, count: int, last_us: int = 0) -> None:
        """+count on the pair (a, b), both directions, last = max(last, last_us)."""
        added = int(np.count_nonzero(self._merge(a, *_one(b, count, last_us))))
        self._merge(b, *_one(a, count, last_us))
        self._edges += added  # after the merges: a row read may merge queued cliques first

    def _merge(self, i: int, others: np.ndarray, increments: np.ndarray, lasts: np.ndarray) -> np.ndarray:
        """+increments on row i's counts of `others` (sorted, distinct), last =
        max(last, lasts); which of them were not neighbours of i yet (a mask over `others`)."""
        idx, cnt, last = self.full_row(i)
        n = max(self._n, 1)
        _, idx, cnt, last, created = kernels.merge_into_rows(
            np.array([0, len(idx)], dtype=np.int64), idx, cnt, last, np.array([i], dtype=np.int64),
            i * n + others.astype(np.int64), increments.astype(np.int64), lasts.astype(np.int64), n,
        )
        self._set(i, idx, cnt, last)
        return created

    def remove(self, a: int, b: int) -> bool:
        """Drop the edge (a, b); whether it existed."""
        existed = self._drop(a, b)
        self._drop(b, a)
        self._edges -= existed
        return existed

    def remove_many(self, a: np.ndarray, b: np.ndarray) -> None:
        """Drop the edges (a[k], b[k]) (distinct pairs), both directions, one
        pass per touched row."""
        if len(a) == 0:
            return
        src = np.concatenate([a, b]).astype(np.int64)
        dst = np.concatenate([b, a]).astype(np.int32)
        order = np.lexsort((dst, src))
        src, dst = src[order], dst[order]
        rows, starts = np.unique(src, return_index=True)
        bounds = np.append(starts, len(src)).tolist()
        dropped = 0
        for k, i in enumerate(rows.tolist()):
            idx, cnt, last, gone = kernels.drop_from_row(*self.full_row(i), dst[bounds[k]:bounds[k + 1]])
            if gone:
                dropped += gone
                self._set(i, idx, cnt, last)
        self._edges -= dropped // 2

    def _drop(self, i: int, j: int) -> bool:
        idx, cnt, last = self.full_row(i)
        pos = int(np.searchsorted(idx, j))
        if pos < len(idx) and idx[pos] == j:
            self._set(i, np.delete(idx, pos), np.delete(cnt, pos), np.delete(last, pos))
            return True
        return False

    def clear(self, i: int) -> list[int]:
        """Drop every edge of node i; its former neighbours."""
        neighbours = self.neighbours(i)
        for j in neighbours:
            self._drop(j, i)
        self._edges -= len(neighbours)
        self._set(i, _EMPTY_IDX, _EMPTY_CNT, _EMPTY_LAST)
        return neighbours

    def resident_bytes(self) -> int:
        """Bytes of the rows' data (not the Python objects around them)."""
        self._merge_queued()
        changed = sum(idx.nbytes + cnt.nbytes + last.nbytes for idx, cnt, last in self._rows.values())
        base = self._indptr.nbytes + self._base_idx.nbytes + self._base_cnt.nbytes + self._base_last.nbytes
        return base + changed


def _one(other: int, count: int, last_us: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.array([other], dtype=np.int32), np.array([count], dtype=np.int32),
            np.array([last_us], dtype=np.int64))
