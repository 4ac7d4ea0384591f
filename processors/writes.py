"""What applying an event writes: a short list of typed operations.

A rule of `processors.evolve` returns the writes its event makes to one
graph version, in the order they apply. The store (`state.repository`)
and the in-memory graph (`state.view`) each apply every write type here
and refuse any other loudly, so a new event type adds a rule and, where
it writes something new, one write type: nothing else dispatches on it.

Write types are plain frozen dataclasses (a fold makes about twenty per
turn): they hold already validated records, never raw input.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Mapping, Union

from emgas.processors.events import TopicNode
from emgas.processors.graph import ConceptState, GraphMeta, GraphRef, Passage
from emgas.processors.pruning import Edge, PairTable

# A graph version's records after a forget re-folded it (store layout).
Records = list[tuple[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class Register:
    """The graph version becomes known (its first turn)."""


@dataclass(frozen=True, slots=True)
class PutMeta:
    """The version's totals and clocks, whole."""

    meta: GraphMeta


@dataclass(frozen=True, slots=True)
class PutConcept:
    """A concept record, whole (new, mentioned or boosted)."""

    concept: ConceptState


@dataclass(frozen=True, slots=True)
class AddPassage:
    """A turn's passage, with a source link from each of its concept ids to it."""

    passage: Passage


@dataclass(frozen=True, slots=True)
class CoOccur:
    """One co-occurrence of every pair of `ids` (sorted, distinct) at event
    time `at`: c(x, y) + 1 and last = max(last, at) (`evolve.pair_after`);
    a pair not yet counted starts at 1 with last = at."""

    ids: tuple[str, ...]
    at: datetime


@dataclass(frozen=True, slots=True)
class RemovePairs:
    """Edges go (their counts and last co-occurrences), in key order."""

    edges: tuple[Edge, ...]


@dataclass(frozen=True, slots=True)
class RemoveConcept:
    """A concept record goes (its edges and links are removed by their own writes)."""

    cid: str


@dataclass(frozen=True, slots=True)
class RemoveLink:
    """The source link concept -> passage goes."""

    cid: str
    turn_id: str


@dataclass(frozen=True, slots=True)
class PrunePassage:
    """A passage goes; its turn stays known (never applied again)."""

    turn_id: str


@dataclass(frozen=True, slots=True)
class KeepEdges:
    """Edges a tick listed that are not due yet: their due times move later
    (the in-memory graph's schedule only; nothing is stored)."""

    pairs: PairTable


@dataclass(frozen=True, slots=True)
class SetTopics:
    """The version's topic nodes: `topics` replace `removed` (all it had)."""

    topics: tuple[TopicNode, ...]
    removed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MarkRetrieval:
    """A retrieval request is applied (never again)."""

    request_id: str


@dataclass(frozen=True, slots=True)
class SwitchVersion:
    """The graph is served from and ingests into this version from now on."""

    version: int


@dataclass(frozen=True, slots=True)
class Refolded:
    """A graph version's records after a re-fold: `records` are every record
    (by key, in no order) but its journal's. Its journal stays but for the
    entries at the log offsets `journal_dropped` (the forgotten turns, and
    events the re-fold rejected): the re-fold started after the others or
    applied each again at its offset, and an entry holds its log record's
    bytes, so it would write the same entry again."""

    records: Mapping[bytes, bytes]
    journal_dropped: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Forgetting:
    """What a forget request changes across a graph's versions."""

    graph_id: str
    request_id: str
    tombstones: tuple[str, ...]  # turn ids never to be applied again
    refolded: Mapping[GraphRef, Refolded]  # versions whose records are replaced
    erased: tuple[GraphRef, ...]  # versions that go, records and registration
    clear_active: bool  # the graph loses every version, so its active version goes too


Write = Union[
    Register, PutMeta, PutConcept, AddPassage, CoOccur, RemovePairs, RemoveConcept, RemoveLink, PrunePassage,
    KeepEdges, SetTopics, MarkRetrieval, SwitchVersion, Forgetting,
]
Writes = tuple[Write, ...]


def of_type(writes: Writes, kind: type) -> list:
    """The writes of one type, in order."""
    return [w for w in writes if type(w) is kind]


class UnknownWrite(TypeError):
    """A write type that a store or graph does not apply: a missing case, not bad input."""

    def __init__(self, where: str, write: object) -> None:
        super().__init__(f"{where} has no case for the write {type(write).__name__}")
