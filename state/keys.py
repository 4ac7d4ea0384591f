"""Key layout of a partition store.

    o                                  -> applied log position (JSON {"offset": int})
    r 0 GRAPH 0 VERSION                -> b"" (the graph versions held here)
    a 0 GRAPH                          -> the graph's active version (JSON {"version": int})
    g 0 GRAPH 0 VERSION 0 m            -> graph totals (JSON {"turns": int})
    g 0 GRAPH 0 VERSION 0 c 0 CONCEPT  -> ConceptState JSON
    g 0 GRAPH 0 VERSION 0 u 0 TURN 0 CONCEPT -> b"" (a link the passage lost: see below)
    g 0 GRAPH 0 VERSION 0 r 0 CONCEPT  -> the concept's row: every edge it has, with the
                                          pair's count and last co-occurrence (`state.rows`)
    g 0 GRAPH 0 VERSION 0 t 0 TURN     -> Passage JSON
    g 0 GRAPH 0 VERSION 0 k 0 TOPIC    -> TopicNode JSON
    g 0 GRAPH 0 VERSION 0 f 0 TURN     -> b"" (a turn applied whose passage was pruned)
    g 0 GRAPH 0 VERSION 0 q 0 REQUEST  -> b"" (a retrieval already applied)
    g 0 GRAPH 0 VERSION 0 j 0 OFFSET   -> the applied graph event at that log offset
                                          (8-byte big-endian), as its JSON encoding
    x 0 GRAPH 0 TURN                   -> b"" (a turn forgotten on request: never applied again)
    y 0 GRAPH 0 REQUEST                -> b"" (a forget request already applied)
    z 0 OFFSET                         -> a graph event the fold rejected (JSON
                                          {"type", "reason"}; 8-byte big-endian offset)
    v                                  -> state format (JSON {"format": int})
    l                                  -> the log this state reflects (JSON {"log_id", "genesis"})
    n 0 GRAPH                          -> the graph's latest complete snapshot (SnapshotLocation JSON)
    b 0 GRAPH                          -> a snapshot of the graph under way (JSON, see state.snapshots)
    d 0 GRAPH 0 PART                   -> a part of a base snapshot under way (its data, base64)
    e 0 GRAPH 0 OFFSET                 -> an event of the graph after a base snapshot's start
    w 0 GRAPH                          -> the graph's floor: its events up to it are in a
                                          restored snapshot (JSON {"offset": int})
    h                                  -> the last checkpoint applied (JSON {"offset", "as_of"})

(0 is a NUL byte; VERSION is decimal.) A passage links every concept its
turn mentioned (its `concept_ids`) but those a decay tick unlinked (`u`,
when it pruned the concept): a turn writes no link records. Snapshots carry
pairs in the layout of format 3, one record per pair, and links in that of
format 4, one record per link, which `state.snapshots` converts:

    g 0 GRAPH 0 VERSION 0 p 0 A 0 B    -> pair, A < B: count and last co-occurrence
                                          (8-byte big-endian each; time in µs since 1970)
    g 0 GRAPH 0 VERSION 0 s 0 CONCEPT 0 TURN -> b"" (concept's source passage)
 Identifiers cannot hold control
characters (see `processors.events`), so NUL separates fields without
ambiguity, and all keys of one graph version share one prefix.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Iterable

from emgas.processors.graph import GraphRef

SEP = b"\x00"
OFFSET = b"o"
FORMAT = b"v"
REGISTRY = b"r" + SEP
ACTIVE = b"a" + SEP
TOMBSTONE = b"x" + SEP
FORGET_REQUEST = b"y" + SEP
REJECTED = b"z" + SEP
LOG = b"l"
LOCATION = b"n" + SEP
PENDING = b"b" + SEP
PART = b"d" + SEP
RECORDED = b"e" + SEP
FLOOR = b"w" + SEP
LAST_CHECKPOINT = b"h"


@lru_cache(maxsize=4096)  # a handful of refs, prefixes built for every record
def graph_prefix(ref: GraphRef) -> bytes:
    return b"g" + SEP + ref.graph_id.encode() + SEP + str(ref.version).encode() + SEP


def graph_meta(ref: GraphRef) -> bytes:
    return graph_prefix(ref) + b"m"


def concept(ref: GraphRef, cid: str) -> bytes:
    return section(ref, b"c") + cid.encode()


def concept_passage(ref: GraphRef, cid: str, turn_id: str) -> bytes:
    return section(ref, b"s") + cid.encode() + SEP + turn_id.encode()


def concepts(ref: GraphRef, cids: Iterable[str]) -> list[bytes]:
    """`concept(ref, cid)` of each of `cids` (a run's, at once)."""
    prefix = section(ref, b"c")
    return [prefix + cid.encode() for cid in cids]


def unlinked(ref: GraphRef, turn_id: str, cid: str) -> bytes:
    """The record that passage `turn_id` no longer links concept `cid`."""
    return section(ref, b"u") + turn_id.encode() + SEP + cid.encode()


def unlinks(ref: GraphRef, links: Iterable[tuple[str, str]]) -> list[bytes]:
    """`unlinked(ref, turn_id, cid)` of each (cid, turn_id) of `links` (a tick group's, at once)."""
    prefix = section(ref, b"u")
    return [prefix + turn_id.encode() + SEP + cid.encode() for cid, turn_id in links]


def pair(ref: GraphRef, a: str, b: str) -> bytes:
    lo, hi = (a, b) if a < b else (b, a)
    return section(ref, b"p") + lo.encode() + SEP + hi.encode()


def row(ref: GraphRef, cid: str) -> bytes:
    return section(ref, b"r") + cid.encode()


def rows(ref: GraphRef, cids: Iterable[str]) -> list[bytes]:
    """`row(ref, cid)` of each of `cids` (a commit's, at once)."""
    prefix = section(ref, b"r")
    return [prefix + cid.encode() for cid in cids]


def passage(ref: GraphRef, turn_id: str) -> bytes:
    return section(ref, b"t") + turn_id.encode()


@lru_cache(maxsize=16384)
def section(ref: GraphRef, kind: bytes) -> bytes:
    """Prefix of one kind of record (b"c", b"s", b"p", b"t", ...) of a graph version."""
    return graph_prefix(ref) + kind + SEP


def split_tail(key: bytes, prefix: bytes) -> list[str]:
    """The NUL-separated fields of `key` after `prefix`, decoded."""
    return [part.decode() for part in key[len(prefix):].split(SEP)]


def registry(ref: GraphRef) -> bytes:
    return REGISTRY + ref.graph_id.encode() + SEP + str(ref.version).encode()


def active(graph_id: str) -> bytes:
    return ACTIVE + graph_id.encode()


def topic(ref: GraphRef, topic_id: str) -> bytes:
    return section(ref, b"k") + topic_id.encode()


def forgotten_turn(ref: GraphRef, turn_id: str) -> bytes:
    return section(ref, b"f") + turn_id.encode()


def retrieval(ref: GraphRef, request_id: str) -> bytes:
    return section(ref, b"q") + request_id.encode()


def journal_entry(ref: GraphRef, offset: int) -> bytes:
    return section(ref, b"j") + _OFFSET.pack(offset)


def journal_entries(ref: GraphRef, offsets: Iterable[int]) -> list[bytes]:
    """`journal_entry(ref, offset)` of each of `offsets` (a re-fold's, at once)."""
    prefix = section(ref, b"j")
    return [prefix + packed for packed in map(_OFFSET.pack, offsets)]


def journal_offset(key: bytes, ref: GraphRef) -> int:
    return offset_after(key, section(ref, b"j"))


def tombstone(graph_id: str, turn_id: str) -> bytes:
    return TOMBSTONE + graph_id.encode() + SEP + turn_id.encode()


def forget_request(graph_id: str, request_id: str) -> bytes:
    return FORGET_REQUEST + graph_id.encode() + SEP + request_id.encode()


def rejected(offset: int) -> bytes:
    return REJECTED + _OFFSET.pack(offset)


def graph_keyed(prefix: bytes, graph_id: str) -> bytes:
    """`prefix` + GRAPH + NUL: every key of one graph under a partition-level prefix."""
    return prefix + graph_id.encode() + SEP


def graph_content_prefixes(graph_id: str) -> tuple[bytes, ...]:
    """The prefixes of everything a graph is: its versions' records, their
    registration, its forgotten turns and forget requests (with `active`,
    one key, these make up a snapshot)."""
    gid = graph_id.encode() + SEP
    return (b"g" + SEP + gid, REGISTRY + gid, TOMBSTONE + gid, FORGET_REQUEST + gid)


def offset_key(prefix: bytes, offset: int) -> bytes:
    return prefix + _OFFSET.pack(offset)


def offset_after(key: bytes, prefix: bytes) -> int:
    """The 8-byte offset that follows `prefix` in `key`."""
    return _OFFSET.unpack(key[len(prefix):])[0]


_OFFSET = struct.Struct(">q")  # big-endian, so journal entries sort in log order
_PAIR = struct.Struct(">qq")  # count, last co-occurrence (µs since 1970), big-endian


def encode_pair(count: int, last_us: int) -> bytes:
    return _PAIR.pack(count, last_us)


def decode_pair(raw: bytes | None) -> tuple[int, int]:
    """(count, last co-occurrence in µs since 1970); (0, minimum) when absent."""
    if not raw:
        return 0, -(2**63)
    count, last = _PAIR.unpack(raw)
    return count, last

