"""Fold points: each graph version's records as of its recent snapshots,
kept locally, so that forgetting a turn re-folds only what follows it.

When the fold applies a `SnapshotStarted` of a graph at offset `as_of`,
the state is exactly the graph as of `as_of`; each of its versions' records
(store layout) but its journal is kept here, compressed, with the ids of
the turns it holds (a live worker makes it where it serves the request's
snapshot, from the records the snapshot is, before it applies anything
else: `version_records`, `Made`). The journal up to `as_of` is the version's own: events
are only ever added after it, and a forget that rewrote it (of a turn the
point holds) dropped the point, so the re-fold takes it from there. A version keeps up to `MAX_POINTS` of them (`thinned`: the newest
always, the others spread over its history). Forgetting turns of a
version starts the re-fold from its latest point that holds none of them
and applies only the journal after it (`PartitionState.refolds`); with
no such point it re-folds the whole journal. Points that hold a forgotten
turn are dropped with the forget. Every fold of the log keeps the same
points (they are made by the fold itself), and they are never graph
content: not in digests, not in snapshots.

    u 0 GRAPH 0 VERSION 0 AS_OF (8-byte big-endian)
        -> as_of (8-byte big-endian), the length of the turn ids' JSON
           (4 bytes), that JSON, the packed records

A state written before versions kept several points has one point per
version under `u 0 GRAPH 0 VERSION` (the same value): it is read as one
of the version's points, and goes when the version's points are thinned
or dropped.
"""

from __future__ import annotations

import bisect
import json
import struct
from dataclasses import dataclass
from typing import Iterator

from emgas.processors.graph import GraphRef
from emgas.state import keys
from emgas.state.snapshots import Records, from_length_prefixed, length_prefixed, unpack
from emgas.state.store import PartitionStore
from emgas.state.transaction import Transaction

PREFIX = b"u" + keys.SEP
_HEADER = struct.Struct(">qI")
_AS_OF = struct.Struct(">q")

# Points a version keeps. The snapshot rounds that make them come about
# every 1 MB of a partition's events at first (`EMGAS_SNAPSHOT_MIN_BYTES`),
# then further apart as the graphs grow, so eight cover a long history at
# a few rounds' spacing; each is the whole version, packed (about 0.4 MB
# for 1,000 synthetic turns: `POINT_LEVEL`), on local disk only.
MAX_POINTS = 8


def version_key(ref: GraphRef) -> bytes:
    """The key of a version's one point in a state written before versions
    kept several; the prefix of its points' keys (+ NUL + as_of) since."""
    return PREFIX + ref.graph_id.encode() + keys.SEP + str(ref.version).encode()


def key(ref: GraphRef, as_of: int) -> bytes:
    return version_key(ref) + keys.SEP + _AS_OF.pack(as_of)


@dataclass(frozen=True)
class FoldPoint:
    as_of: int  # the offset of the `SnapshotStarted` it was taken at
    turn_ids: frozenset[str]  # the turns applied to the version by then (held or pruned)
    blob: bytes  # its records, packed
    key: bytes = b""  # where it is stored

    def records(self) -> Records:
        return unpack_records(self.blob)

    def holds_any(self, turn_ids: set[str]) -> bool:
        return not self.turn_ids.isdisjoint(turn_ids)


# A fold point is local and rewritten every snapshot round, so it is packed
# fast: zstd at level 1 packed the records of a 1,000-turn graph (2.1 MB
# length-prefixed) in 4.7 ms to 410 KB, where zlib at its fastest level
# (what points were packed with until 29 November, still read) took 14.7 ms
# to 526 KB. A replay makes one at every snapshot marker: packing them was
# an eighth of the fold of a log with a marker every 570 records.
POINT_LEVEL = 1
_ZSTD_FRAME = b"\x28\xb5\x2f\xfd"  # how a zstd frame starts (a zlib stream starts with 0x78)


def pack_records(records: Records) -> bytes:
    """A point's records, length-prefixed and packed by zstd at POINT_LEVEL."""
    import zstandard  # imported where a point is made or read: a process that makes none never loads it

    return zstandard.compress(length_prefixed(records), POINT_LEVEL)


