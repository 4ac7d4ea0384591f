"""Rebuilding partition states from `emgas.graph-events`."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from emgas.processors import extract
from emgas.processors.events import GraphDigest
from emgas.processors.graph import GraphParams
from emgas.replay.fold import FoldCounts, Selection, fold_records
from emgas.replay.reader import LogReader
from emgas.state import kernels
from emgas.state.digest import partition_digests
from emgas.state.projector import PartitionState
from emgas.state.rocks import RocksStore

Progress = Callable[[int], None]  # called with the number of records just read


@dataclass
class RebuildReport:
    """Per partition: the offsets read [start, stop); totals and time."""

    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    counts: FoldCounts = field(default_factory=FoldCounts)
    seconds: float = 0.0
    checkpoints: dict[int, int] = field(default_factory=dict)  # partition -> the checkpoint it started from
    processes: int = 1  # how many folded the partitions side by side (replay.parallel)

    @property
    def events_per_s(self) -> float:
        return self.counts.read / self.seconds if self.seconds > 0 else 0.0


def open_rebuild_state(state_dir: Path, params: GraphParams) -> Callable[[int], PartitionState]:
    """Partition -> its state under `state_dir`, opened on first use and
    kept; written without RocksDB's write-ahead log (a rebuild's directory
    is complete when it closes its stores, which flushes them, and one that
    died is refused by the next rather than resumed)."""
    opened: dict[int, PartitionState] = {}

    def open_state(partition: int) -> PartitionState:
        if partition not in opened:
            store = RocksStore(state_dir / f"partition-{partition}", write_ahead_log=False)
            opened[partition] = PartitionState(store, params)
        return opened[partition]

    return open_state


def closed_with_digests(
    open_state: Callable[[int], PartitionState], partitions: Iterable[int], graph_id: str | None,
) -> dict[int, list[GraphDigest]]:
    """Each partition's digests (of `graph_id`, or of every graph), its
    state closed after: on a thread, while the next partition's digests
    are computed (closing flushes the store's memtables, outside the
    interpreter's lock: 7-10 ms a partition of the bench's replay)."""
    digests = {}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="emgas-close") as closing:
        closed = []
        for partition in partitions:
            digests[partition] = partition_digests(open_state(partition).repo, graph_id)
            closed.append(closing.submit(open_state(partition).close))
        for done in closed:
            done.result()  # a store that failed to close says so here
    return digests


def warm_for_fold() -> None:
    """Load the fold's compiled loops and the lemmatiser (a few tenths of a
    second): on a thread while a rebuild connects and reads, not in its first fold."""
    kernels.warm()
    extract.warm()


async def rebuild_partition(
    reader: LogReader,
    topic: str,
    partition: int,
    state: PartitionState,
    stop: int,
    selection: Selection,
    progress: Progress | None = None,
    commit: bool = True,
) -> FoldCounts:
    """Fold the records of `partition` after the state's offset and before
    `stop`, then commit them (unless not `commit`: the caller commits)."""
    counts = FoldCounts()
    async for batch in reader.read(topic, partition, state.applied_offset + 1, stop):
        fold_records(state, batch, selection, counts, last=False)
        if progress is not None:
            progress(len(batch))
    if commit:
        state.commit()
    return counts


async def rebuild(
    reader: LogReader,
    topic: str,
    stops: dict[int, int],
    open_state: Callable[[int], PartitionState],
    selection: Selection,
    progress: Progress | None = None,
) -> RebuildReport:
    """Rebuild each partition in `stops` (partition -> end offset, exclusive)."""
    report = RebuildReport()
    started = time.perf_counter()
    for partition, stop in sorted(stops.items()):
        state = open_state(partition)
        start = state.applied_offset + 1
        report.counts.add(await rebuild_partition(reader, topic, partition, state, stop, selection, progress))
        report.ranges[partition] = (start, stop)
    report.seconds = time.perf_counter() - started
    return report
