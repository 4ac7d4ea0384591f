"""What users publish: a conversation turn, on `emgas.turns`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from emgas.processors.events.base import Event, EventTime, Identifier, MAX_ID_CHARS, MAX_METADATA_ITEMS, MetadataValue, Text


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
    timestamp: EventTime
    session_id: Identifier | None = None
    metadata: dict[str, MetadataValue] = Field(default_factory=dict, max_length=MAX_METADATA_ITEMS)
