"""Event schemas: what travels on the topics, one module per kind.

- `inputs`: what users publish (`Turn`, on `emgas.turns`);
- `graph`: graph events on `emgas.graph-events` (a turn ingested, decay,
  consolidation, retrieval, forgetting, version switches), and the union
  `GraphEvent` the fold reads, which holds the log's own records too;
- `log`: those records: the log's identity, snapshots and checkpoints;
- `queries`: requests on `emgas.queries` and their replies;
- `dead_letters`: what `emgas.dlq` holds.

Every event is a frozen pydantic model with a `type` discriminator and a
`schema_version`; timestamps are timezone-aware. The wire format is JSON
(see `processors.codec` and the README). Limits here are the ones a client
can rely on; reasons for rejecting input are reported with a code. Every
name is importable from here.
"""

from emgas.processors.events.base import (
    EARLIEST_EVENT_TIME, LATEST_EVENT_TIME, MAX_BOOST, MAX_FORGET_TURNS, MAX_ID_CHARS, MAX_METADATA_ITEMS,
    MAX_TEXT_BYTES, TOPIC_NAME_PATTERN, Event, EventTime, Identifier, MetadataValue, Text, TopicName,
)
from emgas.processors.events.dead_letters import DeadLetter
from emgas.processors.events.graph import (
    LOG_EVENTS, Boost, Concept, Consolidate, ContentEvent, Decay, Forget, GraphEvent, GraphVersionSwitched, PrunedConcept,
    PrunedEdge, Retrieved, TopicNode, TurnIngested,
)
from emgas.processors.events.inputs import Turn
from emgas.processors.events.log import Checkpoint, LogStarted, Sealed, Snapshot, SnapshotLocation, SnapshotStarted
from emgas.processors.events.queries import (
    ActivationQuery, ActivationReply, DigestQuery, DigestReply, EmptyReason, ErrorReply, GraphDigest, GraphStats, HeldPassage,
    PassageQuery, PassagesReply, QueryParams, RankedConcept, RankedPassage, Reply, SectionDigest, StatsQuery,
    StatsReply, Timings, TopConcept,
)

__all__ = [
    "EARLIEST_EVENT_TIME", "LATEST_EVENT_TIME", "MAX_BOOST", "EventTime", "MAX_FORGET_TURNS", "MAX_ID_CHARS", "MAX_METADATA_ITEMS", "MAX_TEXT_BYTES", "TOPIC_NAME_PATTERN", "Event",
    "Identifier", "MetadataValue", "Text", "TopicName", "DeadLetter", "LOG_EVENTS", "Boost", "Concept", "Consolidate", "ContentEvent",
    "Decay", "Forget", "GraphEvent", "GraphVersionSwitched", "PrunedConcept", "PrunedEdge", "Retrieved", "TopicNode",
    "TurnIngested", "Turn", "Checkpoint", "LogStarted", "Sealed", "Snapshot", "SnapshotLocation", "SnapshotStarted",
    "ActivationQuery", "ActivationReply", "DigestQuery", "DigestReply", "EmptyReason", "ErrorReply", "GraphDigest", "GraphStats",
    "HeldPassage", "PassageQuery", "PassagesReply", "QueryParams", "RankedConcept", "RankedPassage", "Reply",
    "SectionDigest", "StatsQuery", "StatsReply", "Timings", "TopConcept",
]
