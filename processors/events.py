"""Event schemas: what travels on the topics.

Every event is a frozen pydantic model with a `type` discriminator and a
`schema_version`; timestamps are timezone-aware. The wire format is JSON
(see `processors.codec` and the README). Limits here are the ones a client
can rely on; reasons for rejecting input are reported with a code.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Union

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, FiniteFloat, StringConstraints, model_validator

from processors.dynamics import DecayParams

MAX_ID_CHARS = 256
MAX_TEXT_BYTES = 64 * 1024
MAX_METADATA_ITEMS = 64
MAX_FORGET_TURNS = 10_000
# A Kafka topic name: at most 249 of [a-zA-Z0-9._-].
TOPIC_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"
# Identifiers: no control characters (C0, DEL, C1), not blank.
_ID_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"

Identifier = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS, pattern=_ID_PATTERN)
]
TopicName = Annotated[str, StringConstraints(pattern=TOPIC_NAME_PATTERN)]
Text = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_BYTES, pattern=r"\S")]
MetadataValue = Union[str, int, FiniteFloat, bool, None]  # NaN and infinities have no JSON form


class Event(BaseModel):
    """Base of all events: frozen, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Turn(Event):
    """One conversation turn, published by users on `emgas.turns`.

    `turn_id` is unique within `graph_id` and is the idempotency key:
    a turn published twice changes the graph once.
    """

    type: Literal["turn"] = "turn"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    turn_id: Identifier
    speaker: Annotated[str, StringConstraints(max_length=MAX_ID_CHARS)]
    text: Text
    timestamp: AwareDatetime
    session_id: Identifier | None = None
    metadata: dict[str, MetadataValue] = Field(default_factory=dict, max_length=MAX_METADATA_ITEMS)


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
    timestamp: AwareDatetime
    session_id: str | None = None
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    language: str
    extractor: str
    concepts: tuple[Concept, ...]


class GraphVersionSwitched(Event):
    """Graph event: from here on, `graph_id` is served from and ingests into `version`.

    The version switched away from stays in the state (switch back at any
    time); its event time is `timestamp`.
    """

    type: Literal["graph_version_switched"] = "graph_version_switched"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    version: int = Field(ge=1)
    timestamp: AwareDatetime


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
    timestamp: AwareDatetime  # the tick's event time (`as_of`)
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
    timestamp: AwareDatetime
    topics: tuple[TopicNode, ...]


class Boost(Event):
    """Reinforcement of one concept by a retrieval; `amount` is unitless."""

    id: str
    amount: float = Field(ge=0.0)


class Retrieved(Event):
    """Graph event: a query activated these concepts (reinforcement by
    retrieval). Emitted by the query agent, so replay reproduces it."""

    type: Literal["retrieved"] = "retrieved"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    graph_version: int = Field(ge=1)
    request_id: Identifier
    timestamp: AwareDatetime
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
    timestamp: AwareDatetime
    turn_ids: tuple[Identifier, ...] = Field(default=(), max_length=MAX_FORGET_TURNS)
    whole_graph: bool = False

    @model_validator(mode="after")
    def _one_scope(self) -> "Forget":
        if self.whole_graph == bool(self.turn_ids):
            raise ValueError("name turn_ids, or set whole_graph, not both")
        return self




class QueryParams(Event):
    """Spreading-activation parameters; any left out take the worker's defaults."""

    firing_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    propagation_decay: float | None = Field(default=None, ge=0.0, le=1.0)
    max_iterations: int | None = Field(default=None, ge=1, le=50)
    epsilon: float | None = Field(default=None, ge=0.0, le=1.0)
    top_concepts: int | None = Field(default=None, ge=1, le=1000)
    top_passages: int | None = Field(default=None, ge=1, le=1000)
    # Added in activation_query v3:
    topic_weight: float | None = Field(default=None, ge=0.0, lt=1.0)
    context_window: int | None = Field(default=None, ge=0, le=20)
    context_weight: float | None = Field(default=None, ge=0.0, le=1.0)


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
    at: AwareDatetime | None = None


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


