"""The Faust app, its two thin agents and the query server.

- `extract`:  emgas.turns        -> concept extraction -> emgas.graph-events
- `apply`:    emgas.graph-events -> `on_graph_event` -> local state, and the
              ticks it makes due -> emgas.graph-events
- `serve`:    emgas.queries      -> `on_request` -> the query's reply_to,
              and its reinforcement -> emgas.graph-events; read outside
              the consumer group (`streams.runtime.serving`), so a rebalance does
              not pause queries: the previous owner of a partition answers
              until the new one has caught up and announced itself

The agents decode, call one step function (`state.steps`), persist and
emit. The apply agent takes events in batches and commits each batch as
`streams.runtime.checkpoint` says; on a timer, the worker appends the ticks due to
idle graphs: forgetting is in the log.

`emgas.graph-events` and `emgas.queries` have the same partition count and
key (graph_id, murmur2), so query partition p is answered by the worker
that holds graph-events partition p: a query meets the state of its graph. Agents decode, call
the core, persist, emit; input that cannot be decoded goes to emgas.dlq.
Delivery is at-least-once; the projector makes applying idempotent, and
`streams.runtime.recovery` catches a partition's state up with the log before the
agents use it (after a crash, a restart or a rebalance).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Iterable

import faust
from faust.exceptions import NotReady
from faust.types import TP

from emgas.processors.codec import decode_graph_event, decode_turn, encode
from emgas.processors.errors import DecodeError
from emgas.processors.events import Forget, GraphEvent
from emgas.processors.extract import extractor_id, ingest_all
from emgas.state.snapshot_writer import SnapshotPolicy
from emgas.streams.runtime.checkpoint import Checkpoint
from emgas.streams.runtime.dlq import dead_letter, guarded
from emgas.streams.errors import ServingStopped
from emgas.streams.runtime.faust_transport import App
from emgas.streams.http_auth import aiohttp_guard
from emgas.streams.runtime.membership import GroupWatch, guard_sync_groups, watch_group
from emgas.streams.runtime.metrics import Metrics, register_pages
from emgas.streams.runtime.viewer import register_viewer
from emgas.streams.runtime.partitions import PartitionStates
from emgas.streams.runtime.recovery import Recovery
from emgas.streams.runtime.serving import QueryServer
from emgas.streams.settings import Settings

log = logging.getLogger(__name__)


def create_app(settings: Settings) -> faust.App:
    """Build the worker's Faust app from the settings (no module-level app)."""
    data_dir = settings.worker_data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    app = App(
        settings.app_id,
        broker=f"kafka://{settings.bootstrap_servers()}",
        broker_credentials=settings.kafka.faust_credentials(),
        fetch_max_wait_ms=settings.fetch_wait_ms(),
        datadir=str(data_dir / "faust"),
        topic_allow_declare=False,  # topics are created up front (streams.kafka.topics)
        topic_disable_leader=True,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=settings.heartbeat_interval_s,
        broker_check_crcs=False,  # the mock cluster writes CRC 0 on control batches
        consumer_auto_offset_reset="earliest",
        web_bind=settings.web_host,
        web_port=settings.web_port,
        key_serializer="raw",
        value_serializer="raw",
    )
    policy = SnapshotPolicy(settings.snapshot_min_bytes, settings.snapshot_ratio)
    states = PartitionStates(
        data_dir / "state", settings.graph, settings.activation, settings.extraction, settings.worker_name, policy
    )
    metrics = Metrics()

    async def append(events: list[GraphEvent]) -> list[int]:
        acks = [await _send(app, settings, event) for event in events]
        return [metadata.offset for metadata in await asyncio.gather(*acks)]

    async def fatal(err: Exception) -> None:
        FATAL.append(str(err))
        await app.crash(err)

    recovery = Recovery(settings, states, append, metrics, fatal)
    app.on_partitions_assigned.connect(recovery.on_assigned)
    app.on_partitions_revoked.connect(recovery.on_revoked)
    _register_agents(app, settings, states, recovery, metrics)
    register_pages(
        app, metrics,
        lambda m: _refresh(m, app, settings, states, recovery),
        lambda: _health(settings, recovery),
    )
    register_viewer(app, settings, lambda: [states.get(p) for p in recovery.ready_partitions()])
    token = settings.web_token()
    if token is not None:  # every page behind the bearer token (`streams.http_auth`)
        app.web.web_app.middlewares.append(aiohttp_guard(token))
    def rejoined(reason: str) -> None:
        metrics.group_rejoins.labels(reason).inc()

    guard_sync_groups(rejoined, settings.fault_sync_group_errors)
    watch_group(app, GroupWatch(settings.app_id, settings.session_timeout_s, rejoined))
    return app


