"""The Faust app and its thin agents (wired by `streams.runtime.compose`).

- `extract`:  emgas.turns        -> concept extraction -> emgas.graph-events
- `apply`:    emgas.graph-events -> `on_graph_event` -> local state, and the
              ticks it makes due -> emgas.graph-events
- `serve`:    emgas.queries      -> `on_request` -> the query's reply_to,
              and its reinforcement -> emgas.graph-events; read outside
              the consumer group (`streams.runtime.serving`), so a rebalance does
              not pause queries: the previous owner of a partition answers
              until the new one has caught up and announced itself

The agents decode, call one step function (`service.steps`), persist and
emit. They take each fetch's records as one batch (`streams.runtime.intake`),
not one by one through Faust's streams; the apply agent commits each batch as
`streams.runtime.commit_order` says; on a timer, the worker appends the ticks due to
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
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from multiprocessing import get_context
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Generator, Iterable, Iterator, TypeVar, cast

import faust
from faust.exceptions import NotReady
from faust.types import TP

from emgas.processors.codec import decode_turn, encode
from emgas.processors.errors import DecodeError
from emgas.processors.events import Checkpoint as LogCheckpoint, Forget, GraphEvent, Snapshot, SnapshotStarted
from emgas.processors.extract import encode_all
from emgas.processors.fold_codec import FoldEvent, decode_for_fold
from emgas.state import kernels
from emgas.service import encoder
from emgas.state.rules import Outcome
from emgas.streams.errors import ServingStopped
from emgas.streams.kafka.partitioner import KeyPartitioner
from emgas.streams.runtime.commit_order import BatchCommit, CommitPacing
from emgas.streams.runtime.dlq import dead_letter, guarded
from emgas.streams.runtime.intake import Intake
from emgas.streams.runtime.metrics import Metrics
from emgas.streams.runtime.partitions import PartitionStates
from emgas.streams.runtime.patches import App
from emgas.streams.runtime.ports import GraphLog
from emgas.streams.runtime.recovery import Recovery
from emgas.replay.keyring import KeysUnavailable
from emgas.streams.kafka.sealer import Produce, Sealer, opened
from emgas.streams.settings import PRODUCE_BATCH_BYTES, Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

# Events decoded between two turns of the event loop.
DECODE_SLICE = 40
# A batch is folded a piece at a time (a graph's events between two of the
# log's own records, APPLY_PIECE of them at most: `PartitionSteps.fold_steps`),
# and the event loop gets a turn once pieces have held it APPLY_PAUSE_S: a
# query waits that long and one piece at most. Slices of 40 events in log
# order, as before, cut each graph's run of turns into pieces of 40 / (graphs
# of the partition) events, and a run's fold costs about as much as 2-3
# events whatever its length (its guards, its mentions' arrays, the view's
# and the scheduler's work per graph).
APPLY_PIECE = 40
APPLY_PAUSE_S = 0.002


def faust_app(settings: Settings) -> App:
    """The worker's Faust app, configured from the settings (no module-level app)."""
    return App(
        settings.app_id,
        broker=f"kafka://{settings.bootstrap_servers()}",
        broker_credentials=settings.kafka.faust_credentials(),
        fetch_max_wait_ms=settings.fetch_wait_ms(),
        datadir=str(settings.worker_data_dir / "faust"),
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
        producer_partitioner=KeyPartitioner(),  # the default one, each graph id hashed once
        producer_max_batch_size=PRODUCE_BATCH_BYTES,
    )


def route(event: GraphEvent) -> tuple[bytes | None, int | None]:
    """(key, partition) of a graph event: its graph's key, or, for an event
    about a partition of the log, that partition."""
    graph_id = getattr(event, "graph_id", None)
    if graph_id is not None:
        return graph_id.encode(), None
    return None, event.partition  # type: ignore[union-attr]  # the log's own events name their partition


