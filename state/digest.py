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
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import orjson
from pydantic import BaseModel

from emgas.processors.events import GraphDigest, SectionDigest, TopicNode
from emgas.processors.graph import ConceptState, GraphRef, Passage
from emgas.state import kernels, keys, links
from emgas.state.repository import GraphRepository
from emgas.state.rows import upper_rows

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


class _Version:
    """One graph version's records as its sections need them: the passages
    read and parsed once, for their own section and for the links."""

    def __init__(self, repo: GraphRepository, ref: GraphRef) -> None:
        self.repo, self.ref = repo, ref
        self.passage_prefix = keys.section(ref, b"t")
        self.passages = [(key, raw, orjson.loads(raw)) for key, raw in repo.store.scan(self.passage_prefix)]

    def rendered_lines(self, kind: bytes, render: Render) -> Iterator[str]:
        """`[key fields, value]` as canonical JSON, per record of `kind`."""
        prefix = keys.section(self.ref, kind)
        for key, raw in self.repo.store.scan(prefix):
            yield canonical_json([keys.split_tail(key, prefix), render(raw)])


def concept_lines(version: _Version) -> Iterator[str]:
    return version.rendered_lines(b"c", as_dumped(ConceptState))


def link_lines(version: _Version) -> Iterator[str]:
    """`[[concept, turn], null]` per link, by concept then turn: the passages'
    concepts but the unlinked ones (`state.links`)."""
    start = len(version.passage_prefix)
    turn_ids = [key[start:].decode() for key, _, _ in version.passages]
    by_concept = links.turns_by_concept(
        zip(turn_ids, (value["concept_ids"] for _, _, value in version.passages)),
        links.unlinked_of(version.repo.store, version.ref),
    )
    escaped = {turn_id: _json_str(turn_id) for turn_id in turn_ids}
    for cid in sorted(by_concept):
        head = f"[[{_json_str(cid)},"
        yield from [f"{head}{escaped[turn_id]}],null]" for turn_id in by_concept[cid]]


@dataclass(frozen=True)
class Joined:
    """A section's lines, each followed by a newline, in one UTF-8 buffer (of uint8), and how many."""

    data: np.ndarray
    lines: int


def pair_lines_of(version: _Version) -> Iterator[str]:
    """`[[a, b], [count, last µs]]` per pair, a < b, in (a, b) order."""
    prefix = keys.section(version.ref, b"r")
    return pair_lines((key[len(prefix):].decode(), raw) for key, raw in version.repo.store.scan(prefix))


def pair_section(version: _Version) -> Joined | Iterator[str]:
    """`pair_lines_of`'s lines, written by a compiled loop
    (`kernels.pair_line_bytes`: 228,000 pairs in 55 ms, against 130 a line
    at a time) once the process has loaded the fold's kernels (a fold or a
    replay does), else `pair_lines_of`'s; ValueError for a row not as its
    layout says."""
    if not kernels.loaded():  # the same lines: not worth a first compile of every kernel
        return pair_lines_of(version)
    prefix = keys.section(version.ref, b"r")
    found = list(version.repo.store.scan(prefix))
    cut = len(prefix)
    data, count, bad = kernels.pair_line_bytes(*_packed([key[cut:] for key, _ in found]), *_packed([raw for _, raw in found]))
    if bad >= 0:
        raise ValueError(f"the row record {found[bad][0]!r} is not as its layout says (UTF-8 ids after n entries)")
    return Joined(data, count)


def _packed(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """`parts` one after another as uint8, and where each starts: part k at buffer[at[k]:at[k + 1]]."""
    at = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)), out=at[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), at


_PASSAGE_FIELDS = frozenset(Passage.model_fields)
_render_passage = as_dumped(Passage)


def passage_lines(version: _Version) -> Iterator[bytes]:
    """`[[turn id], passage]` as canonical JSON (bytes), per passage. orjson
    with sorted keys writes the same bytes as `canonical_json` for values
    without floats (its strings are escaped alike: tested over every code
    point); a float (a metadata value), an older format or an int past 64
    bits goes through `canonical_json`."""
    prefix = version.passage_prefix
    for key, raw, value in version.passages:
        tail = keys.split_tail(key, prefix)
        if type(value) is dict and value.keys() == _PASSAGE_FIELDS and _without_floats(value):
            try:
                yield orjson.dumps([tail, value], option=orjson.OPT_SORT_KEYS)
                continue
            except orjson.JSONEncodeError:
                pass
        yield canonical_json([tail, _render_passage(raw)]).encode()


def _without_floats(value: Any) -> bool:
    """Whether no float is anywhere inside the JSON `value` (a container's
    items' types taken at once, its containers looked into)."""
    kind = type(value)
    if kind is not dict and kind is not list:
        return kind is not float
    items = value.values() if kind is dict else value
    kinds = set(map(type, items))
    if float in kinds:
        return False
    return (dict not in kinds and list not in kinds) or all(map(_without_floats, items))


def topic_lines(version: _Version) -> Iterator[str]:
    return version.rendered_lines(b"k", as_dumped(TopicNode))


# The sections of a graph digest, in the order that is part of the format.
# Pairs are kept in rows (`state.rows`) and rendered one line per pair,
# as when each pair was its own record; links are kept in the passages
# (`state.links`) and rendered one line per link, as when each was a record.
SECTIONS: tuple[tuple[str, Callable[[_Version], Iterable[str] | Iterable[bytes] | Joined]], ...] = (
    ("concepts", concept_lines),
    ("sources", link_lines),
    ("pairs", pair_section),
    ("passages", passage_lines),
    ("topics", topic_lines),
)


def _hash_lines(lines: Iterable[str] | Iterable[bytes] | Joined) -> SectionDigest:
    """SHA-256 of every line (all str, or all UTF-8 bytes, or `Joined`)
    followed by a newline, and the number of lines."""
    if isinstance(lines, Joined):
        return SectionDigest(count=lines.lines, digest=hashlib.sha256(lines.data.data).hexdigest())
    h = hashlib.sha256()
    count = 0
    each: Iterator[Any] = iter(lines)
    while chunk := list(itertools.islice(each, HASH_CHUNK)):
        if type(chunk[0]) is bytes:
            h.update(b"\n".join(chunk) + b"\n")
        else:
            h.update(("\n".join(chunk) + "\n").encode())
        count += len(chunk)
    return SectionDigest(count=count, digest=h.hexdigest())


def graph_digest(repo: GraphRepository, ref: GraphRef) -> GraphDigest:
    """The digest of one graph version as stored in `repo`."""
    sections = {"meta": _hash_lines([canonical_json(repo.meta(ref).model_dump(mode="json"))])}
    version = _Version(repo, ref)
    for name, lines in SECTIONS:
        sections[name] = _hash_lines(lines(version))
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
