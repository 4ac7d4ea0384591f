"""What `emgas digest`, `emgas replay` and `emgas switch` do.

The live side is reached only through Kafka (digest queries on the
queries topic, routed like activation queries), so these commands work
from any machine that can reach the broker, whichever workers hold which
graphs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from processors.codec import decode_graph_event, decode_turn
from processors.errors import DecodeError
from processors.events import DigestReply, ErrorReply, GraphDigest, GraphVersionSwitched, Reply
from processors.extract import extractor_id, ingest
from processors.graph import GraphParams
from replay.errors import ReplayError, SnapshotCorrupt
from replay.fold import Selection
from replay.logstate import start_from_checkpoint
from replay.reader import LogReader, LogRecord, partition_of
from replay.rebuild import Progress, RebuildReport, rebuild
from replay.verify import differences
from state.digest import partition_digests
from state.projector import PartitionState
from state.rocks import RocksStore
from streams.client import MemoryClient
from streams.settings import Settings

EMIT_CHUNK = 500


@dataclass
class ReplayResult:
    state_dir: Path
    report: RebuildReport
    digests: list[GraphDigest]
    differences: list[str] | None = None  # None: not verified



def log_reader(settings: Settings) -> LogReader:
    """A reader of the configured broker, with its fetch wait and security options."""
    return LogReader(settings.bootstrap_servers(), settings.fetch_max_wait_ms, client_options=settings.kafka_options())

def _checked(reply: Reply) -> DigestReply:
    if isinstance(reply, ErrorReply):
        raise ReplayError(f"the live system answered {reply.code}: {reply.message}")
    assert isinstance(reply, DigestReply)
    return reply


async def live_digests(settings: Settings, graph_id: str | None) -> list[DigestReply]:
    """The live digests: one reply per partition asked."""
    async with MemoryClient(settings) as client:
        return [_checked(r) for r in await client.digests(graph_id)]


def open_rebuild_state(state_dir: Path, params: GraphParams) -> Callable[[int], PartitionState]:
    opened: dict[int, PartitionState] = {}

    def open_state(partition: int) -> PartitionState:
        if partition not in opened:
            opened[partition] = PartitionState(RocksStore(state_dir / f"partition-{partition}"), params)
        return opened[partition]

    return open_state


async def _partitions_to_read(reader: LogReader, topic: str, graph_id: str | None) -> list[int]:
    """Every partition of `topic`, or only the one `graph_id` is keyed to."""
    partitions = await reader.partitions(topic)
    return partitions if graph_id is None else [partition_of(graph_id.encode(), len(partitions))]


async def replay(
    settings: Settings,
    state_dir: Path,
    graph_id: str | None,
    selection: Selection,
    verify: bool,
    progress: Progress | None = None,
    on_plan: Callable[[int], None] | None = None,
    from_beginning: bool = False,
) -> ReplayResult:
    """Rebuild one graph (all its versions) or every graph from the graph-events
    log into `state_dir`; with `verify`, up to the offsets the live state
    reflects, and compare digests. It starts from each partition's latest
    checkpoint before where it stops (`from_beginning`: from the first
    record; `--as-of` always does). `on_plan` gets the number of records to read."""
    if any(state_dir.iterdir() if state_dir.exists() else []):
        raise ReplayError(f"{state_dir} is not empty: a rebuild needs a fresh state directory")
    topic = settings.graph_events_topic
    async with log_reader(settings) as reader:
        partitions = await _partitions_to_read(reader, topic, graph_id)
        live: list[DigestReply] = []
        if verify:
            live = await live_digests(settings, graph_id)
            stops = {r.partition: r.applied_offset + 1 for r in live}
        else:
            bounds = await reader.bounds(topic, partitions)
            last = selection.to_offset if selection.to_offset is not None else float("inf")
            stops = {p: int(min(end, last + 1)) for p, (_, end) in bounds.items()}
        open_state = open_rebuild_state(state_dir, settings.graph)
        started = time.perf_counter()
        checkpoints = {} if from_beginning else await _start_from_checkpoints(reader, topic, stops, open_state, selection)
        if selection.as_of is not None:
            await _check_as_of(reader, topic, list(stops), selection.as_of)
        if on_plan is not None:
            on_plan(sum(stop - open_state(p).applied_offset - 1 for p, stop in stops.items()))
        report = await rebuild(reader, topic, stops, open_state, selection, progress)
        report.checkpoints = checkpoints
        report.seconds = time.perf_counter() - started  # with the snapshots restored
    digests = [d for p in sorted(stops) for d in partition_digests(open_state(p).repo, graph_id)]
    for p in stops:
        open_state(p).close()
    found = differences([d for r in live for d in r.graphs], digests) if verify else None
    return ReplayResult(state_dir, report, digests, found)


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
        if offset is not None:
            found[partition] = offset
    return found


async def _check_as_of(reader: LogReader, topic: str, partitions: list[int], as_of: datetime) -> None:
    """An `--as-of` before the oldest record retention left is an error: the
    graph then cannot be rebuilt."""
    for partition, (start, end) in (await reader.bounds(topic, partitions)).items():
        if start == 0 or start >= end:
            continue
        async for batch in reader.read(topic, partition, start, start + 1):
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


@dataclass
class Derivation:
    versions: dict[str, int] = field(default_factory=dict)  # graph -> version derived
    turns: dict[str, int] = field(default_factory=dict)  # graph -> turns re-extracted
    undecodable: int = 0


def next_versions(live: Iterable[DigestReply]) -> dict[str, int]:
    """graph -> the version after its highest live one."""
    highest: dict[str, int] = {}
    for reply in live:
        for d in reply.graphs:
            highest[d.graph_id] = max(highest.get(d.graph_id, 0), d.version)
    return {g: v + 1 for g, v in highest.items()}


async def derive_from_turns(
    settings: Settings,
    graph_id: str | None,
    version: int | None = None,
    progress: Progress | None = None,
) -> Derivation:
    """Re-extract every turn of `graph_id` (or of every graph) from the turns
    topic with this process's extraction settings, and append the results to
    the graph-events log as a new version of each graph (or as `version`).
    The live graph keeps serving its active version until switched."""
    versions = {} if version is not None else next_versions(await live_digests(settings, graph_id))
    extractor = extractor_id(settings.extraction)
    result = Derivation()
    topic = settings.turns_topic
    async with log_reader(settings) as reader, MemoryClient(settings) as client:
        partitions = await _partitions_to_read(reader, topic, graph_id)
        for partition, (start, end) in (await reader.bounds(topic, partitions)).items():
            async for batch in reader.read(topic, partition, start, end):
                events = []
                for record in batch:
                    try:
                        turn = decode_turn(record.value, datetime.now(timezone.utc), settings.max_future_s)
                    except DecodeError:
                        result.undecodable += 1  # it went to the DLQ when it was published
                        continue
                    if graph_id is not None and turn.graph_id != graph_id:
                        continue
                    v = version or versions.setdefault(turn.graph_id, 1)
                    result.versions[turn.graph_id] = v
                    result.turns[turn.graph_id] = result.turns.get(turn.graph_id, 0) + 1
                    events.append(ingest(turn, settings.extraction, extractor).model_copy(update={"graph_version": v}))
                for i in range(0, len(events), EMIT_CHUNK):
                    await client.emit(events[i : i + EMIT_CHUNK])
                if progress is not None:
                    progress(len(batch))
    return result


async def switch_version(settings: Settings, graph_id: str, version: int, at: datetime) -> Derivation:
    """Make `version` the active version of `graph_id`, then re-derive the
    graph's turns into it once more: turns published between the version's
    derivation and the switch went to the old version only, and the fold
    skips the turns the version already holds."""
    async with MemoryClient(settings) as client:
        await client.emit([GraphVersionSwitched(graph_id=graph_id, version=version, timestamp=at)])
    return await derive_from_turns(settings, graph_id, version)


async def graph_records(settings: Settings, graph_id: str) -> list[LogRecord]:
    """Every record of the partition of `emgas.graph-events` that holds `graph_id`."""
    topic = settings.graph_events_topic
    async with log_reader(settings) as reader:
        [partition] = await _partitions_to_read(reader, topic, graph_id)
        start, end = (await reader.bounds(topic, [partition]))[partition]
        return [record async for batch in reader.read(topic, partition, start, end) for record in batch]
