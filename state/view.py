"""The in-memory view that serves queries: a compact, incrementally kept adjacency.

Derived from the durable state (rebuilt by `load_view`) and kept current
after each write, so a query never walks RocksDB key by key. Each node's
neighbour list is cached as numpy arrays (indices, pair counts) and
invalidated only when a change touches that node; edge weights are computed
from the counts when read, exact for the current N.

Removed concepts leave a dead slot (their index is not reused until the
view is rebuilt), so arrays indexed by node stay valid. The view also keeps
two heaps of "due times" for the decay scheduler: when each concept's base
activation and each edge's retention will fall below the thresholds under
the configured parameters. Due times only move later. A concept's change
pushes its new due time (an entry older than its record is dropped when
popped); an edge is filed when created, and the scheduler re-files one it
pops before it is due (one push per edge, not one per co-occurrence).
"""

from __future__ import annotations

import bisect
import heapq
import math
import weakref
from collections import deque
from itertools import chain, repeat
from datetime import datetime
from typing import Any, Callable, Collection, Iterable, Sequence

import numpy as np

from emgas.processors.association import WeightKind, outgoing_weights, specificity
from emgas.processors.activation import Neighbours, Surroundings
from emgas.processors.dynamics import DecayParams, edge_lifetime, seconds, time_to_threshold
from emgas.processors.events import TopicNode
from emgas.processors.writes import (
    AddPassage, CoOccur, KeepEdges, MarkRetrieval, PrunePassage, PutConcept, PutMeta, Register, RemoveConcept,
    RemoveLink, RemovePairs, SetTopics, UnknownWrite, Write,
)
from emgas.processors.extract import speaker_key
from emgas.processors.graph import ConceptState, GraphRef, Passage
from emgas.processors.pruning import Edge, PairState, PairTable, pair_state
from emgas.processors.pruning_group import ListedEdge, ListedEdges, slot_keys
from emgas.state import keys, links
from emgas.state.adjacency import Adjacency
from emgas.state.concept_columns import ConceptColumns
from emgas.state.folded_run import FoldedRun
from emgas.state.mention_columns import apply as apply_mentions
from emgas.state.records import PassagePlace, decode_concept, decode_passage_place
from emgas.state.repository import GraphRepository, PendingPassage, from_us, to_us
from emgas.state.rows import upper_arrays



# A passage as a view files it: a record's model, the fold's pending one, or what loading reads of it.
Placed = Passage | PendingPassage | PassagePlace


def concept_due_s(concept: ConceptState, params: DecayParams) -> float:
    """Event time (s since 1970) at which the concept's activation reaches θ."""
    return due_s(concept.base_activation, concept.reinforcements, concept.decay_reference, params)


def due_s(activation: float, reinforcements: int, reference: datetime, params: DecayParams) -> float:
    """`concept_due_s` of a concept's values: activation A as of `reference`."""
    return seconds(reference) + time_to_threshold(activation, reinforcements, params)


def edge_dues_s(counts: np.ndarray, lasts_us: np.ndarray, params: DecayParams) -> np.ndarray:
    """Per edge, the event time (s since 1970) at which its retention reaches
    θ_e: its last co-occurrence (µs over 10^6) plus `edge_lifetime`,
    S · max(c, 1) · ln(1/θ_e) (inf when θ_e ≤ 0), the same operations on arrays."""
    if params.edge_threshold <= 0:
        lifetime = np.full(len(counts), math.inf)
    else:
        lifetime = params.edge_stability_s * np.maximum(counts, 1) * math.log(1.0 / params.edge_threshold)
    return lasts_us / 1e6 + lifetime


