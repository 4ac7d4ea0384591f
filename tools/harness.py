"""What the demo and the benchmarks share beside `emgas.testing` (workers as
child processes, waiting on a live pipeline, the in-process log): the
sample conversation, synthetic turns, timing an ingest, and a process's
memory and CPU.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from emgas.processors.events import Turn
from emgas.streams.cli.main import read_turns
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.settings import Settings
from emgas.testing import turns_per_graph, wait_for_turns


def demo_turns() -> list[Turn]:
    return read_turns(Path(__file__).parent / "data" / "demo.jsonl")


def synthetic_turns(count: int, graphs: int = 4) -> list[Turn]:
    """`count` distinct turns: the demo conversation repeated over `graphs` graphs."""
    base = demo_turns()
    return [
        base[i % len(base)].model_copy(
            update={"graph_id": f"bench-{i % graphs}", "turn_id": f"t{i}"}
        )
        for i in range(count)
    ]


async def ingest_s(settings: Settings, turns: list[Turn], totals: dict[str, int], poll_s: float = 0.05) -> float:
    """Seconds from publishing `turns` until every graph holds its new total
    (`totals`: turns per graph before, updated here), asked every `poll_s`."""
    for graph, n in turns_per_graph(turns).items():
        totals[graph] = totals.get(graph, 0) + n
    async with MemoryClient(settings) as client:
        started = time.perf_counter()
        await client.publish(turns)
        await wait_for_turns(client, totals, deadline_s=900, poll_s=poll_s)
        return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of `values` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def resident_bytes(pid: int | str = "self") -> int:
    """Resident set size of a process, from /proc/PID/statm (Linux)."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    """CPU time a process has used, user + system, from /proc/PID/stat (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

