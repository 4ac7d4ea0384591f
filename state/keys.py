"""Key layout of a partition store.

    o                          -> applied log position (JSON {"offset": int})
    r 0 GRAPH                  -> b"" (the graphs held here)
    g 0 GRAPH 0 m              -> graph totals (JSON {"turns": int})
    g 0 GRAPH 0 c 0 CONCEPT    -> ConceptState JSON
    g 0 GRAPH 0 s 0 CONCEPT 0 TURN -> b"" (concept's source passage)
    g 0 GRAPH 0 p 0 A 0 B      -> pair count, A < B (8-byte big-endian)
    g 0 GRAPH 0 t 0 TURN       -> Passage JSON

(0 is a NUL byte.) Identifiers cannot hold control characters (see
`processors.events`), so NUL separates fields without ambiguity, and all
keys of one graph share the prefix `g 0 GRAPH 0`.
"""

from __future__ import annotations

SEP = b"\x00"
OFFSET = b"o"


def graph_prefix(graph_id: str) -> bytes:
    return b"g" + SEP + graph_id.encode() + SEP


def graph_meta(graph_id: str) -> bytes:
    return graph_prefix(graph_id) + b"m"


def concept(graph_id: str, cid: str) -> bytes:
    return graph_prefix(graph_id) + b"c" + SEP + cid.encode()


def concept_passage(graph_id: str, cid: str, turn_id: str) -> bytes:
    return graph_prefix(graph_id) + b"s" + SEP + cid.encode() + SEP + turn_id.encode()


def pair(graph_id: str, a: str, b: str) -> bytes:
    lo, hi = (a, b) if a < b else (b, a)
    return graph_prefix(graph_id) + b"p" + SEP + lo.encode() + SEP + hi.encode()


def passage(graph_id: str, turn_id: str) -> bytes:
    return graph_prefix(graph_id) + b"t" + SEP + turn_id.encode()


def section(graph_id: str, kind: bytes) -> bytes:
    """Prefix of one kind of record (b"c", b"s", b"p", b"t") of a graph."""
    return graph_prefix(graph_id) + kind + SEP


def split_tail(key: bytes, prefix: bytes) -> list[str]:
    """The NUL-separated fields of `key` after `prefix`, decoded."""
    return [part.decode() for part in key[len(prefix):].split(SEP)]


REGISTRY = b"r" + SEP


def registry(graph_id: str) -> bytes:
    return REGISTRY + graph_id.encode()


def encode_count(n: int) -> bytes:
    return n.to_bytes(8, "big")


def decode_count(raw: bytes | None) -> int:
    return int.from_bytes(raw, "big") if raw else 0
