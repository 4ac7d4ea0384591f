"""`emgas snapshot`: ask the owners of graphs to write snapshots of them now.

A `snapshot_started` record per graph is appended to `emgas.graph-events`
(keyed by the graph); the worker that owns the graph's partition serves it
as soon as it applies it (see `service.snapshot_writer`), and once every
graph of the partition has a complete snapshot it appends a checkpoint.
With `wait_s`, this waits for those checkpoints.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timezone

from emgas.processors.events import DigestReply, SnapshotStarted
from emgas.replay.errors import ReplayError
from emgas.replay.logstate import latest_checkpoint
from emgas.streams.interfaces.admin import live_digests
from emgas.streams.kafka.reader import log_reader
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.settings import Settings


@dataclass
class SnapshotRequest:
    markers: dict[str, tuple[int, int]] = field(default_factory=dict)  # graph -> (partition, offset)
    checkpoints: dict[int, int] = field(default_factory=dict)  # partition -> the checkpoint's offset


async def request_snapshots(settings: Settings, graph_id: str | None, wait_s: float | None) -> SnapshotRequest:
    """Append a snapshot request for `graph_id` (None: every live graph); with
    `wait_s`, wait that long at most for each partition's checkpoint after them."""
    if graph_id is not None:
        graphs = [graph_id]
    else:
        replies = await live_digests(settings, None)
        graphs = sorted({d.graph_id for r in replies if isinstance(r, DigestReply) for d in r.graphs})
    result = SnapshotRequest()
    now = datetime.now(timezone.utc)
    async with MemoryClient(settings) as client:
        for graph in graphs:
            marker = SnapshotStarted(graph_id=graph, reason="request", timestamp=now)
            result.markers[graph] = await client.append_event(marker)
    if wait_s is not None:
        await _wait_for_checkpoints(settings, result, wait_s)
    return result


async def _wait_for_checkpoints(settings: Settings, request: SnapshotRequest, wait_s: float) -> None:
    topic = settings.graph_events_topic
    after: dict[int, int] = {}
    for partition, offset in request.markers.values():
        after[partition] = max(after.get(partition, -1), offset)
    deadline = asyncio.get_running_loop().time() + wait_s
    async with log_reader(settings) as reader:
        while after:
            for partition, offset in list(after.items()):
                start, end = (await reader.bounds(topic, [partition]))[partition]
                found = await latest_checkpoint(reader, topic, partition, max(start, offset), end)
                if found is not None:
                    request.checkpoints[partition] = found[0]
                    del after[partition]
            if after and asyncio.get_running_loop().time() > deadline:
                raise ReplayError(f"no checkpoint written within {wait_s:g} s in partition(s) {sorted(after)}: "
                                  "is a worker running?")
            if after:
                await asyncio.sleep(0.1)
