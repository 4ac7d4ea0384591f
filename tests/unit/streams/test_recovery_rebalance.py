"""A rebalance's start releases the agents waiting on catch-ups (`Recovery.on_rebalance_start`).

Faust rejoins the group only once its agents are idle, and an agent waits
for its partition's catch-up: without this, the whole group waits for the
longest catch-up of any member (up to the rebalance timeout, 60 s)."""

import asyncio
import threading
from types import SimpleNamespace

import pytest
from aiokafka.errors import KafkaTimeoutError, NotLeaderForPartitionError

from emgas.replay.errors import LogUnavailable
from emgas.streams.runtime import recovery as recovery_module
from emgas.streams.runtime.compose import RebalanceStart
from emgas.streams.runtime.recovery import Recovery
from emgas.streams.settings import Settings

SETTINGS = Settings()
TOPIC = SETTINGS.graph_events_topic


async def _settled(partition: int) -> None:
    """No partition is part way through a batch here (`PartitionStates.settled`)."""


STATES = SimpleNamespace(get=lambda partition: None, settled=_settled, commit_if_idle=lambda partition: True)


class SlowRecovery(Recovery):
    """A catch-up that takes until `release` is set (partition 1: none at all)."""

    def __init__(self) -> None:
        super().__init__(SETTINGS, STATES)
        self.release = asyncio.Event()
        self.started: list[int] = []

    async def _read_to_end(self, partition: int) -> int:
        self.started.append(partition)
        if partition != 1:
            await self.release.wait()
        return 0


def tps(*partitions: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(topic=TOPIC, partition=p) for p in partitions]


@pytest.fixture(autouse=True)
def no_vectors(monkeypatch):
    monkeypatch.setattr(recovery_module, "prefetch_graphs", lambda state, params: 0)
    monkeypatch.setattr(recovery_module, "build_encoder_ahead", lambda params: None)


async def test_a_rebalance_start_releases_agents_waiting_on_catch_ups_and_starts_none():
    recovery = SlowRecovery()
    await recovery.on_assigned(None, tps(0, 1))
    assert await recovery.wait(1) is True  # caught up at once
    agent = asyncio.create_task(recovery.wait(0))  # an agent waiting for partition 0's catch-up
    await asyncio.sleep(0.01)
    assert not agent.done()

    recovery.on_rebalance_start()

    assert await asyncio.wait_for(agent, 1) is False  # released: Faust can rejoin
    assert recovery.ready_partitions() == [1]  # a caught-up partition serves until it is revoked
    assert await recovery.wait(2) is False and recovery.started == [0, 1]  # no catch-up starts meanwhile
    await recovery.on_revoked(None, tps(0, 1))
    await recovery.on_assigned(None, tps(0, 2))
    await asyncio.sleep(0.01)
    assert sorted(recovery.started) == [0, 0, 1, 2]  # the assignment starts them again
    recovery.release.set()
    assert await recovery.wait(0) is True and await recovery.wait(2) is True


async def test_the_sensor_passes_a_rebalance_start_from_the_consumer_thread_to_the_worker_loop():
    recovery = SlowRecovery()
    sensor = RebalanceStart(recovery)
    sensor.on_rebalance_start(None)  # before the first assignment: nothing to release, no loop known
    assert recovery.rebalancing is False
    await sensor.on_assigned(None, tps(0))
    thread = threading.Thread(target=sensor.on_rebalance_start, args=(None,))
    thread.start()
    thread.join()
    for _ in range(100):
        if recovery.rebalancing:
            break
        await asyncio.sleep(0.01)
    assert recovery.rebalancing is True


class FailingRecovery(Recovery):
    """A catch-up whose fold fails with `failures`, one per try, then reads 5 records."""

    def __init__(self, failures: list[Exception]) -> None:
        super().__init__(SETTINGS, STATES)
        self.failures = failures

    async def _reconcile(self, reader, partition):
        return None

    async def _fold_to_end(self, reader, partition, worker):
        if self.failures:
            raise self.failures.pop(0)
        return 5


class Reader:
    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return None


