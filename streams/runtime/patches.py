"""Every change this worker makes to Faust's and aiokafka's internals, in one place.

Each patch below reaches into code that is not the libraries' public API,
so it was written for, and is tested with, exactly the pinned versions
(`PINNED`, equal to pyproject.toml's pins: tests/unit/streams/test_patches.py).
`check_versions()` refuses to build a worker on any other version, with one
line naming the patch that would be at risk. The patches, and why each exists:

1. `App` / `Transport`: the consumer's fetch wait (`EMGAS_FETCH_MAX_WAIT_MS`).
   faust-streaming hard-codes `fetch_max_wait_ms=1500` where it builds the
   worker's consumer. A real broker answers a fetch as soon as data arrives,
   but the embedded mock cluster holds every idle fetch for the full wait,
   which would add up to 1.5 s to each query round trip. `_ConsumerThread`
   sets aiokafka's private `_fetch_max_wait_ms` before the consumer starts.
   Tested by every live test's query latency (tests/integration).
2. `_Producer`: an idempotent producer. Faust's producer is idempotent only
   inside its transactions; this one always is (acks=all, Faust's default):
   a retried send after a lost acknowledgement (a broker killed, a leader
   moved) does not write the event twice. The fold would skip the copy
   anyway; the log stays smaller. Tested by tests/integration/test_kafka_durability.py.
3. `guard_sync_groups`: a SyncGroup refused with INVALID_REQUEST means "join
   again", not "stop". aiokafka 0.14 stores that error for the application
   (`GroupCoordinator._push_error_to_user`) and, meanwhile, makes the
   fetcher's wait for an assignment raise it, which crashes a Faust worker
   that holds partitions; the embedded broker produces it by a race. The
   guard replaces `CoordinatorGroupRebalance._send_sync_group_request` and
   answers the error as aiokafka answers REBALANCE_IN_PROGRESS: rejoin at
   once. Tested by tests/unit/streams/test_membership.py and, live, by
   tests/integration/test_scaling.py (with a test-only fault, `SyncGroupGuard.fail_first`).
4. `HandingOverWorker`: SIGTERM hands the partitions over before stopping.
   Overrides Faust's `Worker._on_sigterm` (see `streams.runtime.worker`).
   Tested by tests/integration/test_rebalance.py.
5. `leave_group`: the Faust consumer leaves its group from its own thread
   (`consumer._thread`, aiokafka's `unsubscribe`), so a worker's partitions
   move before it stops; first it stops Faust's fetcher and commits, as Faust
   does on a revocation (`stop_flow`, `flow_control`, `wait_empty`: public
   methods, called where Faust does not). Tested with 4.
6. `TablelessManager` (the app's `TableManager` setting): Faust's table
   manager sleeps 1 s when it starts, before it lets the consumer subscribe,
   so that tables declared late can still register. This worker declares no
   tables, so the sleep only delayed every start, and every takeover by a
   starting worker, by a second. Kept when a table is declared. Tested by
   tests/unit/streams/test_patches.py.
7. `_Consumer._drain_messages`: records in batches (`streams.runtime.intake`).
   Faust's fetcher loop delivers each record on its own (a message object,
   four tasks in `wait_first`, a queue, an event, an acknowledgement); this
   one puts each fetch's records of the intake's topics into the intake as
   they come, and `acknowledge` marks a processed batch's offsets acked in
   Faust's own bookkeeping (`_acked`, `_acked_index`, `_n_acked`, what
   `Consumer.ack` updates), so Faust's commits go on as before. The loop is
   Faust's `_drain_messages` and `getmany` otherwise: the same flow control,
   read offsets, gaps, partition filter and generation check. Tested by
   tests/unit/streams/test_intake.py and by every live test (tests/integration).
8. `venusian` in `faust.app.base`: no scan bookkeeping. Each agent, task,
   timer and page the app declares is registered for `app.discover` by
   venusian's `attach`, which finds the caller's source line
   (`inspect.getframeinfo`: the module file read, every module in
   `sys.modules` looked at, per declaration): `build_worker` took 330 ms
   with it and 243 without (medians of five starts), a part of every
   takeover by a starting worker. This worker never calls `discover` (its
   agents are declared by `streams.runtime.app`), so once an `App` is
   made `attach` does nothing in this process (for any Faust app in it);
   `Scanner` stays venusian's. Tested by tests/unit/streams/test_patches.py.
9. `mode.utils.imports.entry_points`: the installed distributions' entry
   points read once per process. Faust looks up its cache backend, web
   driver and others by name in plugin tables that each read every
   distribution's entry points when first used (`FactoryMapping._finalize`,
   `load_extension_class_names`): three reads of the 140 distributions of
   a worker's environment, 5-15 ms each, in every start and so in every
   takeover by a starting worker. The same entry points, read once (an
   entry point installed while a worker runs is not one it could load
   anyway). Tested by tests/unit/streams/test_patches.py.
10. `TablelessManager.on_rebalance`: an assignment told first. Faust sends
   its `on_partitions_assigned` signal last, after its table manager's
   recovery has sought its own consumer to the committed offsets (a round
   trip from the consumer's thread: 25-30 ms of a takeover). The worker's
   catch-ups read the log with readers of their own, so `compose` starts
   them from the table manager's `on_rebalance`, before that seek; the
   signal's later call finds them started. Tested by
   tests/unit/streams/test_patches.py.

Not patches, but reads of private state, also tied to these versions:
`streams.runtime.membership.GroupWatch` looks at the coordinator's held
error and the subscription's assignment; `replay.reader` asks aiokafka's
client for metadata. And `streams.logs.TransientLeaderErrors` lowers one
aiokafka log message (a filter on a public logger, nothing patched).
"""

