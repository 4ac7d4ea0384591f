"""Typed reads and atomic writes of graph state over a `PartitionStore`."""

from __future__ import annotations

import bisect
import json

from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple

from emgas.processors.dynamics import EPOCH, microseconds
from emgas.processors.events import TopicNode
from emgas.processors.graph import ConceptState, GraphMeta, GraphRef, Passage, concept_record
from emgas.processors.pruning import Edge, PairState, pair_state
from emgas.processors.writes import (
    AddPassage, CoOccur, Forgetting, KeepEdges, MarkRetrieval, PrunePassage, PutConcept, PutMeta, Register,
    Records, Refolded, RemoveConcept, RemoveLink, RemovePairs, SetTopics, SwitchVersion, UnknownWrite, Writes,
)
from emgas.state import fold_points, keys
from emgas.state.rows import RowLookup
from emgas.state.store import LazyRecord, PartitionStore
from emgas.state.transaction import Transaction
from emgas.state.records import decode_passage_concepts, dumps

NO_OFFSET = -1
FIRST_VERSION = 1
# Version of the key layout and record formats; a store in another format
# is rebuilt from the log (see `streams.runtime.partitions`).
STATE_FORMAT = 5  # 4: pair counts in rows (`state.rows`), not one record per pair; 5: links implicit (`keys`)


class PendingConcept(LazyRecord):
    """A concept a run of turns left, kept as its values (`Mentions`' order)
    until it is read as a record or committed: a concept mentioned by many
    runs between two commits is made a record once, not once per run."""

    __slots__ = ("cid", "values")

    def __init__(self, cid: str, values: list) -> None:
        self.cid, self.values = cid, values

    def model(self) -> ConceptState:
        return concept_record(self.cid, self.values)

    def encode(self) -> bytes:
        text, count, activation, created_at, last_accessed, decayed_to, retrievals, first, last = self.values
        return dumps({
            "id": self.cid, "text": text, "count": count, "base_activation": activation, "created_at": created_at,
            "last_accessed": last_accessed, "decayed_to": decayed_to, "retrievals": retrievals,
            "first_retrieved": first, "last_retrieved": last,
        }) or super().encode()


class PendingPassage(LazyRecord):
    """A passage a run of turns staged, kept as its fields until it is read
    as a record (`model`) or committed (`encode`): thousands of them per
    commit, each written once and rarely read before."""

    __slots__ = ("turn_id", "speaker", "text", "timestamp", "session_id", "metadata", "concept_ids", "seq", "_encoded")

    def __init__(
        self, turn_id: str, speaker: str, text: str, timestamp: datetime, session_id: str | None,
        metadata: dict[str, Any], concept_ids: tuple[str, ...], seq: int,
    ) -> None:
        self.turn_id, self.speaker, self.text, self.timestamp = turn_id, speaker, text, timestamp
        self.session_id, self.metadata, self.concept_ids, self.seq = session_id, metadata, concept_ids, seq
        self._encoded: bytes | None = None

    def model(self) -> Passage:
        return Passage.model_construct(
            turn_id=self.turn_id, speaker=self.speaker, text=self.text, timestamp=self.timestamp,
            session_id=self.session_id, metadata=self.metadata, concept_ids=self.concept_ids, seq=self.seq,
        )

    def encode(self) -> bytes:
        """Encoded once (a passage never changes once staged): every scan of
        the pending writes before the commit (a snapshot round's fold point)
        reads it as bytes, then the commit."""
        if self._encoded is None:
            self._encoded = dumps({
                "turn_id": self.turn_id, "speaker": self.speaker, "text": self.text, "timestamp": self.timestamp,
                "session_id": self.session_id, "metadata": self.metadata, "concept_ids": self.concept_ids,
                "seq": self.seq,
            }) or super().encode()
        return self._encoded


class Entry(NamedTuple):
    """An applied graph event as its graph version's journal keeps it: its log
    offset and its JSON encoding. Every write that applies an event records
    it, in the same batch, so a graph version can be re-folded from its own
    journal (`PartitionState.refolds`)."""

    offset: int
    event: bytes


