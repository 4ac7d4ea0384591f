"""Testing an application built on emgas: an in-process log, and workers as child processes.

What the project's own tests use, shipped so that users' tests can use it
too (as stream-processing libraries ship their test drivers):

- `LocalLog`: the pipeline without Kafka. Events are appended to a list
  (the log) and handed, in order, to the same step functions as a live
  worker's apply agent (`service.steps`); whatever becomes due (decay
  ticks, consolidations) is appended too, and queries answered here append
  their reinforcement like the live query agent. The state commits every
  `COMMIT_EVERY` events (reads see what is not committed yet). Its log
  replays like a real one.
- `start_worker` / `stop_worker`: `emgas worker` as a child process on a
  given broker and home, stopped by its PID (SIGTERM, then SIGKILL).
- `turns_per_graph`, `wait_for_turns`, `wait_for_workers`, `wait_until_warm`,
  `health`: waiting on a live pipeline for a condition instead of sleeping.

    from emgas.testing import LocalLog

    log = LocalLog(GraphParams())
    log.extend(events)  # graph events (`turn_ingested`, ...), in log order
    reply = log.ask(query, ActivationParams(), ExtractionParams())
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import deque
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from emgas.processors.activation import ActivationParams
from emgas.processors.errors import QueryError
from emgas.processors.events import ActivationQuery, ActivationReply, ErrorReply, GraphEvent, Turn
from emgas.processors.extract import ExtractionParams
from emgas.processors.graph import GraphParams
from emgas.service.scheduler import Scheduler
from emgas.service.steps import PartitionSteps
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from emgas.state.store import PartitionStore
from emgas.state.transaction import COMMIT_EVERY
from emgas.streams.errors import QueryTimeout
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.kafka.node import free_port
from emgas.streams.settings import Settings

__all__ = [
    "LocalLog", "STATS_PROBE", "free_port", "health", "start_worker", "stop_worker", "turns_per_graph",
    "wait_for_turns", "wait_for_workers", "wait_until_warm",
]

# A seed no concept id can equal (ids are lemmatised word characters):
# asking it returns only the graph's stats.
STATS_PROBE = "·"


# -- the pipeline in process -----------------------------------------------------


_NO_WALL = datetime(1970, 1, 1, tzinfo=timezone.utc)


class LocalLog:
    """One partition's log and state in process: `log` holds every event
    appended (what a replay reads), `outcomes` what the fold made of each,
    `worker` the partition's step functions (`service.steps.PartitionSteps`)."""

    def __init__(self, params: GraphParams, store: PartitionStore | None = None) -> None:
        self.params = params
        self.worker = PartitionSteps(PartitionState(store or MemoryStore(), params), params)
        self.log: list[GraphEvent] = []
        self.outcomes: list[Outcome] = []

    @property
    def state(self) -> PartitionState:
        return self.worker.state

    @property
    def scheduler(self) -> Scheduler:
        return self.worker.scheduler

    def append(self, event: GraphEvent) -> None:
        """Append and apply `event`, then everything that becomes due because of it."""
        queue = deque([event])
        while queue:
            event = queue.popleft()
            self.log.append(event)
            outcome, due = self.worker.on_graph_event(event, len(self.log) - 1, _NO_WALL)
            self.outcomes.append(outcome)
            queue.extend(due)
            if len(self.log) % COMMIT_EVERY == 0:
                self.state.commit()

    def extend(self, events: Iterable[GraphEvent]) -> None:
        for event in events:
            self.append(event)

    def tick(self, graph_id: str, at: datetime) -> None:
        """An explicit tick (what the idle scheduler or `emgas tick` emits)."""
        ref = self.state.ref(graph_id)
        self.extend(self.scheduler.due(self.state, ref, at, "manual"))

    def ask(
        self, query: ActivationQuery, activation: ActivationParams, extraction: ExtractionParams
    ) -> ActivationReply:
        """Answer like the query agent, appending the reinforcement it emits."""
        self.worker.activation, self.worker.extraction = activation, extraction
        reply, due = self.worker.on_request(query, lambda: 0.0)
        if isinstance(reply, ErrorReply):
            raise QueryError(reply.code, reply.message)
        self.extend(due)
        assert isinstance(reply, ActivationReply), "an activation query is answered with activations"
        return reply


