"""Decoding graph events for the fold without a model per concept.

A `turn_ingested` event is most of a log, and validating it into pydantic
models (the event and one `Concept` per concept) costs several times what
the fold then does with it. `decode_for_fold` reads the turns a worker
writes (the current schema version, canonical timestamps) into a
`TurnRow`: the event's fields, validated by the same rules as
`TurnIngested`, its concepts as light `ConceptRow`s. Anything else, and any
turn that is not plainly valid, takes `codec.decode_graph_event`: so a bad
event is refused with the same one-line reason, and an accepted one has the
same field values either way (`tests/unit/test_fold_codec.py`).

A `TurnRow` is a turn for the fold to apply, not a schema: the event's
schema stays `TurnIngested`, which `model` gives when a rule needs it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal, TypeGuard

import msgspec

from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.events import EARLIEST_EVENT_TIME, LATEST_EVENT_TIME, MAX_ID_CHARS, GraphEvent, TurnIngested


class ConceptRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A concept of a turn: `processors.events.Concept`'s fields."""

    id: str
    text: str
    importance: float


class _Wire(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
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


class TurnRow:
    """A `turn_ingested` event decoded for the fold: `TurnIngested`'s fields
    (its concepts `ConceptRow`s), valid as it would be."""

    __slots__ = (
        "graph_id", "graph_version", "turn_id", "speaker", "text", "timestamp", "session_id", "metadata", "language",
        "extractor", "concepts",
    )
    type = "turn_ingested"

    def __init__(self, wire: _Wire, timestamp: datetime) -> None:
        self.graph_id, self.graph_version, self.turn_id = wire.graph_id, wire.graph_version, wire.turn_id
        self.speaker, self.text, self.timestamp, self.session_id = wire.speaker, wire.text, timestamp, wire.session_id
        self.metadata, self.language, self.extractor = wire.metadata, wire.language, wire.extractor
        self.concepts = wire.concepts

    def model(self) -> TurnIngested:
        """The event as its schema's model (for a rule applying it alone)."""
        return TurnIngested.model_validate({
            "graph_id": self.graph_id, "graph_version": self.graph_version, "turn_id": self.turn_id,
            "speaker": self.speaker, "text": self.text, "timestamp": self.timestamp, "session_id": self.session_id,
            "metadata": self.metadata, "language": self.language, "extractor": self.extractor,
            "concepts": [{"id": c.id, "text": c.text, "importance": c.importance} for c in self.concepts],
        })


FoldEvent = GraphEvent | TurnRow


def event_bytes(event: FoldEvent, raw: bytes | None) -> bytes:
    """The event's bytes: as read, else encoded (a row is only ever read)."""
    if raw is not None:
        return raw
    assert not isinstance(event, TurnRow), "a turn decoded for the fold keeps its bytes"
    return encode(event)

_DECODER = msgspec.json.Decoder(_Wire)
# The timestamps pydantic writes: seconds, µs when there are any, Z or an offset.
_CANONICAL_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?(Z|[+-]\d{2}:\d{2})\Z")
_TURN = b'{"type":"turn_ingested","schema_version":2,'


def decode_for_fold(raw: bytes | None) -> FoldEvent:
    """The graph event in `raw`: a `TurnRow` for a plainly valid turn of the
    current schema, else what `decode_graph_event` gives (or raises: a
    record without a value, too)."""
    if raw is not None and raw.startswith(_TURN) and b"\\u" not in raw:  # an escape may hide a lone surrogate: the general path decides
        turn = _turn(raw)
        if turn is not None:
            return turn
    return decode_graph_event(raw)


def is_turn(event: Any) -> TypeGuard[TurnIngested | TurnRow]:
    """Whether `event` is a turn, as a model or as a row."""
    return type(event) is TurnRow or type(event) is TurnIngested


def _turn(raw: bytes) -> TurnRow | None:
    """The row of a turn that passes every rule of `TurnIngested`; None when one
    is in doubt (the general path then accepts it or says why not)."""
    try:
        wire = _DECODER.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):  # not UTF-8, not JSON, not of the shape
        return None
    if not (_identifier(wire.graph_id) and _identifier(wire.turn_id)):
        return None
    if wire.graph_version is not None and wire.graph_version < 1:
        return None
    ids = set()
    for concept in wire.concepts:
        if not (concept.id and concept.text and 0.0 < concept.importance <= 1.0) or concept.id in ids:
            return None
        ids.add(concept.id)
    if not _CANONICAL_TIME.match(wire.timestamp):
        return None
    try:
        at = datetime.fromisoformat(wire.timestamp)
    except ValueError:  # no such day or hour (the 13th month, 25 o'clock)
        return None
    if not EARLIEST_EVENT_TIME <= at < LATEST_EVENT_TIME:
        return None
    return TurnRow(wire, at)


def _identifier(value: str) -> bool:
    """`Identifier`'s rule, or stricter: 1 to MAX_ID_CHARS printable characters, not all spaces."""
    return 0 < len(value) <= MAX_ID_CHARS and value.isprintable() and not value.isspace()
