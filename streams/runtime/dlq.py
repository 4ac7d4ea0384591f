"""Dead letters: input that cannot be processed, kept with its original bytes."""

from __future__ import annotations

import base64
import logging
from typing import Any, Callable

from emgas.processors.errors import DecodeError
from emgas.processors.events import DeadLetter

log = logging.getLogger(__name__)


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode()


def dead_letter(message: Any, err: DecodeError) -> DeadLetter:
    """The DLQ record of a consumed message (`topic`, `partition`, `offset`, `key`, `value`)."""
    return DeadLetter(
        topic=message.topic, partition=message.partition, offset=message.offset,
        reason=err.code, message=err.message,
        key_b64=_b64(message.key), value_b64=_b64(message.value) or "",
    )


def guarded(decode: Callable[[bytes], Any], raw: bytes) -> Any:
    """`decode(raw)`; an unexpected failure of the decoder (a bug) becomes a
    dead letter too, so no input can stop an agent."""
    try:
        return decode(raw)
    except DecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - turned into a dead letter, logged with its traceback
        log.exception("decoder failed on a message")
        raise DecodeError("decoder_error", f"{type(exc).__name__}: {exc}") from None