# -- workers as child processes ------------------------------------------------


def start_worker(
    settings: Settings, log_path: Path, name: str = "worker-1", web_port: int | None = None,
    env: dict[str, str] | None = None, loglevel: str = "WARNING", command: list[str] | None = None,
) -> subprocess.Popen[bytes]:
    """`emgas worker` as a child process on the given broker and home, its web
    server (metrics, health) on `web_port` (default: a free port); `env`:
    more environment variables for it (e.g. other `EMGAS_*` settings);
    `command`: another worker command line (a test's worker with faults)."""
    environment = {
        **os.environ,
        "EMGAS_BROKER": settings.bootstrap_servers(),
        "EMGAS_HOME": str(settings.home),
        "EMGAS_WORKER_NAME": name,
        "EMGAS_WEB_PORT": str(web_port or free_port()),
        "EMGAS_PARTITIONS": str(settings.partitions),
        "EMGAS_TURN_PARTITIONS": str(settings.turn_partitions),
        "EMGAS_GRAPH": settings.graph.model_dump_json(),
        **(env or {}),
    }
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [*(command or [sys.executable, "-m", "emgas", "worker"]), "--loglevel", loglevel],
            env=environment, stdout=log, stderr=subprocess.STDOUT,
        )


def stop_worker(worker: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout_s)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


# -- waiting on a live pipeline ------------------------------------------------


def turns_per_graph(turns: list[Turn]) -> dict[str, int]:
    """graph -> number of distinct turn ids among `turns` (what the graph will hold)."""
    ids: dict[str, set[str]] = {}
    for t in turns:
        ids.setdefault(t.graph_id, set()).add(t.turn_id)
    return {g: len(s) for g, s in ids.items()}


async def wait_for_turns(client: MemoryClient, expected: dict[str, int], deadline_s: float, poll_s: float = 0.05) -> None:
    """Poll each graph's stats, every `poll_s`, until it has applied `expected[graph]`
    turns (0: until any reply comes, i.e. a worker serves the graph's partition)."""
    deadline = time.monotonic() + deadline_s
    for graph, count in expected.items():
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise QueryTimeout(f"graph {graph!r} did not reach {count} turns in {deadline_s:g} s")
            try:
                reply = await client.ask(graph, seeds=(STATS_PROBE,), timeout_s=min(remaining, 5.0))
            except QueryTimeout:
                continue
            if count == 0 or (isinstance(reply, ActivationReply) and reply.stats.turns >= count):
                break
            await asyncio.sleep(poll_s)


async def wait_for_workers(settings: Settings, names: set[str], deadline_s: float = 120) -> None:
    """Until the partitions are spread over exactly the workers `names` (each answers for one)."""
    deadline = time.monotonic() + deadline_s
    async with MemoryClient(settings) as client:
        while True:
            try:
                if {getattr(r, "worker", None) for r in await client.digests(timeout_s=5)} == names:
                    return
            except QueryTimeout:  # a partition between owners: ask again
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"partitions not spread over {sorted(names)} in {deadline_s:g} s")
            await asyncio.sleep(0.2)


def wait_until_warm(port: int, deadline_s: float = 60.0, poll_s: float = 0.1) -> None:
    """Until the worker serving `/health` on `port` says it is warm (its
    one-time loads done: the warm-up, the encoder's session), so that what
    is measured next is its steady state."""
    deadline = time.monotonic() + deadline_s
    while not _warm(port):
        if time.monotonic() > deadline:
            raise AssertionError(f"the worker on port {port} not warm in {deadline_s:g} s: {health(port)}")
        time.sleep(poll_s)


def _warm(port: int) -> bool:
    try:
        return bool(health(port).get("warm"))
    except urllib.error.URLError:  # its web server not up yet
        return False


def health(port: int) -> dict:
    """A worker's `/health` (it answers 503 while a partition catches up, with the same body)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        return json.loads(err.read())
