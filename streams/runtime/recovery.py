"""Bringing an assigned partition's local state up to the log before use.

A worker's state for partition p says which log of `emgas.graph-events`
it reflects (the log's identity, see `processors.events.LogStarted`) and
up to which offset (both written atomically with the state). When p is
assigned (at start-up or by a rebalance), before the agents touch it:

1. The state is compared with the log (`replay.logstate.check_log`):
   identity, first and end offsets. A mismatch is never silent: an error
   line naming the partition and what differs, `emgas_log_mismatches` in
   `/metrics`, and `/health` shows it. Then:
   - another log (reset): `EMGAS_ON_LOG_RESET` says what to do. `rebase`
     (default) keeps the graphs, names the new log in the state and
     appends a base snapshot of every graph to it, so the new log alone
     rebuilds them; `rebuild` drops the state and folds the new log;
     `stop` ends the worker with a one-line error;
   - the same log, but retention dropped records the state has not
     applied: the state is dropped and rebuilt from the latest checkpoint
     (or, if there is none, kept as it is, and the gap reported);
   - no state: it starts from the latest checkpoint in the log, if any.
2. A log that has no identity yet gets one (`log_started`).
3. The log after the state's offset is folded into the state, serving the
   snapshots it starts (the owner writes their parts).

Messages Faust then delivers at or below the state's offset are skipped by
the projector, so nothing is lost and nothing is applied twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Iterable

from aiokafka.errors import KafkaError

from emgas.processors.events import Checkpoint, GraphEvent, LogStarted, SnapshotStarted
from emgas.replay.errors import LogTruncated, ReplayError, SnapshotCorrupt, SnapshotErased
from emgas.replay.fold import Selection
from emgas.replay.keyring import KeyRing, KeysUnavailable
from emgas.replay.logstate import LogCheck, LogStatus, check_log, first_log_started, restore_checkpoint, usable_checkpoint
from emgas.replay.reader import LogReader
from emgas.replay.rebuild import rebuild_partition
from emgas.streams.kafka.reader import log_reader
from emgas.state.ledger import LogIdentity
from emgas.state.snapshots import graph_ids
from emgas.service.retrieval import build_encoder_ahead, prefetch_graphs
from emgas.service.steps import PartitionSteps
from emgas.streams.runtime.metrics import Metrics
from emgas.streams.runtime.partitions import PartitionStates
from emgas.streams.runtime.ports import GraphLog
from emgas.streams.settings import Settings
from emgas.streams.runtime.warming import Warming

log = logging.getLogger(__name__)
RETRY_S = 1.0
ENCODER_AFTER_S = 1.0  # the encoder's session built this long after a first partition serves
COMMIT_AFTER_S = 0.5  # a catch-up's state committed this long after its partition serves (again then while busy)
# Appends events to graph-events (partition events to their own partition);
# the offsets the log gave them.


class LogResetStop(Exception):
    """The log was reset and `EMGAS_ON_LOG_RESET=stop`: the worker must end."""


class Recovery:
    """Per graph-events partition: a catch-up task and a future that says
    whether the partition is ready (True) or was revoked first (False)."""

    # A state further behind the log's end than this many records starts
    # from a checkpoint that lies after it, if one does (folding the state's
    # size beats folding that much history).
    catch_up_limit = 5_000

    def __init__(
        self, settings: Settings, states: PartitionStates, log: GraphLog | None = None,
        metrics: Metrics | None = None, on_fatal: Callable[[Exception], Awaitable[None]] | None = None,
        warming: Warming | None = None, keys: KeyRing | None = None,
        reconcile: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self.keys = keys  # the worker's key ring: the keys it read stay read
        self.reconcile = reconcile  # what a caught-up partition's forgets erase (`Sealer.reconcile`), in the background
        self._reconciling: set[asyncio.Task[None]] = set()
        self._prefetching: set[asyncio.Task[None]] = set()  # key sets read ahead of a catch-up's first sealed record
        self.states = states
        self.log = log  # None: a recovery that only reads (it cannot name a log or re-base)
        self.metrics = metrics
        self.on_fatal = on_fatal
        self.warming = warming  # what queries need, loading beside the start: a partition is ready after it
        self._ready: dict[int, asyncio.Future[bool]] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._checkpoints: dict[int, int] = {}
        self.first_assignment = asyncio.Event()  # set once the group has given this worker its partitions
        self.rebalancing = False  # from a rebalance's start until the next assignment: no catch-up starts
        self.problems: dict[int, str] = {}  # partition -> the last mismatch found, and what was done
        # partition -> how its last catch-up went: seconds, records read, the checkpoint it started from, failed tries
        self.recoveries: dict[int, dict[str, Any]] = {}
        self._failed_tries: dict[int, int] = {}
        self._queued: dict[int, int] = {}  # partition -> concept vectors prefetched before its fold
        self._encoder_ahead: asyncio.TimerHandle | None = None

    @property
    def assignment_seen(self) -> bool:
        """Whether the group has given this worker its partitions once."""
        return self.first_assignment.is_set()

    def _partitions(self, tps: Iterable[Any]) -> list[int]:
        return sorted(tp.partition for tp in tps if tp.topic == self.settings.graph_events_topic)

    async def on_assigned(self, sender: Any, assigned: Iterable[Any], **_: Any) -> None:
        self.first_assignment.set()
        self.rebalancing = False
        for partition in self._partitions(assigned):
            self.ready(partition)

    async def on_revoked(self, sender: Any, revoked: Iterable[Any], **_: Any) -> None:
        for partition in self._partitions(revoked):
            self._revoke(partition)

    def on_rebalance_start(self) -> None:
        """A rebalance began: every partition is about to be revoked (the group's
        protocol is eager), and Faust rejoins the group only once its agents are
        idle, while an agent waits for its partition's catch-up. So the catch-ups
        under way stop now, releasing the agents (their events stay in the log
        for the partition's next owner), and none starts until the next assignment:
        the group waits for no catch-up."""
        self.rebalancing = True
        for partition, future in list(self._ready.items()):
            if not future.done():
                self._revoke(partition)

    def _revoke(self, partition: int) -> None:
        task = self._tasks.pop(partition, None)
        if task is not None:
            task.cancel()
        future = self._ready.pop(partition, None)
        if future is not None and not future.done():
            future.set_result(False)

    def ready(self, partition: int) -> asyncio.Future[bool]:
        """The partition's readiness, starting its catch-up if none is under way
        (during a rebalance: not ready, and none starts)."""
        future = self._ready.get(partition)
        if future is None and self.rebalancing:
            future = asyncio.get_running_loop().create_future()
            future.set_result(False)
            return future
        if future is None:
            future = self._ready[partition] = asyncio.get_running_loop().create_future()
            self._tasks[partition] = asyncio.create_task(self._catch_up(partition, future))
        return future

    def assigned_partitions(self) -> list[int]:
        """Graph-events partitions assigned here (caught up or not)."""
        return sorted(self._ready)

    def ready_partitions(self) -> list[int]:
        """Partitions assigned here and caught up."""
        return sorted(p for p, f in self._ready.items() if f.done() and f.result())

    async def wait(self, partition: int) -> bool:
        """True once the partition is caught up; False if it was revoked meanwhile."""
        return await asyncio.shield(self.ready(partition))

    async def _catch_up(self, partition: int, future: asyncio.Future[bool]) -> None:
        started = time.perf_counter()
        self._queued.pop(partition, None)  # an earlier catch-up's, ended without serving
        self._prefetch_keys(partition)
        try:
            read = await self._read_to_end(partition)
        except (LogResetStop, KeysUnavailable) as err:
            log.error("%s", err)
            if self.on_fatal is not None:
                await self.on_fatal(err)
            return
        elapsed = time.perf_counter() - started
        if read:
            log.info("partition %s caught up: %s events in %.2f s", partition, read, elapsed)
        if self.warming is not None:
            await self.warming.wait()
        self.recoveries[partition] = {
            "seconds": round(elapsed, 3), "records_read": read,
            "checkpoint": self._checkpoints.pop(partition, None),
            "failed_tries": self._failed_tries.pop(partition, 0),
        }
        self._tasks.pop(partition, None)
        if not future.done():
            future.set_result(True)
        if self.reconcile is not None:
            task = asyncio.ensure_future(self._erase_forgotten(partition))
            self._reconciling.add(task)
            task.add_done_callback(self._reconciling.discard)
        # The state the catch-up folded is committed a moment after the partition serves: its
        # first queries are answered first (a restored graph's commit: about 30 ms of a takeover).
        asyncio.get_running_loop().call_later(COMMIT_AFTER_S, self._commit_when_idle, partition)
        if self._encoder_ahead is None:
            # Once per process, a while after a first partition serves: its waiting queries are
            # answered first (the session's build holds the interpreter's lock for about 0.05 s
            # of its 0.2, which doubled a takeover's first answer when it started here at once).
            self._encoder_ahead = asyncio.get_running_loop().call_later(
                ENCODER_AFTER_S, build_encoder_ahead, self.settings.activation)
        # Its graphs' concept vectors, by the background encoder: the partition serves meanwhile
        # (a takeover waited 5-7 s for them in the soak when they were encoded before it served).
        queued = self._queued.pop(partition, 0) + prefetch_graphs(self.states.get(partition), self.settings.activation)
        self.recoveries[partition]["vectors_queued"] = queued

    def _commit_when_idle(self, partition: int) -> None:
        """Commit a caught-up partition's state, or try again later while a
        fold or a thread works on it (`PartitionStates.commit_if_idle`)."""
        if not self.states.commit_if_idle(partition):
            asyncio.get_running_loop().call_later(COMMIT_AFTER_S, self._commit_when_idle, partition)

    def _prefetch_keys(self, partition: int) -> None:
        """The partition's key sets read beside the log's checks, not after
        them: a takeover's first sealed record (the log's first records, a
        snapshot's parts) finds them read (about 45 ms of round trips off
        the takeover, `KeyRing.prefetch`)."""
        if self.keys is None:
            return
        task = asyncio.ensure_future(self.keys.prefetch(partition))
        self._prefetching.add(task)
        task.add_done_callback(self._prefetched)

    def _prefetched(self, task: asyncio.Task[None]) -> None:
        self._prefetching.discard(task)
        if not task.cancelled() and (err := task.exception()) is not None:  # a bug: the catch-up's own read meets it too
            log.warning("reading the key sets ahead failed unexpectedly: %r", err)

    async def _erase_forgotten(self, partition: int) -> None:
        assert self.reconcile is not None
        try:
            await self.reconcile(partition)
        except Exception as err:  # noqa: BLE001 - the next catch-up or forget tries again
            log.warning("partition %s: erasing the keys of forgotten turns failed (%r); tried again at its next "
                        "catch-up", partition, err)

    async def _read_to_end(self, partition: int) -> int:
        """Reconcile the state with the log, then fold the log after the
        state's offset into it; the number of records read. Retries while
        the log cannot be read, and after any other failure too: a catch-up
        task that died would leave its partition unserved, silently, until
        the next rebalance (each try starts again from the state's committed
        offset, so nothing is applied twice)."""
        while True:
            # A partition revoked and given back part way through a batch: the batch
            # ends first (`PartitionStates.folding`), then the log after it is read.
            await self.states.settled(partition)
            try:
                async with log_reader(self.settings, self.keys) as reader:
                    worker = await self._reconcile(reader, partition)
                    # The graphs a checkpoint restored: their concept vectors read from
                    # disk on the background encoder's thread while the log after it is
                    # folded, not by the first query (the rest once it is caught up).
                    if self.warming is None or self.warming.done:  # else no background encoder yet (`warm_up` starts it)
                        self._queued[partition] = self._queued.get(partition, 0) + prefetch_graphs(
                            self.states.get(partition), self.settings.activation)  # a try before this one's count too
                    return await self._fold_to_end(reader, partition, worker)
            except LogTruncated as err:
                # Serve what there is, loudly: `emgas replay --verify` shows the gap.
                self._report(partition, "truncated", "served as it is", str(err))
                return 0
            except (LogResetStop, KeysUnavailable):
                raise
            except Exception as err:  # noqa: BLE001 - see the docstring
                self._failed_tries[partition] = self._failed_tries.get(partition, 0) + 1
                if isinstance(err, (ReplayError, KafkaError)):  # the broker away, a leader moving
                    log.warning("catch-up of partition %s failed (%s); retrying in %s s", partition, err, RETRY_S)
                else:
                    log.error("catch-up of partition %s failed unexpectedly (%r); retrying in %s s", partition, err, RETRY_S)
                await asyncio.sleep(RETRY_S)

    # -- 1 and 2: the state against the log ----------------------------------------

    async def _reconcile(self, reader: LogReader, partition: int) -> PartitionSteps:
        topic = self.settings.graph_events_topic
        worker = self.states.worker(partition)
        state = worker.state
        empty = state.applied_offset < 0 and not state.views and state.ledger.identity() is None
        check = await check_log(reader, topic, partition, state.ledger.identity(), state.applied_offset, empty)
        if check.status is LogStatus.RESET:
            worker = await self._on_reset(reader, partition, worker, check)
        elif check.status is LogStatus.TRUNCATED:
            worker = await self._on_truncated(reader, partition, worker, check)
        elif check.status is LogStatus.UNVERIFIED:
            log.warning("partition %s: %s; trusting the state's offset %s", partition, check.detail, state.applied_offset)
        elif check.status is LogStatus.NEW:
            worker = await self._start_fresh(reader, partition, worker)
        elif check.status is LogStatus.SAME:
            worker = await self._skip_ahead(reader, partition, worker)
        if check.log_id is None and worker.state.ledger.identity() is None:
            await self._name_log(partition)
        return worker

    async def _on_reset(self, reader: LogReader, partition: int, worker: PartitionSteps, check: LogCheck) -> PartitionSteps:
        mode = self.settings.on_log_reset
        if mode == "stop":
            self._report(partition, "reset", "stopped", check.detail)
            raise LogResetStop(f"partition {partition}: {check.detail} (EMGAS_ON_LOG_RESET=stop: stopping; "
                               "set it to rebase or rebuild to go on)")
        if mode == "rebuild":
            self._report(partition, "reset", "state dropped, rebuilt from the new log", check.detail)
            return await self._start_fresh(reader, partition, self.states.discard(partition))
        graphs = graph_ids(worker.state.txn)
        self._report(partition, "reset", f"re-based: {len(graphs)} graph(s) kept, snapshots appended", check.detail)
        await self._rebase(reader, partition, worker, graphs)
        return worker

    async def _rebase(self, reader: LogReader, partition: int, worker: PartitionSteps, graphs: list[str]) -> None:
        """Name the new log in the state and append a base snapshot request
        for every graph to it: once the fold has applied them, the catch-up
        asks for them again at the end of the log and the apply agent serves
        them, so the new log holds the graphs. The requests are appended
        before the state is changed, so a crash in between re-bases again."""
        topic = self.settings.graph_events_topic
        start, end = (await reader.bounds(topic, [partition]))[partition]
        named = await first_log_started(reader, topic, partition, start, end)
        if named is None:
            identity = await self._name_log(partition)
        else:
            identity = LogIdentity(named[1].log_id, named[0])
        now = datetime.now(timezone.utc)
        await self._append([SnapshotStarted(graph_id=g, reason="rebase", base=True, timestamp=now) for g in graphs])
        worker.state.restart_log(identity, offset=start - 1)
        worker.state.commit()

    async def _on_truncated(self, reader: LogReader, partition: int, worker: PartitionSteps, check: LogCheck) -> PartitionSteps:
        topic = self.settings.graph_events_topic
        _, end = (await reader.bounds(topic, [partition]))[partition]
        found = await usable_checkpoint(reader, topic, partition, end)
        if found is None:
            raise LogTruncated(f"{check.detail}, and no checkpoint after them is left in the log")
        if await self._from_checkpoint(reader, partition, self.states.discard(partition), end, found):
            self._report(partition, "truncated", "state rebuilt from the latest checkpoint", check.detail)
            self._restored(self.states.worker(partition))
        return self.states.worker(partition)

    async def _skip_ahead(self, reader: LogReader, partition: int, worker: PartitionSteps) -> PartitionSteps:
        """A state far behind the log starts again from a checkpoint after it."""
        topic = self.settings.graph_events_topic
        _, end = (await reader.bounds(topic, [partition]))[partition]
        behind = worker.state.applied_offset
        if end - behind <= self.catch_up_limit:
            return worker
        found = await usable_checkpoint(reader, topic, partition, end)
        if found is None:
            return worker
        oldest = min((loc.as_of for loc in found[1].snapshots), default=found[1].as_of)
        if oldest - behind <= self.catch_up_limit:
            return worker
        log.info("partition %s: the state is %s records behind the log; starting from the checkpoint at offset %s",
                 partition, end - behind - 1, found[0])
        if await self._from_checkpoint(reader, partition, self.states.discard(partition), end, found):
            self._restored(self.states.worker(partition))
        return self.states.worker(partition)

    async def _start_fresh(self, reader: LogReader, partition: int, worker: PartitionSteps) -> PartitionSteps:
        """An empty state starts from the latest checkpoint, if the log has one."""
        topic = self.settings.graph_events_topic
        _, end = (await reader.bounds(topic, [partition]))[partition]
        if await self._from_checkpoint(reader, partition, worker, end):
            self._restored(worker)
        return self.states.worker(partition)

    async def _from_checkpoint(
        self, reader: LogReader, partition: int, worker: PartitionSteps, end: int,
        found: tuple[int, Checkpoint] | None = None,
    ) -> bool:
        """Restore the empty state from `found`, else from the latest usable
        checkpoint; False if there is none or it is corrupt (then the state is
        empty again, and the whole log is folded)."""
        topic = self.settings.graph_events_topic
        found = found or await usable_checkpoint(reader, topic, partition, end)
        if found is None:
            return False
        try:
            await restore_checkpoint(reader, topic, partition, worker.state, found)
        except (SnapshotCorrupt, SnapshotErased) as err:
            kind = "erased snapshot" if isinstance(err, SnapshotErased) else "corrupt snapshot"
            self._report(partition, kind, "folding the whole log instead", str(err))
            self.states.discard(partition)
            return False
        offset = found[0]
        self._checkpoints[partition] = offset
        return True

    def _restored(self, worker: PartitionSteps) -> None:
        restored = len(worker.state.ledger.floors)
        log.info("partition %s: %s graph(s) restored from the checkpoint; folding the log after offset %s",
                 worker.partition, restored, worker.state.applied_offset)
        if self.metrics is not None:
            self.metrics.snapshots_restored.inc(restored)

    async def _name_log(self, partition: int) -> LogIdentity:
        """Append a `log_started` to a partition that has no identity yet."""
        log_id = uuid.uuid4().hex
        [offset] = await self._append([LogStarted(log_id=log_id, partition=partition, timestamp=datetime.now(timezone.utc))])
        log.info("partition %s: log named %s (offset %s)", partition, log_id, offset)
        return LogIdentity(log_id, offset)

    async def _append(self, events: list[GraphEvent]) -> list[int]:
        if not events:
            return []
        if self.log is None:
            raise ReplayError("this recovery cannot write to the log")
        return await self.log.append_at(events)

    def _report(self, partition: int, kind: str, action: str, detail: str) -> None:
        log.error("partition %s: log mismatch (%s): %s; %s", partition, kind, detail, action)
        self.problems[partition] = f"{kind}: {detail}; {action}"
        if self.metrics is not None:
            self.metrics.log_mismatches.labels(str(partition), kind, action.split(":")[0].split(",")[0]).inc()

    # -- 3: the fold -----------------------------------------------------------------

    async def _fold_to_end(self, reader: LogReader, partition: int, worker: PartitionSteps) -> int:
        """Fold to the end of the log. The snapshots it starts are not served
        here (the state is past their offsets by the end, and their writer
        may have served them already); those still unfinished at the end of
        the log (their writer stopped, or they are this re-base's) are
        requested again, for the agents to serve."""
        topic = self.settings.graph_events_topic
        _, end = (await reader.bounds(topic, [partition]))[partition]
        # Committed once the partition serves (`_commit_when_idle`), not before its first answers.
        counts = await rebuild_partition(reader, topic, partition, worker.state, end, Selection(), commit=False)
        unfinished = worker.state.ledger.pending_snapshots()
        if unfinished:
            now = datetime.now(timezone.utc)
            await self._append([
                SnapshotStarted(graph_id=g, reason="rebase" if base else "request", base=base, timestamp=now)
                for g, base in unfinished
            ])
        return counts.read
