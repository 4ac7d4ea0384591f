"""`emgas demo`: the whole pipeline on this machine's broker, with figures.

Starts the mock cluster in this process and a worker as a child process
(`emgas worker`), publishes the built-in sample conversation (two graphs,
English and Chinese, with a multi-hop link), waits until the worker has
applied every turn, asks a handful of queries, prints the answers and
measures ingest rate and query round trips.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from emgas.processors.events import ActivationReply
from emgas.streams.cli.main import format_reply
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.errors import StreamsError
from emgas.streams.kafka.local import start_local_broker
from emgas.streams.settings import Settings
from emgas.tools.harness import demo_turns, percentile
from emgas.testing import start_worker, stop_worker, turns_per_graph, wait_for_turns

DEMO_QUERIES: list[tuple[str, str]] = [
    ("alice", "Can I bring my dog when I visit my sister?"),
    ("alice", "Why does the Kafka consumer lag spike?"),
    ("alice", "Who gave me the sourdough starter?"),
    ("alice", "卑尔根的天气怎么样？"),
    ("bob", "How is the marathon training going?"),
]


async def _session(settings: Settings, rounds: int) -> dict[str, Any]:
    turns = demo_turns()
    expected = turns_per_graph(turns)
    async with MemoryClient(settings) as client:
        # Wait for the worker to own its partitions before timing anything.
        await wait_for_turns(client, {g: 0 for g in expected}, deadline_s=120)
        started = time.perf_counter()
        await client.publish(turns)
        await wait_for_turns(client, expected, deadline_s=120)
        ingest_s = time.perf_counter() - started
        print(f"ingested {len(turns)} turns for {len(expected)} graphs in {ingest_s:.2f} s "
              f"({len(turns) / ingest_s:.0f} turns/s, publish to applied)\n")
        round_trips: list[float] = []
        worker_ms: list[float] = []
        for graph, text in DEMO_QUERIES:
            for _ in range(rounds):
                t0 = time.perf_counter()
                reply = await client.ask(graph, text)
                round_trips.append((time.perf_counter() - t0) * 1000)
                if isinstance(reply, ActivationReply):
                    worker_ms.append(reply.timings.total_ms)
            print(f"[{graph}] {text}\n{format_reply(reply)}\n")
    figures = {
        "turns": len(turns),
        "ingest_seconds": round(ingest_s, 3),
        "ingest_turns_per_s": round(len(turns) / ingest_s, 1),
        "queries": len(round_trips),
        "round_trip_ms_p50": round(percentile(round_trips, 0.50), 2),
        "round_trip_ms_p99": round(percentile(round_trips, 0.99), 2),
        "worker_ms_p50": round(percentile(worker_ms, 0.50), 3),
        "worker_ms_p99": round(percentile(worker_ms, 0.99), 3),
    }
    print(
        f"query round trip over {len(round_trips)} queries: p50 {figures['round_trip_ms_p50']} ms, "
        f"p99 {figures['round_trip_ms_p99']} ms (worker time p50 {figures['worker_ms_p50']} ms, "
        f"mean {statistics.mean(worker_ms):.3f} ms)"
    )
    return figures


def run_demo(settings: Settings, rounds: int = 20, kind: str | None = None) -> dict[str, Any]:
    """The demo on this machine's broker (`streams.kafka.local`: real Kafka where
    Java and its jars are, else the mock; `kind` chooses), in a fresh home."""
    home = Path(tempfile.mkdtemp(prefix="emgas-demo-"))
    demo = settings.model_copy(update={"home": home})
    cluster = start_local_broker(demo, home / "kafka", kind)
    if cluster.note:
        print(cluster.note)
    demo = demo.model_copy(update={"broker": cluster.bootstrap_servers})
    print(f"{cluster.description} on {cluster.bootstrap_servers}; starting a worker (log: {home / 'worker.log'})")
    worker = start_worker(demo, home / "worker.log")
    try:
        figures = asyncio.run(_session(demo, rounds))
    except StreamsError as exc:
        crashed = worker.poll() is not None
        stop_worker(worker)
        cluster.close()
        why = f"the worker exited with {worker.returncode}" if crashed else str(exc)
        raise StreamsError(f"demo failed: {why}; worker log kept in {home / 'worker.log'}") from None
    stop_worker(worker)
    cluster.close()
    shutil.rmtree(home, ignore_errors=True)
    return figures
