"""`emgas worker`: create topics if needed, then run the Faust worker."""

from __future__ import annotations

import logging
import socket
import tempfile

from emgas.streams.runtime.compose import NO_HOOKS, Hooks, build_worker
from emgas.streams.runtime.patches import HandingOverWorker
from emgas.streams.errors import StreamsError, WorkerStopped
from emgas.streams.http_auth import check_exposure
from emgas.streams.settings import Settings
from emgas.streams.logs import logging_config, quiet_transient_kafka_errors
from emgas.streams.kafka.preflight import BrokerReady


def where(settings: Settings) -> str:
    """The one line a worker prints on start: where to look at it, what it reads."""
    url = f"http://{settings.web_host}:{settings.web_port}"
    return (f"emgas worker {settings.worker_name}: viewer {url}/  metrics {url}/metrics  health {url}/health  "
            f"| Kafka {settings.bootstrap_servers()}  | state {settings.worker_data_dir}")


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


def run_worker(
    settings: Settings, loglevel: str = "INFO", hooks: Hooks = NO_HOOKS, broker: BrokerReady | None = None
) -> None:
    """Run until SIGINT/SIGTERM. Blocks; exits the process when done. `hooks`:
    test-only faults (tests/support/hooked_worker.py); `emgas worker` sets none.
    `broker`: the broker's address and the topics, under way since before the
    runtime was imported (`streams.kafka.preflight`); started here if None."""
    broker = broker or BrokerReady(settings)
    check_can_start(settings)
    quiet_transient_kafka_errors()
    settings, on_mock = broker.result()
    settings = settings.model_copy(update={"fetch_max_wait_ms": settings.fetch_wait_ms(on_mock)})
    print(where(settings), flush=True)
    worker = build_worker(settings, hooks)
    faust_worker = HandingOverWorker(
        worker.app, loglevel=loglevel, quiet=True, logging_config=logging_config(settings.log_format, loglevel),
        hand_over=worker.hand_over,
    )
    logging.getLogger("faust").setLevel(getattr(logging, loglevel))
    try:
        faust_worker.execute_from_commandline()
    finally:
        # A clean stop commits what was applied; a crashed one leaves the store at its last commit.
        worker.states.close(commit=not worker.fatal and worker.app.crash_reason is None)
        if worker.fatal:
            raise WorkerStopped(worker.fatal[0])
