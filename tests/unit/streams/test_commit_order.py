"""The apply agent's commit order and pacing (`streams.runtime.commit_order`)."""

import asyncio

from emgas.processors.graph import GraphParams
from emgas.state.memory import MemoryStore
from emgas.state.projector import PartitionState
from emgas.service.steps import PartitionSteps
from emgas.streams.runtime.commit_order import BatchCommit, CommitPacing
from tests.support.graph_log import RecordingLog
from tests.support.hooked_worker import HeldFlush
from tests.support.factories import ingested


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def a_worker() -> PartitionSteps:
    return PartitionSteps(PartitionState(MemoryStore(), GraphParams()), GraphParams())


def run_batch(worker: PartitionSteps, offset: int, pacing: CommitPacing, force: bool = False) -> None:
    log = RecordingLog()

    async def batch() -> None:
        batch_commit = BatchCommit(log, pacing=pacing)
        worker.state.apply(ingested("g", f"t{offset}", {"cat": 0.5, "dog": 0.4}, minute=offset), offset)
        batch_commit.add(worker, [])
        await batch_commit.commit(force)

    asyncio.run(batch())


def test_a_state_is_committed_at_most_once_per_interval_and_always_when_forced():
    clock, worker = Clock(), a_worker()
    pacing = CommitPacing(1.0, clock)
    run_batch(worker, 0, pacing)
    assert worker.state.committed_offset == 0  # the first batch: no commit before it
    clock.now = 0.5
    run_batch(worker, 1, pacing)
    assert worker.state.committed_offset == 0 and worker.state.applied_offset == 1  # applied, not yet committed
    run_batch(worker, 2, pacing, force=True)
    assert worker.state.committed_offset == 2  # a forget or a snapshot request needs the store as of itself
    clock.now = 1.2
    run_batch(worker, 3, pacing)
    assert worker.state.committed_offset == 2
    clock.now = 2.6
    run_batch(worker, 4, pacing)
    assert worker.state.committed_offset == 4


def test_interval_zero_commits_after_every_batch():
    worker = a_worker()
    pacing = CommitPacing(0.0)
    for offset in range(3):
        run_batch(worker, offset, pacing)
        assert worker.state.committed_offset == offset


def test_a_crash_between_commits_refolds_the_events_after_the_last_commit():
    store = MemoryStore()
    worker = PartitionSteps(PartitionState(store, GraphParams()), GraphParams())
    clock = Clock()
    pacing = CommitPacing(10.0, clock)
    for offset in range(3):
        run_batch(worker, offset, pacing)
    assert worker.state.committed_offset == 0
    restarted = PartitionState(store, GraphParams())  # a crash: what was not committed is gone
    assert restarted.applied_offset == 0  # recovery reads the log from offset 1 again


def test_a_state_a_thread_reads_is_not_committed_and_a_forced_commit_waits_for_the_thread():
    worker = a_worker()
    reading = {0: True}  # a digest hashes partition 0 on a thread

    async def batches() -> list[int]:
        committed = []
        batch_commit = BatchCommit(RecordingLog(), reading=lambda partition: reading[partition])
        worker.state.apply(ingested("g", "t0", {"cat": 0.5}), 0)
        batch_commit.add(worker, [])
        await batch_commit.commit()
        committed.append(worker.state.committed_offset)  # not while the thread reads
        worker.state.apply(ingested("g", "t1", {"dog": 0.5}), 1)
        batch_commit.add(worker, [])
        forced = asyncio.create_task(batch_commit.commit(force=True))
        await asyncio.sleep(0.1)
        committed.append(worker.state.committed_offset)  # the forced commit waits for the thread
        reading[0] = False
        await forced
        committed.append(worker.state.committed_offset)
        return committed

    assert worker.partition == 0
    assert asyncio.run(batches()) == [-1, -1, 1]



async def test_the_worker_commits_a_partition_in_steps_reading_it_until_the_write_is_done(tmp_path):
    from emgas.streams.runtime.partitions import PartitionStates

    states = PartitionStates(tmp_path, GraphParams())
    worker = states.worker(0)
    turns = [ingested(f"g{k % 3}", f"t{k}", {"alpha": 0.9, f"c{k}": 0.5}, minute=k) for k in range(6)]
    worker.state.apply_batch([(turn, k, None) for k, turn in enumerate(turns)])
    seen_reading = []

    async def watch() -> None:  # runs while the commit lets the loop go
        while not seen_reading or seen_reading[-1]:
            seen_reading.append(states.reading(0))
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(watch())
    await states.commit(worker)
    await asyncio.wait_for(watcher, 1)
    assert seen_reading[0] and not states.reading(0)  # read while it committed, released after
    assert not worker.state.uncommitted and worker.state.committed_offset == 5
    states.close(commit=False)
    assert PartitionStates(tmp_path, GraphParams()).get(0).applied_offset == 5  # in the store


def test_the_crash_tests_hold_keeps_a_batch_applied_and_uncommitted_until_its_flush_ends():
    """`tests/support/hooked_worker.HeldFlush` wraps the worker's port: the
    batch's events are in the log, its state not yet committed, for `hold_s`."""
    worker = a_worker()

    async def batch() -> tuple[int, int]:
        batch_commit = BatchCommit(HeldFlush(RecordingLog(), hold_s=0.5))  # type: ignore[arg-type]
        worker.state.apply(ingested("g", "t0", {"cat": 0.5}), 0)
        worker.state.commit()
        worker.state.apply(ingested("g", "t1", {"dog": 0.5}), 1)
        batch_commit.add(worker, [])
        committing = asyncio.create_task(batch_commit.commit())
        await asyncio.sleep(0.05)
        held = worker.state.committed_offset
        await committing
        return held, worker.state.committed_offset

    assert asyncio.run(batch()) == (0, 1)
