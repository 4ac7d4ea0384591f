"""The worker-process harness the demo, the benchmarks and the integration tests share.

A worker as a child process (`emgas worker`) on a given broker and home,
stopped by its PID; waiting until graphs have applied a number of turns;
the sample conversation and small helpers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from emgas.processors.events import ActivationReply, Turn
from emgas.streams.cli.main import read_turns
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.errors import QueryTimeout
from emgas.streams.kafka.node import free_port
from emgas.streams.settings import Settings

# A seed no concept id can equal (ids are lemmatised word characters):
# asking it returns only the graph's stats.
STATS_PROBE = "·"


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


def turns_per_graph(turns: list[Turn]) -> dict[str, int]:
    """graph -> number of distinct turn ids among `turns` (what the graph will hold)."""
    ids: dict[str, set[str]] = {}
    for t in turns:
        ids.setdefault(t.graph_id, set()).add(t.turn_id)
    return {g: len(s) for g, s in ids.items()}


def start_worker(
    settings: Settings, log_path: Path, name: str = "worker-1", web_port: int | None = None,
    env: dict[str, str] | None = None, loglevel: str = "WARNING", command: list[str] | None = None,
) -> subprocess.Popen[bytes]:
    """`emgas worker` as a child process on the given broker and home, its web
    server (metrics, health) on `web_port` (default: a free port); `env`:
    more environment variables for it (e.g. other `EMGAS_*` settings);
    `command`: another worker command line (a test's worker with faults)."""
    environment = {
        **os.environ,
        "EMGAS_BROKER": settings.bootstrap_servers(),
        "EMGAS_HOME": str(settings.home),
        "EMGAS_WORKER_NAME": name,
        "EMGAS_WEB_PORT": str(web_port or free_port()),
        "EMGAS_PARTITIONS": str(settings.partitions),
        "EMGAS_TURN_PARTITIONS": str(settings.turn_partitions),
        "EMGAS_GRAPH": settings.graph.model_dump_json(),
        **(env or {}),
    }
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [*(command or [sys.executable, "-m", "emgas", "worker"]), "--loglevel", loglevel],
            env=environment, stdout=log, stderr=subprocess.STDOUT,
        )


def stop_worker(worker: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout_s)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


async def wait_for_turns(client: MemoryClient, expected: dict[str, int], deadline_s: float, poll_s: float = 0.05) -> None:
    """Poll each graph's stats, every `poll_s`, until it has applied `expected[graph]`
    turns (0: until any reply comes, i.e. a worker serves the graph's partition)."""
    deadline = time.monotonic() + deadline_s
    for graph, count in expected.items():
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise QueryTimeout(f"graph {graph!r} did not reach {count} turns in {deadline_s:g} s")
            try:
                reply = await client.ask(graph, seeds=(STATS_PROBE,), timeout_s=min(remaining, 5.0))
            except QueryTimeout:
                continue
            if count == 0 or (isinstance(reply, ActivationReply) and reply.stats.turns >= count):
                break
            await asyncio.sleep(poll_s)


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


def health(port: int) -> dict:
    """A worker's `/health` (it answers 503 while a partition catches up, with the same body)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        return json.loads(err.read())


def wait_until_warm(port: int, deadline_s: float = 60.0, poll_s: float = 0.1) -> None:
    """Until the worker serving `/health` on `port` says it is warm (its
    one-time loads done: the warm-up, the encoder's session), so that what
    is measured next is its steady state."""
    deadline = time.monotonic() + deadline_s
    while not _warm(port):
        if time.monotonic() > deadline:
            raise AssertionError(f"the worker on port {port} not warm in {deadline_s:g} s: {health(port)}")
        time.sleep(poll_s)


def _warm(port: int) -> bool:
    try:
        return bool(health(port).get("warm"))
    except urllib.error.URLError:  # its web server not up yet
        return False


async def wait_for_workers(settings: Settings, names: set[str], deadline_s: float = 120) -> None:
    """Until the partitions are spread over exactly the workers `names` (each answers for one)."""
    deadline = time.monotonic() + deadline_s
    async with MemoryClient(settings) as client:
        while True:
            try:
                if {getattr(r, "worker", None) for r in await client.digests(timeout_s=5)} == names:
                    return
            except QueryTimeout:  # a partition between owners: ask again
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"partitions not spread over {sorted(names)} in {deadline_s:g} s")
            await asyncio.sleep(0.2)
