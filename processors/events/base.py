"""What every event shares: the base model, identifiers and limits."""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import BaseModel, ConfigDict, FiniteFloat, StringConstraints

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
