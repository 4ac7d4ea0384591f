"""`emgas bench-replay`: live ingest rate vs replay (= recovery) rate, measured.

Starts the embedded broker with ONE partition per topic (the mock cluster
keeps about 5 MiB per partition, so this is the largest single-partition
log it holds), a worker, publishes N turns and times:

- live ingest: publish until the worker has applied every turn (extraction,
  two Kafka hops, the fold);
- replay: `emgas replay --all` of that log into a fresh state directory,
  which is the same code a worker runs to recover a partition it has no
  state for (`streams.runtime.recovery` calls `replay.rebuild.rebuild_partition`);
- fold only: the same records, already in memory, folded into a fresh
  RocksDB state (what replay costs without Kafka);
- recovery: a second worker with an empty state directory takes over the
  partition; time from its start until it answers with every turn
  (includes process start and the consumer-group join).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from emgas.processors.events import Turn
from emgas.processors.graph import GraphParams
from emgas.replay.fold import FoldCounts, Selection, fold_records
from emgas.replay.reader import LogRecord
from emgas.streams.interfaces.admin import replay
from emgas.streams.kafka.reader import log_reader
from emgas.state.projector import PartitionState
from emgas.state.rocks import RocksStore
from emgas.streams.interfaces.client import MemoryClient
from emgas.tools.harness import synthetic_turns
from emgas.testing import start_worker, stop_worker, turns_per_graph, wait_for_turns
from emgas.streams.kafka.local import start_scratch_broker
from emgas.streams.settings import Settings


async def _ingest(settings: Settings, turns: list[Turn]) -> float:
    async with MemoryClient(settings) as client:
        await wait_for_turns(client, {g: 0 for g in turns_per_graph(turns)}, deadline_s=120)
        started = time.perf_counter()
        await client.publish(turns)
        await wait_for_turns(client, turns_per_graph(turns), deadline_s=600)
        return time.perf_counter() - started


async def _read_log(settings: Settings) -> list[LogRecord]:
    """Every record of the (single) graph-events partition, held in memory."""
    async with log_reader(settings) as reader:
        _, end = (await reader.bounds(settings.graph_events_topic, [0]))[0]
        return [r async for batch in reader.read(settings.graph_events_topic, 0, 0, end) for r in batch]


def _fold_only_s(records: list[LogRecord], state_dir: Path, params: GraphParams) -> float:
    """Seconds to fold `records` into a fresh RocksDB state: replay without Kafka."""
    state = PartitionState(RocksStore(state_dir), params)
    started = time.perf_counter()
    fold_records(state, records, Selection(), FoldCounts())
    elapsed = time.perf_counter() - started
    state.close()
    return elapsed


async def _wait_served(settings: Settings, turns: list[Turn]) -> None:
    async with MemoryClient(settings) as client:
        await wait_for_turns(client, turns_per_graph(turns), deadline_s=600)


def run_replay_bench(settings: Settings, count: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="emgas-bench-"))
    one = settings.model_copy(update={"home": home, "partitions": 1, "turn_partitions": 1})
    cluster = start_scratch_broker(one, one.home / "kafka")
    live = one.model_copy(update={"broker": cluster.bootstrap_servers})
    turns = synthetic_turns(count)
    worker = start_worker(live, home / "worker-1.log", name="worker-1")
    try:
        ingest_s = asyncio.run(_ingest(live, turns))
        result = asyncio.run(replay(live, home / "replayed", None, Selection(), verify=True))
        records = asyncio.run(_read_log(live))
        fold_s = _fold_only_s(records, home / "fold-only", live.graph)
        stop_worker(worker)
        started = time.perf_counter()
        worker = start_worker(live, home / "worker-2.log", name="worker-2")
        asyncio.run(_wait_served(live, turns))
        recovery_s = time.perf_counter() - started
    finally:
        stop_worker(worker)
        cluster.close()
    log_bytes = sum(p.stat().st_size for p in (home / "replayed").rglob("*") if p.is_file())
    shutil.rmtree(home, ignore_errors=True)
    return {
        "turns": count,
        "partitions": 1,
        "live_ingest_s": round(ingest_s, 3),
        "live_ingest_turns_per_s": round(count / ingest_s, 1),
        "replay_s": round(result.report.seconds, 3),
        "replay_events_per_s": round(result.report.events_per_s, 1),
        "replay_verified": result.differences == [],
        "fold_only_events_per_s": round(len(records) / fold_s, 1),
        "recovery_fresh_worker_s": round(recovery_s, 3),
        "rebuilt_state_bytes": log_bytes,
    }


def print_figures(figures: dict[str, Any], json_out: Path | None) -> None:
    for name, value in figures.items():
        print(f"{name:>28}: {value}")
    if json_out:
        json_out.write_text(json.dumps(figures, indent=2))
