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


def run_worker(settings: Settings, loglevel: str = "INFO") -> None:
    """Run until SIGINT/SIGTERM. Blocks; exits the process when done."""
    asyncio.run(ensure_topics(settings))
    print(where(settings), flush=True)
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