@pytest.mark.parametrize("failures", [
    [],
    [LogUnavailable("the leader is gone")],
    [NotLeaderForPartitionError(), KafkaTimeoutError()],  # aiokafka's own, not wrapped by the reader
    [RuntimeError("a bug"), LogUnavailable("away")],      # anything else too: a dead task serves nothing
])
async def test_a_catch_up_that_fails_is_tried_again_until_the_partition_is_ready(monkeypatch, caplog, failures):
    monkeypatch.setattr(recovery_module, "log_reader", lambda settings, keys=None: Reader())
    monkeypatch.setattr(recovery_module, "RETRY_S", 0.0)
    tries = len(failures)
    recovery = FailingRecovery(list(failures))
    await recovery.on_assigned(None, tps(3))
    assert await asyncio.wait_for(recovery.wait(3), 5) is True
    assert recovery.recoveries[3]["records_read"] == 5 and recovery.recoveries[3]["failed_tries"] == tries
    said = [r.getMessage() for r in caplog.records if r.name == recovery_module.log.name]
    assert len([s for s in said if "catch-up of partition 3 failed" in s]) == tries


class Warmed:
    def __init__(self, done: bool) -> None:
        self.done = done

    async def wait(self) -> None:
        self.done = True


class OrderedRecovery(Recovery):
    """A catch-up that restores, then folds: the order of those and of the prefetches, in `steps`."""

    def __init__(self, warming: Warmed, steps: list[str]) -> None:
        super().__init__(SETTINGS, STATES, warming=warming)
        self.steps = steps

    async def _reconcile(self, reader, partition):
        self.steps.append("restored")

    async def _fold_to_end(self, reader, partition, worker):
        self.steps.append("folded")
        return 6


@pytest.mark.parametrize("warmed, expected", [
    (True, ["restored", "prefetched", "folded", "prefetched"]),  # read from disk while the rest is folded
    (False, ["restored", "folded", "prefetched"]),  # the warm-up, which starts the background encoder, not done yet
])
async def test_a_restored_graphs_vectors_are_prefetched_before_the_log_after_it_is_folded(monkeypatch, warmed, expected):
    steps: list[str] = []
    monkeypatch.setattr(recovery_module, "log_reader", lambda settings, keys=None: Reader())
    monkeypatch.setattr(recovery_module, "prefetch_graphs", lambda state, params: steps.append("prefetched") or 2)
    recovery = OrderedRecovery(Warmed(warmed), steps)
    await recovery.on_assigned(None, tps(3))
    assert await asyncio.wait_for(recovery.wait(3), 5) is True
    assert steps == expected and recovery.recoveries[3]["vectors_queued"] == 2 * expected.count("prefetched")


async def test_the_encoder_is_built_once_a_while_after_the_first_partition_serves(monkeypatch):
    # Not at start (a takeover's first answers need only the vectors on disk)
    # and not at once (its build would slow the queries waiting for the partition).
    steps: list[str] = []
    built = asyncio.Event()
    monkeypatch.setattr(recovery_module, "log_reader", lambda settings, keys=None: Reader())
    monkeypatch.setattr(recovery_module, "ENCODER_AFTER_S", 0.05)
    monkeypatch.setattr(recovery_module, "build_encoder_ahead", lambda params: steps.append("encoder") or built.set())
    recovery = OrderedRecovery(Warmed(True), steps)
    await recovery.on_assigned(None, tps(3))
    assert await asyncio.wait_for(recovery.wait(3), 5) is True
    assert "encoder" not in steps  # the partition serves first
    await asyncio.wait_for(built.wait(), 5)
    await recovery.on_assigned(None, tps(4))
    assert await asyncio.wait_for(recovery.wait(4), 5) is True
    await asyncio.sleep(0.1)
    assert steps.count("encoder") == 1  # once per process, whatever the catch-ups after


def test_a_workers_warm_up_loads_what_queries_need_not_the_folds_compiled_loops(monkeypatch):
    from emgas.processors import extract
    from emgas.state import kernels
    from emgas.streams.runtime import warming

    loaded = []
    monkeypatch.setattr(kernels, "_compile", lambda: loaded.append("kernels"))
    monkeypatch.setattr(extract, "warm", lambda: loaded.append("lemmatiser"))
    monkeypatch.setattr(warming, "warm_up", lambda params, vectors: loaded.append(("expansion", vectors)))
    settings = Settings()
    warming.warm_for_queries(settings)
    assert loaded == ["lemmatiser", ("expansion", settings.word_vectors_cache)]


class RetriedRecovery(OrderedRecovery):
    """`OrderedRecovery` whose first fold fails (the broker away), so its catch-up is tried twice."""

    async def _fold_to_end(self, reader, partition, worker):
        if "failed" not in self.steps:
            self.steps.append("failed")
            raise LogUnavailable("the leader is gone")
        return await super()._fold_to_end(reader, partition, worker)


