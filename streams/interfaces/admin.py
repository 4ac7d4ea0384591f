"""Live administration: what `emgas digest`, `replay`, `switch` and `explain` ask of the broker.

The live side is reached only through Kafka (digest queries on the
queries topic, routed like activation queries), so these commands work
from any machine that can reach the broker, whichever workers hold which
graphs. The rebuilding itself is `replay`'s, from a reader.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import partial
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from emgas.processors.codec import decode_turn
from emgas.processors.errors import DecodeError
from emgas.processors.events import DigestReply, ErrorReply, GraphVersionSwitched, Reply, StatsReply
from emgas.processors.extract import extractor_id, ingest_all
from emgas.replay.errors import ReplayError
from emgas.replay.fold import Selection
from emgas.replay.parallel import SideBySide
from emgas.replay.reader import LogReader, LogRecord
from emgas.replay.rebuild import Progress, warm_for_fold
from emgas.replay.run import ReplayResult, partitions_to_read, rebuild_dir
from emgas.replay.verify import differences
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.kafka.reader import log_reader
from emgas.streams.settings import Settings


def _checked(reply: Reply) -> DigestReply:
    if isinstance(reply, ErrorReply):
        raise ReplayError(f"the live system answered {reply.code}: {reply.message}")
    assert isinstance(reply, DigestReply)
    return reply


# A worker hashes every graph of a partition for a digest of it: the wait
# for one grows with the partition's records (seconds per record on top of
# the query timeout; a partition of 15,000 records, some 7,500 turns, took
# about 2 s on a quiet 2-core machine, many times that under load).
DIGEST_S_PER_RECORD = 0.002


async def live_digests(settings: Settings, graph_id: str | None, records: int = 0) -> list[DigestReply]:
    """The live digests: one reply per partition asked; `records`: how many
    the largest partition of the log holds (the wait grows with it)."""
    async with MemoryClient(settings) as client:
        wait_s = settings.query_timeout_s + (0 if graph_id else DIGEST_S_PER_RECORD * records)
        return [_checked(r) for r in await client.digests(graph_id, wait_s)]


async def replay(
    settings: Settings,
    state_dir: Path,
    graph_id: str | None,
    selection: Selection,
    verify: bool,
    progress: Progress | None = None,
    on_plan: Callable[[int], None] | None = None,
    from_beginning: bool = False,
    processes: int | None = None,
) -> ReplayResult:
    """`emgas replay`: rebuild from the configured broker's log into
    `state_dir` (see `replay.run.rebuild_dir`); with `verify`, up to the
    offsets the live state reflects, and compare digests. `processes`: how
    many fold the partitions side by side (None: `replay.parallel` decides
    by the cores and the records to read; 1: this one alone)."""
    topic = settings.graph_events_topic
    # The fold's compiled loops and the lemmatiser load while the log's first records are read, not in the first fold.
    threading.Thread(target=warm_for_fold, name="emgas-warm-kernels", daemon=True).start()
    async with log_reader(settings) as reader:
        live: list[DigestReply] = await live_digests(settings, graph_id, await _largest(reader, topic)) if verify else []
        stops = {r.partition: r.applied_offset + 1 for r in live} if verify else None
        if stops is not None and graph_id is None:
            await _check_every_partition_answered(reader, topic, stops)
        result = await rebuild_dir(
            reader, topic, state_dir, settings.graph, graph_id, selection, stops, from_beginning, progress, on_plan,
            SideBySide(partial(log_reader, settings), processes),
        )
    if verify:
        result.differences = differences([d for r in live for d in r.graphs], result.digests)
    return result


async def _largest(reader: LogReader, topic: str) -> int:
    """How many records the largest partition of `topic` holds now."""
    bounds = await reader.bounds(topic, await reader.partitions(topic))
    return max((end - start for start, end in bounds.values()), default=0)


async def _check_every_partition_answered(reader: LogReader, topic: str, stops: dict[int, int]) -> None:
    """ReplayError unless the live digests cover every partition of the log:
    a verification of some partitions must not pass for one of all."""
    in_log = await reader.partitions(topic)
    unanswered = sorted(set(in_log) - set(stops))
    if unanswered:
        raise ReplayError(
            f"no live digest for partitions {unanswered} of the {len(in_log)} of {topic}: not verified "
            "(the queries topic must have as many partitions as the log)"
        )


@dataclass
class Derivation:
    versions: dict[str, int] = field(default_factory=dict)  # graph -> version derived
    turns: dict[str, int] = field(default_factory=dict)  # graph -> turns re-extracted
    undecodable: int = 0
    # graph -> (distinct turns the turns topic still holds, turns of the live graph) where fewer
    short: dict[str, tuple[int, int]] = field(default_factory=dict)


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
    found: dict[str, set[str]] = {}
    topic = settings.turns_topic
    async with log_reader(settings) as reader, MemoryClient(settings) as client:
        partitions = await partitions_to_read(reader, topic, graph_id)
        for partition, (start, end) in (await reader.bounds(topic, partitions)).items():
            async for batch in reader.read(topic, partition, start, end):
                turns = []
                for record in batch:
                    try:
                        turn = decode_turn(record.value, datetime.now(timezone.utc), settings.max_future_s)
                    except DecodeError:
                        result.undecodable += 1  # it went to the DLQ when it was published
                        continue
                    if graph_id is None or turn.graph_id == graph_id:
                        turns.append(turn)
                # As the extract agent does: a turn whose extraction fails went to the DLQ live.
                events = []
                for ingested in ingest_all(turns, settings.extraction, extractor):
                    if isinstance(ingested, str):
                        result.undecodable += 1
                        continue
                    v = version or versions.setdefault(ingested.graph_id, 1)
                    result.versions[ingested.graph_id] = v
                    result.turns[ingested.graph_id] = result.turns.get(ingested.graph_id, 0) + 1
                    found.setdefault(ingested.graph_id, set()).add(ingested.turn_id)
                    events.append(ingested.model_copy(update={"graph_version": v}))
                await client.emit(events)
                if progress is not None:
                    progress(len(batch))
        result.short = await _short_of_the_live_graphs(client, {g: len(ids) for g, ids in found.items()})
    return result


async def _short_of_the_live_graphs(client: MemoryClient, found: dict[str, int]) -> dict[str, tuple[int, int]]:
    """graph -> (turns found, turns its live graph holds), where the turns
    topic holds fewer than the live graph was built from: retention (the
    broker's, 7 days by default on Kafka) dropped the others, and a version
    derived from it holds only what is left."""
    short = {}
    for graph, count in found.items():
        reply = await client.stats(graph, top=0)
        if isinstance(reply, StatsReply) and reply.turns > count:
            short[graph] = (count, reply.turns)
    return short


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
        [partition] = await partitions_to_read(reader, topic, graph_id)
        start, end = (await reader.bounds(topic, [partition]))[partition]
        return [record async for batch in reader.read(topic, partition, start, end) for record in batch]
