"""What `emgas worker` checks and starts before it imports its runtime.

First what it needs of this machine (`check_can_start`: one-line errors,
before anything else is said), then its broker found and its topics made
sure of, on a thread of its own (`BrokerReady`): the round trips to the
broker (0.02-0.08 s: the broker's address answering, the topics
described or created) wait beside the runtime's imports (Faust, aiohttp,
the fold: about 0.2 s of the interpreter's time) instead of after them,
so a takeover's first answer comes that much sooner. Light to import: the
command line imports it before the runtime.
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
import threading

from emgas.streams.errors import StreamsError
from emgas.streams.http_auth import check_exposure
from emgas.streams.kafka.discovery import wait_for_broker
from emgas.streams.kafka.topics import ensure_topics
from emgas.streams.settings import Settings


def check_can_start(settings: Settings) -> None:
    """What a worker needs of this machine before it starts, each a one-line
    error naming the setting to change: a writable state directory, a
    free port for its web server, and a token if that listens beyond loopback."""
    state_dir = settings.worker_data_dir
    setting = "EMGAS_DATA_DIR" if settings.data_dir else "EMGAS_HOME"
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=state_dir):
            pass
    except OSError as exc:
        raise StreamsError(f"cannot write the state directory {state_dir} ({setting}): {exc.strerror}") from None
    check_exposure(settings.web_host, settings.web_token(), "the worker's web server (EMGAS_WEB_HOST)")
    with socket.socket() as probe:
        try:
            probe.bind((settings.web_host, settings.web_port))
        except OSError as exc:
            raise StreamsError(
                f"the web port {settings.web_host}:{settings.web_port} is not free ({exc.strerror}): "
                "stop what uses it, or choose another port with EMGAS_WEB_PORT"
            ) from None


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


def start_checks(settings: Settings) -> BrokerReady:
    """`check_can_start` (raising its one-line error before any other word),
    then `BrokerReady` started."""
    check_can_start(settings)
    return BrokerReady(settings)
