"""Decoding graph events for the fold without a model per concept or topic.

A `turn_ingested` event is most of a log, and validating it into pydantic
models (the event and one `Concept` per concept) costs several times what
the fold then does with it. `decode_for_fold` reads the turns a worker
writes (the current schema version, canonical timestamps) into a
`TurnRow`: the event's fields, validated by the same rules as
`TurnIngested`, its concepts as light `ConceptRow`s. A `consolidate` event
likewise becomes a `ConsolidateRow`, its topics `TopicRow`s: a daily
memory's log brings one nearly every turn, each naming the graph's every
topic, and a run of turns applies only its last one's (`state.turn_run`).
A `decay` tick becomes a `DecayRow`: one that prunes lists a few concepts
and about ten edges, a model each, and a forget re-folds thousands.
Anything else, and any turn or consolidation that is not plainly valid,
takes `codec.decode_graph_event`: so a bad event is refused with the same
one-line reason, and an accepted one has the same field values either way
(`tests/unit/processors/test_fold_codec.py`).

A row is an event for the fold to apply, not a schema: the event's schema
stays `TurnIngested` or `Consolidate`, which `model` gives when a rule
needs it.

The rows are not tracked by the cyclic collector (msgspec's `gc=False`):
each holds strings, numbers, a datetime, a flat metadata dict or
parameters, and tuples of rows, never anything that refers back to it, so
it is in no cycle. A batch holds thousands of them, and the collector's
first pass after each batch (`state.collector`) traversed every one and
each of its fields.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal, TypeGuard

import msgspec
from pydantic import ValidationError

from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.dynamics import DecayParams
from emgas.processors.events import (
    EARLIEST_EVENT_TIME, LATEST_EVENT_TIME, MAX_ID_CHARS, Consolidate, Decay, GraphEvent, TurnIngested,
)


class ConceptRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A concept of a turn: `processors.events.Concept`'s fields, checked
    as they are decoded (a text and an id not empty, an importance in
    (0, 1]: a value out of them fails the decoding, which leaves the turn to
    the general path)."""

    id: Annotated[str, msgspec.Meta(min_length=1)]
    text: Annotated[str, msgspec.Meta(min_length=1)]
    importance: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)]


