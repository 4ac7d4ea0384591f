"""A compact, incrementally updated co-occurrence adjacency.

Each node's row is neighbour indices (int32, sorted), pair counts c(x, y)
(int32) and the pair's last co-occurrence (int64 µs since 1970): 16 bytes
per directed entry. Every row lives in one pool of three arrays; a node's
span (where its row starts in the pool, and its length) is one int64, so
there is no per-node object. A row a change replaces is written anew at the
pool's end and its span moved there: the old entries stay, dead, until the
pool is compacted (rows in node order, no dead entries) once the dead
outnumber half the live. A query reads a row as a view of the pool (no
copy, no cache to invalidate): nothing is ever written where a live row
is, so a row handed to a reader stays valid.

Rows are read and written a set at a time (`gather`, `find`,
`remove_many`, `_replace`): compiled loops over spans (`state.kernels`),
no Python step per row, which is where a fold's time went while rows were
objects of their own.

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
last time and theirs (`processors.evolve.pair_after`). A merge tells
`on_new_edges` which edges it created and the event time of the first
clique that held each (the graph files their due times).

One thread writes (the fold); a reader on another thread sees each row
whole, old or new: a span is one word, written after its entries, and the
pool and the spans are swapped together (`_layout`) when either moves.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import numpy as np

from emgas.state import kernels
from emgas.state.kernels import _LENGTH_MASK, _SPAN_BITS

_EMPTY_IDX = np.zeros(0, dtype=np.int32)
_EMPTY_CNT = np.zeros(0, dtype=np.int32)
_EMPTY_LAST = np.zeros(0, dtype=np.int64)

Row = tuple[np.ndarray, np.ndarray, np.ndarray]  # (neighbours, counts, last µs)
# Rows one after another: (ptr, neighbours, counts, last µs), row k at [ptr[k], ptr[k + 1]).
Rows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
# (spans, neighbours, counts, last µs): the spans and the pool they point into.
Layout = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    return (starts.astype(np.int64) << _SPAN_BITS) | lengths.astype(np.int64)


def _gather(layout: Layout, rows: np.ndarray) -> Rows:
    """The rows `rows` of `layout`, one after another (copies)."""
    return kernels.gather_rows(*layout, rows)


class Adjacency:
    """Every pair count of one graph, as rows over node indices (see the module)."""

    def __init__(self) -> None:
        self._n = 0
        # Spans of nodes < len(spans) (a node past them has an empty row), and the pool.
        self._layout: Layout = (np.zeros(64, dtype=np.int64), _EMPTY_IDX, _EMPTY_CNT, _EMPTY_LAST)
        self._used = 0  # pool entries written (live and dead)
        self._live = 0  # pool entries some span covers
        self._ordered = True  # the pool holds the rows in node order, with no dead entry (a CSR)
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
        self.add_nodes(1)
        return self._n - 1

    def add_nodes(self, count: int) -> None:
        self._n += count
        spans, idx, cnt, last = self._layout
        if self._n > len(spans):
            grown = np.zeros(max(self._n, 2 * len(spans)), dtype=np.int64)
            grown[: len(spans)] = spans
            self._layout = (grown, idx, cnt, last)

    def __len__(self) -> int:
        return self._n

    def full_row(self, i: int) -> Row:
        """(neighbour indices, pair counts, last µs) of node i, sorted by neighbour (read-only)."""
        if self._queued:
            self._merge_queued()
        spans, idx, cnt, last = self._layout
        if i >= len(spans):
            return _EMPTY_IDX, _EMPTY_CNT, _EMPTY_LAST
        span = int(spans[i])
        lo = span >> _SPAN_BITS
        hi = lo + (span & _LENGTH_MASK)
        return idx[lo:hi], cnt[lo:hi], last[lo:hi]

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(neighbour indices, pair counts) of node i, sorted by neighbour (read-only)."""
        idx, cnt, _ = self.full_row(i)
        return idx, cnt

    def gather(self, rows: np.ndarray) -> Rows:
        """The rows of the nodes `rows` (int64, each < len(self)), one after
        another: (ptr, neighbours, counts, last µs), row k at [ptr[k], ptr[k + 1])."""
        if self._queued:
            self._merge_queued()
        return _gather(self._layout, rows)

    def upper_row_payloads(
        self, rows: np.ndarray, rank: np.ndarray, text: np.ndarray, bounds: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The store records of the rows `rows`, each with its entries past
        its own node in `rank`'s order (`kernels.upper_row_payloads`)."""
        if self._queued:
            self._merge_queued()
        return kernels.upper_row_payloads(*self._layout, rows, rank, text, bounds)

    def find(self, rows: np.ndarray, others: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per k: whether the edge (rows[k], others[k]) exists (a node < 0
        has none), and its count and last µs (0 where not)."""
        if self._queued:
            self._merge_queued()
        return kernels.find_pairs(*self._layout, rows.astype(np.int64), others.astype(np.int64))

    def _replace(self, rows: np.ndarray, new: Rows) -> None:
        """Rows `rows` (distinct) become `new`'s, written at the pool's end
        (the pool grown, or compacted, first when it is full)."""
        ptr, idx, cnt, last = new
        total = int(ptr[-1])
        replaced = int((self._layout[0][rows] & _LENGTH_MASK).sum())
        if self._used + total > len(self._layout[1]):
            self._make_room(total)
        self._live += total - replaced
        spans, pool_idx, pool_cnt, pool_last = self._layout
        at = self._used
        pool_idx[at:at + total], pool_cnt[at:at + total], pool_last[at:at + total] = idx, cnt, last
        spans[rows] = _spans(at + ptr[:-1], np.diff(ptr))  # after the entries: a reader sees the row whole
        self._used += total
        self._ordered = False
        self._dirty.update(rows.tolist())

    def _make_room(self, extra: int) -> None:
        """Room for `extra` more entries: the live rows compacted into a new
        pool when the dead entries are many, else the pool grown by half."""
        if self._used - self._live > self._live // 2:
            self._repack(extra)
            return
        spans, idx, cnt, last = self._layout
        size = max(self._used + extra, len(idx) * 3 // 2, 1024)
        used = self._used
        self._layout = (spans.copy(), _grown(idx, size, used), _grown(cnt, size, used), _grown(last, size, used))

    def _repack(self, extra: int = 0) -> None:
        """Every live row copied into a new pool in node order (no dead
        entries), with room for `extra` more; new spans to it."""
        n = self._n
        spans = self._layout[0]
        ptr, idx, cnt, last = _gather(self._layout, np.arange(n, dtype=np.int64))
        total = int(ptr[-1])
        size = total + extra + total // 8
        new_idx, new_cnt = np.empty(size, dtype=np.int32), np.empty(size, dtype=np.int32)
        new_last = np.empty(size, dtype=np.int64)
        new_idx[:total], new_cnt[:total], new_last[:total] = idx, cnt, last
        new_spans = np.zeros(len(spans), dtype=np.int64)
        new_spans[:n] = _spans(ptr[:-1], np.diff(ptr))
        self._layout = (new_spans, new_idx, new_cnt, new_last)
        self._used = self._live = total
        self._ordered = True

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
        least `minimum`, in row order (the pool compacted first: a filter on
        the arrays)."""
        if self._queued or not self._ordered:
            self.compact()
        spans, idx, cnt, _ = self._layout
        rows = np.repeat(np.arange(self._n, dtype=np.int64), spans[: self._n] & _LENGTH_MASK)
        keep = cnt[: self._used] >= minimum
        return rows[keep], idx[: self._used][keep].astype(np.int64), cnt[: self._used][keep]

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
        pairs and written at the pool's end (`kernels.merge_in_pool`), all
        in compiled loops."""
        if not self._queued:
            return
        chunks, self._queued = self._queued, []
        n = max(self._n, 1)
        members, sizes, at_s, at_us = chunks[0] if len(chunks) == 1 else tuple(np.concatenate(c) for c in zip(*chunks))
        pairs, counts, earliest, latest = kernels.queued_pairs(members, sizes, at_s, at_us, n)
        if not len(pairs):
            self._created(_EMPTY_IDX, _EMPTY_IDX, np.zeros(0))
            return
        row_of = pairs // n  # ascending, as the pairs are
        touched = row_of[np.flatnonzero(np.diff(row_of, prepend=-1))]
        created = self._merge_rows(touched, pairs, counts, latest, n)
        # Each new edge is new at both ends: report it from its lower end.
        upper = created & (row_of < pairs % n)
        self._created(row_of[upper].astype(np.int32), (pairs[upper] % n).astype(np.int32), earliest[upper])

    def _merge_rows(
        self, touched: np.ndarray, pairs: np.ndarray, counts: np.ndarray, latest: np.ndarray, n: int,
    ) -> np.ndarray:
        """Merge `pairs` (keys row·n + neighbour, sorted, distinct, each of a
        row in `touched`, ascending) into their rows, each written anew at
        the pool's end (`kernels.merge_in_pool`, room made first for the most
        the rows can become); which pairs were not entries yet (a mask)."""
        replaced = int((self._layout[0][touched] & _LENGTH_MASK).sum())
        if self._used + replaced + len(pairs) > len(self._layout[1]):
            self._make_room(replaced + len(pairs))
        written, created = kernels.merge_in_pool(*self._layout, self._used, touched, pairs, counts, latest, n)
        self._used += written
        self._live += written - replaced
        self._ordered = False
        self._dirty.update(touched.tolist())
        return created

    def _created(self, a: np.ndarray, b: np.ndarray, at: np.ndarray) -> None:
        """After a merge: count the edges (a[k] < b[k]) it created and tell `on_new_edges`."""
        self._edges += len(a) - self._precounted
        if len(a) and self.on_new_edges is not None:
            self.on_new_edges(a, b, at)
        self._precounted, self._uncounted = 0, False

    def compact(self) -> None:
        """Every row in node order in a new pool with no dead entries (rows
        handed out stay valid: they are views of the old one)."""
        self._merge_queued()
        if not self._ordered:
            self._repack()

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
        indptr = np.searchsorted(src[order], np.arange(self._n + 1)).astype(np.int64)
        spans = np.zeros(max(self._n, 64), dtype=np.int64)
        spans[: self._n] = _spans(indptr[:-1], np.diff(indptr))
        self._layout = (spans, dst[order], cnt[order], last[order])
        self._used = self._live = len(src)
        self._ordered = True
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
        if self._queued:
            self._merge_queued()  # row i as it is now
        n = max(self._n, 1)
        return self._merge_rows(
            np.array([i], dtype=np.int64), i * n + others.astype(np.int64), increments.astype(np.int64),
            lasts.astype(np.int64), n,
        )

    def remove(self, a: int, b: int) -> bool:
        """Drop the edge (a, b); whether it existed."""
        before = self._edges
        self.remove_many(np.array([a], dtype=np.int64), np.array([b], dtype=np.int64))
        return self._edges < before

    def remove_many(self, a: np.ndarray, b: np.ndarray) -> None:
        """Drop the edges (a[k], b[k]) (distinct pairs), both directions: the
        rows touched filtered in one compiled pass (`kernels.drop_pairs`)."""
        if len(a) == 0:
            return
        if self._queued:
            self._merge_queued()
        src = np.concatenate([a, b]).astype(np.int64)
        dst = np.concatenate([b, a]).astype(np.int64)
        order = np.lexsort((dst, src))
        changed, ptr, idx, cnt, last, dropped = kernels.drop_pairs(*self._layout, src[order], dst[order])
        if dropped:
            self._replace(changed, (ptr, idx, cnt, last))
            self._edges -= dropped // 2

    def clear(self, i: int) -> list[int]:
        """Drop every edge of node i (its row and its entry in each neighbour's,
        in one pass: `remove_many`); its former neighbours."""
        neighbours = self.neighbours(i)
        if neighbours:
            others = np.array(neighbours, dtype=np.int64)
            self.remove_many(np.full(len(others), i, dtype=np.int64), others)
        return neighbours

    def resident_bytes(self) -> int:
        """Bytes of the rows' data: the pool (dead entries and room to grow included) and the spans."""
        self._merge_queued()
        return sum(array.nbytes for array in self._layout)


def _grown(array: np.ndarray, size: int, used: int) -> np.ndarray:
    """A new array of `size` entries of `array`'s type, its first `used` those of `array`."""
    grown = np.empty(size, dtype=array.dtype)
    grown[:used] = array[:used]
    return grown


def _one(other: int, count: int, last_us: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.array([other], dtype=np.int32), np.array([count], dtype=np.int32),
            np.array([last_us], dtype=np.int64))
