"""What a partition of the log holds of its own: identity, checkpoints, snapshots.

- `check_log`: does the log a state is about to read look like the log the
  state reflects? Its identity (the `log_started` record the state saw,
  or, once retention dropped it, the latest checkpoint's `log_id`), and the
  state's offset against the log's bounds.
- `latest_checkpoint`: scanning back from the end, a window at a time,
  looking at record prefixes only, for the last `checkpoint` record.
- `start_from_checkpoint`: restore a fresh state from the latest checkpoint
  before `stop` (reading its snapshots' parts where they lie), so the fold
  reads only the tail after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from emgas.processors.codec import decode_graph_event
from emgas.processors.errors import DecodeError
from emgas.processors.events import Checkpoint, LogStarted, Sealed, Snapshot
from emgas.processors.sealing import snapshot_of_key_id
from emgas.replay.errors import LogTruncated, SnapshotCorrupt, SnapshotErased
from emgas.replay.reader import FEW_RECORDS_BYTES, LogReader, LogRecord
from emgas.state.projector import PartitionState
from emgas.state.snapshots import SnapshotMismatch
from emgas.state.ledger import LogIdentity

SCAN_WINDOW = 2_000  # records read per step of a backward scan
# Its first step: a checkpoint is appended right after its snapshots, so on
# a worker's start it is nearly always among the log's last records (2,000
# records of graph events are about 3 MB to fetch and parse).
FIRST_SCAN_WINDOW = 64
GENESIS_WINDOW = 50  # a log's first records searched for its `log_started`
_CHECKPOINT = b'{"type":"checkpoint"'
_LOG_STARTED = b'{"type":"log_started"'


class LogStatus(str, Enum):
    SAME = "same"  # the log the state reflects, readable after its offset
    NEW = "new"  # the state is empty: nothing to compare
    RESET = "reset"  # another log: recreated topic, restarted embedded broker, other cluster
    TRUNCATED = "truncated"  # the same log, but retention dropped records the state still needs
    UNVERIFIED = "unverified"  # no record left names the log (an old state, or identity dropped)


@dataclass(frozen=True)
class LogCheck:
    status: LogStatus
    detail: str
    log_id: str | None  # the log's identity, where it has one


def _decoded(record: LogRecord, prefix: bytes) -> object | None:
    try:
        return _decoded_or_refused(record, prefix)
    except DecodeError:
        return None


def _decoded_or_refused(record: LogRecord, prefix: bytes) -> object | None:
    """The event in `record` if its value starts with `prefix` (None if not);
    DecodeError if it does but is no event this code reads."""
    if not record.value or not record.value.startswith(prefix):
        return None  # a record without a value (garbage, a tombstone) names nothing
    return decode_graph_event(record.value)


async def latest_checkpoint(
    reader: LogReader, topic: str, partition: int, start: int, stop: int
) -> tuple[int, Checkpoint] | None:
    """The last checkpoint with start <= offset < stop, and its offset."""
    hi, window = stop, FIRST_SCAN_WINDOW
    while hi > start:
        lo = max(start, hi - window)
        window = SCAN_WINDOW
        found = None
        async for batch in reader.read(topic, partition, lo, hi, open_sealed=False):  # checkpoints are never sealed
            for record in batch:
                event = _decoded(record, _CHECKPOINT)
                if isinstance(event, Checkpoint):
                    found = (record.offset, event)
        if found is not None:
            return found
        hi = lo
    return None


async def first_log_started(reader: LogReader, topic: str, partition: int, start: int, end: int) -> tuple[int, LogStarted] | None:
    """The log's `log_started` among its first records, and its offset."""
    genesis = min(end, start + GENESIS_WINDOW)
    async for batch in reader.read(topic, partition, start, genesis, FEW_RECORDS_BYTES, open_sealed=False):  # never sealed
        for record in batch:
            event = _decoded(record, _LOG_STARTED)
            if isinstance(event, LogStarted):
                return record.offset, event
    return None


async def log_identity(reader: LogReader, topic: str, partition: int, start: int, end: int) -> str | None:
    """The log's id: its first `log_started` record, else its latest checkpoint's; None: it has none."""
    first = await first_log_started(reader, topic, partition, start, end)
    if first is not None:
        return first[1].log_id
    checkpoint = await latest_checkpoint(reader, topic, partition, start, end)
    return checkpoint[1].log_id if checkpoint is not None else None


async def _names(reader: LogReader, topic: str, partition: int, offset: int, log_id: str) -> bool:
    """Whether the record at `offset` is the `log_started` of `log_id`."""
    async for batch in reader.read(topic, partition, offset, offset + 1, FEW_RECORDS_BYTES, open_sealed=False):
        for record in batch:
            event = _decoded(record, _LOG_STARTED)
            return isinstance(event, LogStarted) and event.log_id == log_id
    return False