# A pruning tick decided in a group, as `stage_prunings` stages it: its
# journal entry, the concepts it removes, the (concept, turn) links it
# unlinks, the passages it orphans (turn id -> the concepts each names).
PrunedByTick = tuple[Entry, Iterable[str], Iterable[tuple[str, str]], Mapping[str, tuple[str, ...]]]


# Times seen lately, in µs, by identity: a fold converts the same datetime
# objects over and over (a turn's time, held concepts' times), and both
# subtracting an aware datetime and comparing two of them (a lookup by
# value) call their tzinfo. An entry holds its object, so its id is not reused.
_US_SEEN: dict[int, tuple[datetime, int]] = {}
_US_SEEN_MAX = 1 << 16


def to_us(t: datetime) -> int:
    """Event time as integer microseconds since 1970 (exact for aware datetimes)."""
    seen = _US_SEEN.get(id(t))
    if seen is not None and seen[0] is t:
        return seen[1]
    if len(_US_SEEN) >= _US_SEEN_MAX:
        _US_SEEN.clear()
    us = microseconds(t)
    _US_SEEN[id(t)] = (t, us)
    return us


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def state_format(store: PartitionStore) -> int | None:
    """The format `store` was written in; None for an empty store."""
    raw = store.get(keys.FORMAT)
    if raw:
        return json.loads(raw)["format"]
    return 1 if store.get(keys.OFFSET) else None


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

    def forgotten_turns(self, graph_id: str) -> set[str]:
        """Every turn of the graph forgotten on request (its tombstones)."""
        prefix = keys.graph_keyed(keys.TOMBSTONE, graph_id)
        return {key[len(prefix):].decode() for key, _ in self.store.scan(prefix)}

    def has_forget(self, graph_id: str, request_id: str) -> bool:
        return self.store.get(keys.forget_request(graph_id, request_id)) is not None

    def journal(self, ref: GraphRef, after: int = -1) -> Iterator[Entry]:
        """The events applied to the graph version after log offset `after`, in log order."""
        section = keys.section(ref, b"j")
        for key, raw in self.store.scan(section, keys.journal_entry(ref, after + 1)):
            yield Entry(keys.offset_after(key, section), raw)

    def journal_to(self, ref: GraphRef, last: int) -> Iterator[Entry]:
        """The events applied to the graph version up to log offset `last`, in log order."""
        for entry in self.journal(ref):
            if entry.offset > last:
                return
            yield entry

    def records_but_journal(self, ref: GraphRef, journal_after: int | None = None) -> Records:
        """Every record of the graph version but its journal's (but, with
        `journal_after`, its journal entries after that log offset), in key order."""
        prefix, journal = keys.graph_prefix(ref), keys.section(ref, b"j")
        before = []
        for key, value in self.store.scan(prefix):
            if key >= journal:
                break
            before.append((key, value))
        if journal_after is not None:
            before += self.store.scan(journal, keys.journal_entry(ref, journal_after + 1))
        return before + list(self.store.scan(prefix, journal[:-2] + b"k"))

    def turn_ids(self, ref: GraphRef) -> set[str]:
        """Every turn applied to the graph version: passages held and pruned."""
        ids: set[str] = set()
        for kind in (b"t", b"f"):
            prefix = keys.section(ref, kind)
            ids.update(key[len(prefix):].decode() for key, _ in self.store.scan(prefix))
        return ids

    @staticmethod
    def turn_ids_in(ref: GraphRef, records: Records) -> set[str]:
        """`turn_ids` read from `records` (the version's, in key order, as
        `records_but_journal` gives them), without scanning the store again."""
        ids: set[str] = set()
        for kind in (b"t", b"f"):
            prefix = keys.section(ref, kind)
            k = bisect.bisect_left(records, (prefix,))  # a (key, value) pair sorts after its key alone
            while k < len(records) and records[k][0].startswith(prefix):
                ids.add(records[k][0][len(prefix):].decode())
                k += 1
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
        settle = getattr(self.store, "settle_concepts", None)  # the views' changed concepts first (a plain store has none)
        if settle is not None:
            settle(ref, ids)
        found = self.store.get_models([keys.concept(ref, cid) for cid in ids], ConceptState)
        return {cid: concept for cid, concept in zip(ids, found) if concept is not None}

    def put_concepts(self, ref: GraphRef, concepts: Mapping[str, list]) -> None:
        """Stage concepts given as their values (`Mentions`' order), each made a record only when read or committed."""
        self.store.stage(dict(zip(
            keys.concepts(ref, concepts), (PendingConcept(cid, values) for cid, values in concepts.items()),
        )))

    def pairs(self, ref: GraphRef, edges: Iterable[Edge]) -> dict[Edge, PairState]:
        """The stored pairs among `edges` (each (a, b) with a < b: in a's row)."""
        edges = list(edges)
        rows = self.rows_of(ref, sorted({a for a, _ in edges}))
        found = {}
        times: dict[int, datetime] = {}  # pairs of one turn often share their last time
        for edge in edges:
            entry = rows[edge[0]].get(edge[1])
            if entry is not None:
                at = times.get(entry[1])
                if at is None:
                    at = times[entry[1]] = from_us(entry[1])
                found[edge] = pair_state(entry[0], at)
        return found

    def rows_of(self, ref: GraphRef, cids: list[str]) -> dict[str, RowLookup]:
        """The rows of `cids`, pending changes included, for point lookups."""
        settle = getattr(self.store, "settle", None)  # the views' changed rows first (a plain store has none)
        if settle is not None:
            settle()
        raws = self.store.multi_get([keys.row(ref, cid) for cid in cids])
        return {cid: RowLookup(raw) for cid, raw in zip(cids, raws)}

    def links(
        self, ref: GraphRef, candidates: list[tuple[str, str]], named: Mapping[str, tuple[str, ...]] | None = None,
    ) -> frozenset[tuple[str, str]]:
        """Those of the (concept, turn) links that exist: the turn's passage
        is held, its turn mentioned the concept, and no tick unlinked it.
        `named`: the concepts the passages of those turns name, when read already."""
        if named is None:
            named = self.passage_concepts(ref, sorted({t for _, t in candidates}))
        mentioned = [(c, t) for c, t in candidates if t in named and c in named[t]]
        unlinked = self.store.multi_get(keys.unlinks(ref, mentioned))
        return frozenset(link for link, raw in zip(mentioned, unlinked) if raw is None)

    def passage_concepts(self, ref: GraphRef, turn_ids: list[str]) -> dict[str, tuple[str, ...]]:
        """The concepts each held passage of `turn_ids` names (its `concept_ids`),
        read without making the passages models."""
        lookup = getattr(self.store, "lookup", self.store.multi_get)  # a transaction's pending values as they are
        found = {}
        for turn_id, value in zip(turn_ids, lookup([keys.passage(ref, t) for t in turn_ids])):
            if isinstance(value, bytes):
                named = decode_passage_concepts(value)  # not as the encoder writes it: the model reads it, or says why not
                found[turn_id] = Passage.model_validate_json(value).concept_ids if named is None else named
            elif value is not None:
                found[turn_id] = value.concept_ids  # a passage staged as a model or as its fields
        return found

    def passages(self, ref: GraphRef, turn_ids: list[str]) -> dict[str, Passage]:
        found = self.store.get_models([keys.passage(ref, t) for t in turn_ids], Passage)
        return {t: passage for t, passage in zip(turn_ids, found) if passage is not None}

    def passages_starting(self, ref: GraphRef, prefix: str, limit: int) -> dict[str, Passage]:
        """Up to `limit` passages whose turn id starts with `prefix`, in turn id order."""
        section = keys.section(ref, b"t")
        found: dict[str, Passage] = {}
        for key, raw in self.store.scan(section + prefix.encode()):
            if len(found) >= limit:
                break
            found[key[len(section):].decode()] = Passage.model_validate_json(raw)
        return found

    def topics(self, ref: GraphRef) -> list[TopicNode]:
        return [TopicNode.model_validate_json(raw) for _, raw in self.store.scan(keys.section(ref, b"k"))]

    def apply(self, ref: GraphRef, writes: Writes, entry: Entry | None) -> None:
        """Stage one event's writes to `ref` (and its journal entry) in the transaction."""
        if entry is not None:
            self.store.put(keys.journal_entry(ref, entry.offset), entry.event)
        for write in writes:
            stage = _STAGES.get(type(write))
            if stage is None:
                raise UnknownWrite("the store", write)
            stage(self, ref, write)

    def _register(self, ref: GraphRef, write: Register) -> None:
        self.store.put(keys.registry(ref), b"")

    def _put_meta(self, ref: GraphRef, write: PutMeta) -> None:
        self.store.put(keys.graph_meta(ref), write.meta)

    def _put_concept(self, ref: GraphRef, write: PutConcept) -> None:
        self.store.put(keys.concept(ref, write.concept.id), write.concept)

    def _add_passage(self, ref: GraphRef, write: AddPassage) -> None:
        """The passage, which links each of its concepts (`keys`: no record per link)."""
        self.store.put(keys.passage(ref, write.passage.turn_id), write.passage)

    def _rows_kept_by_the_view(self, ref: GraphRef, write: CoOccur | RemovePairs) -> None:
        """Pair rows change in the graph's view (`state.adjacency`), which the
        fold has loaded for any event that writes them; the rows it changed are
        written here when the transaction settles (`PartitionState`)."""

    def _remove_concept(self, ref: GraphRef, write: RemoveConcept) -> None:
        self.store.put(keys.concept(ref, write.cid), None)

    def _remove_link(self, ref: GraphRef, write: RemoveLink) -> None:
        self.store.put(keys.unlinked(ref, write.turn_id, write.cid), b"")

    def _prune_passage(self, ref: GraphRef, write: PrunePassage) -> None:
        self._drop_passage(ref, write.turn_id, self.passage_concepts(ref, [write.turn_id]).get(write.turn_id, ()))

    def _drop_passage(self, ref: GraphRef, turn_id: str, named: Iterable[str]) -> None:
        self.store.write(_passage_dropped(ref, turn_id, named))

    def stage_prunings(self, ref: GraphRef, ticks: Iterable[PrunedByTick]) -> None:
        """Stage the pruning ticks a group decided (`state.tick_group`), in
        log order, each as its writes but its meta's would stage it: its
        journal entry, the records of the concepts it removes, the (concept,
        turn) links unlinked, the orphaned passages (turn id -> the concepts
        it names) gone. One batch for the group: a later tick's record of a
        key replaces an earlier one's, as staging them one after another would."""
        batch: dict[bytes, bytes | None] = {}
        for entry, concepts, links, orphaned in ticks:
            batch[keys.journal_entry(ref, entry.offset)] = entry.event
            batch.update(dict.fromkeys(keys.concepts(ref, concepts)))
            batch.update(dict.fromkeys(keys.unlinks(ref, links), b""))
            for turn_id, named in orphaned.items():  # after the links: a dropped passage's go
                batch.update(_passage_dropped(ref, turn_id, named))
        self.store.write(batch)  # a transaction stages it: one call, not one a record

    def _keep_edges(self, ref: GraphRef, write: KeepEdges) -> None:
        pass  # a due time: the in-memory graph's alone

    def _set_topics(self, ref: GraphRef, write: SetTopics) -> None:
        for topic_id in write.removed:
            self.store.put(keys.topic(ref, topic_id), None)
        for topic in write.topics:
            self.store.put(keys.topic(ref, topic.id), topic)

    def _mark_retrieval(self, ref: GraphRef, write: MarkRetrieval) -> None:
        self.store.put(keys.retrieval(ref, write.request_id), b"")

    def _switch_version(self, ref: GraphRef, write: SwitchVersion) -> None:
        self.store.put(keys.active(ref.graph_id), json.dumps({"version": write.version}).encode())

    def _forgetting(self, ref: GraphRef, forgetting: Forgetting) -> None:
        """Tombstones; each refolded version's records replaced by the new ones;
        erased versions deleted (with the graph's active version when it loses them all)."""
        put, graph_id = self.store.put, forgetting.graph_id
        put(keys.forget_request(graph_id, forgetting.request_id), b"")
        for turn_id in forgetting.tombstones:
            put(keys.tombstone(graph_id, turn_id), b"")
        forgotten = set(forgetting.tombstones)
        for refolded, records in forgetting.refolded.items():
            fold_points.drop_holding(self.store, refolded, forgotten)  # they still hold a forgotten turn
            self._replace_records(refolded, records)
        for erased in forgetting.erased:
            fold_points.drop_version(self.store, erased)
            for key, _ in list(self.records(erased)):
                put(key, None)
            put(keys.registry(erased), None)
        if forgetting.clear_active:
            put(keys.active(graph_id), None)

    def _replace_records(self, ref: GraphRef, refolded: Refolded) -> None:
        """`ref`'s records become `refolded`'s (its journal but the entries the
        re-fold dropped stays): only those that differ are written, as a
        re-fold leaves most of a version as it was (rows and concepts it
        never reached)."""
        put = self.store.put
        old = dict(self.records_but_journal(ref))
        for key, value in refolded.records.items():
            if old.pop(key, None) != value:
                put(key, value)
        for key in old:
            put(key, None)
        for key in keys.journal_entries(ref, refolded.journal_dropped):
            put(key, None)

    def stage_rejection(self, offset: int, event_type: str, reason: str) -> None:
        """Record that the fold rejected the event at `offset` (state otherwise unchanged)."""
        self.store.put(keys.rejected(offset), json.dumps({"type": event_type, "reason": reason}).encode())

    def rejections(self) -> list[tuple[int, dict[str, str]]]:
        """(offset, {"type", "reason"}) of every event the fold rejected, in log order."""
        return [(keys.offset_after(key, keys.REJECTED), json.loads(raw)) for key, raw in self.store.scan(keys.REJECTED)]


