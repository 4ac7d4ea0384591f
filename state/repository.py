"""Typed reads and atomic writes of graph state over a `PartitionStore`."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Iterable, Iterator, Mapping, NamedTuple

from emgas.processors.dynamics import EPOCH
from emgas.processors.events import TopicNode
from emgas.processors.evolve import Delta, Forgetting
from emgas.processors.graph import ConceptState, GraphMeta, GraphRef, Passage
from emgas.processors.pruning import Edge, PairState, pair_state
from emgas.state import keys
from emgas.state.transaction import Transaction

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
    """All graphs of one partition, and the log offset their state reflects.

    Reads see the partition transaction's pending writes; writes are staged
    in it and reach the store when the transaction commits.
    """

    def __init__(self, store: Transaction) -> None:
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
        [meta] = self.store.get_models([keys.graph_meta(ref)], GraphMeta)
        return meta or GraphMeta()

    def turns(self, ref: GraphRef) -> int:
        return self.meta(ref).turns

    def concepts(self, ref: GraphRef, ids: Iterable[str]) -> dict[str, ConceptState]:
        ids = list(ids)
        found = self.store.get_models([keys.concept(ref, cid) for cid in ids], ConceptState)
        return {cid: concept for cid, concept in zip(ids, found) if concept is not None}

    def pairs(self, ref: GraphRef, edges: Iterable[Edge]) -> dict[Edge, PairState]:
        edges = list(edges)
        raws = self.store.multi_get(keys.pair_keys(ref, edges))
        found = {}
        times: dict[int, datetime] = {}  # pairs of one turn often share their last time
        for edge, raw in zip(edges, raws):
            if raw is not None:
                count, last = keys.decode_pair(raw)
                at = times.get(last)
                if at is None:
                    at = times[last] = from_us(last)
                found[edge] = pair_state(count, at)
        return found

    def edges_of(self, ref: GraphRef, neighbours: Mapping[str, Iterable[str]]) -> dict[str, dict[str, PairState]]:
        """Per concept, its stored pairs with each of `neighbours[concept]` (neighbour -> pair)."""
        found: dict[str, dict[str, PairState]] = {}
        for cid, others in neighbours.items():
            edges = {o: (cid, o) if cid < o else (o, cid) for o in others}
            pairs = self.pairs(ref, edges.values())
            found[cid] = {o: pairs[edge] for o, edge in edges.items() if edge in pairs}
        return found

    def sources(self, ref: GraphRef, cid: str) -> list[str]:
        """Turn ids of the passages that mention `cid`."""
        prefix = keys.section(ref, b"s") + cid.encode() + keys.SEP
        return [key[len(prefix):].decode() for key, _ in self.store.scan(prefix)]

    def links(self, ref: GraphRef, candidates: list[tuple[str, str]]) -> frozenset[tuple[str, str]]:
        """Those of the (concept, turn) links that exist."""
        found = self.store.multi_get([keys.concept_passage(ref, c, t) for c, t in candidates])
        return frozenset(link for link, raw in zip(candidates, found) if raw is not None)

    def passages(self, ref: GraphRef, turn_ids: list[str]) -> dict[str, Passage]:
        found = self.store.get_models([keys.passage(ref, t) for t in turn_ids], Passage)
        return {t: passage for t, passage in zip(turn_ids, found) if passage is not None}

    def passages_starting(self, ref: GraphRef, prefix: str, limit: int) -> dict[str, Passage]:
        """Up to `limit` passages whose turn id starts with `prefix`, in turn id order."""
        section = keys.section(ref, b"t")
        found = {}
        for key, raw in self.store.scan(section + prefix.encode()):
            if len(found) >= limit:
                break
            found[key[len(section):].decode()] = Passage.model_validate_json(raw)
        return found

    def topics(self, ref: GraphRef) -> list[TopicNode]:
        return [TopicNode.model_validate_json(raw) for _, raw in self.store.scan(keys.section(ref, b"k"))]

    def stage(self, delta: Delta, entry: Entry | None) -> None:
        """Stage one event's delta (and its journal entry) in the transaction."""
        ref, put = delta.ref, self.store.put
        if entry is not None:
            put(keys.journal_entry(ref, entry.offset), entry.event)
        if delta.registers:
            put(keys.registry(ref), b"")
        if delta.meta is not None:
            put(keys.graph_meta(ref), delta.meta)
        if delta.passage is not None:
            put(keys.passage(ref, delta.passage.turn_id), delta.passage)
        for concept in delta.concepts:
            put(keys.concept(ref, concept.id), concept)
        for cid, turn_id in delta.links:
            put(keys.concept_passage(ref, cid, turn_id), b"")
        if delta.pairs:
            times: dict[datetime, int] = {}
            for key, (_, pair) in zip(keys.pair_keys(ref, (edge for edge, _ in delta.pairs)), delta.pairs):
                at = times.get(pair.last)
                if at is None:
                    at = times[pair.last] = to_us(pair.last)
                put(key, keys.encode_pair(pair.count, at))
        self._stage_removals(delta)
        if delta.topics is not None:
            for topic_id in delta.removed_topics:
                put(keys.topic(ref, topic_id), None)
            for topic in delta.topics:
                put(keys.topic(ref, topic.id), topic)
        if delta.retrieval is not None:
            put(keys.retrieval(ref, delta.retrieval), b"")
        if delta.active_version is not None:
            put(keys.active(ref.graph_id), json.dumps({"version": delta.active_version}).encode())
        if delta.forgetting is not None:
            self._stage_forgetting(delta.forgetting)

    def _stage_removals(self, delta: Delta) -> None:
        """Concepts, pairs, concept -> passage links and passages removed (a
        removed passage's turn stays known: its `f` record)."""
        ref, put = delta.ref, self.store.put
        for cid in delta.removed_concepts:
            put(keys.concept(ref, cid), None)
        for key in keys.pair_keys(ref, delta.removed_pairs):
            put(key, None)
        for cid, turn_id in delta.removed_links:
            put(keys.concept_passage(ref, cid, turn_id), None)
        for turn_id in delta.removed_passages:
            put(keys.passage(ref, turn_id), None)
            put(keys.forgotten_turn(ref, turn_id), b"")

    def _stage_forgetting(self, forgetting: Forgetting) -> None:
        """Tombstones; each refolded version's records replaced by the new ones;
        erased versions deleted (with the graph's active version when it loses them all)."""
        put, graph_id = self.store.put, forgetting.graph_id
        put(keys.forget_request(graph_id, forgetting.request_id), b"")
        for turn_id in forgetting.tombstones:
            put(keys.tombstone(graph_id, turn_id), b"")
        for ref, records in forgetting.refolded.items():
            for key, _ in list(self.records(ref)):
                put(key, None)
            for key, value in records:
                put(key, value)
        for ref in forgetting.erased:
            for key, _ in list(self.records(ref)):
                put(key, None)
            put(keys.registry(ref), None)
        if forgetting.clear_active:
            put(keys.active(graph_id), None)

    def stage_rejection(self, offset: int, event_type: str, reason: str) -> None:
        """Record that the fold rejected the event at `offset` (state otherwise unchanged)."""
        self.store.put(keys.rejected(offset), json.dumps({"type": event_type, "reason": reason}).encode())

    def rejections(self) -> list[tuple[int, dict[str, str]]]:
        """(offset, {"type", "reason"}) of every event the fold rejected, in log order."""
        return [(keys.offset_after(key, keys.REJECTED), json.loads(raw)) for key, raw in self.store.scan(keys.REJECTED)]


def offset_batch(offset: int) -> dict[bytes, bytes | None]:
    """What every commit carries: the log offset the state reflects and its format."""
    return {
        keys.OFFSET: json.dumps({"offset": offset}).encode(),
        keys.FORMAT: json.dumps({"format": STATE_FORMAT}).encode(),
    }
