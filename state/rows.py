"""Pair counts as rows: one record per concept, not one per pair.

A concept's row holds every edge it has: each neighbour's id with the
pair's count c(x, y) and last co-occurrence (µs since 1970), sorted by
neighbour id. Each edge is in both its ends' rows, so restoring reads
whole rows and a tick reads the rows of the concepts it names.

The fold does not read or write rows per turn. A turn's co-occurrences
(`processors.writes.CoOccur`) and a tick's removals are kept in a
`RowChanges` buffer, in order, and applied to the stored rows they touch
at once when the partition transaction settles (before a commit or a
scan): one read, merge and write per changed row per commit, where the
per-pair layout read and wrote every pair of every turn.

Record value: n (4 bytes, big-endian), n × (count, last) as big-endian
int64, then the n neighbour ids in UTF-8, NUL-separated.
"""

from __future__ import annotations

import struct
from typing import Iterable, Iterator

import numpy as np

from emgas.processors.graph import GraphRef

_N = struct.Struct(">I")
_VALUES = np.dtype(">i8")

# One neighbour's entry: [count, last µs].
Row = dict[str, tuple[int, int]]


def encode_row(row: Row) -> bytes:
    """The record of `row` (neighbour id -> (count, last µs)), neighbours sorted."""
    ids = sorted(row)
    values = np.array([row[o] for o in ids], dtype=_VALUES).reshape(-1)
    return _N.pack(len(ids)) + values.tobytes() + "\x00".join(ids).encode()


def decode_row(raw: bytes | None) -> Row:
    """Neighbour id -> (count, last µs) of a row record (empty if absent)."""
    if not raw:
        return {}
    (n,) = _N.unpack_from(raw)
    if n == 0:
        return {}
    values = np.frombuffer(raw, dtype=_VALUES, count=2 * n, offset=_N.size).tolist()
    ids = raw[_N.size + 16 * n:].decode().split("\x00")
    return dict(zip(ids, zip(values[0::2], values[1::2])))


def row_entries(raw: bytes) -> Iterator[tuple[str, int, int]]:
    """(neighbour id, count, last µs) of a row record, in neighbour order."""
    for other, (count, last) in decode_row(raw).items():
        yield other, count, last


def upper_pairs(rows: Iterable[tuple[str, bytes]]) -> Iterator[tuple[str, str, int, int]]:
    """Each edge once, (a, b, count, last µs) with a < b, in (a, b) order,
    from rows taken in concept order: the order of the per-pair layout's keys."""
    for cid, raw in rows:
        for other, count, last in row_entries(raw):
            if cid < other:
                yield cid, other, count, last


class RowChanges:
    """Changes to rows not yet written, per (graph version, concept), in order.

    A change is `(ids, at_us)`: one co-occurrence with every other id of
    the clique; or `(other, None)`: the edge with `other` goes.
    """

    def __init__(self) -> None:
        self._changes: dict[tuple[GraphRef, str], list[tuple[object, int | None]]] = {}

    def __bool__(self) -> bool:
        return bool(self._changes)

    def co_occur(self, ref: GraphRef, ids: tuple[str, ...], at_us: int) -> None:
        change = (ids, at_us)
        changes = self._changes
        for cid in ids:
            key = (ref, cid)
            pending = changes.get(key)
            if pending is None:
                changes[key] = [change]
            else:
                pending.append(change)

    def remove(self, ref: GraphRef, a: str, b: str) -> None:
        self._changes.setdefault((ref, a), []).append((b, None))
        self._changes.setdefault((ref, b), []).append((a, None))

    def drain(self, only: GraphRef | None = None, cids: list[str] | None = None) -> dict[tuple[GraphRef, str], list]:
        """The pending changes (of `only`'s rows of `cids`, or all), removed from the buffer."""
        if only is None:
            drained, self._changes = self._changes, {}
            return drained
        drained = {}
        for cid in cids or ():
            pending = self._changes.pop((only, cid), None)
            if pending is not None:
                drained[(only, cid)] = pending
        return drained

    def clear(self) -> None:
        self._changes = {}


def changed_row(cid: str, row: Row, changes: list) -> Row:
    """`row` (neighbour -> (count, last µs)) after `changes`, in order: a
    co-occurrence adds one to each other id's count and keeps the later
    time (`processors.evolve.pair_after`); a removal drops the neighbour."""
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
