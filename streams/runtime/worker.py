"""`emgas worker`: create topics if needed, then run the Faust worker."""

from __future__ import annotations

import asyncio
import logging
import socket
import tempfile

import faust

from emgas.state.retrieval import warm_up
from emgas.streams.runtime.app import FATAL, create_app
from emgas.streams.errors import StreamsError, WorkerStopped
from emgas.streams.http_auth import check_exposure
from emgas.streams.settings import Settings
from emgas.streams.logs import logging_config, quiet_transient_kafka_errors
from emgas.streams.kafka.topics import ensure_topics


def where(settings: Settings) -> str:
    """The one line a worker prints on start: where to look at it, what it reads."""
    url = f"http://{settings.web_host}:{settings.web_port}"
    return (f"emgas worker {settings.worker_name}: viewer {url}/  metrics {url}/metrics  health {url}/health  "
            f"| Kafka {settings.bootstrap_servers()}  | state {settings.worker_data_dir}")


class HandingOverWorker(faust.Worker):
    """SIGTERM: hand the partitions over first (`app.hand_over`: leave the group,
    answer until the new owners have caught up), then stop. A second SIGTERM,
    or SIGINT, stops at once."""

    _handing_over = False

    def _on_sigterm(self) -> None:
        if self._handing_over:
            return super()._on_sigterm()
        self._handing_over = True
        self.loop.create_task(self._hand_over_then_stop())

    async def _hand_over_then_stop(self) -> None:
        try:
            await self.app.hand_over()
        except Exception:  # noqa: BLE001 - stopping must not depend on it
            logging.getLogger(__name__).exception("hand-over failed; stopping")
        super()._on_sigterm()


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


def run_worker(settings: Settings, loglevel: str = "INFO") -> None:
    """Run until SIGINT/SIGTERM. Blocks; exits the process when done."""
    check_can_start(settings)
    quiet_transient_kafka_errors()
    on_mock = asyncio.run(ensure_topics(settings))
    settings = settings.model_copy(update={"fetch_max_wait_ms": settings.fetch_wait_ms(on_mock)})
    print(where(settings), flush=True)
    # WordNet and the encoder load now (about 1 s), before the worker joins its
    # group: not on its first query, and not while it folds its first turns.
    warm_up(settings.activation)
    app = create_app(settings)
    worker = HandingOverWorker(
        app, loglevel=loglevel, quiet=True, logging_config=logging_config(settings.log_format, loglevel)
    )
    logging.getLogger("faust").setLevel(getattr(logging, loglevel))
    try:
        worker.execute_from_commandline()
    finally:
        if FATAL:
            raise WorkerStopped(FATAL[0])
