"""A canonical digest of a graph version: equal content, equal digest.

The digest covers everything that defines a graph (its totals and clocks,
concepts with their metadata, concept -> passage links, pair counts and
last co-occurrences, passages, topic nodes), not caches (views), not the
idempotency ledgers (turn ids of pruned passages, applied retrievals) and
not the log offset (which depends on the partition
layout, not on the graph). Each record is rendered canonically (its key
fields, then its value as JSON with sorted keys, floats as their shortest
round-trip repr, no whitespace), records are taken in key order, and each
section is hashed with SHA-256; the graph digest hashes the sections'
names, counts and digests. So it is independent of the storage engine, of
the order and batching of writes, and of the machine.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Any, Callable, Iterable, Iterator

import orjson
from pydantic import BaseModel

from emgas.processors.events import GraphDigest, SectionDigest, TopicNode
from emgas.processors.graph import ConceptState, GraphRef, Passage
from emgas.state import keys, links
from emgas.state.repository import GraphRepository
from emgas.state.rows import upper_rows

# (section name, key kind, value renderer); the order is part of the format.
# Pairs are kept in rows (`state.rows`) and rendered one line per pair,
# as when each pair was its own record; links are kept in the passages
# (`state.links`) and rendered one line per link, as when each was a record.
Render = Callable[[bytes], Any]


def as_dumped(model: type[BaseModel]) -> Render:
    """A record's value as `model.model_dump(mode="json")` gives it: the stored
    JSON itself when it holds every field of the model (what the fold writes:
    `model_dump_json`, or `state.records` byte for byte), else read through
    the model (a record of an older format: its defaults filled in)."""
    fields = frozenset(model.model_fields)

    def render(raw: bytes) -> Any:
        value = orjson.loads(raw)
        if isinstance(value, dict) and value.keys() == fields:
            return value
        return model.model_validate_json(raw).model_dump(mode="json")

    return render


SECTIONS: tuple[tuple[str, bytes, Render | None], ...] = (
    ("concepts", b"c", as_dumped(ConceptState)),
    ("sources", b"s", None),
    ("pairs", b"r", None),
    ("passages", b"t", as_dumped(Passage)),
    ("topics", b"k", as_dumped(TopicNode)),
)


# One encoder for every line: `json.dumps` with these options builds a new
# one per call, which was a third of a digest's time.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_json_str = json.encoder.encode_basestring  # what the encoder writes for a str (ensure_ascii=False)
HASH_CHUNK = 4096  # lines hashed in one update (the same bytes as one by one)


def canonical_json(value: Any) -> str:
    """`value` as JSON with sorted keys, no whitespace, non-ASCII kept, no NaN."""
    return _CANONICAL.encode(value)


def pair_line(a: str, b: str, count: int, last: int) -> str:
    """`canonical_json([[a, b], [count, last]])` for ints count and last, written directly."""
    return f"[[{_json_str(a)},{_json_str(b)}],[{count:d},{last:d}]]"


def pair_lines(rows: Iterable[tuple[str, bytes]]) -> Iterator[str]:
    """`pair_line` of each edge of `rows` (concept id, row record; in concept
    order) once, from its lower end: the lines of `upper_pairs`, a row at a time."""
    escaped = _json_str
    for cid, others, values in upper_rows(rows):
        head = f"[[{escaped(cid)},"
        yield from [f"{head}{escaped(b)}],[{count},{last}]]" for b, (count, last) in zip(others, values.tolist())]


def section_records(repo: GraphRepository, ref: GraphRef, kind: bytes, render: Render | None) -> Iterator[str]:
    """One canonical line per record: `[key fields, value]` as canonical JSON
    (for pairs: `[[a, b], [count, last µs]]`, a < b, in (a, b) order)."""
    prefix = keys.section(ref, kind)
    if kind == b"s":
        for cid, turn_id in links.of_version(repo.store, ref):
            yield f"[[{_json_str(cid)},{_json_str(turn_id)}],null]"
        return
    if render is None:
        yield from pair_lines((key[len(prefix):].decode(), raw) for key, raw in repo.store.scan(prefix))
        return
    for key, raw in repo.store.scan(prefix):
        yield canonical_json([keys.split_tail(key, prefix), render(raw)])


def _hash_lines(lines: Iterable[str]) -> SectionDigest:
    """SHA-256 of every line followed by a newline, and the number of lines."""
    h = hashlib.sha256()
    count = 0
    lines = iter(lines)
    while chunk := list(itertools.islice(lines, HASH_CHUNK)):
        h.update(("\n".join(chunk) + "\n").encode())
        count += len(chunk)
    return SectionDigest(count=count, digest=h.hexdigest())


def graph_digest(repo: GraphRepository, ref: GraphRef) -> GraphDigest:
    """The digest of one graph version as stored in `repo`."""
    sections = {"meta": _hash_lines([canonical_json(repo.meta(ref).model_dump(mode="json"))])}
    for name, kind, render in SECTIONS:
        sections[name] = _hash_lines(section_records(repo, ref, kind, render))
    top = _hash_lines(f"{name} {s.count} {s.digest}" for name, s in sections.items())
    return GraphDigest(
        graph_id=ref.graph_id,
        version=ref.version,
        active=repo.active_version(ref.graph_id) == ref.version,
        digest=top.digest,
        sections=sections,
    )


def partition_digests(repo: GraphRepository, graph_id: str | None = None) -> list[GraphDigest]:
    """Digests of every graph version in `repo`, or of `graph_id`'s versions only."""
    return [
        graph_digest(repo, ref)
        for ref in repo.graph_refs()
        if graph_id is None or ref.graph_id == graph_id
    ]