class Output:
    """Where the worker's results go: graph events to the log (keyed by
    graph, or to the log partition they are about) and dead letters."""

    def __init__(self, app: faust.App, settings: Settings, metrics: Metrics, sealer: Sealer) -> None:
        self.app, self.settings, self.metrics, self.sealer = app, settings, metrics, sealer

    async def _send(self, event: GraphEvent) -> Any:
        key, partition = route(event)
        value = encode(event)
        if isinstance(event, Snapshot):
            value = await self.sealer.seal_snapshot_part(event, value)
        ack = await self.app.producer.send(self.settings.graph_events_topic, key, value, partition, None, None)
        if isinstance(event, LogCheckpoint):
            await ack  # in the log before the snapshots it supersedes go
            await self.sealer.checkpointed(event)
        return ack

    async def send_event(self, event: GraphEvent) -> Any:
        """Produce a graph event; the future of its acknowledgement."""
        ack = await self._send(event)
        self.metrics.emitted.labels(event.type).inc()
        return ack

    async def acknowledged(self, acks: list[Awaitable[Any]]) -> None:
        """Wait for the acknowledgements of events sent (`send_event`)."""
        await asyncio.gather(*acks)

    async def append(self, events: Iterable[GraphEvent]) -> None:
        """Produce graph events and wait for every acknowledgement."""
        await self.acknowledged([await self.send_event(event) for event in events])

    async def append_at(self, events: list[GraphEvent]) -> list[int]:
        """Produce graph events (recovery's snapshots and markers); their log offsets once acknowledged."""
        acks = [await self._send(event) for event in events]
        return [metadata.offset for metadata in await asyncio.gather(*acks)]

    async def append_turns(self, extracted: list[tuple[str, str, str, bytes]]) -> None:
        """Turns extracted, (graph, turn id, time, its `turn_ingested` event's
        bytes): each sealed (its key in the key topic first) and produced under
        its graph's key, then every acknowledgement awaited."""
        events = await self.sealer.seal_turns(extracted)
        pending = [
            await self.app.producer.send(self.settings.graph_events_topic, graph_id.encode(), event, None, None, None)
            for (graph_id, *_), event in zip(extracted, events)
        ]
        await asyncio.gather(*pending)

    async def dead_letter(self, message: Any, err: DecodeError) -> None:
        """The message's original bytes to the dead-letter topic, with the reason."""
        log.warning("dead letter %s[%s]@%s: %s", message.topic, message.partition, message.offset, err)
        self.metrics.dead_letters.labels(message.topic, err.code).inc()
        await self.app.producer.send_and_wait(
            self.settings.dlq_topic, message.key, encode(dead_letter(message, err)), None, None, None
        )

    async def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None) -> Any:
        """One record to any topic (the query server's replies and announcements)."""
        return await self.app.producer.send_and_wait(topic, key, value, partition, None, None)


def producing(app: faust.App) -> Produce:
    """Sending one record (None: a tombstone) to a partition of any topic
    with the app's producer; the future of its acknowledgement."""

    async def produce(topic: str, key: bytes, value: bytes | None, partition: int) -> Any:
        return await app.producer.send(topic, key, value, partition, None, None)

    return produce


class WhileRunning:
    """A `GraphLog` for the query server, which runs beside Faust's services:
    a send after Faust stopped its producer (the worker is stopping: SIGINT,
    a crash elsewhere) raises `ServingStopped`, which ends serving quietly,
    instead of Faust's NotReady, which would crash a stopping worker."""

    def __init__(self, log: GraphLog) -> None:
        self._log = log

    async def send_event(self, event: GraphEvent) -> Any:
        with _stopped_as_serving_stopped():
            return await self._log.send_event(event)

    async def acknowledged(self, acks: list[Awaitable[Any]]) -> None:
        with _stopped_as_serving_stopped():
            await self._log.acknowledged(acks)

    async def append(self, events: Iterable[GraphEvent]) -> None:
        with _stopped_as_serving_stopped():
            await self._log.append(events)

    async def append_at(self, events: list[GraphEvent]) -> list[int]:
        with _stopped_as_serving_stopped():
            return await self._log.append_at(events)

    async def append_turns(self, extracted: list[tuple[str, str, str, bytes]]) -> None:
        with _stopped_as_serving_stopped():
            await self._log.append_turns(extracted)

    async def dead_letter(self, message: Any, err: DecodeError) -> None:
        with _stopped_as_serving_stopped():
            await self._log.dead_letter(message, err)

    async def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None) -> Any:
        with _stopped_as_serving_stopped():
            return await self._log.send(topic, key, value, partition)