from __future__ import annotations

import asyncio
import logging
from functools import cache
from importlib import metadata
from typing import Any, Awaitable, Callable

import faust
from aiokafka.consumer.group_coordinator import CoordinatorGroupRebalance
from aiokafka.errors import InvalidRequestError, RebalanceInProgressError
from faust.tables import TableManager
from faust.app import base as faust_app_base
from faust.transport.consumer import CONSUMER_FETCHING
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from faust.types.tuples import ack_lock
from faust.utils import venusian as faust_venusian
from mode.utils import imports as mode_imports
from mode.utils.futures import notify

from emgas.streams.errors import StreamsError
from emgas.streams.runtime.intake import Intake

log = logging.getLogger(__name__)

# The distributions whose internals are patched, and the versions the patches were written for.
PINNED = {"faust-streaming": "0.15.3", "aiokafka": "0.14.0"}


class UnpatchableVersion(StreamsError):
    """An installed Faust or aiokafka that the patches were not written for."""


def check_versions(installed: Callable[[str], str] = metadata.version) -> None:
    """Refuse, in one line, a Faust or aiokafka other than the pinned one."""
    for name, pinned in PINNED.items():
        found = installed(name)
        if found != pinned:
            raise UnpatchableVersion(
                f"the worker patches internals of {name} {pinned} (streams/runtime/patches.py), "
                f"but {name} {found} is installed: install {name}=={pinned}"
            )


# 1 and 2: the consumer's fetch wait, an idempotent producer.

class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka reads this attribute when the consumer starts its fetcher.
        consumer._fetch_max_wait_ms = self.app.fetch_max_wait_ms  # type: ignore[attr-defined]
        return consumer


