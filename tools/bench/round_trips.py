"""Query round trips through Kafka request/reply, and the worker's own time in them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from emgas.processors.events import ActivationReply
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.settings import Settings
from emgas.tools.demo import DEMO_QUERIES
from emgas.tools.figures import figure
from emgas.tools.harness import percentile


async def _round_trips(settings: Settings, queries: int) -> tuple[list[float], list[float]]:
    """Round trip and worker time (the reply's `timings.total_ms`) of each query, ms."""
    async with MemoryClient(settings) as client:
        times, worker = [], []
        for i in range(queries):
            _, text = DEMO_QUERIES[i % len(DEMO_QUERIES)]
            started = time.perf_counter()
            reply = await client.ask("rr", text, reinforce=False)
            times.append((time.perf_counter() - started) * 1000)
            if isinstance(reply, ActivationReply):
                worker.append(reply.timings.total_ms)
        return times, worker


def round_trip_figures(live: Settings, queries: int, repeats: int) -> dict[str, Any]:
    rounds = [asyncio.run(_round_trips(live, queries)) for _ in range(repeats)]
    worker = [percentile(w, 0.5) for _, w in rounds if w]
    return {
        "rr_p50_ms": figure([percentile(times, 0.5) for times, _ in rounds], 2),
        "rr_p99_ms": figure([percentile(times, 0.99) for times, _ in rounds], 2),
        "rr_worker_p50_ms": figure(worker, 3) if worker else None,  # None: no activation reply came
    }