async def test_vectors_prefetched_by_a_try_that_failed_are_counted_with_the_catch_ups(monkeypatch):
    steps: list[str] = []
    handed = iter([2, 0, 1])  # the first try hands 2 over; the second finds them handed over; the caught-up state 1 more
    monkeypatch.setattr(recovery_module, "log_reader", lambda settings, keys=None: Reader())
    monkeypatch.setattr(recovery_module, "RETRY_S", 0.0)
    monkeypatch.setattr(recovery_module, "prefetch_graphs", lambda state, params: steps.append("prefetched") or next(handed))
    recovery = RetriedRecovery(Warmed(True), steps)
    await recovery.on_assigned(None, tps(3))
    assert await asyncio.wait_for(recovery.wait(3), 5) is True
    assert steps == ["restored", "prefetched", "failed", "restored", "prefetched", "folded", "prefetched"]
    assert recovery.recoveries[3]["vectors_queued"] == 3


class _Keys:
    """A key ring that records what was read ahead, and when."""

    def __init__(self, order: list[str]) -> None:
        self.order = order

    async def prefetch(self, partition: int) -> None:
        self.order.append(f"keys {partition}")


class _CheckingRecovery(Recovery):
    def __init__(self, order: list[str]) -> None:
        super().__init__(SETTINGS, STATES, keys=_Keys(order))  # type: ignore[arg-type]
        self.order = order

    async def _read_to_end(self, partition: int) -> int:
        await asyncio.sleep(0)  # the log's first round trip: the read ahead runs meanwhile
        self.order.append(f"log {partition}")
        return 0


async def test_a_catch_up_reads_its_partitions_keys_beside_the_logs_checks():
    order: list[str] = []
    recovery = _CheckingRecovery(order)
    await recovery.on_assigned(None, tps(3))
    assert await recovery.wait(3) is True
    assert order == ["keys 3", "log 3"]  # begun before the log's checks, not after their first sealed record


class _BrokenKeys:
    async def prefetch(self, partition: int) -> None:
        raise RuntimeError("a bug in the key ring")


async def test_a_read_ahead_that_fails_unexpectedly_is_said_and_the_catch_up_goes_on(caplog):
    order: list[str] = []
    recovery = _CheckingRecovery(order)
    recovery.keys = _BrokenKeys()  # type: ignore[assignment]
    await recovery.on_assigned(None, tps(4))
    assert await recovery.wait(4) is True and order == ["log 4"]
    await asyncio.sleep(0)
    assert "reading the key sets ahead failed unexpectedly: RuntimeError('a bug in the key ring')" in caplog.text


class Committing:
    """A partition's states whose commit finds it busy the first `busy` times."""

    def __init__(self, busy: int) -> None:
        self.busy, self.tries, self.committed = busy, 0, asyncio.Event()
        self.get, self.settled = STATES.get, STATES.settled

    def commit_if_idle(self, partition: int) -> bool:
        self.tries += 1
        if self.tries <= self.busy:
            return False
        self.committed.set()
        return True


async def test_a_caught_up_partitions_state_is_committed_after_it_serves_and_again_while_busy(monkeypatch):
    """A catch-up leaves its fold uncommitted (a takeover's first answers come
    first), and its state is committed a moment after the partition serves,
    tried again while the apply agent or a thread works on it."""
    monkeypatch.setattr(recovery_module, "log_reader", lambda settings, keys=None: Reader())
    monkeypatch.setattr(recovery_module, "COMMIT_AFTER_S", 0.01)
    states = Committing(busy=2)
    recovery = OrderedRecovery(Warmed(True), [])
    recovery.states = states
    await recovery.on_assigned(None, tps(3))
    assert await asyncio.wait_for(recovery.wait(3), 5) is True
    assert states.tries == 0  # the partition serves first
    await asyncio.wait_for(states.committed.wait(), 5)
    assert states.tries == 3


async def test_a_catch_ups_fold_is_not_committed_by_the_fold_itself(monkeypatch):
    folded = {}

    async def rebuild_partition(reader, topic, partition, state, stop, selection, progress=None, commit=True):
        folded.update(partition=partition, stop=stop, commit=commit)
        return SimpleNamespace(read=4)

    class Bounds:
        async def bounds(self, topic, partitions):
            return {p: (0, 9) for p in partitions}

    monkeypatch.setattr(recovery_module, "rebuild_partition", rebuild_partition)
    worker = SimpleNamespace(state=SimpleNamespace(ledger=SimpleNamespace(pending_snapshots=lambda: [])))
    recovery = Recovery(SETTINGS, STATES)
    assert await recovery._fold_to_end(Bounds(), 3, worker) == 4
    assert folded == {"partition": 3, "stop": 9, "commit": False}
