"""Graph events: what `emgas.graph-events` carries about a graph's content.

The union `GraphEvent` also holds the log's own records (`processors.events.log`).
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from emgas.processors.dynamics import DecayParams
from emgas.processors.events.base import MAX_BOOST, MAX_FORGET_TURNS, Event, EventTime, Identifier, MetadataValue
from emgas.processors.events.log import Checkpoint, LogStarted, Sealed, Snapshot, SnapshotStarted


class Concept(Event):
    """A concept extracted from a text: normalised id, surface text, importance in (0, 1]."""

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    importance: float = Field(gt=0.0, le=1.0)


class TurnIngested(Event):
    """Graph event: a turn and the concepts extracted from it.

    It carries everything needed to rebuild the graph, passage text
    included, so replaying `emgas.graph-events` alone rebuilds a graph.
    Its event time is the turn's `timestamp`.
    """

    type: Literal["turn_ingested"] = "turn_ingested"
    schema_version: Literal[2] = 2
    graph_id: Identifier
    # None: the graph's active version when the event is applied (live
    # ingestion); a number: that version (re-derivation, `--from-turns`).
    # Added in schema version 2; version 1 events are upcast with None.
    graph_version: int | None = Field(default=None, ge=1)
    turn_id: Identifier
    speaker: str
    text: str
    timestamp: EventTime
    session_id: str | None = None
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    language: str
    extractor: str
    concepts: tuple[Concept, ...]

    @model_validator(mode="after")
    def _distinct_concepts(self) -> "TurnIngested":
        check_distinct_concepts([c.id for c in self.concepts])
        return self


def check_distinct_concepts(ids: list[str]) -> None:
    """A turn's concept ids are distinct (ValueError if not): `TurnIngested`'s
    rule, which `extract.ingest_encoded` checks without the model."""
    if len(set(ids)) != len(ids):
        raise ValueError("a concept id appears twice in the turn (the extractor merges repeats)")


class GraphVersionSwitched(Event):
    """Graph event: from here on, `graph_id` is served from and ingests into `version`.

    The version switched away from stays in the state (switch back at any
    time); its event time is `timestamp`.
    """

    type: Literal["graph_version_switched"] = "graph_version_switched"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    version: int = Field(ge=1)
    timestamp: EventTime


class PrunedConcept(Event):
    """A concept a decay tick removes. `reason`: `activation` (its base
    activation at the tick, `value`, is below the threshold) or `isolated`
    (the tick removes its last edge)."""

    id: str
    reason: Literal["activation", "isolated"]
    value: float


class PrunedEdge(Event):
    """An edge a decay tick removes: its retention R at the tick (`value`) is below the threshold."""

    a: str
    b: str
    value: float


class Decay(Event):
    """Graph event: a decay tick. Time window [.., `timestamp`) of the graph
    version closed (or an idle graph was ticked); base activations and edge
    retentions are taken to `timestamp` with `params`, and the concepts and
    edges listed fall below the thresholds there and are removed.

    The emitter decides the lists from the state it has applied; applying
    checks each entry again against the state (an entry reinforced since is
    kept), so the result depends only on the event and the state.
    """

    type: Literal["decay"] = "decay"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    graph_version: int = Field(ge=1)
    timestamp: EventTime  # the tick's event time (`as_of`)
    trigger: Literal["window", "idle", "manual"]
    params: DecayParams
    concepts: tuple[PrunedConcept, ...] = ()
    edges: tuple[PrunedEdge, ...] = ()


class TopicNode(Event):
    """A topic: a cluster of strongly co-occurring concepts (hierarchical
    edges member -> topic). `id` is derived from the most central member;
    `label` joins the texts of the most central members."""

    id: str
    label: str
    members: tuple[str, ...]


class Consolidate(Event):
    """Graph event: the graph version's topic nodes as of `timestamp`; they
    replace the previous ones. Members pruned since are dropped on apply."""

    type: Literal["consolidate"] = "consolidate"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    graph_version: int = Field(ge=1)
    timestamp: EventTime
    topics: tuple[TopicNode, ...]


class Boost(Event):
    """Reinforcement of one concept by a retrieval; `amount` is unitless, at
    most MAX_BOOST (the bound of the worker's `retrieval_boost`)."""

    id: str
    amount: float = Field(ge=0.0, le=MAX_BOOST)


class Retrieved(Event):
    """Graph event: a query activated these concepts (reinforcement by
    retrieval). Emitted by the query agent, so replay reproduces it."""

    type: Literal["retrieved"] = "retrieved"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    graph_version: int = Field(ge=1)
    request_id: Identifier
    timestamp: EventTime
    boosts: tuple[Boost, ...]


class Forget(Event):
    """Graph event: a user's request to forget (seeds: deletion on request).

    `turn_ids`: these turns of `graph_id` (every version of it); empty with
    `whole_graph`: the graph itself. Applying it rebuilds each affected
    graph version from its own applied events without those turns (see
    `state.projector`), so the graph equals one whose log never held them.
    The turn ids stay known as forgotten: a turn re-sent with one of them
    is not applied again. `timestamp`: when it was asked (wall clock).
    """

    type: Literal["forget"] = "forget"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    request_id: Identifier
    timestamp: EventTime
    turn_ids: tuple[Identifier, ...] = Field(default=(), max_length=MAX_FORGET_TURNS)
    whole_graph: bool = False

    @model_validator(mode="after")
    def _one_scope(self) -> "Forget":
        if self.whole_graph == bool(self.turn_ids):
            raise ValueError("name turn_ids, or set whole_graph, not both")
        return self


GraphEvent = Annotated[
    Union[
        TurnIngested, GraphVersionSwitched, Decay, Consolidate, Retrieved, Forget,
        LogStarted, SnapshotStarted, Snapshot, Checkpoint, Sealed,
    ],
    Field(discriminator="type"),
]
# Events about the log and its snapshots, not about a graph's content (a
# sealed record reaches the fold only when its key is gone: it applies nothing).
LOG_EVENTS = (LogStarted, SnapshotStarted, Snapshot, Checkpoint, Sealed)
# The others: each about one graph's content (a type for annotations, not a wire union).
ContentEvent = TurnIngested | GraphVersionSwitched | Decay | Consolidate | Retrieved | Forget