class _Consumer(faust_aiokafka.Consumer):
    intake: Intake | None = None  # 7: set by `App.take_in_batches`

    def _new_consumer_thread(self) -> _ConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    # 7: records in batches.

    async def _drain_messages(self, fetcher: Any) -> None:
        intake = self.intake
        if intake is None:
            return await super()._drain_messages(fetcher)
        fetcher_should_stop = fetcher._stopped.is_set
        try:
            while not (self._stopped.is_set() or fetcher_should_stop()):
                self.diag.set_flag(CONSUMER_FETCHING)
                records, active = await self._wait_next_records(1.0)
                await self.sleep(0)
                if records and not self.should_stop:
                    await self._deliver(intake, records, active)
                self.diag.unset_flag(CONSUMER_FETCHING)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                log.info("Broker stopped consumer, shutting down...")
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                log.info("Consumer shutting down for user cancel.")
                return
            raise
        finally:
            self.diag.unset_flag(CONSUMER_FETCHING)

    async def _deliver(self, intake: Intake, records: Any, active: Any) -> None:
        """A fetch's records: the intake's topics' as one batch per topic, others one by one as Faust does."""
        if not self.flow_active:  # a rebalance began meanwhile: as Faust's `getmany`
            try:
                await self.perform_seek()
            except Exception as exc:  # noqa: BLE001 - as Faust's getmany: logged, the next fetch tries again
                log.warning("exception performing seek when flow not active %s", exc)
            return
        generation = self.app.consumer_generation_id
        by_topic: dict[str, list[Any]] = {}
        for tp, tp_records in records.items():
            if active is None or tp in active or tp in self._buffered_partitions:
                fresh = await self._fresh(TP(tp.topic, tp.partition), tp_records)
                by_topic.setdefault(tp.topic, []).extend(fresh)
        for topic, fresh in by_topic.items():
            if not self.flow_active or generation != self.app.consumer_generation_id:
                return
            if not fresh:
                continue
            if intake.takes(topic):
                self._unacked_messages.add(intake.put(topic, fresh))  # type: ignore[arg-type]  # a batch in hand
                if not intake.has_room():
                    await self.wait_first(intake.room(), self.suspend_flow.wait())
            else:
                for record in fresh:
                    message = self._to_message(TP(record.topic, record.partition), record)
                    await self.wait_first(self.callback(message), self.suspend_flow.wait())
        if self._commit_every is not None and self._n_acked >= self._commit_every:
            self._n_acked = 0
            await self.commit()

    async def _fresh(self, tp: TP, records: list[Any]) -> list[Any]:
        """The records not read before (Faust's read offsets), noting gaps between offsets as Faust does."""
        read_offset = self._read_offset[tp]
        acks_enabled = self.app.topics.acks_enabled_for(tp.topic)
        fresh = []
        for record in records:
            offset = record.offset
            if read_offset is not None and offset < read_offset:
                continue
            if read_offset and offset - read_offset > 1 and acks_enabled:
                await self._add_gap(tp, read_offset + 1, offset)
            fresh.append(record)
            read_offset = offset
        self._read_offset[tp] = read_offset
        return fresh

    def acknowledge(self, records: list[Any]) -> None:
        """Mark the records' offsets acked, as `Consumer.ack` does for each message."""
        offsets: dict[TP, list[int]] = {}
        for record in records:
            offsets.setdefault(TP(record.topic, record.partition), []).append(record.offset)
        with ack_lock:
            for tp, tp_offsets in offsets.items():
                committed = self._committed_offset[tp]
                index = self._acked_index[tp]
                new = [o for o in tp_offsets if (committed is None or o >= committed) and o not in index]
                index.update(new)
                self._acked[tp].extend(new)
                self._n_acked += len(new)
            notify(self._waiting_for_ack)


class _Producer(faust_aiokafka.Producer):
    def _settings_extra(self) -> Any:
        return {**super()._settings_extra(), "acks": "all", "enable_idempotence": True}


class Transport(faust_aiokafka.Transport):
    Consumer = _Consumer
    Producer = _Producer


class TablelessManager(TableManager):
    """Faust's table manager without its start-up sleep when there is no table
    (6), which tells `on_assigned`, when set, of an assignment before Faust's
    own recovery seeks the consumer to its committed offsets (10)."""

    on_assigned: Callable[[set[TP]], Awaitable[None]] | None = None

    async def on_rebalance(
        self, assigned: set[TP], revoked: set[TP], newly_assigned: set[TP], generation_id: int = 0,
    ) -> None:
        if self.on_assigned is not None:
            await self.on_assigned(assigned)
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)

    async def on_start(self) -> None:
        if len(self):
            return await super().on_start()
        if not self.should_stop:
            await self._update_channels()
            await self.recovery.start()


class App(faust.App):
    """A Faust app whose consumer uses `fetch_max_wait_ms`, whose producer is
    idempotent, whose table manager does not sleep at start, whose
    declarations skip venusian (8) and whose plugin tables read the entry
    points once (9)."""

    def __init__(self, *args: Any, fetch_max_wait_ms: int, **kwargs: Any) -> None:
        self.fetch_max_wait_ms = fetch_max_wait_ms
        faust_app_base.venusian = _NoScan  # type: ignore[assignment]  # 8, before anything is declared
        mode_imports.entry_points = _entry_points  # type: ignore[assignment]  # 9, before a plugin table is read
        super().__init__(*args, TableManager=TablelessManager, **kwargs)

    def _new_transport(self) -> Transport:
        return Transport(self.conf.broker_consumer, self)

    def take_in_batches(self, intake: Intake) -> None:
        """The consumer puts the intake's topics' records into it, a batch per fetch (7)."""
        consumer = self.consumer
        assert isinstance(consumer, _Consumer)
        consumer.intake = intake
        intake.acknowledge = consumer.acknowledge
        self.flow_control.manage_queue(intake)  # type: ignore[arg-type]  # cleared as Faust clears its buffers


# 8: no venusian bookkeeping.

class _NoScan:
    """What `faust.app.base` calls `venusian`: `attach` records nothing (no
    `discover` here), `Scanner` is venusian's."""

    Scanner = faust_venusian.Scanner

    @staticmethod
    def attach(*args: Any, **kwargs: Any) -> None:
        return None


# 9: the entry points read once.

@cache
def _entry_points() -> Any:
    """Every installed distribution's entry points, read at the first call."""
    return metadata.entry_points()


# 3: SyncGroup refused with INVALID_REQUEST.

