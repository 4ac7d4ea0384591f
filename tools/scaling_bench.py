"""`emgas bench`, scaling out by partition: does the work divide, and how long do graphs pause?

- worker_cpu_ms_per_turn_1 / _2 / _3: the same stream of turns (over
  SCALE_GRAPHS graphs, SCALE_PARTITIONS partitions) ingested by 1, 2 and 3
  workers in one group, each on a fresh embedded broker: CPU time (user +
  system, from /proc/PID/stat) summed over the worker processes from just
  before publishing to every turn applied, per turn. Throughput cannot show
  scaling on a 2-core machine that also runs the broker and the publisher;
  CPU per turn can: it stays flat when nothing is done twice.
  partitions_per_worker_N: how many graph-events partitions each of the N
  workers owns (from its /health).
- max_unavailable_s_join / _leave: two workers serve graphs whose log holds
  a history (unavailability_history_events events per partition at the
  least, with a checkpoint, as a running deployment has); every graph is
  asked continuously (`tools.availability`); a third worker with no state
  joins, then leaves (SIGTERM). The longest any graph could not answer,
  from the start of the join (of the leave) until every graph answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from emgas.processors.events import GraphEvent, Turn
from emgas.streams.kafka.reader import log_reader
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.kafka.local import start_scratch_broker
from emgas.streams.settings import Settings
from emgas.streams.interfaces.snapshots import request_snapshots
from emgas.tools.availability import Availability
from emgas.tools.harness import cpu_seconds, ingest_s
from emgas.testing import free_port, health, start_worker, stop_worker, wait_for_workers, wait_until_warm

Progress = Callable[[str], None]
SCALE_PARTITIONS = 6  # divides among 1, 2 and 3 workers evenly
SCALE_GRAPHS = 24
JOIN_DEADLINE_S = 120.0
PROBE_PAUSE_S = 0.1  # between one answer and the next question, per graph
INGEST_POLL_S = 0.5  # how often a graph's turn count is asked while CPU is measured (the asking costs CPU too)


@contextlib.contextmanager
def group(settings: Settings, names: list[str], tag: str) -> Iterator[tuple[Settings, dict[str, tuple[Any, int]]]]:
    """A fresh embedded broker (SCALE_PARTITIONS partitions) and workers `names`,
    once they share the partitions: (its settings, name -> (process, web port))."""
    home = Path(tempfile.mkdtemp(prefix=f"emgas-bench-{tag}-"))
    base = settings.model_copy(update={"home": home, "partitions": SCALE_PARTITIONS, "turn_partitions": SCALE_PARTITIONS})
    cluster = start_scratch_broker(base, base.home / "kafka")
    live = base.model_copy(update={"broker": cluster.bootstrap_servers})
    workers: dict[str, tuple[Any, int]] = {}
    try:
        for name in names:
            port = free_port()
            workers[name] = (start_worker(live, home / f"{name}.log", name=name, web_port=port), port)
        asyncio.run(wait_for_workers(live, set(names), JOIN_DEADLINE_S))
        yield live, workers
    finally:
        for process, _ in workers.values():
            stop_worker(process)
        cluster.close()
        shutil.rmtree(home, ignore_errors=True)


def owned(workers: dict[str, tuple[Any, int]]) -> list[int]:
    """How many graph-events partitions each worker has been assigned, fewest first."""
    return sorted(len(health(port)["partitions"]["assigned"]) for _, port in workers.values())


def scale_turns(count: int, tag: str) -> list[Turn]:
    """`count` turns of the demo conversation over SCALE_GRAPHS graphs, ids unique to `tag`."""
    from emgas.tools.harness import synthetic_turns

    return [t.model_copy(update={"turn_id": f"{tag}-{t.turn_id}", "graph_id": f"scale-{t.graph_id}"})
            for t in synthetic_turns(count, graphs=SCALE_GRAPHS)]


def cpu_figures(settings: Settings, turns: int, repeats: int, progress: Progress) -> dict[str, Any]:
    """worker_cpu_ms_per_turn_N and partitions_per_worker_N for N = 1, 2, 3."""
    from emgas.tools.figures import figure

    out: dict[str, Any] = {"scale_partitions": SCALE_PARTITIONS, "scale_turns": turns}
    for n in (1, 2, 3):
        progress(f"{n} worker(s): CPU per turn")
        with group(settings, [f"worker-{i + 1}" for i in range(n)], f"cpu{n}") as (live, workers):
            for _, port in workers.values():
                wait_until_warm(port)  # the encoder's session is built after a worker serves: not measured
            totals: dict[str, int] = {}
            asyncio.run(ingest_s(live, scale_turns(SCALE_GRAPHS * 4, "warm-up"), totals, INGEST_POLL_S))  # first extraction, first writes
            per_turn = []
            for r in range(repeats):
                batch = scale_turns(turns, f"n{n}-r{r}")
                before = sum(cpu_seconds(process.pid) for process, _ in workers.values())
                asyncio.run(ingest_s(live, batch, totals, INGEST_POLL_S))
                spent = sum(cpu_seconds(process.pid) for process, _ in workers.values()) - before
                per_turn.append(spent * 1000 / turns)
            out[f"worker_cpu_ms_per_turn_{n}"] = figure(per_turn, 3)
            out[f"partitions_per_worker_{n}"] = owned(workers)
    return out


async def _history(live: Settings, events: list[GraphEvent]) -> int:
    """Append `events` and checkpoint every graph; the fewest events any partition holds."""
    async with MemoryClient(live) as client:
        await client.emit(events)
    await request_snapshots(live, None, wait_s=120)
    async with log_reader(live) as reader:
        bounds = await reader.bounds(live.graph_events_topic, list(range(live.partitions)))
    if any(start > 0 for start, _ in bounds.values()):
        raise RuntimeError("the embedded broker dropped part of the history (5 MiB per partition): use fewer events")
    return min(end for _, end in bounds.values())


async def _pause(live: Settings, graphs: list[str], change: Callable[[], Any]) -> float:
    """Seconds the slowest graph could not answer from `change()` until every graph answers again."""
    async with Availability(live, graphs, pause_s=PROBE_PAUSE_S) as probe:
        await probe.until_all_answer(time.monotonic(), deadline_s=60)
        started = time.monotonic()
        await change()
        await probe.until_all_answer(time.monotonic(), deadline_s=JOIN_DEADLINE_S)
        await asyncio.sleep(0.3)
        if probe.hung:
            raise RuntimeError(f"a query waited {probe.longest_wait_s:.1f} s, past its deadline")
        return probe.longest_gap(started, time.monotonic()).seconds


def availability_figures(settings: Settings, events: list[GraphEvent], repeats: int, progress: Progress) -> dict[str, Any]:
    """max_unavailable_s_join / _leave: a third worker with no state joins two, then leaves."""
    from emgas.tools.figures import figure

    joins, leaves = [], []
    with group(settings, ["worker-1", "worker-2"], "handoff") as (live, workers):
        progress("hand-offs: the history")
        fewest = asyncio.run(_history(live, events))
        graphs = sorted({e.graph_id for e in events if getattr(e, "graph_id", None)})
        for r in range(repeats):
            name = f"joiner-{r}"  # a new name: a new data directory, no state
            progress(f"hand-offs: {name} joins")

            async def join(name: str = name) -> None:  # bound now: called in this iteration
                port = free_port()
                workers[name] = (start_worker(live, live.home / f"{name}.log", name=name, web_port=port), port)
                await wait_for_workers(live, {"worker-1", "worker-2", name}, JOIN_DEADLINE_S)

            joins.append(asyncio.run(_pause(live, graphs, join)))
            progress(f"hand-offs: {name} leaves")

            async def leave(name: str = name) -> None:
                process, _ = workers.pop(name)
                process.send_signal(signal.SIGTERM)
                await asyncio.to_thread(process.wait, 60)

            leaves.append(asyncio.run(_pause(live, graphs, leave)))
    return {
        "unavailability_history_events": fewest,
        "max_unavailable_s_join": figure(joins, 2),
        "max_unavailable_s_leave": figure(leaves, 2),
    }


def scaling_figures(settings: Settings, size: dict[str, Any], history: list[GraphEvent], progress: Progress) -> dict[str, Any]:
    return {
        **cpu_figures(settings, size["scale_turns"], size["scale_repeats"], progress),
        **availability_figures(settings, history, size["scale_repeats"], progress),
    }

