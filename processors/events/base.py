"""What every event shares: the base model, identifiers and limits."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Union

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, FiniteFloat, StringConstraints
from pydantic_core import PydanticCustomError

MAX_ID_CHARS = 256
MAX_TEXT_BYTES = 64 * 1024
MAX_METADATA_ITEMS = 64
MAX_FORGET_TURNS = 10_000
# The largest reinforcement one retrieval may add to a concept (unitless):
# the worker's `retrieval_boost` is bounded by it, so a larger boost in the
# log is not one a worker wrote.
MAX_BOOST = 10.0
# Event times the fold and the scheduler compute with (windows, idle clocks,
# ages in seconds); anything outside is refused when it is decoded.
EARLIEST_EVENT_TIME = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST_EVENT_TIME = datetime(2200, 1, 1, tzinfo=timezone.utc)
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


def _supported(t: datetime) -> datetime:
    if not EARLIEST_EVENT_TIME <= t < LATEST_EVENT_TIME:
        raise PydanticCustomError(
            "timestamp_out_of_range",
            "timestamp {timestamp} is outside the supported range 1970-01-01..2199-12-31",
            {"timestamp": t.isoformat()},
        )
    return t


EventTime = Annotated[AwareDatetime, AfterValidator(_supported)]  # timezone-aware, in the supported range


class Event(BaseModel):
    """Base of all events: frozen, strict about unknown fields, no NaN or infinite numbers."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