def unpack_records(blob: bytes) -> Records:
    """`pack_records`'s records, or those of a point packed by zlib before."""
    if not blob.startswith(_ZSTD_FRAME):
        return unpack(blob)
    import zstandard

    return from_length_prefixed(zstandard.decompress(blob))


def encode_point(as_of: int, turn_ids: set[str], records: Records) -> bytes:
    ids = json.dumps(sorted(turn_ids), ensure_ascii=False).encode()
    return _HEADER.pack(as_of, len(ids)) + ids + pack_records(records)


def decode_point(point_key: bytes, raw: bytes) -> FoldPoint:
    as_of, length = _HEADER.unpack_from(raw)
    start = _HEADER.size
    return FoldPoint(as_of, frozenset(json.loads(raw[start:start + length])), raw[start + length:], point_key)


def _stored(store: PartitionStore | Transaction, ref: GraphRef) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) of each of `ref`'s points, the old layout's included."""
    own = version_key(ref)
    for point_key, raw in store.scan(own):
        if point_key == own or point_key.startswith(own + keys.SEP):  # not version 12's when ref is version 1
            yield point_key, raw


def points(store: PartitionStore | Transaction, ref: GraphRef) -> list[FoldPoint]:
    """`ref`'s fold points, oldest first."""
    return sorted((decode_point(k, raw) for k, raw in _stored(store, ref)), key=lambda point: point.as_of)


def latest_without(store: PartitionStore | Transaction, ref: GraphRef, turn_ids: set[str]) -> FoldPoint | None:
    """`ref`'s latest fold point that holds none of `turn_ids`: where
    re-folding the version without them can start (None: from the beginning)."""
    for point in reversed(points(store, ref)):
        if not point.holds_any(turn_ids):
            return point
    return None


def thinned(offsets: list[int], keep: int = MAX_POINTS) -> list[int]:
    """The offsets (ascending) of the points to keep: at most `keep`, the
    newest always. While there are too many, the point nearest its newer
    neighbour goes (ties: the older), so the kept ones spread over the
    history; with rounds evenly spaced, the oldest go first."""
    kept = list(offsets)
    while len(kept) > keep:
        gaps = [kept[i + 1] - kept[i] for i in range(len(kept) - 1)]
        kept.pop(gaps.index(min(gaps)))
    return kept


@dataclass(frozen=True)
class Made:
    """A version's point as of `as_of`, encoded (`encode_point`), not stored yet."""

    ref: GraphRef
    as_of: int
    value: bytes


def version_records(content: Records, ref: GraphRef) -> Records:
    """`ref`'s records but its journal, taken from its graph's `content`
    (`snapshots.stored_content`, in key order): what
    `GraphRepository.records_but_journal` reads, without reading it again."""
    prefix, journal = keys.graph_prefix(ref), keys.section(ref, b"j")
    start = bisect.bisect_left(content, (prefix,))  # a (key, value) pair sorts after its key alone
    found = []
    for record in content[start:]:
        if not record[0].startswith(prefix):
            break
        if not record[0].startswith(journal):
            found.append(record)
    return found


def keep_made(store: Transaction, made: Made) -> None:
    """Add a point made (`Made`), then thin its version's points to `MAX_POINTS`."""
    ref = made.ref
    store.put(key(ref, made.as_of), made.value)
    # as_of -> key, read from the values' headers (their turn ids and records left packed)
    held = {_AS_OF.unpack_from(raw)[0]: point_key for point_key, raw in _stored(store, ref)}
    for offset in set(held) - set(thinned(sorted(held))):
        store.put(held[offset], None)


def drop_holding(store: Transaction, ref: GraphRef, turn_ids: set[str]) -> None:
    """Drop `ref`'s points that hold any of `turn_ids` (a forget made them wrong)."""
    for point in points(store, ref):
        if point.holds_any(turn_ids):
            store.put(point.key, None)


def drop_version(store: Transaction, ref: GraphRef) -> None:
    """Drop every fold point of `ref`."""
    for point_key, _ in list(_stored(store, ref)):
        store.put(point_key, None)


def drop_graph(store: Transaction, graph_id: str) -> None:
    """Drop the fold points of every version of `graph_id`."""
    for point_key, _ in list(store.scan(keys.graph_keyed(PREFIX, graph_id))):
        store.put(point_key, None)
