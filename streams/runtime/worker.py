"""`emgas worker`: create topics if needed, then run the Faust worker."""

from __future__ import annotations

import logging

from emgas.streams.runtime.app import Output
from emgas.streams.runtime.compose import LogFactory, build_worker
from emgas.streams.runtime.patches import HandingOverWorker
from emgas.streams.errors import WorkerStopped
from emgas.streams.settings import Settings
from emgas.streams.logs import logging_config, quiet_transient_kafka_errors
from emgas.streams.runtime.preflight import BrokerReady, start_checks


def where(settings: Settings) -> str:
    """The one line a worker prints on start: where to look at it, what it reads."""
    url = f"http://{settings.web_host}:{settings.web_port}"
    return (f"emgas worker {settings.worker_name}: viewer {url}/  metrics {url}/metrics  health {url}/health  "
            f"| Kafka {settings.bootstrap_servers()}  | state {settings.worker_data_dir}")


def run_worker(
    settings: Settings, loglevel: str = "INFO", broker: BrokerReady | None = None, graph_log: LogFactory = Output,
) -> None:
    """Run until SIGINT/SIGTERM. Blocks; exits the process when done. `graph_log`:
    the worker's port to the log (a test's wraps Kafka's with its faults:
    tests/support/hooked_worker.py; `emgas worker` runs Kafka's, `Output`).
    `broker`: `start_checks` made before the runtime was imported (the
    machine checked, the broker's address and the topics under way); made
    here if None."""
    broker = broker or start_checks(settings)
    quiet_transient_kafka_errors()
    settings, on_mock = broker.result()
    settings = settings.model_copy(update={"fetch_max_wait_ms": settings.fetch_wait_ms(on_mock)})
    print(where(settings), flush=True)
    worker = build_worker(settings, graph_log)
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