def _while_running(produce: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """`produce` for the query server, which runs beside Faust's services: a
    send after Faust stopped its producer (the worker is stopping: SIGINT, a
    crash elsewhere) raises `ServingStopped`, which ends serving quietly,
    instead of Faust's NotReady, which would crash a stopping worker."""

    async def guarded(*args: Any) -> Any:
        try:
            return await produce(*args)
        except NotReady:
            raise ServingStopped("the producer has stopped") from None

    return guarded


# Why the worker must end (one line each), for the command's exit status.
FATAL: list[str] = []


def route(event: GraphEvent) -> tuple[bytes | None, int | None]:
    """(key, partition) of a graph event: its graph's key, or, for an event
    about a partition of the log, that partition."""
    graph_id = getattr(event, "graph_id", None)
    if graph_id is not None:
        return graph_id.encode(), None
    return None, event.partition


async def _send(app: faust.App, settings: Settings, event: GraphEvent) -> Any:
    key, partition = route(event)
    return await app.producer.send(settings.graph_events_topic, key, encode(event), partition, None, None)


def _refresh(metrics: Metrics, app: faust.App, settings: Settings, states: PartitionStates, recovery: Recovery) -> None:
    """Set the gauges from the partitions assigned here (a revoked partition's series go)."""
    for gauge in (metrics.graphs, metrics.concepts, metrics.edges, metrics.passages, metrics.lag,
                  metrics.applied_offset, metrics.committed_offset):
        gauge.clear()
    ready = recovery.ready_partitions()
    metrics.ready.set(len(ready))
    metrics.recovering.set(len(recovery.assigned_partitions()) - len(ready))
    for partition in ready:
        state, label = states.get(partition), str(partition)
        views = list(state.views.loaded().values())  # evicted graphs are not loaded to be counted
        metrics.graphs.labels(label).set(len(state.views))
        metrics.concepts.labels(label).set(sum(v.concepts for v in views))
        metrics.edges.labels(label).set(sum(v.edges for v in views))
        metrics.passages.labels(label).set(sum(len(v.place_of) for v in views))
        metrics.applied_offset.labels(label).set(state.applied_offset)
        metrics.committed_offset.labels(label).set(state.committed_offset)
        highwater = app.consumer.highwater(TP(settings.graph_events_topic, partition))
        if highwater is not None and highwater >= 0:
            metrics.lag.labels(label).set(max(0, highwater - 1 - state.applied_offset))


def _health(settings: Settings, recovery: Recovery) -> dict[str, Any]:
    assigned, ready = recovery.assigned_partitions(), recovery.ready_partitions()
    return {
        "worker": settings.worker_name,
        "ready": recovery.assignment_seen and assigned == ready,
        "partitions": {"assigned": assigned, "ready": ready},
        "log_mismatches": {str(p): problem for p, problem in sorted(recovery.problems.items())},
        "recoveries": {str(p): done for p, done in sorted(recovery.recoveries.items())},
    }


def _topic(app: faust.App, name: str, partitions: int) -> Any:
    return app.topic(name, partitions=partitions, key_type=bytes, value_type=bytes)


def _register_agents(
    app: faust.App, settings: Settings, states: PartitionStates, recovery: Recovery, metrics: Metrics
) -> None:
    turns = _topic(app, settings.turns_topic, settings.turn_partitions)
    graph_events = _topic(app, settings.graph_events_topic, settings.partitions)
    extractor = extractor_id(settings.extraction)
    extraction = Extraction(settings, extractor)

    async def send_event(event: GraphEvent) -> Any:
        """Produce a graph event; the future of its acknowledgement."""
        ack = await _send(app, settings, event)
        metrics.emitted.labels(event.type).inc()
        return ack

    async def append(events: Iterable[GraphEvent]) -> None:
        await asyncio.gather(*[await send_event(event) for event in events])

    async def to_dlq(message: Any, err: DecodeError) -> None:
        log.warning("dead letter %s[%s]@%s: %s", message.topic, message.partition, message.offset, err)
        metrics.dead_letters.labels(message.topic, err.code).inc()
        await app.producer.send_and_wait(
            settings.dlq_topic, message.key, encode(dead_letter(message, err)), None, None, None
        )

    @app.agent(turns, name="extract")
    async def extract_turns(stream: Any) -> None:
        # Turns come in batches; their graph events are sent without waiting
        # for each ack, and the batch's acks are awaited before its turns
        # are acknowledged (so their offsets can be committed): a turn is
        # never committed before its graph event is in the log.
        async for events in stream.take_events(settings.extract_batch, within=settings.extract_batch_wait_s):
            turns = []
            for event in events:
                try:
                    now = datetime.now(timezone.utc)
                    turn = guarded(lambda raw: decode_turn(raw, now, settings.max_future_s), event.message.value)
                    turns.append((event.message, turn))
                except DecodeError as err:
                    await to_dlq(event.message, err)
            pending = []
            for (message, _), result in zip(turns, await extraction.run([turn for _, turn in turns])):
                if isinstance(result, str):  # extraction failed on this turn only
                    await to_dlq(message, DecodeError("extraction_failed", result))
                    continue
                pending.append(await app.producer.send(
                    settings.graph_events_topic, result.graph_id.encode(), encode(result), None, None, None
                ))
            await asyncio.gather(*pending)
            metrics.turns.inc(len(pending))

    @app.agent(graph_events, name="apply")
    async def apply_events(stream: Any) -> None:
        async for events in stream.take_events(settings.apply_batch, within=settings.apply_batch_wait_s):
            checkpoint = Checkpoint(send_event, settings.commit_hold_s)
            for event in events:
                await apply_one(event.message, checkpoint)
            await checkpoint.commit()

    async def apply_one(message: Any, checkpoint: Checkpoint) -> None:
        try:
            graph_event = guarded(decode_graph_event, message.value)
        except DecodeError as err:
            await to_dlq(message, err)
            return
        # A partition revoked while it caught up is skipped here: its new
        # owner reads the log from its own state's offset.
        if not await recovery.wait(message.partition):
            return
        worker = states.worker(message.partition)
        refolds = None
        if isinstance(graph_event, Forget) and message.offset > worker.state.applied_offset:
            # Re-folding a graph takes a replay of it: off the event loop, so
            # heartbeats and queries go on meanwhile. It reads committed
            # state only, and this partition's events wait for it.
            await checkpoint.commit()
            refolds = await asyncio.to_thread(worker.state.refolds, graph_event)
        wall = datetime.now(timezone.utc)
        outcome, due = worker.on_graph_event(graph_event, message.offset, wall, message.value, refolds, serve=False)
        metrics.applied.labels(graph_event.type, outcome.value).inc()
        checkpoint.add(worker, due)
        if worker.snapshots.to_serve:
            # Serialising a graph takes a while: off the event loop, after a
            # commit (it reads the state as of the request; queries read it too).
            await checkpoint.commit()
            checkpoint.add(worker, await asyncio.to_thread(worker.serve_snapshots))

    if settings.graph.idle_check_s > 0:

        @app.timer(settings.graph.idle_check_s)
        async def tick_graphs() -> None:
            """Ticks due by the window (missed before a restart) or by idleness."""
            wall = datetime.now(timezone.utc)
            rounds = math.ceil(settings.evict_idle_s / settings.graph.idle_check_s)
            for partition in recovery.ready_partitions():
                await append(states.worker(partition).on_timer(wall))
                states.get(partition).views.evict_unused(rounds)

    # Queries are read outside the group, so rebalances do not pause them (`streams.runtime.serving`).
    async def send(topic: str, key: bytes | None, value: bytes, partition: int | None) -> Any:
        return await app.producer.send_and_wait(topic, key, value, partition, None, None)

    server = QueryServer(
        settings, states, recovery, metrics, _while_running(send), _while_running(append), _while_running(to_dlq)
    )

    @app.task
    async def serve_queries() -> None:
        await server.run()

    def leave_group() -> None:
        """The Faust consumer leaves its group (on its own thread): its partitions move."""
        thread = app.consumer._thread
        thread.thread_loop.call_soon_threadsafe(thread._consumer.unsubscribe)

    async def hand_over() -> None:
        """What `emgas worker` does on SIGTERM before it stops (streams.runtime.worker): hand the
        partitions over, then answer nothing more, before Faust stops the producer."""
        try:
            await server.hand_over(leave_group, settings.hand_over_s)
        finally:
            await server.stop()

    app.hand_over = hand_over  # type: ignore[attr-defined]


class Extraction:
    """Runs `ingest_all` on batches of turns: in a process pool when
    `extract_processes` > 0, so extraction (the bulk of a turn's cost) runs
    on its own core while the event loop applies events and serves queries."""

    def __init__(self, settings: Settings, extractor: str) -> None:
        self.settings = settings
        self.extractor = extractor
        self._pool: ProcessPoolExecutor | None = None

    async def run(self, turns: list[Any]) -> list[Any]:
        """`ingest_all` of the turns: a TurnIngested, or the error's text, per turn."""
        params = self.settings.extraction
        if not turns:
            return []
        if self.settings.extract_processes == 0:
            return ingest_all(turns, params, self.extractor)
        if self._pool is None:
            # spawn, not fork: the worker process already runs threads.
            self._pool = ProcessPoolExecutor(self.settings.extract_processes, mp_context=get_context("spawn"))
        loop = asyncio.get_running_loop()
        size = -(-len(turns) // self.settings.extract_processes)
        chunks = [turns[i : i + size] for i in range(0, len(turns), size)]
        done = await asyncio.gather(*(loop.run_in_executor(self._pool, ingest_all, c, params, self.extractor) for c in chunks))
        return [ingested for chunk in done for ingested in chunk]
