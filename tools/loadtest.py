"""`emgas loadtest`: turns for many graphs and queries at a steady rate, then a reconciliation.

Starts the embedded broker (loopback) and one worker, publishes `turns`
turns spread over `graphs` graphs evenly over `duration_s` seconds while a
second task asks `queries_per_s` queries per second, and stops by itself.
At the end: every published turn must be in its graph (turn counts per
graph from the worker against what was published), no reply may be an
error, and the worker's resident memory is reported at the start and the
end of the load, with the query latency percentiles.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from emgas.processors.events import ErrorReply, StatsReply
from emgas.tools.harness import synthetic_turns
from emgas.streams.interfaces.client import MemoryClient
from emgas.tools.demo import DEMO_QUERIES
from emgas.tools.harness import percentile, resident_bytes
from emgas.testing import free_port, start_worker, stop_worker, turns_per_graph, wait_for_turns, wait_until_warm
from emgas.streams.kafka.local import start_scratch_broker
from emgas.streams.settings import Settings


def _rss_mib(pid: int) -> float:
    return resident_bytes(pid) / 2**20


async def _publish(client: MemoryClient, turns: list[Any], duration_s: float) -> None:
    """Publish in small batches, paced to spread the turns over `duration_s`."""
    batch = max(1, len(turns) // max(1, int(duration_s * 20)))
    started = time.monotonic()
    for i in range(0, len(turns), batch):
        await client.publish(turns[i : i + batch])
        ahead = started + duration_s * (i + batch) / len(turns) - time.monotonic()
        if ahead > 0:
            await asyncio.sleep(ahead)


async def _query(client: MemoryClient, graphs: list[str], rate: float, until: float) -> tuple[list[float], list[str]]:
    latencies, errors = [], []
    k = 0
    while time.monotonic() < until:
        tick = time.monotonic()
        graph = graphs[k % len(graphs)]
        _, text = DEMO_QUERIES[k % len(DEMO_QUERIES)]
        reply = await client.ask(graph, text, reinforce=False, timeout_s=10)
        latencies.append((time.monotonic() - tick) * 1000)
        if isinstance(reply, ErrorReply) and reply.code != "graph_not_found":  # not yet created: intended
            errors.append(f"{reply.code}: {reply.message}")
        k += 1
        await asyncio.sleep(max(0.0, 1.0 / rate - (time.monotonic() - tick)))
    return latencies, errors


async def _session(
    settings: Settings, turns: list[Any], rate: float, duration_s: float, pid: int, port: int
) -> dict[str, Any]:
    graphs = sorted(turns_per_graph(turns))
    async with MemoryClient(settings) as client:
        await wait_for_turns(client, {g: 0 for g in graphs}, deadline_s=120)
        await asyncio.to_thread(wait_until_warm, port)
        rss_start = _rss_mib(pid)  # the worker is up, owns its partitions and has loaded what it loads once
        started = time.monotonic()
        publishing = asyncio.create_task(_publish(client, turns, duration_s))
        latencies, errors = await _query(client, graphs, rate, started + duration_s)
        await publishing
        await wait_for_turns(client, turns_per_graph(turns), deadline_s=120)
        settled_s = time.monotonic() - started
        missing = {}
        for graph, expected in turns_per_graph(turns).items():
            stats = await client.stats(graph, top=0)
            held = stats.turns if isinstance(stats, StatsReply) else 0
            if held != expected:
                missing[graph] = expected - held
    return {"latencies": latencies, "errors": errors, "missing": missing, "settled_s": settled_s, "rss_start": rss_start}


def run_loadtest(settings: Settings, turns: int, queries_per_s: float, duration_s: float, graphs: int = 50) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="emgas-load-"))
    load = settings.model_copy(update={"home": home})
    cluster = start_scratch_broker(load, load.home / "kafka")
    live = load.model_copy(update={"broker": cluster.bootstrap_servers})
    port = free_port()
    worker = start_worker(live, home / "worker.log", web_port=port)
    try:
        outcome = asyncio.run(
            _session(live, synthetic_turns(turns, graphs=graphs), queries_per_s, duration_s, worker.pid, port))
        rss_end = _rss_mib(worker.pid)
    finally:
        stop_worker(worker)
        cluster.close()
        shutil.rmtree(home, ignore_errors=True)
    latencies = outcome["latencies"]
    return {
        "turns": turns,
        "graphs": graphs,
        "duration_s": duration_s,
        "turns_per_s_offered": round(turns / duration_s, 1),
        "queries": len(latencies),
        "queries_per_s_achieved": round(len(latencies) / duration_s, 1),
        "query_p50_ms": round(percentile(latencies, 0.5), 2) if latencies else None,
        "query_p99_ms": round(percentile(latencies, 0.99), 2) if latencies else None,
        "error_replies": outcome["errors"][:10],
        "turns_missing": outcome["missing"],
        "all_applied_after_s": round(outcome["settled_s"], 2),
        "worker_rss_mib": {"start": round(outcome["rss_start"], 1), "end": round(rss_end, 1)},
        "ok": not outcome["errors"] and not outcome["missing"],
    }
