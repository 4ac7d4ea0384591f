"""The worker's partitions: one RocksDB store, state and step functions per graph-events partition."""

from __future__ import annotations

import asyncio
import logging
import shutil
import threading
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from emgas.processors.activation import ActivationParams
from emgas.processors.extract import ExtractionParams
from emgas.processors.graph import GraphParams
from emgas.state.projector import PartitionState
from emgas.state.repository import STATE_FORMAT, state_format
from emgas.service.retrieval import drop_vectors
from emgas.state.rocks import RocksStore
from emgas.service.snapshot_writer import SnapshotPolicy
from emgas.service.steps import PartitionSteps

log = logging.getLogger(__name__)
T = TypeVar("T")

THREADS_WAIT_S = 30.0  # the longest `close` waits for threads on the states (a large snapshot: seconds)


class PartitionStates:
    """Opens partition stores under `root` on first use and keeps them open."""

    def __init__(
        self,
        root: Path,
        params: GraphParams,
        activation: ActivationParams | None = None,
        extraction: ExtractionParams | None = None,
        name: str = "local",
        snapshots: SnapshotPolicy | None = None,
    ) -> None:
        self.root = root
        self.params = params
        self.activation = activation
        self.extraction = extraction
        self.name = name
        self.snapshots = snapshots
        self._open: dict[int, PartitionSteps] = {}
        self._busy: Counter[int] = Counter()  # partition -> work on its state off the event loop
        self._folding: dict[int, asyncio.Event] = {}  # partition -> set once the batch folded now is done
        # Threads still working on a state, counted by the threads themselves: the event
        # loop may be gone when they end (a stopping worker), and `close` waits for them.
        self._threads = threading.Condition()
        self._threads_running = 0

    def _path(self, partition: int) -> Path:
        return self.root / f"partition-{partition}"

    def get(self, partition: int) -> PartitionState:
        return self.worker(partition).state

    def worker(self, partition: int) -> PartitionSteps:
        """The partition's state with its step functions, opened on first use."""
        worker = self._open.get(partition)
        if worker is None:
            state = PartitionState(self._store(partition), self.params)
            worker = self._open[partition] = PartitionSteps(
                state, self.params, self.activation, self.extraction, self.name, partition, self.snapshots
            )
        return worker

    def discard(self, partition: int) -> PartitionSteps:
        """Drop the partition's local state (it is rebuilt from the log); the new, empty one."""
        worker = self._open.pop(partition, None)
        if worker is not None:
            worker.state.txn.close()
        shutil.rmtree(self._path(partition), ignore_errors=True)
        return self.worker(partition)

    def _store(self, partition: int) -> RocksStore:
        """The partition's store; one in an older state format is dropped, so
        recovery rebuilds it from the log (the state is a disposable view)."""
        path = self._path(partition)
        store = RocksStore(path)
        found = state_format(store)
        if found in (None, STATE_FORMAT):
            return store
        log.warning("state of partition %s is in format %s, not %s: rebuilding it from the log", partition, found, STATE_FORMAT)
        store.close()
        shutil.rmtree(path)
        return RocksStore(path)

    @contextmanager
    def folding(self, partition: int) -> Iterator[None]:
        """The partition's state is folded inside, a piece at a time, with the
        event loop answering queries between pieces
        (`PartitionSteps.fold_steps`): each graph is then at some offset of
        its own, the partition as a whole at none. So it counts as read
        (`reading`: not committed, not released) and `settled` waits until
        it is done (a digest, a catch-up)."""
        done = self._folding[partition] = asyncio.Event()
        self._busy[partition] += 1
        try:
            yield
        except BaseException:
            # Stopped part way (the worker stopping cancels its agents, a bug raised):
            # the state is at no offset of the log, so it goes back to its last
            # commit, and whoever opens it next reads the log from there.
            self._drop_uncommitted(partition)
            raise
        finally:
            self._busy[partition] -= 1
            del self._folding[partition]
            done.set()

    def _drop_uncommitted(self, partition: int) -> None:
        """Close the partition's state without committing (opened again on use, at its last commit)."""
        worker = self._open.pop(partition, None)
        if worker is not None:
            log.warning("partition %s stopped part way through a batch: its state goes back to its last commit",
                        partition)
            worker.state.txn.close()

    def is_folding(self, partition: int) -> bool:
        return partition in self._folding

    async def settled(self, partition: int) -> None:
        """Wait until the partition is not being folded (`folding`)."""
        while (folding := self._folding.get(partition)) is not None:
            await folding.wait()

    def open_partitions(self) -> list[int]:
        return sorted(self._open)

    def reading(self, partition: int) -> bool:
        """Whether a thread reads the partition's state now (`in_thread`): its
        store is then not committed to (a thread may read it under a copy of
        what was pending when it started: `Transaction.read_copy`)."""
        return self._busy[partition] > 0

    async def in_thread(self, partition: int, work: Callable[[], T]) -> T:
        """`work()` in a thread, the partition's state not released (nor, by the
        callers that check `reading`, committed) while it runs (until the
        thread ends, even if the caller is cancelled meanwhile)."""
        loop = asyncio.get_running_loop()
        self._busy[partition] += 1
        with self._threads:
            self._threads_running += 1

        def run() -> T:
            try:
                return work()
            finally:
                with self._threads:
                    self._threads_running -= 1
                    self._threads.notify_all()
                try:
                    loop.call_soon_threadsafe(self._busy.subtract, [partition])
                except RuntimeError:  # the loop closed meanwhile: the worker is stopping
                    pass

        try:
            done = loop.run_in_executor(None, run)
        except RuntimeError:  # the executor is shut down (the worker is stopping): nothing started
            with self._threads:
                self._threads_running -= 1
            self._busy[partition] -= 1
            raise
        return await done

    async def commit(self, worker: PartitionSteps) -> None:
        """Commit a partition's state without holding the event loop for the
        whole commit (tens of ms for a busy partition: queries would wait
        behind it): the views' changes are staged one graph at a time,
        letting the loop run between two, then encoded and written on a
        thread. The partition counts as read throughout (no other commit, no
        release); its caller applies nothing to it until this returns."""
        partition, state = worker.partition, worker.state
        self._busy[partition] += 1
        try:
            for _ in state.settle_steps():
                await asyncio.sleep(0)
            staged = state.stage_commit()
            if staged is not None:
                await self.in_thread(partition, staged[0].write)  # counted as read until the thread ends
                state.committed(staged)
        finally:
            self._busy[partition] -= 1

    def commit_if_idle(self, partition: int) -> bool:
        """Commit the partition's open state now, unless something works on
        it (a fold part way, a thread on it: a fold's caller commits it after);
        False then, True once committed or when none is open."""
        worker = self._open.get(partition)
        if worker is None:
            return True
        if self._busy[partition] > 0:
            return False
        worker.state.commit()
        return True

    def release(self, partition: int) -> bool:
        """Commit and close the partition's state, and drop its views and its
        graphs' concept vectors, once it is someone else's (a revoked
        partition's state is kept only to cover its queries until its new owner
        announces it): a worker's memory follows the partitions it holds, not
        every partition it ever held. Opened again on use. False if a thread
        works on it now (try again later)."""
        worker = self._open.get(partition)
        if worker is None:
            return True
        if self._busy[partition] > 0:
            return False
        del self._open[partition]
        drop_vectors(worker.state)
        worker.state.commit()
        worker.state.txn.close()
        return True

    def close(self, commit: bool = True) -> None:
        """Close every open state; `commit`: what was applied is committed first
        (a clean stop: a restart resumes from there, and a broker that lost its
        log meanwhile finds it in the state). A worker stopped by an error
        commits nothing more: recovery reads the log from the last commit.
        A thread still writing or reading a state (a commit's write, a
        snapshot) is waited for first, for `THREADS_WAIT_S` at most."""
        with self._threads:
            if not self._threads.wait_for(lambda: self._threads_running == 0, THREADS_WAIT_S):
                log.warning("closing the partition states with %d thread(s) still on them", self._threads_running)
        for partition, worker in self._open.items():
            if commit and partition not in self._folding:  # part way through a batch: at no offset, not committed
                worker.state.commit()
            worker.state.txn.close()
        self._open.clear()