@contextmanager
def _stopped_as_serving_stopped() -> Iterator[None]:
    try:
        yield
    except NotReady:
        raise ServingStopped("the producer has stopped") from None


class Agents:
    """The worker's agents and timer: each decodes, calls one step, persists, emits."""

    def __init__(self, settings: Settings, states: PartitionStates, recovery: Recovery, metrics: Metrics,
                 log: GraphLog, sealer: Sealer, extraction: Extraction,
                 on_fatal: Callable[[Exception], Awaitable[None]] | None = None) -> None:
        self.settings, self.states, self.recovery, self.metrics = settings, states, recovery, metrics
        self.log, self.sealer, self.extraction = log, sealer, extraction
        self.intake = Intake([settings.turns_topic, settings.graph_events_topic])
        self.pacing = CommitPacing(settings.state_commit_interval_s)
        self.compiled = False  # the fold's compiled loops loaded (`state.kernels`)
        self.on_fatal = on_fatal  # what ends the worker (a sealed record it cannot open)

    def register(self, app: App) -> None:
        """Subscribe to the two topics and run the agents on their records, a
        fetch's batch at a time (`streams.runtime.intake`)."""
        settings = self.settings
        for name, partitions in ((settings.turns_topic, settings.turn_partitions),
                                 (settings.graph_events_topic, settings.partitions)):
            app.topics.add(_topic(app, name, partitions))  # what the consumer subscribes to
        app.take_in_batches(self.intake)
        app.task(self.extract_turns)
        app.task(self.apply_events)
        if settings.graph.idle_check_s > 0:
            app.timer(settings.graph.idle_check_s)(self.tick_graphs)

    async def extract_turns(self) -> None:
        settings = self.settings
        await self._take(settings.turns_topic, settings.extract_batch, settings.extract_batch_wait_s, self.extract)

    async def apply_events(self) -> None:
        settings = self.settings
        await self._take(settings.graph_events_topic, settings.apply_batch, settings.apply_batch_wait_s, self.apply)

    async def _take(self, topic: str, most: int, within_s: float,
                    process: Callable[[list[Any]], Awaitable[None]]) -> None:
        """An agent's loop: the records of the batches of `topic` that came
        within `within_s` of the first, `process`ed `most` at a time, then
        the batches are done (their offsets may be committed)."""
        while True:
            batches = await self.intake.take_up_to(topic, most, within_s)
            records = [record for batch in batches for record in batch.records]
            for start in range(0, len(records), most):
                await process(records[start:start + most])
            for batch in batches:
                self.intake.done(batch)

    async def extract(self, records: list[Any]) -> None:
        # The graph events are sent without waiting for each ack, and the
        # acks are awaited before the turns are done (so their offsets can
        # be committed): a turn is never committed before its graph event
        # is in the log.
        settings, log = self.settings, self.log
        turns = []
        for record in records:
            try:
                now = datetime.now(timezone.utc)
                turn = guarded(lambda raw: decode_turn(raw, now, settings.max_future_s), record.value)  # noqa: B023
                turns.append((record, turn))
            except DecodeError as err:
                await log.dead_letter(record, err)
        extracted = []
        for (record, turn), result in zip(turns, await self.extraction.run([turn for _, turn in turns])):
            if isinstance(result, str):  # extraction failed on this turn only
                await log.dead_letter(record, DecodeError("extraction_failed", result))
                continue
            extracted.append((turn.graph_id, turn.turn_id, turn.timestamp.isoformat(), result))
        await log.append_turns(extracted)
        self.metrics.turns.inc(len(extracted))

    async def apply(self, records: list[Any]) -> None:
        if not self.compiled:
            # Loading the fold's compiled loops (numba and its cache, 0.3-0.4 s)
            # on the first fold that calls them stalled the event loop, and the
            # queries waiting on it. On a thread, before the first batch, the
            # loop answers meanwhile (sharing the interpreter). Not at start: a
            # partition taken over is ready without them (`warm_for_queries`).
            await asyncio.to_thread(kernels.warm)
            self.compiled = True
        batch_commit = BatchCommit(self.log, self.pacing, self.states.reading,
                                self.states.commit)
        pending: dict[int, list[tuple[FoldEvent, int, bytes]]] = {}  # per partition, in log order
        try:
            values = await opened(self.sealer.keys, records)  # sealed turns and snapshots: what was sealed
        except KeysUnavailable as err:
            log.error("%s", err)
            if self.on_fatal is not None:
                await self.on_fatal(err)
            raise
        for k, (record, value) in enumerate(zip(records, values)):
            if k and not k % DECODE_SLICE:
                await asyncio.sleep(0)  # decoding a slice at a time too
            try:
                graph_event = guarded(decode_for_fold, value)
            except DecodeError as err:
                await self.log.dead_letter(record, err)  # its bytes as they are in the log
                continue
            if isinstance(graph_event, (Forget, SnapshotStarted)):  # each needs the state as of itself
                await self.apply_batch(record.partition, pending.pop(record.partition, []), batch_commit)
                await self.apply_one(record, graph_event, batch_commit)
            else:
                pending.setdefault(record.partition, []).append((graph_event, record.offset, value))
        for partition, events in pending.items():
            await self.apply_batch(partition, events, batch_commit)
        await batch_commit.commit()

    async def apply_batch(self, partition: int, batch: list[tuple[FoldEvent, int, bytes]], batch_commit: BatchCommit) -> None:
        """Fold a partition's events a piece at a time, letting the event loop
        answer queries between pieces (a query waits for `APPLY_PAUSE_S` and
        a piece at most, not for the whole batch). The partition counts as
        folding until the last piece (`PartitionStates.folding`): nothing
        commits, hashes or catches it up meanwhile. A revocation meanwhile
        lets the batch end: the state stays at one offset of the log."""
        if not batch:
            return
        await asyncio.sleep(0)  # the batch before may have been another partition's
        if not await self.recovery.wait(partition):
            return  # revoked (or revoked while it caught up): its new owner reads the log from its own state
        worker = self.states.worker(partition)
        with self.states.folding(partition):
            outcomes, due = await _pausing(worker.fold_steps(list(batch), datetime.now(timezone.utc), APPLY_PIECE))
        for (kind, outcome), n in Counter((e.type, o.value) for (e, _, _), o in zip(batch, outcomes)).items():
            self.metrics.applied.labels(kind, outcome).inc(n)
        for graph_id, turn_ids in _forgotten_again(batch, outcomes).items():
            await self.sealer.erase_turns(graph_id, turn_ids)  # a forgotten turn sent again: its words too
        batch_commit.add(worker, due)

    async def apply_one(self, record: Any, graph_event: GraphEvent, batch_commit: BatchCommit) -> None:
        """A forget or a snapshot request: applied alone, with the state as of itself."""
        if not await self.recovery.wait(record.partition):
            return
        worker = self.states.worker(record.partition)
        refolds = None
        if isinstance(graph_event, Forget) and record.offset > worker.state.applied_offset:
            if not worker.state.repo.has_forget(graph_event.graph_id, graph_event.request_id):
                # The turns' words made unreadable in the log first: once the
                # forget counts as applied (a digest query says so), they are.
                # A crash before it is applied erases nothing that recovery
                # would not fold the same way.
                await self.sealer.forgotten(graph_event)
            # Re-folding a graph takes a replay of it: off the event loop, so
            # heartbeats and queries go on meanwhile. It reads committed
            # state only, and this partition's events wait for it.
            await batch_commit.commit(force=True)
            refolds = await self.states.in_thread(record.partition, lambda: worker.state.refolds(graph_event))
        wall = datetime.now(timezone.utc)
        outcome, due = worker.on_graph_event(graph_event, record.offset, wall, record.value, refolds, serve=False)
        self.metrics.applied.labels(graph_event.type, outcome.value).inc()
        batch_commit.add(worker, due)
        if worker.snapshots.to_serve:
            # Serialising a graph takes a while: off the event loop, after a
            # commit (it reads the state as of the request; queries read it too).
            await batch_commit.commit(force=True)
            batch_commit.add(worker, await self.states.in_thread(record.partition, worker.serve_snapshots))
            worker.keep_served_points()

    async def tick_graphs(self) -> None:
        """Ticks due by the window (missed before a restart) or by idleness."""
        wall = datetime.now(timezone.utc)
        rounds = math.ceil(self.settings.evict_idle_s / self.settings.graph.idle_check_s)
        for partition in self.recovery.ready_partitions():
            if self.states.is_folding(partition):
                continue  # part way through a batch: its graphs at offsets of their own (the next round has it)
            worker = self.states.worker(partition)
            await self.log.append(worker.on_timer(wall))
            worker.state.views.evict_unused(rounds)
            if worker.state.uncommitted and self.pacing.due(worker) and not self.states.reading(partition):
                # An idle partition's last events reach the store too. Safe between
                # two batches: a tick they made due and a crash lost is due again.
                worker.state.commit()
                self.pacing.committed(worker)


