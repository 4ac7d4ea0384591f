"""Dead letters: input that cannot be processed, kept with its original bytes."""

from __future__ import annotations

import base64
from typing import Any

from emgas.processors.errors import DecodeError
from emgas.processors.events import DeadLetter


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode()


def dead_letter(message: Any, err: DecodeError) -> DeadLetter:
    """The DLQ record of a consumed message (`topic`, `partition`, `offset`, `key`, `value`)."""
    return DeadLetter(
        topic=message.topic, partition=message.partition, offset=message.offset,
        reason=err.code, message=err.message,
        key_b64=_b64(message.key), value_b64=_b64(message.value) or "",
    )
