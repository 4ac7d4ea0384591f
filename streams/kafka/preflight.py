"""A worker's broker found and its topics made sure of, on a thread of its own.

`emgas worker` starts this before it imports its runtime (Faust, aiohttp,
the fold: about 0.2 s of the interpreter's time), so the round trips to
the broker (0.02-0.08 s: the broker's address answering, the topics
described or created) wait beside those imports instead of after them:
a takeover's first answer comes that much sooner.
"""

from __future__ import annotations

import asyncio
import threading

from emgas.streams.kafka.discovery import wait_for_broker
from emgas.streams.kafka.topics import ensure_topics
from emgas.streams.settings import Settings


class BrokerReady:
    """`wait_for_broker` then `ensure_topics` for `settings`, run on a thread started now."""

    def __init__(self, settings: Settings) -> None:
        self._found: tuple[Settings, bool] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(settings,), name="emgas-broker", daemon=True)
        self._thread.start()

    def _run(self, settings: Settings) -> None:
        try:
            found = wait_for_broker(settings)
            self._found = found, asyncio.run(ensure_topics(found))
        except BaseException as exc:  # noqa: BLE001 - raised where the worker waits for it
            self._error = exc

    def result(self) -> tuple[Settings, bool]:
        """The settings with the broker found, and whether it is librdkafka's mock
        cluster (`ensure_topics`); what either raised, raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._found is not None
        return self._found