def _forgotten_again(batch: list[tuple[FoldEvent, int, bytes]], outcomes: list[Outcome]) -> dict[str, set[str]]:
    """graph -> the turns of `batch` not applied because they were forgotten before."""
    found: dict[str, set[str]] = {}
    for (event, _, _), outcome in zip(batch, outcomes):
        if outcome is Outcome.FORGOTTEN_TURN:
            found.setdefault(event.graph_id, set()).add(event.turn_id)  # type: ignore[union-attr]  # a turn's outcome
    return found


async def _pausing(steps: Generator[None, None, T]) -> T:
    """What `steps` returns, its steps taken on the event loop, which gets a
    turn each time they have held it for `APPLY_PAUSE_S`."""
    loop = asyncio.get_running_loop()
    since = loop.time()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(T, done.value)
        if loop.time() - since >= APPLY_PAUSE_S:
            await asyncio.sleep(0)
            since = loop.time()


def _topic(app: faust.App, name: str, partitions: int) -> Any:
    return app.topic(name, partitions=partitions, key_type=bytes, value_type=bytes)


def refresh_gauges(metrics: Metrics, app: faust.App, settings: Settings, states: PartitionStates,
                   recovery: Recovery) -> None:
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


def health(settings: Settings, recovery: Recovery) -> dict[str, Any]:
    """The worker's `/health`: ready when every assigned partition has caught
    up; warm when what it loads once has loaded too (its warm-up, and the
    encoder's session when semantic seeds are on: built a second after a
    first partition serves, `Recovery`), so that a benchmark measures its
    steady state, not its loads."""
    assigned, ready = recovery.assigned_partitions(), recovery.ready_partitions()
    semantic = encoder.status() if settings.activation.semantic else "off"
    return {
        "worker": settings.worker_name,
        "ready": recovery.assignment_seen and assigned == ready,
        "warm": (recovery.warming is None or recovery.warming.done) and semantic != "not built",
        "encoder": semantic,
        "partitions": {"assigned": assigned, "ready": ready},
        "log_mismatches": {str(p): problem for p, problem in sorted(recovery.problems.items())},
        "recoveries": {str(p): done for p, done in sorted(recovery.recoveries.items())},
    }


