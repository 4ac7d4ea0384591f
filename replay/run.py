"""Rebuilding graphs from `emgas.graph-events` into a state directory.

It takes a log reader (`replay.reader.LogReader`) and the graph
parameters, not the settings: the live side (the settings, the workers'
digests for `--verify`) is `streams.interfaces.admin`'s.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from emgas.processors.codec import decode_graph_event
from emgas.processors.errors import DecodeError
from emgas.processors.events import GraphDigest
from emgas.processors.graph import GraphParams
from emgas.replay.errors import ReplayError, SnapshotCorrupt, SnapshotErased
from emgas.replay.fold import Selection
from emgas.replay.logstate import start_from_checkpoint
from emgas.replay.reader import FEW_RECORDS_BYTES, LogReader, LogRecord, partition_of
from emgas.replay.parallel import ShareJob, SideBySide, available_cores, processes_for, rebuild_side_by_side
from emgas.replay.rebuild import Progress, RebuildReport, closed_with_digests, open_rebuild_state, rebuild
from emgas.state.projector import PartitionState

log = logging.getLogger(__name__)


@dataclass
class ReplayResult:
    state_dir: Path
    report: RebuildReport
    digests: list[GraphDigest]
    differences: list[str] | None = None  # None: not verified



async def partitions_to_read(reader: LogReader, topic: str, graph_id: str | None) -> list[int]:
    """Every partition of `topic`, or only the one `graph_id` is keyed to."""
    partitions = await reader.partitions(topic)
    return partitions if graph_id is None else [partition_of(graph_id.encode(), len(partitions))]


async def rebuild_dir(
    reader: LogReader,
    topic: str,
    state_dir: Path,
    params: GraphParams,
    graph_id: str | None,
    selection: Selection,
    stops: dict[int, int] | None = None,
    from_beginning: bool = False,
    progress: Progress | None = None,
    on_plan: Callable[[int], None] | None = None,
    side_by_side: SideBySide | None = None,
) -> ReplayResult:
    """Rebuild one graph (all its versions) or every graph of `topic`, read
    with `reader`, into the fresh `state_dir`: each partition up to its
    `stops` offset (exclusive; default: the log's end, or `selection.to_offset`),
    from its latest checkpoint before that (`from_beginning`: from the first
    record; `--as-of` always does). `on_plan` gets the number of records to read.
    With `side_by_side`, the partitions' folds may run in processes of their
    own (`replay.parallel`); the checkpoints are restored here first."""
    if any(state_dir.iterdir() if state_dir.exists() else []):
        raise ReplayError(f"{state_dir} is not empty: a rebuild needs a fresh state directory")
    if stops is None:
        partitions = await partitions_to_read(reader, topic, graph_id)
        bounds = await reader.bounds(topic, partitions)
        last = selection.to_offset if selection.to_offset is not None else float("inf")
        stops = {p: int(min(end, last + 1)) for p, (_, end) in bounds.items()}
    open_state = open_rebuild_state(state_dir, params)
    started = time.perf_counter()
    checkpoints = {} if from_beginning else await _start_from_checkpoints(reader, topic, stops, open_state, selection)
    if selection.as_of is not None:
        await _check_as_of(reader, topic, list(stops), selection.as_of)
    to_read = {p: stop - open_state(p).applied_offset - 1 for p, stop in stops.items()}
    if on_plan is not None:
        on_plan(sum(to_read.values()))
    processes = processes_for(to_read, side_by_side.processes, available_cores()) if side_by_side else 1
    if side_by_side is not None and processes > 1:
        whole = ShareJob(side_by_side.make_reader, topic, state_dir, params, selection, graph_id, stops)
        report, digests = await rebuild_side_by_side(reader, whole, to_read, processes, open_state, progress)
    else:
        report = await rebuild(reader, topic, stops, open_state, selection, progress)
        by_partition = closed_with_digests(open_state, sorted(stops), graph_id)
        digests = [d for p in sorted(by_partition) for d in by_partition[p]]
    report.checkpoints = checkpoints
    report.processes = processes
    report.seconds = time.perf_counter() - started  # with the snapshots restored
    return ReplayResult(state_dir, report, digests)


async def _start_from_checkpoints(
    reader: LogReader, topic: str, stops: dict[int, int], open_state: Callable[[int], PartitionState], selection: Selection
) -> dict[int, int]:
    """Restore each partition's state from its latest checkpoint before its
    stop (not for an `--as-of` rebuild: a snapshot holds events of any time);
    partition -> the checkpoint's offset, where there was one."""
    if selection.as_of is not None:
        return {}
    found = {}
    for partition, stop in sorted(stops.items()):
        try:
            offset = await start_from_checkpoint(reader, topic, partition, open_state(partition), stop, selection.graph_id)
        except SnapshotCorrupt as err:
            raise SnapshotCorrupt(f"{err} (`emgas replay --from-beginning` folds the whole log instead)") from None
        except SnapshotErased as err:
            log.info("%s: folding the partition from its beginning", err)  # nothing was restored
            continue
        if offset is not None:
            found[partition] = offset
    return found


async def _check_as_of(reader: LogReader, topic: str, partitions: list[int], as_of: datetime) -> None:
    """An `--as-of` before the oldest record retention left is an error: the
    graph then cannot be rebuilt."""
    for partition, (start, end) in (await reader.bounds(topic, partitions)).items():
        if start == 0 or start >= end:
            continue
        async for batch in reader.read(topic, partition, start, start + 1, FEW_RECORDS_BYTES):
            oldest = _event_time(batch[0])
            if as_of < oldest:
                raise ReplayError(
                    f"--as-of {as_of.isoformat()} is before the oldest record left in {topic}[{partition}] "
                    f"(offset {start}, of {oldest.isoformat()}): retention dropped what came before"
                )


def _event_time(record: LogRecord) -> datetime:
    """A record's event time; the time it was written if it is not a graph event."""
    try:
        return decode_graph_event(record.value).timestamp
    except DecodeError:
        return datetime.fromtimestamp(record.timestamp_ms / 1000, timezone.utc)
