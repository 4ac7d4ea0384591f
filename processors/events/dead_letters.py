"""What `emgas.dlq` holds."""

from __future__ import annotations

from typing import Literal


from emgas.processors.events.base import Event


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