async def check_log(
    reader: LogReader, topic: str, partition: int, identity: LogIdentity | None, offset: int, empty: bool
) -> LogCheck:
    """Compare a state (its log `identity`, applied `offset`, whether it is
    `empty`) with the log partition it is about to read."""
    start, end = (await reader.bounds(topic, [partition]))[partition]
    where = f"{topic}[{partition}]"
    reset = f"{where} is not the log the state was built from: "
    if identity is not None and identity.genesis >= 0 and identity.genesis >= end:
        return LogCheck(LogStatus.RESET, reset + f"the state's log started at offset {identity.genesis}, "
                        + (f"this one ends at offset {end - 1}" if end else "this one is empty"), None)
    # The record the state saw start its log, where it still is, names the log for sure.
    confirmed = identity is not None and start <= identity.genesis < end
    if identity is not None and confirmed and not await _names(reader, topic, partition, identity.genesis, identity.log_id):
        found = await log_identity(reader, topic, partition, start, end)
        return LogCheck(LogStatus.RESET, reset + f"offset {identity.genesis} does not hold the start of log "
                        f"{identity.log_id} (this log is {found or 'unnamed'})", found)
    found = identity.log_id if identity is not None and confirmed else await log_identity(reader, topic, partition, start, end)
    if empty:
        return LogCheck(LogStatus.NEW, "no local state", found)
    if identity is not None and found is not None and found != identity.log_id:
        return LogCheck(LogStatus.RESET, reset + f"it is log {found}, the state reflects log {identity.log_id}", found)
    if offset >= end:
        return LogCheck(LogStatus.RESET, reset + f"the state reflects it up to offset {offset}, but it "
                        + (f"ends at offset {end - 1}" if end else "is empty"), found)
    if offset + 1 < start:
        return LogCheck(LogStatus.TRUNCATED, f"{where} starts at offset {start}: offsets {offset + 1}..{start - 1}, "
                        "which the state has not applied, were dropped by retention", found)
    if identity is None or found is None:
        why = "the state names no log (it was written before logs had one)" if identity is None else "no record left names the log"
        return LogCheck(LogStatus.UNVERIFIED, f"{where}: cannot check the log's identity: {why}", found)
    return LogCheck(LogStatus.SAME, f"{where} is log {found}", found)


async def usable_checkpoint(
    reader: LogReader, topic: str, partition: int, stop: int, graph_id: str | None = None
) -> tuple[int, Checkpoint] | None:
    """The latest checkpoint before `stop` whose snapshots (only `graph_id`'s,
    if given) are still in the log, with its offset; None if there is none."""
    start, _ = (await reader.bounds(topic, [partition]))[partition]
    found = await latest_checkpoint(reader, topic, partition, start, stop)
    if found is None:
        return None
    offset, checkpoint = found
    locations = tuple(loc for loc in checkpoint.snapshots if graph_id is None or loc.graph_id == graph_id)
    if any(loc.first < start for loc in locations):
        return None
    return offset, checkpoint.model_copy(update={"snapshots": locations})


async def restore_checkpoint(
    reader: LogReader, topic: str, partition: int, state: PartitionState, found: tuple[int, Checkpoint]
) -> None:
    """Restore the empty `state` from the checkpoint `found` (its offset, and
    it), reading its snapshots' parts where they lie."""
    offset, checkpoint = found
    locations = checkpoint.snapshots
    parts: dict[str, list[Snapshot]] = {loc.graph_id: [] for loc in locations}
    wanted = {loc.graph_id: loc.as_of for loc in locations}
    erased = set()
    unreadable: list[str] = []  # snapshot-like records that do not decode (a newer schema version, say)
    for lo, hi in _ranges([(loc.first, loc.last + 1) for loc in locations]):
        async for batch in reader.read(topic, partition, lo, hi):
            for record in batch:
                try:
                    event = _decoded_or_refused(record, b'{"type":"s')
                except DecodeError as err:
                    unreadable.append(f"offset {record.offset}: {err}")
                    continue
                if isinstance(event, Snapshot) and wanted.get(event.graph_id) == event.as_of:
                    parts[event.graph_id].append(event)
                elif isinstance(event, Sealed) and snapshot_of_key_id(event.key_id) == wanted.get(event.graph_id):
                    erased.add(event.graph_id)  # its key is gone (the reader opens those it can)
    incomplete = [loc.graph_id for loc in locations if len({p.part for p in parts[loc.graph_id]}) < loc.parts]
    if erased & set(incomplete):
        raise SnapshotErased(f"{topic}[{partition}]: the checkpoint at offset {offset} lists snapshots of "
                             f"{sorted(erased & set(incomplete))} written before a forget, whose key is erased")
    if incomplete and unreadable:
        # In the log, but not readable here: not a gap to serve around, a checkpoint to do without.
        raise SnapshotCorrupt(f"{topic}[{partition}]: the checkpoint at offset {offset} lists snapshots of "
                              f"{incomplete} whose parts this worker cannot read ({unreadable[0]})")
    if incomplete:
        raise LogTruncated(f"{topic}[{partition}]: the checkpoint at offset {offset} lists snapshots of "
                           f"{incomplete} whose parts are not all in the log")
    try:
        state.restore_checkpoint(checkpoint, {g: _unique(ps) for g, ps in parts.items()})
    except SnapshotMismatch as err:
        raise SnapshotCorrupt(f"{topic}[{partition}]: the checkpoint at offset {offset} cannot be used: {err}") from None


async def start_from_checkpoint(
    reader: LogReader, topic: str, partition: int, state: PartitionState, stop: int, graph_id: str | None = None
) -> int | None:
    """Restore the empty `state` from the latest usable checkpoint before
    `stop` (only `graph_id`'s snapshot, if given); the checkpoint's offset,
    or None when the log holds none."""
    found = await usable_checkpoint(reader, topic, partition, stop, graph_id)
    if found is None:
        return None
    await restore_checkpoint(reader, topic, partition, state, found)
    return found[0]


def _unique(parts: list[Snapshot]) -> list[Snapshot]:
    return list({p.part: p for p in parts}.values())


def _ranges(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching [lo, hi) spans merged, in order."""
    merged: list[list[int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]
