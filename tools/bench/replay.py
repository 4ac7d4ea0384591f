"""Replay: rebuilding state from the graph-events topic, and reading the same log without the fold."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from emgas.processors.fold_codec import decode_for_fold
from emgas.processors.errors import DecodeError
from emgas.replay.fold import Selection
from emgas.streams.interfaces.admin import replay
from emgas.streams.kafka.reader import log_reader
from emgas.streams.settings import Settings
from emgas.tools.figures import figure


async def _log_read(settings: Settings) -> tuple[int, float]:
    """Every record of every partition of the graph-events topic, from its
    start to its end, read and decoded as a replay decodes it
    (`decode_for_fold`) without folding: (records, seconds), timed as
    `replay.rebuild.rebuild` times a replay."""
    topic = settings.graph_events_topic
    async with log_reader(settings) as reader:
        bounds = await reader.bounds(topic, await reader.partitions(topic))
        records = 0
        started = time.perf_counter()
        for partition, (start, end) in sorted(bounds.items()):
            async for batch in reader.read(topic, partition, start, end):
                for record in batch:
                    try:
                        decode_for_fold(record.value)
                    except DecodeError:
                        pass  # counted as read, as a replay counts it
                records += len(batch)
        return records, time.perf_counter() - started


def replay_figures(live: Settings, home: Path, repeats: int) -> dict[str, Any]:
    """Replay of every record from the first (`--from-beginning`: the same
    records the log read reads, so the two compare like for like), reading
    the same log without the fold, and the default replay, which starts
    from each partition's latest checkpoint (its seconds: restoring the
    snapshots and folding the tail), in turn."""
    replays, reads, from_checkpoint = [], [], []
    for i in range(repeats):
        whole = asyncio.run(replay(live, home / f"replayed-{i}", None, Selection(), verify=False, from_beginning=True))
        replays.append(whole.report.events_per_s)
        records, seconds = asyncio.run(_log_read(live))
        reads.append(records / seconds)
        tail = asyncio.run(replay(live, home / f"replayed-tail-{i}", None, Selection(), verify=False))
        from_checkpoint.append(tail.report.seconds)
    return {
        "replay_events_per_s": figure(replays, 1), "log_read_events_per_s": figure(reads, 1),
        "replay_from_checkpoint_s": figure(from_checkpoint, 3),
    }