class ActivationReply(Event):
    type: Literal["activation_reply"] = "activation_reply"
    schema_version: Literal[1] = 1
    request_id: str
    graph_id: str
    seeds: tuple[str, ...]
    concepts: tuple[RankedConcept, ...]
    passages: tuple[RankedPassage, ...]
    iterations: int
    stats: GraphStats
    timings: Timings


class ErrorReply(Event):
    type: Literal["error_reply"] = "error_reply"
    schema_version: Literal[1] = 1
    request_id: str | None
    graph_id: str | None
    code: str
    message: str


class SectionDigest(Event):
    """Number of records of one kind and the SHA-256 of their canonical form."""

    count: int
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


# -- log events: the log's identity and snapshots (see `state.snapshots`) ------


class LogStarted(Event):
    """Log event: the identity of one partition of `emgas.graph-events`.

    Written once, by the first worker to find the partition without one,
    to that partition (no graph key). The first `log_started` record of a
    partition names it: a log recreated (a new embedded broker, a topic
    deleted and created again, another cluster) gets a new `log_id`, so a
    state can tell the log it reflects from any other. Checkpoints carry
    the id forward once retention drops this record.
    """

    type: Literal["log_started"] = "log_started"
    schema_version: Literal[1] = 1
    log_id: Identifier
    partition: int = Field(ge=0)
    timestamp: AwareDatetime


class SnapshotStarted(Event):
    """Log event: a snapshot of `graph_id` as of this record's offset.

    The worker that owns the partition, on applying it, serialises the
    graph (every version, with its graph-level records) exactly as of this
    offset and appends the `Snapshot` parts. `base`: the parts replace the
    graph's state when complete, whatever a fold of the log before gave
    (a state re-based onto a new log: its graphs are not in this log);
    otherwise they are a copy recovery may start from.
    """

    type: Literal["snapshot_started"] = "snapshot_started"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    reason: Literal["policy", "request", "forget", "rebase"]
    base: bool = False
    timestamp: AwareDatetime


class Snapshot(Event):
    """Log event: part `part` of `parts` of the snapshot started at offset `as_of`.

    `data`: base64 of this part's slice of the zlib-compressed records of
    the graph (see `state.snapshots`); the last part carries the digests of
    the graph's versions as of `as_of` and the SHA-256 of the records, which
    a restore checks. A snapshot whose parts are not all
    in the log (its writer stopped) is ignored.
    """

    type: Literal["snapshot"] = "snapshot"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    as_of: int = Field(ge=0)
    part: int = Field(ge=0)
    parts: int = Field(ge=1)
    data: str
    digests: tuple[GraphDigest, ...] = ()
    content_sha256: str = ""  # on the last part: SHA-256 of the records before compression
    timestamp: AwareDatetime


class SnapshotLocation(Event):
    """Where a complete snapshot of a graph lies in its partition."""

    graph_id: str
    as_of: int  # the offset of its `snapshot_started`: the state it holds
    first: int  # offset of its first part
    last: int  # offset of its last part
    parts: int


class Checkpoint(Event):
    """Log event: every graph of the partition has a complete snapshot here.

    Recovery restores these snapshots and folds the log after the oldest
    of them, skipping each graph's events up to its own snapshot: the cost
    is the state's size plus the recent history, not the whole log.
    """

    type: Literal["checkpoint"] = "checkpoint"
    schema_version: Literal[1] = 1
    log_id: Identifier
    partition: int = Field(ge=0)
    as_of: int = Field(ge=0)  # the offset the listing reflects
    snapshots: tuple[SnapshotLocation, ...]
    timestamp: AwareDatetime


GraphEvent = Annotated[
    Union[
        TurnIngested, GraphVersionSwitched, Decay, Consolidate, Retrieved, Forget,
        LogStarted, SnapshotStarted, Snapshot, Checkpoint,
    ],
    Field(discriminator="type"),
]
# Events about the log and its snapshots, not about a graph's content.
LOG_EVENTS = (LogStarted, SnapshotStarted, Snapshot, Checkpoint)


class DeadLetter(Event):
    """What `emgas.dlq` holds: the original bytes and why they were refused."""

    type: Literal["dead_letter"] = "dead_letter"
    schema_version: Literal[1] = 1
    topic: str
    partition: int
    offset: int
    reason: str
    message: str
    key_b64: str | None
    value_b64: str