class GraphView:
    """One graph's nodes, counts, co-occurrence adjacency and passage ids."""

    def __init__(self, ref: GraphRef, decay: DecayParams) -> None:
        self.ref = ref
        self.decay = decay
        self.dead = 0
        self.topics: list[TopicNode] = []
        self._topic_members: list[np.ndarray] = []  # per topic: its members' node indices
        self._topics_of: dict[int, list[int]] = {}  # node index -> its topics' node indices
        self._concept_due: list[tuple[float, str]] = []
        self._latest_due: dict[str, float] = {}  # per live concept: its newest due time
        # Edges' due times (s since 1970) by node slot, in chunks, unsorted:
        # (due, a, b) arrays; a tick takes those due at once (`due_edges`).
        self._edge_due: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._edge_due_entries = 0
        self._edge_noted: list[tuple[float, int, int]] = []  # filed one by one, not in a chunk yet
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        # Every concept's values, by slot: what runs of turns change in place
        # (its slots' due times filed when next asked for, their records
        # written when the transaction settles: `concept_records`).
        self.columns = ConceptColumns()
        self._counts = np.zeros(64, dtype=np.float64)
        self._id_order: list[int] = []  # every slot, in the order of their ids (`_rank`)
        self._ranked: np.ndarray | None = None  # each slot's place in it
        self._id_text = np.zeros(0, dtype=np.uint8)  # every slot's id in UTF-8 (`_id_bytes`)
        self._id_bounds = np.zeros(1, dtype=np.int64)
        self._row_stored = np.zeros(0, dtype=np.bool_)  # per slot: whether the store holds a row record of it
        self._adjacency = Adjacency()
        self._adjacency.on_new_edges = _weakly(self._file_new_edges)  # the view holds the adjacency: no cycle
        self.passage_ids: list[list[str]] = []
        # Where each passage sits: turn id -> (session, seq), and per session
        # seq -> turn id (context looks up a passage's neighbours by seq).
        self.place_of: dict[str, tuple[str | None, int]] = {}
        self._seats: dict[str | None, dict[int, str]] = {}
        # Who said each passage (`speaker_key`), and each session's turns
        # in arrival order: what the ranking's speaker and session steps read.
        self.speaker_of: dict[str, str] = {}
        self._speaker_passages: dict[str, int] = {}  # speaker key -> passages held
        self.session_turns: dict[str, dict[str, None]] = {}
        self.turns = 0

    @property
    def texts(self) -> list[str]:
        """Each slot's surface text (the earliest mention's)."""
        return self.columns.text

    @property
    def size(self) -> int:
        """Node slots, dead ones included (the length of per-node arrays)."""
        return len(self.ids)

    @property
    def concepts(self) -> int:
        """Live concepts."""
        return len(self.index)

    @property
    def edges(self) -> int:
        return self._adjacency.edges

    def needs_compaction(self) -> bool:
        """Whether dead slots or stale due-time entries outnumber live ones
        (then `load_view` gives an equal, compact view)."""
        slack = 1024
        if self.dead > self.concepts + slack:
            return True
        # Queued turns only add edges: below the bound, no merge is needed to know.
        due = self._edge_due_entries + len(self._edge_noted)
        return due > 4 * self._adjacency.edges_at_least + slack and due > 4 * self.edges + slack
        # changed adjacency rows are folded back in memory (`Adjacency.compact`)

    @property
    def counts(self) -> np.ndarray:
        """c(x) for every node, in index order."""
        return self._counts[: self.size]

    def node(self, cid: str, text: str) -> int:
        """Index of concept `cid`, adding it if new."""
        i = self.index.get(cid)
        if i is None:
            i = self.new_nodes([cid], [text])
        return i

    def new_nodes(self, cids: list[str], texts: list[str]) -> int:
        """Add concepts `cids` (distinct, none held) with their texts, in
        order, as `node` adds one; the first one's index."""
        first, n = len(self.ids), len(cids)
        self.index.update(zip(cids, range(first, first + n)))
        self.ids += cids
        self.columns.add_many(texts)
        self._adjacency.add_nodes(n)
        self.passage_ids += [[] for _ in range(n)]
        if first + n > len(self._counts):
            grown = np.zeros(max(2 * len(self._counts), first + n), dtype=self._counts.dtype)
            grown[: len(self._counts)] = self._counts
            self._counts = grown
        return first

    def set_count(self, i: int, count: int) -> None:
        self._counts[i] = count

    def set_counts(self, first: int, counts: list[int]) -> None:
        """`set_count` of the nodes from `first` on."""
        self._counts[first:first + len(counts)] = counts

    def load_pairs(self, a: np.ndarray, b: np.ndarray, counts: np.ndarray, lasts: np.ndarray | None = None) -> None:
        """Set every pair count (and last co-occurrence, µs) at once (a fresh view: loading)."""
        self._adjacency.load(a, b, counts, lasts)

    # -- pair rows: kept here while folding, written to the store at settle --

    @property
    def has_row_changes(self) -> bool:
        return self._adjacency.has_changes

    def row_records(self) -> dict[str, bytes | None]:
        """The store records (`state.rows`) of the concepts whose rows changed
        since the last call: concept id -> its row, or None when it has no
        edge (or is gone). A concept removed and mentioned again has a new
        slot: its live slot's row is the one written."""
        dirty = self._adjacency.take_dirty()
        if not dirty:
            return {}
        ids, index = self.ids, self.index
        changed = np.fromiter(dirty, dtype=np.int64, count=len(dirty))
        dead = self.columns.dead[changed]
        stored = self._rows_stored()
        records: dict[str, bytes | None] = {}
        live = set(changed[~dead].tolist())
        for i in changed[dead].tolist():  # a removed concept's: none, or its new slot's
            cid = ids[i]
            now = index.get(cid)
            if now is not None:  # its record is the new slot's to write, or to delete
                live.add(now)
                stored[now] |= stored[i]
            elif stored[i]:
                records[cid] = None
            stored[i] = False
        rank = self._rank()
        slots = np.fromiter(live, dtype=np.int64, count=len(live))
        slots = slots[np.argsort(rank[slots], kind="stable")]  # in id order: the keys' order
        payload, at = self._adjacency.upper_row_payloads(slots, rank, *self._id_bytes())
        full = np.diff(at) > 0
        if full.any():
            data = payload.tobytes()
            records.update(zip(
                [ids[slot] for slot in slots[full].tolist()],
                map(data.__getitem__, map(slice, at[:-1][full].tolist(), at[1:][full].tolist())),
            ))
        emptied = slots[~full]
        records.update((ids[slot], None) for slot in emptied[stored[emptied]].tolist())  # none stored: none to delete
        stored[slots[full]] = True
        stored[emptied] = False
        return records

    def _rows_stored(self) -> np.ndarray:
        """Per slot, whether the store holds its row (grown to every slot)."""
        if len(self._row_stored) < len(self.ids):
            grown = np.zeros(max(len(self.ids), 2 * len(self._row_stored)), dtype=np.bool_)
            grown[: len(self._row_stored)] = self._row_stored
            self._row_stored = grown
        return self._row_stored

    def rows_loaded(self, cids: Iterable[str]) -> None:
        """The store holds rows of these concepts (a view loaded from it)."""
        stored, index = self._rows_stored(), self.index
        stored[[index[cid] for cid in cids if cid in index]] = True

    def _id_bytes(self) -> tuple[np.ndarray, np.ndarray]:
        """Every slot's id in UTF-8, one after another, and where each
        starts: slot i's at text[bounds[i]:bounds[i + 1]] (ids are never
        changed, so the slots added since the last call are appended)."""
        known = len(self._id_bounds) - 1
        if known < len(self.ids):
            encoded = [cid.encode() for cid in self.ids[known:]]
            used = int(self._id_bounds[-1])
            self._id_bounds = np.concatenate((self._id_bounds, used + np.cumsum([len(raw) for raw in encoded])))
            self._id_text = _appended(self._id_text, used, b"".join(encoded))
        return self._id_text, self._id_bounds

    def _rank(self) -> np.ndarray:
        """Each slot's place among every slot's id in string order (`state.rows`
        sorts a row's neighbours by id); slots added since the last call are
        inserted into the order kept."""
        ids = self.ids
        known = len(self._id_order)
        if known < len(ids) or self._ranked is None:
            if len(ids) - known > known // 8 + 16:  # many new slots: sort them all again
                self._id_order = sorted(range(len(ids)), key=ids.__getitem__)
            for slot in range(len(self._id_order), len(ids)):
                bisect.insort(self._id_order, slot, key=ids.__getitem__)
            self._ranked = np.empty(len(ids), dtype=np.int64)
            self._ranked[np.array(self._id_order, dtype=np.int64)] = np.arange(len(ids))
        assert self._ranked is not None
        return self._ranked

    def pairs(self, edges: Iterable[Edge]) -> dict[Edge, PairState]:
        """The pairs among `edges` that exist, with their count and last
        co-occurrence (the rows touched searched at once: `Adjacency.find`)."""
        edges = edges if isinstance(edges, list) else list(edges)
        if not edges:
            return {}
        index = self.index
        rows = np.array([index.get(a, -1) for a, _ in edges], dtype=np.int64)
        others = np.array([index.get(b, -1) for _, b in edges], dtype=np.int64)
        found, counts, lasts = self._adjacency.find(rows, others)
        hit = np.flatnonzero(found).tolist()
        times: dict[int, datetime] = {}  # pairs of one turn often share their last time
        result: dict[Edge, PairState] = {}
        for k, count, us in zip(hit, counts[found].tolist(), lasts[found].tolist()):
            at_time = times.get(us)
            if at_time is None:
                at_time = times[us] = from_us(us)
            result[edges[k]] = pair_state(count, at_time)
        return result

    def pair_table(self, edges: Iterable[Edge]) -> PairTable:
        """The pairs among `edges` (each (a, b), a < b) that exist, as a table
        in key order (the rows touched searched at once: `Adjacency.find`)."""
        edges = sorted(set(edges))
        found, counts, lasts = self._find(edges)
        hit = np.flatnonzero(found)
        return PairTable(tuple(edges[k] for k in hit.tolist()), counts[hit].astype(np.int64), lasts[hit].astype(np.int64))

    def listed_edges(self, per_tick: Sequence[Sequence[ListedEdge]]) -> ListedEdges:
        """The edges each tick of a group lists that exist (`ListedEdges`):
        each tick's once as listed, in (a, b) id order (`_rank`), with their
        counts, last co-occurrences and keys (`slot_key`), the rows touched
        searched at once (`Adjacency.find`)."""
        get = self.index.get
        ticks = np.repeat(np.arange(len(per_tick), dtype=np.int64), [len(edges) for edges in per_tick])
        a = np.array([get(edge.a, -1) for edges in per_tick for edge in edges], dtype=np.int64)
        b = np.array([get(edge.b, -1) for edges in per_tick for edge in edges], dtype=np.int64)
        held = np.flatnonzero((a >= 0) & (b >= 0))  # both ends are concepts of the graph
        if not len(held):
            return ListedEdges(starts=[0] * (len(per_tick) + 1))
        ticks, a, b = ticks[held], a[held], b[held]
        found, counts, lasts = self._adjacency.find(a, b)
        rank = self._rank()
        hit = np.flatnonzero(found)
        order = hit[np.lexsort((rank[b[hit]], rank[a[hit]], ticks[hit]))]
        ticks, a, b = ticks[order], a[order], b[order]
        once = np.ones(len(order), dtype=np.bool_)  # listed twice the same way round: once
        once[1:] = (ticks[1:] != ticks[:-1]) | (a[1:] != a[:-1]) | (b[1:] != b[:-1])
        order, ticks, a, b = order[once], ticks[once], a[once], b[once]
        return ListedEdges(
            np.searchsorted(ticks, np.arange(len(per_tick) + 1)).tolist(), a.tolist(), b.tolist(),
            slot_keys(a, b, len(self.ids)).tolist(),
            counts[order].astype(np.int64), lasts[order].astype(np.int64),
        )

    def slot_rows(self, slots: Sequence[int]) -> list[tuple[list[int], list[int], list[int]]]:
        """Each slot's (neighbour slots, counts c(a, b), last co-occurrences
        µs), by neighbour, gathered at once (a tick group reads the row of
        each concept it lists)."""
        if not slots:
            return []
        ptr, idx, cnt, last = (a.tolist() for a in self._adjacency.gather(np.asarray(slots, dtype=np.int64)))
        return [(idx[lo:hi], cnt[lo:hi], last[lo:hi]) for lo, hi in zip(ptr, ptr[1:])]

    def _find(self, edges: list[Edge]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per edge (either way round), whether it exists, its count and its last µs."""
        index = self.index
        rows = np.fromiter((index.get(a, -1) for a, _ in edges), dtype=np.int64, count=len(edges))
        others = np.fromiter((index.get(b, -1) for _, b in edges), dtype=np.int64, count=len(edges))
        if not edges:
            return np.zeros(0, dtype=np.bool_), rows, rows
        return self._adjacency.find(rows, others)

    def edges_of(self, neighbours: dict[str, Iterable[str]]) -> dict[str, dict[str, PairState]]:
        """Per concept, its pairs with each of `neighbours[concept]` that exist
        (neighbour -> pair): every concept's searched at once."""
        pairs = self.pairs([(cid, other) for cid, others in neighbours.items() for other in others])
        found: dict[str, dict[str, PairState]] = {cid: {} for cid in neighbours}
        for (cid, other), pair in pairs.items():
            found[cid][other] = pair
        return found

    def apply_all(self, writes: Iterable[Write]) -> None:
        """Apply an event's writes in order."""
        for write in writes:
            self.apply(write)

    def add_turns(self, run: FoldedRun) -> None:
        """Apply a run of new turns (`state.turn_run`): what each turn's writes
        do in turn (nodes created in the order the turns first mention them,
        passages placed, cliques queued), with each concept's values as the
        run's mentions leave them (`state.mention_columns`)."""
        mentions = run.mentions
        slots = mentions.slots.copy()
        fresh = np.flatnonzero(slots < 0)  # in the order of their first mention; none held (the run read the index)
        if len(fresh):
            ids, texts = mentions.ids, mentions.texts
            first = self.new_nodes([ids[k] for k in fresh.tolist()], [texts[k] for k in fresh.tolist()])
            slots[fresh] = np.arange(first, first + len(fresh))
        apply_mentions(self.columns, mentions, slots)
        self._counts[slots] = self.columns.mentions[slots]
        placed = run.passages
        for passage in placed:
            self.place(passage)
        linked = [passage.concept_ids for passage in placed]
        sizes = list(map(len, linked))
        members = list(map(self.index.__getitem__, chain.from_iterable(linked)))
        sources = map(self.passage_ids.__getitem__, members)  # each member's list of passages, in the passages' order
        deque(map(list.append, sources, chain.from_iterable(map(repeat, (p.turn_id for p in placed), sizes))), maxlen=0)
        at_us = [to_us(passage.timestamp) for passage in placed]
        at_s = [us / 1e6 for us in at_us]  # `dynamics.seconds`: the µs since 1970 over 10^6, as `total_seconds` divides
        self._adjacency.add_cliques(
            np.array(members, dtype=np.int32), np.array(sizes, dtype=np.int64), np.array(at_s, dtype=np.float64),
            np.array(at_us, dtype=np.int64),
        )
        self.turns = run.meta.turns
        if run.topics is not None:
            self.set_topics(list(run.topics.topics))

    def concept_records(self, only: Iterable[str]) -> dict[str, list]:
        """The values (`Mentions`' order) of those of the concepts `only` whose
        columns changed since they were last taken, by id: the records a rule
        is about to read."""
        columns, ids, index = self.columns, self.ids, self.index
        slots = [i for i in (index.get(cid) for cid in only) if i is not None]
        return {ids[i]: columns.values(i) for i in columns.take_unwritten_of(slots)}

    def encoded_concepts(self) -> dict[str, bytes]:
        """The records (JSON) of the live concepts whose columns changed since
        they were last taken, by id, in id order (a commit's: encoded at once)."""
        columns, ids = self.columns, self.ids
        taken = np.array(columns.take_unwritten(), dtype=np.int64)
        live = taken[~columns.dead[taken]]  # a removed concept's slot is not its record
        slots = live[np.argsort(self._rank()[live], kind="stable")].tolist()  # in id order: the keys' (a commit sorts them)
        named = [ids[i] for i in slots]
        return dict(zip(named, columns.encoded(slots, named)))

    @property
    def has_concept_changes(self) -> bool:
        return self.columns.any_unwritten

    def remove_slot_edges(self, keys: Iterable[int], size: int) -> None:
        """Drop the edges `keys` (`slot_key`s of slots < `size`, each end live)."""
        ordered = np.array(sorted(keys), dtype=np.int64)
        self._adjacency.remove_many(ordered // size, ordered % size)

    def remove_edges(self, edges: list[Edge]) -> None:
        """Drop the edges whose ends are both live (a removed concept's go with it)."""
        index = self.index
        live = [(index[a], index[b]) for a, b in edges if a in index and b in index]
        if live:
            ends = np.array(live, dtype=np.int32)
            self._adjacency.remove_many(ends[:, 0], ends[:, 1])

    def apply(self, write: Write) -> None:
        """Apply one write the store has just staged (any but a forget's,
        after which the graph is loaded again)."""
        step = self._steps.get(type(write))
        if step is None:
            raise UnknownWrite("the in-memory graph", write)
        step(self, write)

    def _put_concept(self, write: PutConcept) -> None:
        concept = write.concept
        i = self.node(concept.id, concept.text)
        self.columns.put(i, concept)  # the earliest mention's text, which may change, included
        self._counts[i] = concept.count

    def _add_passage(self, write: AddPassage) -> None:
        passage = write.passage
        self.place(passage)
        index, sources = self.index, self.passage_ids
        for cid in passage.concept_ids:
            sources[index[cid]].append(passage.turn_id)

    def _co_occur(self, write: CoOccur) -> None:
        index = self.index
        self._adjacency.add_clique((index[cid] for cid in write.ids), at_s=seconds(write.at), at_us=to_us(write.at))

    def _file_new_edges(self, a: np.ndarray, b: np.ndarray, at_s: np.ndarray) -> None:
        """A new edge (count 1, last = the time of the first turn that held
        it) gets a due time; a repeated co-occurrence only moves it later,
        and the scheduler re-files an edge it finds not yet due."""
        self._file_edges(at_s + edge_lifetime(1, self.decay), a, b)

    def _file_edges(self, due: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        if len(due):
            self._edge_due.append((due, a.astype(np.int32), b.astype(np.int32)))
            self._edge_due_entries += len(due)

    def _put_meta(self, write: PutMeta) -> None:
        self.turns = write.meta.turns

    def _remove_pairs(self, write: RemovePairs) -> None:
        self.remove_edges(list(write.edges))

    def _remove_concept(self, write: RemoveConcept) -> None:
        self.remove_concept(write.cid)

    def _remove_link(self, write: RemoveLink) -> None:
        i = self.index.get(write.cid)
        if i is not None and write.turn_id in self.passage_ids[i]:
            self.passage_ids[i].remove(write.turn_id)

    def _prune_passage(self, write: PrunePassage) -> None:
        self.forget_passage(write.turn_id)

    def _keep_edges(self, write: KeepEdges) -> None:  # listed by a tick, not yet due: due later
        self.note_pairs(write.pairs)

    def _set_topics(self, write: SetTopics) -> None:
        self.set_topics(list(write.topics))

    def _stored_only(self, write: Write) -> None:
        pass  # registration, retrievals applied, the active version: nothing a query reads here

    _steps: dict[type, Callable[[GraphView, Any], None]] = {
        PutConcept: _put_concept, AddPassage: _add_passage, CoOccur: _co_occur, PutMeta: _put_meta,
        RemovePairs: _remove_pairs, RemoveConcept: _remove_concept, RemoveLink: _remove_link,
        PrunePassage: _prune_passage, KeepEdges: _keep_edges, SetTopics: _set_topics,
        Register: _stored_only, MarkRetrieval: _stored_only,
    }

    def place(self, passage: Placed) -> None:
        if passage.turn_id in self.place_of:  # placed again: file it afresh
            self.forget_passage(passage.turn_id)
        key = (passage.session_id, passage.seq)
        self.place_of[passage.turn_id] = key
        self._seats.setdefault(passage.session_id, {})[passage.seq] = passage.turn_id
        speaker = self.speaker_of[passage.turn_id] = speaker_key(passage.speaker)
        self._speaker_passages[speaker] = self._speaker_passages.get(speaker, 0) + 1
        if passage.session_id is not None:
            self.session_turns.setdefault(passage.session_id, {})[passage.turn_id] = None

    def forget_passage(self, turn_id: str) -> None:
        key = self.place_of.pop(turn_id, None)
        self._unfile_speaker(turn_id)
        if key is not None:
            seats = self._seats.get(key[0])
            if seats is not None and seats.get(key[1]) == turn_id:
                del seats[key[1]]
                if not seats:
                    del self._seats[key[0]]
            session = key[0]
            members = self.session_turns.get(session) if session is not None else None
            if session is not None and members is not None:
                members.pop(turn_id, None)
                if not members:
                    del self.session_turns[session]

    def session_of(self, turn_id: str) -> str | None:
        place = self.place_of.get(turn_id)
        return place[0] if place is not None else None

    def members(self, session: str) -> Collection[str]:
        """The turns of a session, in arrival order (a live view: read, do not keep)."""
        return self.session_turns[session].keys()

    def surroundings(self) -> Surroundings:
        return Surroundings(self.context, self.session_of, self.members, lambda pid: self.speaker_of.get(pid, ""))

    def _unfile_speaker(self, turn_id: str) -> None:
        speaker = self.speaker_of.pop(turn_id, None)
        if speaker is not None:
            left = self._speaker_passages[speaker] - 1
            if left:
                self._speaker_passages[speaker] = left
            else:
                del self._speaker_passages[speaker]

    def speakers(self) -> set[str]:
        """The speaker keys of the passages held."""
        return set(self._speaker_passages)

    def context(self, turn_id: str, window: int) -> list[tuple[str, int]]:
        """Turns of the same session within `window` places of `turn_id`, with their distance."""
        session, seq = self.place_of[turn_id]
        seats = self._seats[session]
        found = []
        for d in range(1, window + 1):
            before, after = seats.get(seq - d), seats.get(seq + d)
            if before is not None:
                found.append((before, d))
            if after is not None:
                found.append((after, d))
        return found

    def _file_concepts(self) -> None:
        """File the due time of each concept changed since the last filing
        (a concept mentioned in many turns between two ticks is filed once)."""
        columns, ids, index = self.columns, self.ids, self.index
        for i in columns.take_unfiled():
            cid = ids[i]
            if index.get(cid) != i:
                continue  # a dead slot
            reinforcements = int(columns.mentions[i] + columns.retrievals[i])
            due = self._latest_due[cid] = due_s(
                float(columns.activation[i]), reinforcements, columns.reference(i), self.decay,
            )
            heapq.heappush(self._concept_due, (due, cid))
        if len(self._concept_due) > 4 * len(self._latest_due) + 1024:
            # Stale entries outnumber live ones: keep each live concept's newest
            # (what loading the view from the store files).
            self._concept_due = [(d, cid) for cid, d in self._latest_due.items()]
            heapq.heapify(self._concept_due)

    def file_loaded_edges(self, a: np.ndarray, b: np.ndarray, counts: np.ndarray, lasts_us: np.ndarray) -> None:
        """File the due times of stored edges (`edge_dues_s`)."""
        self._file_edges(edge_dues_s(counts, lasts_us, self.decay), a, b)

    def note_pairs(self, pairs: PairTable) -> None:
        """File the due time of each edge of `pairs` (`edge_dues_s`)."""
        index = self.index
        self.note_slot_pairs([index[a] for a, _ in pairs.edges], [index[b] for _, b in pairs.edges], pairs.counts,
                             pairs.last_us)

    def note_slot_pairs(self, a: list[int], b: list[int], counts: np.ndarray, last_us: np.ndarray) -> None:
        """File the due time of each edge (a[k], b[k]), of count counts[k]
        and last co-occurrence last_us[k] (`edge_dues_s`)."""
        due = edge_dues_s(counts, last_us, self.decay)
        self._edge_noted += list(zip(due.tolist(), a, b))

    def due_concepts(self, at: datetime) -> list[str]:
        """Pop the ids whose due time is at or before `at` (possibly stale: check them)."""
        self._file_concepts()
        return [cid for _, cid in _pop_due(self._concept_due, seconds(at))]

    def due_edges(self, at: datetime) -> list[Edge]:
        until_s = seconds(at)
        if self._adjacency.earliest_queued_s + edge_lifetime(1, self.decay) <= until_s:
            _ = self._adjacency.edges  # reading them merges, which files the due times of the edges queued turns created
        if self._edge_noted:
            noted = np.array(self._edge_noted, dtype=np.float64).reshape(-1, 3)
            self._file_edges(noted[:, 0], noted[:, 1], noted[:, 2])
            self._edge_noted = []
        if not self._edge_due:
            return []
        due = np.concatenate([d for d, _, _ in self._edge_due])
        ends_a = np.concatenate([x for _, x, _ in self._edge_due])
        ends_b = np.concatenate([y for _, _, y in self._edge_due])
        now = due <= until_s
        self._edge_due = [(due[~now], ends_a[~now], ends_b[~now])]
        self._edge_due_entries = len(self._edge_due[0][0])
        ids = self.ids
        found = []
        for i, j in zip(ends_a[now].tolist(), ends_b[now].tolist()):
            x, y = ids[i], ids[j]
            found.append((x, y) if x < y else (y, x))
        return found

    def most_mentioned(self, n: int) -> list[int]:
        """Indices of the n live concepts with the highest counts c(x); ties by index."""
        live = np.array(sorted(self.index.values()), dtype=np.int64)
        return live[np.lexsort((live, -self.counts[live]))][:n].tolist()

    def snapshot(
        self, min_pair_count: int = 1, paired_only: bool = False,
    ) -> tuple[dict[str, int], dict[str, str], dict[Edge, int]]:
        """Live concepts' counts and texts, and the pair counts of at least
        `min_pair_count`, by id. `paired_only`: counts and texts only of the
        concepts in those pairs (all a consolidation reads)."""
        # Each live row's entries of at least min_pair_count, from the end whose id is smaller:
        # the filter in arrays (most pairs are seen once or twice), the ids only for what passes.
        rows, others, strong = self._adjacency.entries_at_least(min_pair_count)
        live = np.zeros(len(self.ids), dtype=bool)
        live[np.fromiter(self.index.values(), dtype=np.int64, count=len(self.index))] = True
        kept = live[rows]
        ids = self.ids
        pairs = {}
        for i, j, count in zip(rows[kept].tolist(), others[kept].tolist(), strong[kept].tolist()):
            a, b = ids[i], ids[j]
            if a < b:
                pairs[(a, b)] = count
        named = dict.fromkeys(c for pair in pairs for c in pair) if paired_only else self.index
        index = self.index
        counts = {cid: int(self._counts[index[cid]]) for cid in named}
        texts = {cid: self.texts[index[cid]] for cid in named}
        return counts, texts, pairs

    def neighbour_ids(self, cid: str) -> list[str]:
        i = self.index.get(cid)
        return [] if i is None else [self.ids[j] for j in self._adjacency.neighbours(i)]

    def remove_concept(self, cid: str) -> None:
        """Drop a concept, its edges and its passage links (its slot stays, dead)."""
        i = self.index.pop(cid)
        self._latest_due.pop(cid, None)
        self.columns.drop(i)
        self._adjacency.clear(i)
        self._counts[i] = 0
        self.passage_ids[i] = []
        self.dead += 1

    def neighbour_counts(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(neighbour indices, pair counts c(i, ·)) of node i, sorted by neighbour."""
        return self._adjacency.row(i)


    def resident_bytes(self) -> int:
        """Bytes of the adjacency rows (the query structure's bulk)."""
        return self._adjacency.resident_bytes()

    def set_topics(self, topics: list[TopicNode]) -> None:
        """Topic nodes; in spreading, topic k is node `size + k` (after every concept slot)."""
        self.topics = topics
        self._topic_members = [
            np.array([self.index[m] for m in t.members if m in self.index], dtype=np.int64) for t in topics
        ]
        self._topics_of = {}
        for k, members in enumerate(self._topic_members):
            for i in members:
                self._topics_of.setdefault(int(i), []).append(k)

    @property
    def nodes(self) -> int:
        """Nodes of the spreading graph: concept slots, then topics."""
        return self.size + len(self.topics)

    def neighbours(self, kind: WeightKind, fan: bool, topic_weight: float = 0.0) -> Neighbours:
        """A `Neighbours` function giving exact weights W[i, ·] for the current counts.

        With topic_weight τ > 0, a concept in topics sends τ of its weight,
        split evenly, to its topic nodes (the rest to its neighbours, scaled
        by 1 − τ), and a topic node spreads evenly over its members: the
        hierarchical edges concept -> topic -> concept.

        The function keeps each node's weights once computed: one query
        spreads through the same hub rows in every iteration and every seed
        group, and the counts do not change while it does (it runs between
        two pieces of the fold). So ask for a new one per query.
        """
        counts, n, size = self.counts, float(self.turns), self.size
        known: dict[int, tuple[np.ndarray, np.ndarray]] = {}

        def weighted(i: int) -> tuple[np.ndarray, np.ndarray]:
            found = known.get(i)
            if found is None:
                found = known[i] = computed(i)
            return found

        def computed(i: int) -> tuple[np.ndarray, np.ndarray]:
            if i >= size:
                members = self._topic_members[i - size]
                return members, np.full(len(members), 1.0 / max(len(members), 1))
            idx, pair = self.neighbour_counts(i)
            weights = outgoing_weights(kind, fan, pair, counts[i], counts[idx], n)
            topics = self._topics_of.get(i) if topic_weight > 0 else None
            if not topics:
                return idx, weights
            up = np.array([size + k for k in topics], dtype=np.int64)
            share = np.full(len(topics), topic_weight / len(topics))
            return np.concatenate([idx, up]), np.concatenate([weights * (1.0 - topic_weight), share])

        return weighted

    def ids_of(self, indices: np.ndarray) -> list[str]:
        return [self.ids[int(i)] for i in indices]

    def specificity(self) -> np.ndarray:
        return specificity(self.counts, float(self.turns))


def _appended(buffer: np.ndarray, used: int, raw: bytes) -> np.ndarray:
    """`buffer` (uint8, its first `used` bytes kept) with `raw` after them,
    in place where it has room, else in one twice as large."""
    end = used + len(raw)
    if end > len(buffer):
        grown = np.zeros(max(2 * len(buffer), end), dtype=np.uint8)
        grown[:used] = buffer[:used]
        buffer = grown
    buffer[used:end] = np.frombuffer(raw, dtype=np.uint8)
    return buffer


def _weakly(method: Callable[..., None]) -> Callable[..., None]:
    """`method` of an object, called while the object lives, without
    keeping it alive: a view dropped (evicted, loaded again compact, replaced
    by a forget's re-fold) is then freed as it goes, with its lists and
    arrays, instead of waiting for the cyclic collector to find it."""
    held = weakref.WeakMethod(method)

    def call(*args: Any) -> None:
        bound = held()
        if bound is not None:
            bound(*args)
    return call


def _pop_due(heap: list, until_s: float) -> Iterable[tuple]:
    while heap and heap[0][0] <= until_s:
        yield heapq.heappop(heap)


def _concept_values(raw: bytes) -> tuple[str, list]:
    """(id, `Mentions`' values) of a concept record (`records.decode_concept`)."""
    decoded = decode_concept(raw)
    if decoded is not None:
        return decoded
    concept = ConceptState.model_validate_json(raw)  # not as the encoder writes it: the model reads it, or says why not
    return concept.id, [
        concept.text, concept.count, concept.base_activation, concept.created_at, concept.last_accessed,
        concept.decayed_to, concept.retrievals, concept.first_retrieved, concept.last_retrieved,
    ]


def load_view(repo: GraphRepository, ref: GraphRef, decay: DecayParams) -> GraphView:
    """Rebuild a graph version's view from the durable state."""
    view = GraphView(ref, decay)
    concepts = [_concept_values(raw) for _, raw in repo.store.scan(keys.section(ref, b"c"))]
    first = view.new_nodes([cid for cid, _ in concepts], [values[0] for _, values in concepts])
    loaded = [values for _, values in concepts]
    view.columns.load_many(first, loaded)
    view.set_counts(first, [values[1] for values in loaded])
    row_prefix = keys.section(ref, b"r")
    rows = [(key[len(row_prefix):].decode(), raw) for key, raw in repo.store.scan(row_prefix)]
    view.rows_loaded(cid for cid, _ in rows)
    a_array, b_array, count_array, last_array = upper_arrays(rows, view.index)
    view.file_loaded_edges(a_array, b_array, count_array, last_array)
    view.load_pairs(a_array, b_array, count_array, last_array)
    unlinked = links.unlinked_of(repo.store, ref)
    index, sources = view.index, view.passage_ids
    for _, raw in repo.store.scan(keys.section(ref, b"t")):  # in turn id order: each concept's sources in it too
        passage: Placed | None = decode_passage_place(raw)
        if passage is None:  # not as the encoder writes it: the model reads it, or says why not
            passage = Passage.model_validate_json(raw)
        view.place(passage)
        gone = unlinked.get(passage.turn_id, ())
        for cid in passage.concept_ids:
            if cid not in gone:
                sources[index[cid]].append(passage.turn_id)
    view.turns = repo.turns(ref)
    view.set_topics(repo.topics(ref))
    return view