class _Wire(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A turn_ingested event as workers write it (every field present)."""

    type: Literal["turn_ingested"]
    schema_version: Literal[2]
    graph_id: str
    graph_version: int | None
    turn_id: str
    speaker: str
    text: str
    timestamp: str
    session_id: str | None
    metadata: dict[str, str | int | float | bool | None]
    language: str
    extractor: str
    concepts: tuple[ConceptRow, ...]


class TurnRow(msgspec.Struct, frozen=True, gc=False):
    """A `turn_ingested` event decoded for the fold: `TurnIngested`'s fields
    (its concepts `ConceptRow`s), valid as it would be (`of`). Not tracked
    by the cyclic collector (see the module)."""

    graph_id: str
    graph_version: int | None
    turn_id: str
    speaker: str
    text: str
    timestamp: datetime
    session_id: str | None
    metadata: dict[str, str | int | float | bool | None]
    language: str
    extractor: str
    concepts: tuple[ConceptRow, ...]
    concept_ids: tuple[str, ...]  # its concepts' ids, sorted: what its passage links, and what a fold part checks
    type: ClassVar[str] = "turn_ingested"

    @classmethod
    def of(cls, wire: _Wire, timestamp: datetime, concept_ids: tuple[str, ...]) -> TurnRow:
        return cls(
            wire.graph_id, wire.graph_version, wire.turn_id, wire.speaker, wire.text, timestamp, wire.session_id,
            wire.metadata, wire.language, wire.extractor, wire.concepts, concept_ids,
        )

    def model(self) -> TurnIngested:
        """The event as its schema's model (for a rule applying it alone)."""
        return TurnIngested.model_validate({
            "graph_id": self.graph_id, "graph_version": self.graph_version, "turn_id": self.turn_id,
            "speaker": self.speaker, "text": self.text, "timestamp": self.timestamp, "session_id": self.session_id,
            "metadata": self.metadata, "language": self.language, "extractor": self.extractor,
            "concepts": [{"id": c.id, "text": c.text, "importance": c.importance} for c in self.concepts],
        })


class TopicRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A topic of a consolidation: `processors.events.TopicNode`'s fields."""

    id: str
    label: str
    members: tuple[str, ...]


class _ConsolidateWire(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A consolidate event as workers write it (every field present)."""

    type: Literal["consolidate"]
    schema_version: Literal[1]
    graph_id: str
    graph_version: int
    timestamp: str
    topics: tuple[TopicRow, ...]


class ConsolidateRow(msgspec.Struct, frozen=True, gc=False):
    """A `consolidate` event decoded for the fold: `Consolidate`'s fields
    (its topics `TopicRow`s), valid as it would be (`of`). Not tracked by
    the cyclic collector (see the module)."""

    graph_id: str
    graph_version: int
    timestamp: datetime
    topics: tuple[TopicRow, ...]
    type: ClassVar[str] = "consolidate"

    @classmethod
    def of(cls, wire: _ConsolidateWire, timestamp: datetime) -> ConsolidateRow:
        return cls(wire.graph_id, wire.graph_version, timestamp, wire.topics)

    def model(self) -> Consolidate:
        """The event as its schema's model (for its rule)."""
        return Consolidate.model_validate({
            "graph_id": self.graph_id, "graph_version": self.graph_version, "timestamp": self.timestamp,
            "topics": [{"id": t.id, "label": t.label, "members": t.members} for t in self.topics],
        })


class PrunedConceptRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A concept a tick lists: `processors.events.PrunedConcept`'s fields."""

    id: str
    reason: Literal["activation", "isolated"]
    value: float


class PrunedEdgeRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """An edge a tick lists: `processors.events.PrunedEdge`'s fields."""

    a: str
    b: str
    value: float


class _ParamsWire(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A tick's `DecayParams` as workers write them (every field present)."""

    model: Literal["exponential", "power", "hybrid"]
    half_life_s: float
    power_tau_s: float
    power_beta: float
    hybrid_after: int
    concept_threshold: float
    edge_stability_s: float
    edge_threshold: float


class _DecayWire(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A decay event as workers write it (every field present)."""

    type: Literal["decay"]
    schema_version: Literal[1]
    graph_id: str
    graph_version: int
    timestamp: str
    trigger: Literal["window", "idle", "manual"]
    params: _ParamsWire
    concepts: tuple[PrunedConceptRow, ...]
    edges: tuple[PrunedEdgeRow, ...]


class DecayRow(msgspec.Struct, frozen=True, gc=False):
    """A `decay` event decoded for the fold: `Decay`'s fields (its params a
    `DecayParams`, its lists `PrunedConceptRow`s and `PrunedEdgeRow`s),
    valid as it would be (`of`). A tick that prunes lists a few concepts
    and about ten edges, which as a model each took most of its decoding.
    Not tracked by the cyclic collector (see the module)."""

    graph_id: str
    graph_version: int
    timestamp: datetime
    trigger: str
    params: DecayParams
    concepts: tuple[PrunedConceptRow, ...]
    edges: tuple[PrunedEdgeRow, ...]
    type: ClassVar[str] = "decay"

    @classmethod
    def of(cls, wire: _DecayWire, timestamp: datetime, params: DecayParams) -> DecayRow:
        return cls(wire.graph_id, wire.graph_version, timestamp, wire.trigger, params, wire.concepts, wire.edges)

    def model(self) -> Decay:
        """The event as its schema's model (for a rule applying it alone)."""
        return Decay.model_validate({
            "graph_id": self.graph_id, "graph_version": self.graph_version, "timestamp": self.timestamp,
            "trigger": self.trigger, "params": self.params,
            "concepts": [{"id": c.id, "reason": c.reason, "value": c.value} for c in self.concepts],
            "edges": [{"a": e.a, "b": e.b, "value": e.value} for e in self.edges],
        })


FoldEvent = GraphEvent | TurnRow | ConsolidateRow | DecayRow


def event_bytes(event: FoldEvent, raw: bytes | None) -> bytes:
    """The event's bytes: as read, else encoded (a row is only ever read)."""
    if raw is not None:
        return raw
    assert not isinstance(event, (TurnRow, ConsolidateRow, DecayRow)), "an event decoded for the fold keeps its bytes"
    return encode(event)

_DECODER = msgspec.json.Decoder(_Wire)
_CONSOLIDATE_DECODER = msgspec.json.Decoder(_ConsolidateWire)
_DECAY_DECODER = msgspec.json.Decoder(_DecayWire)
# The timestamps pydantic writes: seconds, µs when there are any, Z or an offset.
_CANONICAL_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?(Z|[+-]\d{2}:\d{2})\Z")
_TURN = b'{"type":"turn_ingested","schema_version":2,'
_CONSOLIDATE = b'{"type":"consolidate","schema_version":1,'
_DECAY = b'{"type":"decay","schema_version":1,'


def decode_for_fold(raw: bytes | None) -> FoldEvent:
    """The graph event in `raw`: a `TurnRow` for a plainly valid turn of the
    current schema, a `ConsolidateRow` or a `DecayRow` for such a
    consolidation or tick, else what `decode_graph_event` gives (or raises:
    a record without a value, too)."""
    # An escape may hide a lone surrogate: the general path decides. (Most
    # records hold no backslash at all, found by memchr; a search for the
    # two bytes costs 40 times as much: 4.9 µs in a 6.8 KB consolidation.)
    if raw is not None and (b"\\" not in raw or b"\\u" not in raw):
        row: FoldEvent | None = None
        if raw.startswith(_TURN):
            row = _turn(raw)
        elif raw.startswith(_DECAY):
            row = _decay(raw)
        elif raw.startswith(_CONSOLIDATE):
            row = _consolidation(raw)
        if row is not None:
            return row
    return decode_graph_event(raw)


def is_turn(event: Any) -> TypeGuard[TurnIngested | TurnRow]:
    """Whether `event` is a turn, as a model or as a row."""
    return type(event) is TurnRow or type(event) is TurnIngested


def concept_ids(turn: TurnIngested | TurnRow) -> tuple[str, ...]:
    """The ids of a turn's concepts, sorted (a row has them from its decoding)."""
    return turn.concept_ids if isinstance(turn, TurnRow) else tuple(sorted(c.id for c in turn.concepts))


def is_consolidation(event: Any) -> TypeGuard[Consolidate | ConsolidateRow]:
    """Whether `event` is a consolidation, as a model or as a row."""
    return type(event) is ConsolidateRow or type(event) is Consolidate


def is_decay(event: Any) -> TypeGuard[Decay | DecayRow]:
    """Whether `event` is a decay tick, as a model or as a row."""
    return type(event) is DecayRow or type(event) is Decay


def _turn(raw: bytes) -> TurnRow | None:
    """The row of a turn that passes every rule of `TurnIngested`; None when one
    is in doubt (the general path then accepts it or says why not)."""
    try:
        wire = _DECODER.decode(raw)  # each concept checked as it is decoded (`ConceptRow`)
    except (msgspec.DecodeError, UnicodeDecodeError):  # not UTF-8, not JSON, not of the shape
        return None
    if not (_identifier(wire.graph_id) and _identifier(wire.turn_id)):
        return None
    if wire.graph_version is not None and wire.graph_version < 1:
        return None
    ids = {concept.id for concept in wire.concepts}
    if len(ids) < len(wire.concepts):  # an id twice
        return None
    at = _event_time(wire.timestamp)
    return None if at is None else TurnRow.of(wire, at, tuple(sorted(ids)))


def _consolidation(raw: bytes) -> ConsolidateRow | None:
    """The row of a consolidation that passes every rule of `Consolidate`;
    None when one is in doubt."""
    try:
        wire = _CONSOLIDATE_DECODER.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if not _identifier(wire.graph_id) or wire.graph_version < 1:
        return None
    at = _event_time(wire.timestamp)
    return None if at is None else ConsolidateRow.of(wire, at)


def _decay(raw: bytes) -> DecayRow | None:
    """The row of a tick that passes every rule of `Decay`; None when one is
    in doubt. (Its values are finite: JSON has no infinity, and msgspec
    refuses a number past a float's range, as the codec does.)"""
    try:
        wire = _DECAY_DECODER.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if not _identifier(wire.graph_id) or wire.graph_version < 1:
        return None
    params = _params(wire.params)
    at = _event_time(wire.timestamp)
    return None if at is None or params is None else DecayRow.of(wire, at, params)


def _params(wire: _ParamsWire) -> DecayParams | None:
    """The `DecayParams` of a tick's parameters, validated once per distinct
    set (a graph's ticks repeat them); None if they are not valid. Known
    by their encoding, not by equality, which would take -0.0 for 0.0."""
    key = msgspec.json.encode(wire)
    params = _PARAMS.get(key)
    if params is None:
        try:
            params = DecayParams.model_validate({field: getattr(wire, field) for field in wire.__struct_fields__})
        except ValidationError:
            return None
        if len(_PARAMS) >= 64:
            _PARAMS.clear()
        _PARAMS[key] = params
    return params


_PARAMS: dict[bytes, DecayParams] = {}  # a race between threads writes an equal value


def _event_time(timestamp: str) -> datetime | None:
    """`EventTime`'s value of a canonical timestamp; None when one is in doubt."""
    at = canonical_time(timestamp)
    return at if at is not None and EARLIEST_EVENT_TIME <= at < LATEST_EVENT_TIME else None


def canonical_time(timestamp: str) -> datetime | None:
    """An aware datetime written as pydantic writes one (seconds, µs when
    there are any, Z or an offset), as pydantic reads it; None otherwise."""
    if not _CANONICAL_TIME.match(timestamp):
        return None
    try:
        return datetime.fromisoformat(timestamp)
    except ValueError:  # no such day or hour (the 13th month, 25 o'clock)
        return None


def _identifier(value: str) -> bool:
    """`Identifier`'s rule, or stricter: 1 to MAX_ID_CHARS printable characters, not all spaces."""
    return 0 < len(value) <= MAX_ID_CHARS and value.isprintable() and not value.isspace()