class SyncGroupGuard:
    """SyncGroup refused with INVALID_REQUEST means "join again", not "stop".

    The guard answers it as aiokafka answers REBALANCE_IN_PROGRESS: rejoin at
    once. `fail_first` is a test-only fault (set by tests/support/hooked_worker.py):
    that many SyncGroups are refused here, before they are sent."""

    def __init__(self) -> None:
        self.count: Callable[[str], None] = lambda reason: None
        self.fail_first = 0

    async def sync(self, rebalance: Any, request: Any, send_sync: Callable[[Any, Any], Any]) -> Any:
        coordinator = rebalance._coordinator
        send = coordinator._send_req

        async def translated(sync_request: Any) -> Any:
            if sync_request is not request:  # another request sent meanwhile (a commit): untouched
                return await send(sync_request)
            if self.fail_first > 0:
                self.fail_first -= 1
                log.warning("test hook: SyncGroup refused with INVALID_REQUEST (%d more to refuse)", self.fail_first)
                response: Any = _Answer(InvalidRequestError.errno)
            else:
                response = await send(sync_request)
            if response.error_code != InvalidRequestError.errno:
                return response
            log.warning("consumer group %s: SyncGroup refused with INVALID_REQUEST; rejoining", rebalance.group_id)
            self.count("sync_refused")
            return _Answer(RebalanceInProgressError.errno)

        coordinator._send_req = translated  # for this one request
        try:
            return await send_sync(rebalance, request)
        finally:
            del coordinator._send_req


class _Answer:
    """A SyncGroup response carrying only an error code."""

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code
        self.member_assignment = b""


SYNC_GROUP_GUARD = SyncGroupGuard()


def guard_sync_groups(count: Callable[[str], None]) -> None:
    """Install `SYNC_GROUP_GUARD` in aiokafka (once per process); `count(reason)`
    is told of each refusal."""
    SYNC_GROUP_GUARD.count = count
    original = CoordinatorGroupRebalance._send_sync_group_request
    if getattr(original, "emgas_guard", False):
        return

    async def guarded(self: Any, request: Any) -> Any:
        return await SYNC_GROUP_GUARD.sync(self, request, original)

    guarded.emgas_guard = True  # type: ignore[attr-defined]
    CoordinatorGroupRebalance._send_sync_group_request = guarded


# 4 and 5: handing partitions over on SIGTERM.

class HandingOverWorker(faust.Worker):
    """SIGTERM: `hand_over()` first (leave the group, answer until the new
    owners have caught up), then stop. A second SIGTERM, or SIGINT, stops at once."""

    _handing_over = False

    def __init__(self, *args: Any, hand_over: Callable[[], Awaitable[None]], **kwargs: Any) -> None:
        self._hand_over = hand_over
        super().__init__(*args, **kwargs)
        # No start-up spinner: at --loglevel WARNING and above Faust spins it on
        # every log record, for which it sets the root logger to DEBUG (a record
        # made for each of aiokafka's debug lines, 2-3 % of a busy worker's CPU).
        self.spinner = None

    def _on_sigterm(self) -> None:
        if self._handing_over:
            return super()._on_sigterm()
        self._handing_over = True
        self.loop.create_task(self._hand_over_then_stop())

    async def _hand_over_then_stop(self) -> None:
        try:
            await self._hand_over()
        except Exception:  # noqa: BLE001 - stopping must not depend on it
            log.exception("hand-over failed; stopping")
        super()._on_sigterm()


async def leave_group(app: faust.App, settle_s: float = 10.0) -> None:
    """The Faust consumer leaves its group (on its own thread): its partitions move.

    First, as Faust does when a rebalance revokes partitions: no more records
    are taken, the agents' buffers are dropped, what they hold is finished
    and the offsets are committed (for `settle_s` at most). Otherwise Faust's
    fetcher, still draining, asks aiokafka for the high-water mark of a
    partition no longer assigned and crashes the worker (`AssertionError:
    Partition is not assigned`): the worker stopped before the new owners had
    announced themselves (its queries went unanswered meanwhile), with its
    last offsets uncommitted (their bad records dead-lettered again)."""
    consumer = app.consumer
    consumer.stop_flow()
    app.flow_control.suspend()
    app.flow_control.clear()
    try:
        await asyncio.wait_for(consumer.wait_empty(), settle_s)
    except asyncio.TimeoutError:
        log.warning("leaving the group with records still in hand after %g s: their offsets are not committed", settle_s)
    thread = consumer._thread  # type: ignore[attr-defined]
    thread.thread_loop.call_soon_threadsafe(thread._consumer.unsubscribe)