# How each write is staged, by its type (after the class: a compiled class
# has no names of its own methods in its body to build it from).
_STAGES: dict[type, Callable[[GraphRepository, GraphRef, Any], None]] = {
    Register: GraphRepository._register, PutMeta: GraphRepository._put_meta, PutConcept: GraphRepository._put_concept,
    AddPassage: GraphRepository._add_passage, CoOccur: GraphRepository._rows_kept_by_the_view,
    RemovePairs: GraphRepository._rows_kept_by_the_view, RemoveConcept: GraphRepository._remove_concept,
    RemoveLink: GraphRepository._remove_link, PrunePassage: GraphRepository._prune_passage,
    KeepEdges: GraphRepository._keep_edges, SetTopics: GraphRepository._set_topics,
    MarkRetrieval: GraphRepository._mark_retrieval, SwitchVersion: GraphRepository._switch_version,
    Forgetting: GraphRepository._forgetting,
}


def _passage_dropped(ref: GraphRef, turn_id: str, named: Iterable[str]) -> dict[bytes, bytes | None]:
    """The records of a passage that goes, with the links it lost (of
    `named`, the concepts it names); its turn stays known (its `f` record)."""
    dropped: dict[bytes, bytes | None] = dict.fromkeys(keys.unlinks(ref, [(cid, turn_id) for cid in named]))
    dropped[keys.passage(ref, turn_id)] = None
    dropped[keys.forgotten_turn(ref, turn_id)] = b""
    return dropped


def offset_batch(offset: int) -> dict[bytes, bytes | None]:
    """What every commit carries: the log offset the state reflects and its format."""
    return {
        keys.OFFSET: json.dumps({"offset": offset}).encode(),
        keys.FORMAT: json.dumps({"format": STATE_FORMAT}).encode(),
    }
