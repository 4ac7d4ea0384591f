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
from bisect import bisect_left
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


def encode_packed(n: int, values: bytes, ids: list[str]) -> bytes:
    """The record of a row of `n` entries given in neighbour id order: their
    (count, last µs) values already packed (big-endian int64 pairs) and their
    ids; the same bytes as `encode_row` of the same entries."""
    return _N.pack(n) + values + "\x00".join(ids).encode()


def _parts(raw: bytes | None) -> tuple[list[str], np.ndarray]:
    """The neighbour ids of a row record and its (count, last µs) values, an
    n × 2 read-only array over the record (empty if absent)."""
    n = _N.unpack_from(raw)[0] if raw else 0
    if not raw or n == 0:
        return [], np.zeros((0, 2), dtype=_VALUES)
    values = np.frombuffer(raw, dtype=_VALUES, count=2 * n, offset=_N.size).reshape(n, 2)
    return raw[_N.size + 16 * n:].decode().split("\x00"), values


def decode_row(raw: bytes | None) -> Row:
    """Neighbour id -> (count, last µs) of a row record (empty if absent)."""
    ids, values = _parts(raw)
    return dict(zip(ids, map(tuple, values.tolist())))


class RowLookup:
    """Point lookups in a row record without decoding every entry (a tick
    reads a few entries of rows that may hold thousands)."""

    def __init__(self, raw: bytes | None) -> None:
        self._ids, self._values = _parts(raw)

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
    time (`processors.evolve.pair_after`); a removal drops the neighbour.
    The reference of `changed_record`, which does the same on records."""
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


def _summed(cid: str, changes: list) -> dict[str, list]:
    """The changes per neighbour: [dropped first, co-occurrences, latest µs]."""
    summed: dict[str, list] = {}
    get = summed.get
    for what, at in changes:
        if at is None:
            summed[what] = [True, 0, None]
            continue
        for other in what:
            if other == cid:
                continue
            entry = get(other)
            if entry is None:
                summed[other] = [False, 1, at]
            else:
                entry[1] += 1
                if entry[2] is None or at > entry[2]:
                    entry[2] = at
    return summed


def changed_record(cid: str, raw: bytes | None, changes: list) -> bytes | None:
    """The row record `raw` after `changes` (as `changed_row`), None when no
    edge is left. A long row is not decoded into Python objects: only its
    changed entries are touched, the rest is copied as arrays and bytes."""
    n = _N.unpack_from(raw)[0] if raw else 0
    if n < _SMALL_ROW:
        row = changed_row(cid, decode_row(raw), changes)
        return encode_row(row) if row else None
    assert raw is not None  # n >= _SMALL_ROW > 0
    ids, values = _parts(raw)
    values = values.copy()
    dropped, added = [], []
    for other, (reset, count, at) in sorted(_summed(cid, changes).items()):
        pos = bisect_left(ids, other)
        if pos == n or ids[pos] != other:
            if count:
                added.append((pos, other, count, at))
        elif reset and not count:
            dropped.append(pos)
        elif reset:
            values[pos] = (count, at)
        else:
            values[pos, 0] += count
            if at > values[pos, 1]:
                values[pos, 1] = at
    if not dropped and not added:
        return raw[: _N.size] + values.tobytes() + raw[_N.size + 16 * n:]
    # Inserted before their positions in the old row, then the dropped ones cut out.
    if added:
        positions = [p for p, *_ in added]
        values = np.insert(values, positions, np.array([(c, t) for _, _, c, t in added], dtype=_VALUES), axis=0)
        ids = _spliced(ids, positions, [o for _, o, _, _ in added])
        shift = np.searchsorted(np.array(positions), np.array(dropped, dtype=np.int64), side="right")
        dropped = (np.array(dropped, dtype=np.int64) + shift).tolist()
    if dropped:
        keep = np.ones(len(ids), dtype=bool)
        keep[dropped] = False
        values = values[keep]
        ids = _spliced(ids, dropped, None)
    if not ids:
        return None
    return _N.pack(len(ids)) + values.astype(_VALUES).tobytes() + "\x00".join(ids).encode()


# Rows shorter than this are changed as dicts (numpy's per-call cost outweighs it).
_SMALL_ROW = 48


def _spliced(ids: list[str], positions: list[int], inserted: list[str] | None) -> list[str]:
    """`ids` with `inserted[k]` put before `positions[k]` (ascending), or,
    with `inserted` None, without the entries at `positions` (ascending)."""
    out: list[str] = []
    start = 0
    for k, pos in enumerate(positions):
        out.extend(ids[start:pos])
        if inserted is None:
            start = pos + 1
        else:
            out.append(inserted[k])
            start = pos
    out.extend(ids[start:])
    return out
