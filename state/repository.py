"""Typed reads and atomic writes of graph state over a `PartitionStore`."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Iterable, Iterator, NamedTuple

from processors.dynamics import EPOCH
from processors.events import TopicNode
from processors.graph import ConceptState, GraphMeta, GraphRef, Passage, TurnDelta
from processors.pruning import Edge, PairState
from state import keys
from state.store import PartitionStore

NO_OFFSET = -1
FIRST_VERSION = 1
# Version of the key layout and record formats; a store in another format
# is rebuilt from the log (see `streams.partitions`).
STATE_FORMAT = 3


class Entry(NamedTuple):
    """An applied graph event as its graph version's journal keeps it: its log
    offset and its JSON encoding. Every write that applies an event records
    it, in the same batch, so a graph version can be re-folded from its own
    journal (`PartitionState.refolds`)."""

    offset: int
    event: bytes


def to_us(t: datetime) -> int:
    """Event time as integer microseconds since 1970 (exact for aware datetimes)."""
    return (t - EPOCH) // timedelta(microseconds=1)


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


class GraphRepository:
    """All graphs of one partition, and the log offset their state reflects."""

    def __init__(self, store: PartitionStore) -> None:
        self.store = store

    def applied_offset(self) -> int:
        """Offset of the last graph event applied here; NO_OFFSET if none."""
        raw = self.store.get(keys.OFFSET)
        return json.loads(raw)["offset"] if raw else NO_OFFSET

    def state_format(self) -> int | None:
        """The format the store was written in; None for an empty store."""
        raw = self.store.get(keys.FORMAT)
        if raw:
            return json.loads(raw)["format"]
        return 1 if self.store.get(keys.OFFSET) else None

    def graph_refs(self) -> list[GraphRef]:
        """Every graph version held here, in key order."""
        refs = []
        for key, _ in self.store.scan(keys.REGISTRY):
            graph_id, version = keys.split_tail(key, keys.REGISTRY)
            refs.append(GraphRef(graph_id, int(version)))
        return refs

    def active_version(self, graph_id: str) -> int:
        """The version queries and live turns use: the last switched to, else 1."""
        raw = self.store.get(keys.active(graph_id))
        return json.loads(raw)["version"] if raw else FIRST_VERSION

    def has_turn(self, ref: GraphRef, turn_id: str) -> bool:
        """Whether the turn was applied (its passage is stored, or was pruned)."""
        found = self.store.multi_get([keys.passage(ref, turn_id), keys.forgotten_turn(ref, turn_id)])
        return any(raw is not None for raw in found)

    def is_forgotten(self, graph_id: str, turn_id: str) -> bool:
        """Whether the turn was forgotten on request (`processors.events.Forget`)."""
        return self.store.get(keys.tombstone(graph_id, turn_id)) is not None

    def has_forget(self, graph_id: str, request_id: str) -> bool:
        return self.store.get(keys.forget_request(graph_id, request_id)) is not None

    def journal(self, ref: GraphRef) -> Iterator[Entry]:
        """The events applied to the graph version, in log order."""
        for key, raw in self.store.scan(keys.section(ref, b"j")):
            yield Entry(keys.journal_offset(key, ref), raw)

    def turn_ids(self, ref: GraphRef) -> set[str]:
        """Every turn applied to the graph version: passages held and pruned."""
        ids = set()
        for kind in (b"t", b"f"):
            prefix = keys.section(ref, kind)
            ids.update(key[len(prefix):].decode() for key, _ in self.store.scan(prefix))
        return ids

    def records(self, ref: GraphRef) -> Iterator[tuple[bytes, bytes]]:
        """Every record of the graph version (its key prefix), in key order."""
        return self.store.scan(keys.graph_prefix(ref))

    def has_retrieval(self, ref: GraphRef, request_id: str) -> bool:
        return self.store.get(keys.retrieval(ref, request_id)) is not None

    def meta(self, ref: GraphRef) -> GraphMeta:
        raw = self.store.get(keys.graph_meta(ref))
        return GraphMeta.model_validate_json(raw) if raw else GraphMeta()

    def turns(self, ref: GraphRef) -> int:
        return self.meta(ref).turns

    def concepts(self, ref: GraphRef, ids: Iterable[str]) -> dict[str, ConceptState]:
        ids = list(ids)
        raws = self.store.multi_get([keys.concept(ref, cid) for cid in ids])
        return {
            cid: ConceptState.model_validate_json(raw)
            for cid, raw in zip(ids, raws)
            if raw is not None
        }

    def pairs(self, ref: GraphRef, edges: Iterable[Edge]) -> dict[Edge, PairState]:
        edges = list(edges)
        raws = self.store.multi_get([keys.pair(ref, a, b) for a, b in edges])
        found = {}
        for edge, raw in zip(edges, raws):
            if raw is not None:
                count, last = keys.decode_pair(raw)
                found[edge] = PairState(count, from_us(last))
        return found

    def sources(self, ref: GraphRef, cid: str) -> list[str]:
        """Turn ids of the passages that mention `cid`."""
        prefix = keys.section(ref, b"s") + cid.encode() + keys.SEP
        return [key[len(prefix):].decode() for key, _ in self.store.scan(prefix)]

    def linked(self, ref: GraphRef, turn_id: str, concept_ids: list[str]) -> bool:
        """Whether any of these concepts links to the passage of `turn_id`."""
        links = self.store.multi_get([keys.concept_passage(ref, c, turn_id) for c in concept_ids])
        return any(link is not None for link in links)

    def passages(self, ref: GraphRef, turn_ids: list[str]) -> dict[str, Passage]:
        raws = self.store.multi_get([keys.passage(ref, t) for t in turn_ids])
        return {
            t: Passage.model_validate_json(raw) for t, raw in zip(turn_ids, raws) if raw is not None
        }

    def topics(self, ref: GraphRef) -> list[TopicNode]:
        return [TopicNode.model_validate_json(raw) for _, raw in self.store.scan(keys.section(ref, b"k"))]

    def mark_offset(self, offset: int) -> None:
        """Record that the event at `offset` was seen but changed nothing."""
        self.store.write(_base(offset))

    def switch_version(self, graph_id: str, version: int, offset: int) -> None:
        """Make `version` the active one, with the offset of the event that said so."""
        self.store.write({
            **_base(offset),
            keys.active(graph_id): json.dumps({"version": version}).encode(),
        })

    def write(self, delta: TurnDelta, entry: Entry) -> dict[Edge, PairState]:
        """Write one turn's delta and its journal entry, atomically; return the
        pairs it created (count 1) and their state."""
        ref = delta.ref
        turn_id = delta.passage.turn_id
        pair_keys = [keys.pair(ref, a, b) for a, b in delta.pairs]
        old_pairs = self.store.multi_get(pair_keys)
        batch: dict[bytes, bytes | None] = {
            **_journaled(ref, entry),
            keys.registry(ref): b"",
            keys.graph_meta(ref): _json(delta.meta),
            keys.passage(ref, turn_id): _json(delta.passage),
        }
        for concept in delta.concepts:
            batch[keys.concept(ref, concept.id)] = _json(concept)
            batch[keys.concept_passage(ref, concept.id, turn_id)] = b""
        at = to_us(delta.passage.timestamp)
        created = {}
        for edge, key, old in zip(delta.pairs, pair_keys, old_pairs):
            if old is None:
                batch[key] = keys.encode_pair(1, at)
                created[edge] = PairState(1, delta.passage.timestamp)
            else:
                count, last = keys.decode_pair(old)
                batch[key] = keys.encode_pair(count + 1, max(last, at))
        self.store.write(batch)
        return created

    def write_retrieval(self, ref: GraphRef, concepts: Iterable[ConceptState], entry: Entry, request_id: str) -> None:
        """Replace concept records (a retrieval's boosts), marking the request applied."""
        batch = {**_journaled(ref, entry), **{keys.concept(ref, c.id): _json(c) for c in concepts}}
        batch[keys.retrieval(ref, request_id)] = b""
        self.store.write(batch)

    def write_removals(
        self,
        ref: GraphRef,
        meta: GraphMeta,
        concepts: Iterable[str],
        edges: Iterable[Edge],
        sources: Iterable[tuple[str, str]],
        passages: Iterable[str],
        entry: Entry,
    ) -> None:
        """A decay tick: the new meta, and concepts, edges, concept -> passage
        links and passages removed (a removed passage's turn stays known)."""
        batch: dict[bytes, bytes | None] = {**_journaled(ref, entry), keys.graph_meta(ref): _json(meta)}
        batch.update({keys.concept(ref, cid): None for cid in concepts})
        batch.update({keys.pair(ref, a, b): None for a, b in edges})
        batch.update({keys.concept_passage(ref, cid, t): None for cid, t in sources})
        for turn_id in passages:
            batch[keys.passage(ref, turn_id)] = None
            batch[keys.forgotten_turn(ref, turn_id)] = b""
        self.store.write(batch)

    def write_topics(self, ref: GraphRef, meta: GraphMeta, topics: Iterable[TopicNode], entry: Entry) -> None:
        """Replace the graph version's topic nodes."""
        batch: dict[bytes, bytes | None] = {key: None for key, _ in self.store.scan(keys.section(ref, b"k"))}
        batch.update({**_journaled(ref, entry), keys.graph_meta(ref): _json(meta)})
        batch.update({keys.topic(ref, t.id): _json(t) for t in topics})
        self.store.write(batch)

    def write_forgetting(
        self,
        graph_id: str,
        request_id: str,
        turn_ids: Iterable[str],
        refolded: dict[GraphRef, list[tuple[bytes, bytes]]],
        erased: Iterable[GraphRef],
        offset: int,
    ) -> None:
        """A forget request: the turns' tombstones, each refolded graph version's
        records replaced by the new ones, erased versions deleted (with the
        graph's active version when it loses them all), atomically."""
        batch: dict[bytes, bytes | None] = {**_base(offset), keys.forget_request(graph_id, request_id): b""}
        batch.update({keys.tombstone(graph_id, t): b"" for t in turn_ids})
        for ref, records in refolded.items():
            batch.update({key: None for key, _ in self.records(ref)})
            batch.update(records)
        erased = list(erased)
        for ref in erased:
            batch.update({key: None for key, _ in self.records(ref)})
            batch[keys.registry(ref)] = None
        if erased and all(r in erased for r in self.graph_refs() if r.graph_id == graph_id):
            batch[keys.active(graph_id)] = None
        self.store.write(batch)


def _journaled(ref: GraphRef, entry: Entry) -> dict[bytes, bytes | None]:
    """`_base` plus the event's journal entry in its graph version."""
    return {**_base(entry.offset), keys.journal_entry(ref, entry.offset): entry.event}


def _json(model: ConceptState | GraphMeta | Passage | TopicNode) -> bytes:
    return model.model_dump_json().encode()


def _base(offset: int) -> dict[bytes, bytes | None]:
    """What every write carries: the log offset it reflects and the state format."""
    return {
        keys.OFFSET: json.dumps({"offset": offset}).encode(),
        keys.FORMAT: json.dumps({"format": STATE_FORMAT}).encode(),
    }