class Extraction:
    """Runs `encode_all` on batches of turns: in a process pool when
    `extract_processes` > 0, so extraction (the bulk of a turn's cost) runs
    on its own core while the event loop applies events and serves queries;
    else in a thread, so that a query does not wait for a whole batch of
    turns (200 Chinese turns take tens of ms): the event loop takes the
    interpreter back at its switch interval (5 ms)."""

    def __init__(self, settings: Settings, extractor: str) -> None:
        self.settings = settings
        self.extractor = extractor
        self._pool: ProcessPoolExecutor | None = None

    async def run(self, turns: list[Any]) -> list[Any]:
        """`encode_all` of the turns: a turn_ingested event's bytes, or the error's text, per turn."""
        params = self.settings.extraction
        if not turns:
            return []
        if self.settings.extract_processes == 0:
            return await asyncio.to_thread(encode_all, turns, params, self.extractor)
        if self._pool is None:
            # spawn, not fork: the worker process already runs threads.
            self._pool = ProcessPoolExecutor(self.settings.extract_processes, mp_context=get_context("spawn"))
        loop = asyncio.get_running_loop()
        size = -(-len(turns) // self.settings.extract_processes)
        chunks = [turns[i : i + size] for i in range(0, len(turns), size)]
        done = await asyncio.gather(*(loop.run_in_executor(self._pool, encode_all, c, params, self.extractor) for c in chunks))
        return [ingested for chunk in done for ingested in chunk]
