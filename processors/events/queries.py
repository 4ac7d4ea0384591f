"""Requests on `emgas.queries` and the replies on their `reply_to` topic."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Union

from pydantic import Field, StringConstraints, model_validator

from emgas.processors.events.base import Event, EventTime, Identifier, MAX_ID_CHARS, MetadataValue, Text, TopicName


# The range of each spreading-activation parameter a query may set, declared
# once: `QueryParams` checks a query's values with them, `ActivationParams`
# (the worker's defaults, which the settings read) its defaults, and the
# command line's options take their number type from `QueryParams`.
Share = Annotated[float, Field(ge=0.0, le=1.0)]  # the firing threshold, the decay, ε, the context weight
Iterations = Annotated[int, Field(ge=1, le=50)]
Ranked = Annotated[int, Field(ge=1, le=1000)]  # concepts or passages in a reply
TopicShare = Annotated[float, Field(ge=0.0, lt=1.0)]  # below 1: some weight stays on the concepts' own edges
ContextWindow = Annotated[int, Field(ge=0, le=20)]


class QueryParams(Event):
    """Spreading-activation parameters; any left out take the worker's defaults."""

    firing_threshold: Share | None = None
    propagation_decay: Share | None = None
    max_iterations: Iterations | None = None
    epsilon: Share | None = None
    top_concepts: Ranked | None = None
    top_passages: Ranked | None = None
    # Added in activation_query v3:
    topic_weight: TopicShare | None = None
    context_window: ContextWindow | None = None
    context_weight: Share | None = None


class ActivationQuery(Event):
    """A retrieval request on `emgas.queries`, answered on `reply_to`.

    Seeds come from `text` (extracted like a turn) and/or `seeds`
    (explicit concept ids or surface forms); at least one must be given.
    """

    type: Literal["activation_query"] = "activation_query"
    schema_version: Literal[3] = 3
    request_id: Identifier
    graph_id: Identifier
    # None: the graph's active version. Added in schema version 2.
    graph_version: int | None = Field(default=None, ge=1)
    text: Text | None = None
    seeds: tuple[Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)], ...] = Field(
        default=(), max_length=256
    )
    reply_to: TopicName = "emgas.replies"
    params: QueryParams = QueryParams()
    # Added in schema version 3. `reinforce`: the concepts the answer
    # activates are boosted (a `retrieved` graph event). `at`: the event time
    # of that boost (default: the latest event time the graph has seen).
    reinforce: bool = True
    at: EventTime | None = None


class DigestQuery(Event):
    """A request for digests of the live state, on `emgas.queries`.

    With `graph_id` it is keyed like the graph and answered for every
    version of it; without, it is sent to one partition and answered for
    every graph held there.
    """

    type: Literal["digest_query"] = "digest_query"
    schema_version: Literal[1] = 1
    request_id: Identifier
    graph_id: Identifier | None = None
    reply_to: TopicName = "emgas.replies"


class StatsQuery(Event):
    """A request for a graph's size and most mentioned concepts, on `emgas.queries`."""

    type: Literal["stats_query"] = "stats_query"
    schema_version: Literal[1] = 1
    request_id: Identifier
    graph_id: Identifier
    graph_version: int | None = Field(default=None, ge=1)
    top: int = Field(default=10, ge=0, le=1000)
    reply_to: TopicName = "emgas.replies"


class PassageQuery(Event):
    """A request for passages by turn id (`get`), on `emgas.queries`: those
    named, and (`turn_id_prefix`) up to 1,000 whose turn id starts so."""

    type: Literal["passage_query"] = "passage_query"
    schema_version: Literal[1] = 1
    request_id: Identifier
    graph_id: Identifier
    graph_version: int | None = Field(default=None, ge=1)
    turn_ids: tuple[Identifier, ...] = Field(default=(), max_length=1000)
    turn_id_prefix: Identifier | None = None
    reply_to: TopicName = "emgas.replies"

    @model_validator(mode="after")
    def _asks_something(self) -> "PassageQuery":
        if not self.turn_ids and self.turn_id_prefix is None:
            raise ValueError("name turn_ids or a turn_id_prefix")
        return self


class TopConcept(Event):
    id: str
    text: str
    count: int
    base_activation: float


class StatsReply(Event):
    """A graph version's size (live records) and its most mentioned concepts."""

    type: Literal["stats_reply"] = "stats_reply"
    schema_version: Literal[1] = 1
    request_id: str
    graph_id: str
    version: int
    turns: int
    concepts: int
    edges: int
    passages: int
    topics: int
    top_concepts: tuple[TopConcept, ...]


class RankedConcept(Event):
    id: str
    text: str
    activation: float
    score: float


class RankedPassage(Event):
    turn_id: str
    speaker: str
    text: str
    timestamp: datetime
    score: float


class GraphStats(Event):
    """How much of the graph the answer saw: a client can wait on these."""

    turns: int
    concepts: int


class Timings(Event):
    """Milliseconds spent by the worker on each stage of a query."""

    extract_ms: float
    spread_ms: float
    rank_ms: float
    total_ms: float


# Why an activation reply has no passage: no word of the query is a concept of
# the graph (nor relates to one), or the seeds found lead to no passage held.
EmptyReason = Literal["no_seeds", "no_passages"]


class ActivationReply(Event):
    type: Literal["activation_reply"] = "activation_reply"
    schema_version: Literal[2] = 2
    request_id: str
    graph_id: str
    seeds: tuple[str, ...]
    concepts: tuple[RankedConcept, ...]
    passages: tuple[RankedPassage, ...]
    iterations: int
    stats: GraphStats
    timings: Timings
    # Added in v2 (v1 replies are upcast with none of them):
    unmatched: tuple[str, ...] = ()  # query words that are no concept of the graph
    expanded: tuple[str, ...] = ()  # concepts the lexicon related those words to (weak seeds)
    empty: EmptyReason | None = None  # set when `passages` is empty: why


class ErrorReply(Event):
    type: Literal["error_reply"] = "error_reply"
    schema_version: Literal[1] = 1
    request_id: str | None
    graph_id: str | None
    code: str
    message: str


class SectionDigest(Event):
    """Number of records of one kind and the SHA-256 of their canonical form."""

    count: int = Field(ge=0)
    digest: str


class GraphDigest(Event):
    """The canonical digest of one graph version (see `state.digest`)."""

    graph_id: str
    version: int
    active: bool
    digest: str
    sections: dict[str, SectionDigest]


class DigestReply(Event):
    """Digests of live graphs and the log offset of the partition they reflect."""

    type: Literal["digest_reply"] = "digest_reply"
    schema_version: Literal[1] = 1
    request_id: str
    worker: str
    partition: int
    applied_offset: int
    graphs: tuple[GraphDigest, ...]


class HeldPassage(Event):
    """A passage as the graph holds it, with the concepts it mentioned."""

    turn_id: str
    speaker: str
    text: str
    timestamp: datetime
    session_id: str | None = None
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    concepts: tuple[str, ...] = ()


class PassagesReply(Event):
    """The passages asked for that the graph version holds; `missing`: the
    other turn ids (never applied, forgotten, or pruned by decay)."""

    type: Literal["passages_reply"] = "passages_reply"
    schema_version: Literal[1] = 1
    request_id: str
    graph_id: str
    version: int
    passages: tuple[HeldPassage, ...]
    missing: tuple[str, ...]


Reply = Annotated[
    Union[ActivationReply, DigestReply, StatsReply, PassagesReply, ErrorReply], Field(discriminator="type")
]
