"""The composition root: what a worker is made of, and how the parts connect.

`build_worker(settings)` is the one place that constructs the worker's
collaborators and hands each the others it needs; nothing is set on the
Faust app afterwards. `emgas worker` runs what it returns
(`streams.runtime.worker`). Everything the worker produces goes through
one port, `graph_log`'s (`streams.runtime.ports.GraphLog`): a test wraps it
to add its faults (tests/support/hooked_worker.py); the command line never does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import faust

from emgas.processors.extract import extractor_id
from emgas.service.snapshot_writer import SnapshotPolicy
from emgas.streams.http_auth import aiohttp_guard
from emgas.streams.runtime.app import (
    Agents, Extraction, Output, WhileRunning, faust_app, health, producing, refresh_gauges,
)
from emgas.streams.runtime.membership import GroupWatch, watch_group
from emgas.streams.runtime.metrics import Metrics, register_pages
from emgas.streams.runtime.partitions import PartitionStates
from emgas.streams.runtime.patches import App, TablelessManager, check_versions, guard_sync_groups, leave_group
from emgas.streams.runtime.ports import GraphLog
from emgas.streams.runtime.recovery import Recovery
from emgas.streams.kafka.sealer import Sealer
from emgas.streams.kafka.reader import key_ring
from emgas.streams.runtime.serving import QueryServer
from emgas.streams.runtime.viewer import register_viewer
from emgas.streams.runtime.warming import start_warming
from emgas.streams.settings import Settings


@dataclass
class Worker:
    """A worker's parts. `fatal` holds why it must end (one line each), for the command's exit status."""

    app: App
    settings: Settings
    states: PartitionStates
    metrics: Metrics
    recovery: Recovery
    server: QueryServer
    fatal: list[str] = field(default_factory=list)

    async def hand_over(self) -> None:
        """What `emgas worker` does on SIGTERM before it stops: hand the partitions
        over, then answer nothing more, before Faust stops the producer."""
        try:
            await self.server.hand_over(self._leave_group, self.settings.hand_over_s)
        finally:
            await self.server.stop()

    async def _leave_group(self) -> None:
        self.recovery.on_rebalance_start()  # an agent waiting for a catch-up would hold the leave up
        await leave_group(self.app)


class RebalanceStart(faust.Sensor):
    """Tells `Recovery` that a rebalance began (`Recovery.on_rebalance_start`), as
    soon as aiokafka asks for the partitions back and before Faust waits for its
    agents. Faust calls sensors there on the consumer's own thread, so the call
    is passed to the worker's event loop, which the first assignment makes known."""

    def __init__(self, recovery: Recovery) -> None:
        super().__init__()
        self.recovery = recovery
        self.worker_loop: asyncio.AbstractEventLoop | None = None

    async def on_assigned(self, sender: Any, assigned: Any, **_: Any) -> None:
        self.worker_loop = asyncio.get_running_loop()

    def on_rebalance_start(self, app: Any) -> dict:
        loop = self.worker_loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.recovery.on_rebalance_start)
        return super().on_rebalance_start(app)


# What makes the worker's port to the log (`streams.runtime.ports.GraphLog`) from its producer's app.
LogFactory = Callable[[App, Settings, Metrics, Sealer], GraphLog]


def build_worker(settings: Settings, graph_log: LogFactory = Output) -> Worker:
    """The worker for `settings`: its Faust app, partition states, recovery, agents and query server,
    all writing through one port to the log, `graph_log`'s (the Kafka adapter, `Output`, unless a
    caller wraps or replaces it)."""
    check_versions()
    warming = start_warming(settings)  # beside the rest of the start: a partition is ready once it is done
    settings.worker_data_dir.mkdir(parents=True, exist_ok=True)
    app = faust_app(settings)
    metrics = Metrics()
    states = PartitionStates(
        settings.worker_data_dir / "state", settings.graph, settings.activation, settings.extraction,
        settings.worker_name, SnapshotPolicy(settings.snapshot_min_bytes, settings.snapshot_ratio),
    )
    kek = settings.kek(create=settings.seal)  # the embedded default's file made by the first worker that seals
    keys = key_ring(settings, kek)  # one per worker: what recovery reads of the key topic, the agents use
    sealer = Sealer(kek if settings.seal else None, keys, settings.keys_topic, settings.partitions, producing(app),
                    settings.key_erasure_ms / 1000)
    output = graph_log(app, settings, metrics, sealer)
    fatal: list[str] = []

    async def stop_for(err: Exception) -> None:
        fatal.append(str(err))
        await app.crash(err)

    def reconcile(partition: int) -> Awaitable[None]:
        state = states.get(partition)
        return sealer.reconcile(partition, state.repo.forgotten_turns, state.ledger.last_listed())

    recovery = Recovery(settings, states, output, metrics, stop_for, warming, keys, reconcile)
    app.on_partitions_assigned.connect(recovery.on_assigned)  # type: ignore[arg-type]  # Faust's signal typing
    tables = app.tables
    assert isinstance(tables, TablelessManager), "the app's table manager is the patched one"
    tables.on_assigned = lambda assigned: recovery.on_assigned(tables, assigned)  # catch-ups before Faust's seek (10)
    app.on_partitions_revoked.connect(recovery.on_revoked)  # type: ignore[arg-type]
    rebalances = RebalanceStart(recovery)
    app.on_partitions_assigned.connect(rebalances.on_assigned)  # type: ignore[arg-type]
    app.sensors.add(rebalances)
    agents = Agents(settings, states, recovery, metrics, output, sealer,
                    Extraction(settings, extractor_id(settings.extraction)), stop_for)
    agents.register(app)
    # Queries are read outside the group, so rebalances do not pause them (`streams.runtime.serving`).
    server = QueryServer(settings, states, recovery, metrics, WhileRunning(output))
    app.task(server.run)
    _register_pages(app, settings, states, recovery, metrics)
    rejoined = metrics.group_rejoins.labels
    guard_sync_groups(lambda reason: rejoined(reason).inc())
    watch_group(app, GroupWatch(settings.app_id, settings.session_timeout_s, lambda reason: rejoined(reason).inc()))
    return Worker(app, settings, states, metrics, recovery, server, fatal)


def _register_pages(app: App, settings: Settings, states: PartitionStates, recovery: Recovery,
                    metrics: Metrics) -> None:
    """/metrics, /health and the viewer on Faust's web server, behind the token if one is set."""
    register_pages(app, metrics, lambda m: refresh_gauges(m, app, settings, states, recovery),
                   lambda: health(settings, recovery))
    register_viewer(app, settings, lambda: [states.get(p) for p in recovery.ready_partitions()])
    token = settings.web_token()
    if token is not None:  # every page behind the bearer token (`streams.http_auth`)
        app.web.web_app.middlewares.append(aiohttp_guard(token))  # type: ignore[attr-defined]
