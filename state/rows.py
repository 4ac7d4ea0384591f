"""Pair counts as rows: one record per concept, not one per pair.

A concept's row holds its edges to the concepts whose ids come after its
own: each such neighbour's id with the pair's count c(x, y) and last
co-occurrence (µs since 1970), sorted by neighbour id. So each edge is
kept once, in its lower end's row, and a concept whose neighbours all come
before it has no row. Rows written by earlier versions held every edge in
both its ends' rows; every reader takes a row's entries past its own id only
(`upper_rows`), so those read the same.

The fold does not read or write rows per turn: the graph's view keeps
every pair in its adjacency (`state.adjacency`), where a turn's
co-occurrences and a tick's removals change them, and the rows it changed
are encoded from there (`GraphView.row_records`) when the partition
transaction settles (before a commit or a scan): one write per changed row
per commit, and no stored row read back.

Record value: n (4 bytes, big-endian), n × (count, last) as big-endian
int64, then the n neighbour ids in UTF-8, NUL-separated.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from typing import Iterable, Iterator, Mapping

import numpy as np


_N = struct.Struct(">I")
_VALUES = np.dtype(">i8")

# One neighbour's entry: [count, last µs].
Row = dict[str, tuple[int, int]]


def encode_row(row: Row) -> bytes:
    """The record of `row` (neighbour id -> (count, last µs)), neighbours sorted."""
    ids = sorted(row)
    values = np.array([row[o] for o in ids], dtype=_VALUES).reshape(-1)
    return _N.pack(len(ids)) + values.tobytes() + "\x00".join(ids).encode()


def row_parts(raw: bytes | None) -> tuple[list[str], np.ndarray]:
    """The neighbour ids of a row record and its (count, last µs) values, an
    n × 2 read-only array over the record (empty if absent)."""
    n = _N.unpack_from(raw)[0] if raw else 0
    if not raw or n == 0:
        return [], np.zeros((0, 2), dtype=_VALUES)
    values = np.frombuffer(raw, dtype=_VALUES, count=2 * n, offset=_N.size).reshape(n, 2)
    return raw[_N.size + 16 * n:].decode().split("\x00"), values


def row_ids(raw: bytes) -> list[str]:
    """The neighbour ids of a row record, in order."""
    n = _N.unpack_from(raw)[0]
    return raw[_N.size + 16 * n:].decode().split("\x00") if n else []


def decode_row(raw: bytes | None) -> Row:
    """Neighbour id -> (count, last µs) of a row record (empty if absent)."""
    ids, values = row_parts(raw)
    return dict(zip(ids, map(tuple, values.tolist())))


class RowLookup:
    """Point lookups in a row record without decoding every entry (a tick
    reads a few entries of rows that may hold thousands)."""

    def __init__(self, raw: bytes | None) -> None:
        self._ids, self._values = row_parts(raw)

    def get(self, other: str) -> tuple[int, int] | None:
        """(count, last µs) of the edge with `other`; None if there is none."""
        ids = self._ids
        pos = bisect_left(ids, other)
        if pos < len(ids) and ids[pos] == other:
            return int(self._values[pos, 0]), int(self._values[pos, 1])
        return None


def row_entries(raw: bytes) -> Iterator[tuple[str, int, int]]:
    """(neighbour id, count, last µs) of a row record, in neighbour order."""
    for other, (count, last) in decode_row(raw).items():
        yield other, count, last


def upper_rows(rows: Iterable[tuple[str, bytes]]) -> Iterator[tuple[str, list[str], np.ndarray]]:
    """Each row (concept id, row record), in the order given, that has
    neighbours past its own id: the id, those neighbours' ids and their
    (count, last µs) values, a slice of the record (a row's neighbours are
    sorted, so its upper ones are those past its own id)."""
    for cid, raw in rows:
        ids, values = row_parts(raw)
        k = bisect_right(ids, cid)
        if k < len(ids):
            yield cid, ids[k:], values[k:]


def upper_pairs(rows: Iterable[tuple[str, bytes]]) -> Iterator[tuple[str, str, int, int]]:
    """Each edge once, (a, b, count, last µs) with a < b, in (a, b) order,
    from rows taken in concept order: the order of the per-pair layout's
    keys (`upper_rows`, an entry at a time; the reference `upper_arrays` is
    tested against)."""
    for cid, ids, values in upper_rows(rows):
        for other, (count, last) in zip(ids, values.tolist()):
            yield cid, other, count, last


def upper_arrays(
    rows: Iterable[tuple[str, bytes]], index: Mapping[str, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`upper_pairs` as arrays (int64), the ends as `index` numbers them:
    (a, b, count, last µs), each edge once, in the same order; each row's
    values taken as a slice of its record, not entry by entry."""
    lower: list[int] = []  # per row with upper entries: its own end, and how many
    lengths: list[int] = []
    upper: list[int] = []
    values: list[np.ndarray] = []
    for cid, others, row_values in upper_rows(rows):
        upper += [index[other] for other in others]
        lower.append(index[cid])
        lengths.append(len(others))
        values.append(row_values)
    if not values:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy(), empty.copy()
    both = np.concatenate(values).astype(np.int64)
    a = np.repeat(np.array(lower, dtype=np.int64), lengths)
    return a, np.array(upper, dtype=np.int64), np.ascontiguousarray(both[:, 0]), np.ascontiguousarray(both[:, 1])


def changed_row(cid: str, row: Row, changes: list) -> Row:
    """`row` (neighbour -> (count, last µs)) after `changes`, in order: a
    co-occurrence `(ids, at µs)` adds one to each other id's count and keeps
    the later time (`processors.evolve.pair_after`); a removal `(other,
    None)` drops the neighbour. The reference the rows the fold writes are
    tested against."""
    get = row.get
    for what, at in changes:
        if at is None:
            row.pop(what, None)
            continue
        for other in what:
            if other == cid:
                continue
            old = get(other)
            row[other] = (1, at) if old is None else (old[0] + 1, old[1] if old[1] > at else at)
    return row
