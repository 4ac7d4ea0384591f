"""Snapshots of graphs in the log: a graph's content, packed into parts and back.

A graph's content is every record of its versions (`g`), their
registration (`r`), its active version (`a`), forgotten turns (`x`) and
forget requests (`y`): what a fold of the graph's events writes. A
snapshot is that content as of the offset of a `SnapshotStarted`: the
records in key order as the store keeps them (the `rows` layout;
version 1 snapshots carried a record per pair and per link, the `pairs`
layout, converted when restored), length-prefixed, compressed by zstd
(by zlib before schema version 3 of `Snapshot`, still read), cut into
parts below the broker's message size (`Snapshot` events, keyed by the
graph).

What a fold keeps about the log itself (its identity, the snapshots under
way and complete, checkpoints) is the ledger's (`state.ledger`).
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import itertools
import struct
import zlib

import orjson
from datetime import datetime
from typing import Iterable, Iterator

from emgas.processors.events import (
    GraphDigest, Snapshot,
)
from emgas.processors.events.log import SnapshotCompression, SnapshotLayout
from emgas.processors.writes import Records
from emgas.state import keys
from emgas.state.rows import row_ids
from emgas.state.store import PartitionStore
from emgas.state.transaction import Transaction

# Compressed bytes per part: base64 makes 4/3 of it, far below Kafka's
# default 1 MiB message limit (`message.max.bytes`, the producer's
# `max_request_size`).
PART_BYTES = 384 * 1024
_LENGTHS = struct.Struct(">II")


# -- a graph's content, packed and unpacked ------------------------------------


def stored_content(store: PartitionStore, graph_id: str) -> Records:
    """Every record of `graph_id`'s content as the store keeps it (the
    `rows` layout, what snapshots carry), the active version first."""
    active = store.get(keys.active(graph_id))
    records: Records = [] if active is None else [(keys.active(graph_id), active)]
    for prefix in keys.graph_content_prefixes(graph_id):
        records.extend(store.scan(prefix))
    return records


def graph_content(store: PartitionStore, graph_id: str) -> Records:
    """`stored_content` in the `pairs` layout, whatever layout the store
    keeps: pair rows as one record per pair (`as_pairs`), links one record
    per link (`as_links`). What version 1 snapshots carry; two graphs are
    equal when theirs are."""
    return as_links(as_pairs(stored_content(store, graph_id)))


def in_store_layout(records: Records) -> Records:
    """`pairs`-layout records (`graph_content`'s) in the store's layout."""
    return as_unlinks(as_rows(records))


def as_links(records: Records) -> Records:
    """Records (in key order) with each graph version's links given one
    record per link (`s`, as format 4 kept them) instead of in its passages
    and `u` records (`state.links`), in key order."""
    out: Records = []
    for prefix, kinds in _by_version(records):
        if prefix is None:
            out += kinds[b""]
            continue
        gone = kinds.pop(b"u", [])
        passages = kinds.get(b"t")
        if passages:
            kinds[b"s"] = _links_of(prefix, passages, gone)
        out += _in_key_order(kinds)
    return out


def _links_of(prefix: bytes, passages: Records, unlinked: Records) -> Records:
    """The link records of a version's passages but the `unlinked` ones, in key order."""
    start = len(prefix) + 2
    lost: dict[bytes, set[bytes]] = {}
    for key, _ in unlinked:
        turn_id, cid = key[start:].split(keys.SEP, 1)
        lost.setdefault(turn_id, set()).add(cid)
    links = []
    for key, value in passages:
        turn_id = key[start:]
        gone = lost.get(turn_id, ())
        links += [(cid, turn_id) for cid in (c.encode() for c in _concepts(value)) if cid not in gone]
    links.sort()
    head = prefix + b"s" + keys.SEP
    return [(head + cid + keys.SEP + turn_id, b"") for cid, turn_id in links]


def as_unlinks(records: Records) -> Records:
    """The inverse of `as_links`: link records become the `u` records of
    the concepts each passage mentions but does not link (in key order)."""
    out: Records = []
    for prefix, kinds in _by_version(records):
        if prefix is None:
            out += kinds[b""]
            continue
        links = kinds.pop(b"s", [])
        passages = kinds.get(b"t")
        if passages:
            kinds[b"u"] = _unlinks_of(prefix, passages, links)
        out += _in_key_order(kinds)
    return out


def _unlinks_of(prefix: bytes, passages: Records, links: Records) -> Records:
    """The `u` records of a version whose passages link only what `links` hold, in key order."""
    start = len(prefix) + 2
    linked: dict[bytes, set[bytes]] = {}
    for key, _ in links:
        cid, turn_id = key[start:].split(keys.SEP, 1)
        linked.setdefault(turn_id, set()).add(cid)
    head = prefix + b"u" + keys.SEP
    unlinked: Records = []
    for key, value in passages:  # in turn id order, so the records come in key order
        turn_id = key[start:]
        kept = linked.get(turn_id, set())
        gone = sorted(cid for cid in (c.encode() for c in _concepts(value)) if cid not in kept)
        unlinked += [(head + turn_id + keys.SEP + cid, b"") for cid in gone]
    return unlinked


def _concepts(passage: bytes) -> list[str]:
    """The concept ids a passage record names."""
    return orjson.loads(passage)["concept_ids"]


def as_pairs(records: Iterable[tuple[bytes, bytes]]) -> Records:
    """Records (in key order) with each graph version's rows given as its
    pairs, one record per pair (a < b), in key order: what snapshots carry,
    whatever layout the store keeps them in. A pair's value is the row's
    entry as it is (`keys.encode_pair`'s bytes)."""
    out: Records = []
    for prefix, kinds in _by_version(records):
        if prefix is None:
            out += kinds[b""]
            continue
        rows = kinds.pop(b"r", None)
        if rows:
            kinds[b"p"] = _pairs_of(prefix, rows)
        out += _in_key_order(kinds)
    return out


def _pairs_of(prefix: bytes, rows: Records) -> Records:
    """The pair records of a version's rows (its key `prefix`), in key order:
    each row's entries past its own id (sorted), under their lower end."""
    pairs: Records = []
    start = len(prefix) + 2  # past the kind and its separator
    head = prefix + b"p" + keys.SEP
    for key, raw in rows:
        cid = key[start:]
        ids = row_ids(raw)
        k = bisect.bisect_right(ids, cid.decode())
        lower = head + cid + keys.SEP
        base = 4 + 16 * k  # `state.rows`: n, then 16 bytes per entry
        pairs += [(lower + other.encode(), raw[base + 16 * i:base + 16 * i + 16]) for i, other in enumerate(ids[k:])]
    return pairs


def _by_version(records: Iterable[tuple[bytes, bytes]]) -> Iterator[tuple[bytes | None, dict[bytes, Records]]]:
    """Records in key order, a graph version's together (its key prefix,
    and its records by kind: the byte after the prefix, each kind's in key
    order); a record of no graph version alone (prefix None, kind b"")."""
    prefix: bytes | None = None
    at = 0  # where the kind byte is, in keys of `prefix`
    kinds: dict[bytes, Records] = {}
    for key, value in records:
        if prefix is not None and key.startswith(prefix):  # most records: the version of the one before
            kind = key[at:at + 1]
            records_of = kinds.get(kind)
            if records_of is None:
                records_of = kinds[kind] = []
            records_of.append((key, value))
            continue
        if prefix is not None:
            yield prefix, kinds
            prefix, kinds = None, {}
        fields = key.split(keys.SEP, 3) if key.startswith(b"g" + keys.SEP) else []
        if len(fields) == 4:
            prefix = key[:len(key) - len(fields[3])]
            at = len(prefix)
            kinds = {fields[3][:1]: [(key, value)]}
            continue
        yield None, {b"": [(key, value)]}
    if prefix is not None:
        yield prefix, kinds


def _in_key_order(kinds: dict[bytes, Records]) -> Records:
    """A version's records, its kinds in key order."""
    return [record for kind in sorted(kinds) for record in kinds[kind]]


def as_rows(records: Iterable[tuple[bytes, bytes]]) -> Records:
    """The inverse of `as_pairs`: pair records become their lower ends' rows (in key order)."""
    out: Records = []
    for prefix, kinds in _by_version(records):
        if prefix is None:
            out += kinds[b""]
            continue
        pairs = kinds.pop(b"p", None)
        if pairs:
            kinds[b"r"] = _rows_of(prefix, pairs)
        out += _in_key_order(kinds)
    return out


def _rows_of(prefix: bytes, pairs: Records) -> Records:
    """A version's rows from its pair records (in key order: by lower end,
    then upper): each pair an entry of its lower end's row (`state.rows`'
    record: its entries' count and last as the pair's value bytes, then the
    ids)."""
    start = len(prefix) + 2
    ends = [(key[start:].split(keys.SEP), value) for key, value in pairs]  # ([lower, upper], count and last)
    head = prefix + b"r" + keys.SEP
    rows: Records = []
    for cid, group in itertools.groupby(ends, key=_lower):
        row = list(group)
        rows.append((head + cid, struct.pack(">I", len(row)) + b"".join(v for _, v in row) + b"\x00".join(e[1] for e, _ in row)))
    return rows


def _lower(entry: tuple[list[bytes], bytes]) -> bytes:
    return entry[0][0]


class SnapshotMismatch(Exception):
    """A snapshot's records are not the ones its writer serialised."""


def length_prefixed(records: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The records one after another, each after its key's and value's lengths (4 bytes each, big-endian)."""
    return b"".join(_LENGTHS.pack(len(k), len(v)) + k + v for k, v in records)


def pack(records: Iterable[tuple[bytes, bytes]], level: int = 6) -> bytes:
    """Length-prefixed records (4-byte big-endian key and value lengths),
    compressed by zlib at `level` (any level unpacks alike)."""
    return zlib.compress(length_prefixed(records), level)


def unpack(blob: bytes) -> Records:
    return from_length_prefixed(zlib.decompress(blob))


def from_length_prefixed(body: bytes) -> Records:
    """The records of `length_prefixed`'s bytes."""
    records, at = [], 0
    while at < len(body):
        klen, vlen = _LENGTHS.unpack_from(body, at)
        at += _LENGTHS.size
        records.append((body[at : at + klen], body[at + klen : at + klen + vlen]))
        at += klen + vlen
    return records


# zstd's level 1: the records of a 3,000-turn graph (9.8 MB length-prefixed)
# compressed in 16.5 ms to 1.61 MB and decompressed in 5.4, where zlib at
# its fastest level (what snapshots were compressed with until schema
# version 3) took 51 ms to 1.96 MB and 22.6 to decompress: a takeover
# restores sooner and a round's writer holds a core a third as long. Rounds
# start after the log grows by the last round's compressed bytes
# (`service.snapshot_writer`), so larger snapshots come less often and the
# log grows by the same bytes of snapshot per event.
SNAPSHOT_ZSTD_LEVEL = 1


def _compressed(body: bytes) -> bytes:
    import zstandard  # imported where a snapshot is written or restored: most commands never load it

    return zstandard.compress(body, SNAPSHOT_ZSTD_LEVEL)


def _decompressed(blob: bytes, compression: SnapshotCompression) -> bytes:
    """`blob` decompressed as `compression` says; ValueError or zlib.error if it is not that."""
    if compression == "zlib":
        return zlib.decompress(blob)
    import zstandard

    try:
        return zstandard.decompress(blob)
    except zstandard.ZstdError as exc:
        raise ValueError(str(exc)) from None


def snapshot_parts(
    graph_id: str, as_of: int, records: Records, digests: Iterable[GraphDigest], at: datetime,
    part_bytes: int = PART_BYTES, layout: SnapshotLayout = "rows",
) -> list[Snapshot]:
    """The `Snapshot` events of `records` (in `layout`) as of offset `as_of`;
    the digests and the records' SHA-256 ride on the last."""
    body = length_prefixed(records)
    blob = _compressed(body)
    chunks = [blob[i : i + part_bytes] for i in range(0, len(blob), part_bytes)] or [b""]
    last = len(chunks) - 1
    return [
        Snapshot(
            graph_id=graph_id, as_of=as_of, part=i, parts=len(chunks),
            data=base64.b64encode(chunk).decode(), layout=layout, digests=tuple(digests) if i == last else (),
            content_sha256=hashlib.sha256(body).hexdigest() if i == last else "", timestamp=at,
        )
        for i, chunk in enumerate(chunks)
    ]


def assemble(parts: Iterable[Snapshot]) -> Records:
    """The records of a complete snapshot from its parts (any order), in
    the store's layout whatever the snapshot's; SnapshotMismatch if they
    are not the ones its writer serialised."""
    ordered = sorted(parts, key=lambda p: p.part)
    compressions = {p.compression for p in ordered}
    if len(compressions) > 1:
        raise SnapshotMismatch(f"its parts are compressed in different ways: {sorted(compressions)}")
    try:
        body = _decompressed(b"".join(base64.b64decode(p.data) for p in ordered), compressions.pop() if ordered else "zstd")
    except (zlib.error, ValueError) as exc:
        raise SnapshotMismatch(f"its parts do not decompress: {exc}") from None
    expected = ordered[-1].content_sha256 if ordered else ""
    if expected and hashlib.sha256(body).hexdigest() != expected:
        raise SnapshotMismatch(f"its records hash to {hashlib.sha256(body).hexdigest()[:12]}, "
                               f"its writer's to {expected[:12]}")
    records = from_length_prefixed(body)
    return in_store_layout(records) if ordered and ordered[-1].layout == "pairs" else records


def replace_content(store: Transaction, graph_id: str, records: Records) -> None:
    """Delete `graph_id`'s content and write `records` (the store's layout) in its place."""
    store.put(keys.active(graph_id), None)
    for prefix in keys.graph_content_prefixes(graph_id):
        for key, _ in list(store.scan(prefix)):
            store.put(key, None)
    for key, value in records:
        store.put(key, value)


def graph_ids(store: PartitionStore) -> list[str]:
    """Every graph with content in the store: versions, tombstones or forget requests."""
    found: set[str] = set()
    for prefix in (keys.REGISTRY, keys.TOMBSTONE, keys.FORGET_REQUEST):
        found.update(keys.split_tail(key, prefix)[0] for key, _ in store.scan(prefix))
    return sorted(found)
