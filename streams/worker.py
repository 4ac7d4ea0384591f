"""`emgas worker`: create topics if needed, then run the Faust worker."""

from __future__ import annotations

import asyncio
import logging

import faust

from emgas.streams.app import FATAL, create_app
from emgas.streams.errors import WorkerStopped
from emgas.streams.settings import Settings
from emgas.streams.logs import logging_config
from emgas.streams.topics import ensure_topics


def where(settings: Settings) -> str:
    """The one line a worker prints on start: where to look at it, what it reads."""
    url = f"http://{settings.web_host}:{settings.web_port}"
    return (f"emgas worker {settings.worker_name}: viewer {url}/  metrics {url}/metrics  health {url}/health  "
            f"| Kafka {settings.bootstrap_servers()}  | state {settings.worker_data_dir}")


def run_worker(settings: Settings, loglevel: str = "INFO") -> None:
    """Run until SIGINT/SIGTERM. Blocks; exits the process when done."""
    asyncio.run(ensure_topics(settings))
    print(where(settings), flush=True)
    app = create_app(settings)
    worker = faust.Worker(
        app, loglevel=loglevel, quiet=True, logging_config=logging_config(settings.log_format, loglevel)
    )
    logging.getLogger("faust").setLevel(getattr(logging, loglevel))
    try:
        worker.execute_from_commandline()
    finally:
        if FATAL:
            raise WorkerStopped(FATAL[0])
