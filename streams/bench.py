"""`emgas bench`: the speed figures of this memory, measured on this machine.

Every figure is the median of several repeats, with their min and max:

- extract_turns_per_s: the product's extraction (`processors.extract.ingest`)
  on chat turns, one core; yake_reference_turns_per_s: the `yake` package
  (n=3, top 10) on the same turns in the same run.
- ingest_turns_per_s(_2_workers): publish -> applied and visible to
  queries, end to end on the embedded broker, one worker (two workers).
- query_p50_ms / query_p99_ms: in-process spreading activation, scoring and
  top-k (what a worker runs per query) on a synthetic co-occurrence-shaped
  graph (seeded; Zipf-distributed node popularity), 3 seeds drawn by
  degree; ppr_p50_ms: personalised PageRank on the same graph and seeds.
- rr_p50_ms / rr_p99_ms: query round trip through Kafka request/reply on the
  embedded broker against a graph of LoCoMo size; idle_worker_cpu_percent:
  the worker's CPU use while nobody talks to it.
- replay_events_per_s: rebuilding state from `emgas.graph-events`.
- resident_bytes_per_edge: resident memory of the query structures of the
  synthetic graph, per undirected edge.
- forget_ms: applying a request to forget one turn of a graph of
  forget_graph_turns simulated turns (decay ticks, consolidations, RocksDB
  state): the graph version is re-folded from its journal without the turn;
  journal_bytes_per_turn: the journal that makes it possible (every event
  applied to the graph, ticks included), per turn.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import platform
import shutil
import statistics
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable

import numpy as np

from processors.activation import ActivationParams, concept_scores, spread, top_concepts
from processors.extract import ExtractionParams, detect_language, extractor_id, ingest
from processors.walks import personalised_pagerank
from replay.bench import synthetic_turns
from replay.fold import Selection
from replay.run import replay
from state.view import GraphView
from processors.graph import GraphParams, GraphRef
from processors.dynamics import DecayParams
from streams.client import MemoryClient
from streams.demo import DEMO_QUERIES, demo_turns, percentile, start_worker, stop_worker, turns_per_graph, wait_for_turns
from streams.local import start_embedded
from streams.settings import Settings

Progress = Callable[[str], None]


def figure(values: list[float], digits: int = 2) -> dict[str, Any]:
    """Median, min and max of repeated measurements."""
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "repeats": len(values),
    }


def _rate(count: int, run: Callable[[], Any], repeats: int) -> list[float]:
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        rates.append(count / (time.perf_counter() - started))
    return rates


def extraction_figures(turns: int, repeats: int) -> dict[str, Any]:
    import yake

    params = ExtractionParams()
    english = [t for t in demo_turns() if detect_language(t.text, params) == "en"]
    turn_objects = [english[i % len(english)].model_copy(update={"turn_id": f"t{i}"}) for i in range(turns)]
    corpus = [t.text for t in turn_objects]
    tag = extractor_id(params)
    reference = yake.KeywordExtractor(lan="en", n=3, top=10)
    for t in english:  # warm up: stopword lists, caches
        ingest(t, params, tag)
        reference.extract_keywords(t.text)
    return {
        "extract_turns_per_s": figure(_rate(turns, lambda: [ingest(t, params, tag) for t in turn_objects], repeats), 1),
        "yake_reference_turns_per_s": figure(_rate(turns, lambda: [reference.extract_keywords(x) for x in corpus], repeats), 1),
    }


def synthetic_view(concepts: int, edges: int, seed: int) -> GraphView:
    """A co-occurrence-shaped graph: node popularity ~ Zipf, pair counts from
    sampling pairs by popularity, c(x) and N consistent with ~5 concepts per turn."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / (np.arange(concepts) + 10.0) ** 0.8
    popularity /= popularity.sum()
    draws = int(edges * 1.25)
    a = rng.choice(concepts, size=draws, p=popularity)
    b = rng.choice(concepts, size=draws, p=popularity)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keep = lo != hi
    pairs, counts = np.unique(lo[keep] * concepts + hi[keep], return_counts=True)
    pairs, counts = pairs[:edges], counts[:edges]
    view = GraphView(GraphRef("bench", 1), DecayParams())
    for i in range(concepts):
        view.node(f"c{i}", f"c{i}")
    incident = np.zeros(concepts)
    np.add.at(incident, pairs // concepts, counts)
    np.add.at(incident, pairs % concepts, counts)
    for i, c in enumerate(incident):
        view.set_count(i, int(c // 4) + 1)
    view.load_pairs(pairs // concepts, pairs % concepts, counts)
    view.turns = int(view.counts.sum() // 5) + 1
    return view


def _rss_bytes() -> int:
    """Resident set size, after handing freed heap back to the system."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def query_figures(concepts: int, edges: int, queries: int, repeats: int, seed: int = 11) -> dict[str, Any]:
    before = _rss_bytes()
    view = synthetic_view(concepts, edges, seed)
    params = ActivationParams()
    resident = (_rss_bytes() - before) / max(view.edges, 1)
    degree = view.degrees()
    rng = np.random.default_rng(seed)
    seed_sets = [rng.choice(view.size, size=3, replace=False, p=degree / degree.sum()).tolist() for _ in range(queries)]
    neighbours = view.neighbours(params.weight, params.fan)

    def one(seeds: list[int]) -> float:
        started = time.perf_counter()
        activation, _ = spread(view.size, seeds, neighbours, params)
        scores = concept_scores(activation, view.specificity(), params.hub_floor)
        top_concepts(scores, activation, params.top_concepts, view.ids)
        return (time.perf_counter() - started) * 1000

    rounds = [[one(s) for s in seed_sets] for _ in range(repeats)]
    src, dst, weight = view.edge_arrays(params.weight)
    ppr_rounds = []
    for _ in range(repeats):
        times = []
        for s in seed_sets[: max(5, queries // 10)]:
            started = time.perf_counter()
            personalised_pagerank(view.size, src, dst, weight, s)
            times.append((time.perf_counter() - started) * 1000)
        ppr_rounds.append(statistics.median(times))
    return {
        "query_graph": {"concepts": view.concepts, "edges": view.edges, "queries": queries},
        "query_p50_ms": figure([percentile(r, 0.5) for r in rounds], 3),
        "query_p99_ms": figure([percentile(r, 0.99) for r in rounds], 3),
        "ppr_p50_ms": figure(ppr_rounds, 3),
        "resident_bytes_per_edge": round(resident, 1),
        "adjacency_bytes_per_edge": round(view.resident_bytes() / max(view.edges, 1), 1),
    }


async def _ingest_s(settings: Settings, turns: list[Any], totals: dict[str, int]) -> float:
    """Seconds from publishing `turns` until every graph holds its new total
    (`totals`: turns per graph before, updated here)."""
    for graph, n in turns_per_graph(turns).items():
        totals[graph] = totals.get(graph, 0) + n
    async with MemoryClient(settings) as client:
        started = time.perf_counter()
        for i in range(0, len(turns), 500):
            await client.publish(turns[i : i + 500])
        await wait_for_turns(client, totals, deadline_s=900)
        return time.perf_counter() - started


async def _ready(settings: Settings, graphs: list[str]) -> None:
    async with MemoryClient(settings) as client:
        await wait_for_turns(client, {g: 0 for g in graphs}, deadline_s=120)


async def _workers_serving(settings: Settings, names: set[str], deadline_s: float) -> bool:
    async with MemoryClient(settings) as client:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            try:
                replies = await client.digests(timeout_s=5)
                if {getattr(r, "worker", None) for r in replies} == names:
                    return True
            except Exception:  # noqa: BLE001 - a partition still moving: ask again
                pass
            await asyncio.sleep(0.5)
    return False


def _ingest_rates(
    live: Settings, turns: int, repeats: int, tag: str, totals: dict[str, int], progress: Progress
) -> list[float]:
    rates = []
    for r in range(repeats):
        batch = [t.model_copy(update={"turn_id": f"{tag}{r}-{t.turn_id}"}) for t in synthetic_turns(turns, graphs=8)]
        progress(f"ingest {tag} {r + 1}/{repeats}")
        rates.append(turns / asyncio.run(_ingest_s(live, batch, totals)))
    return rates


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _round_trips(settings: Settings, queries: int) -> list[float]:
    async with MemoryClient(settings) as client:
        times = []
        for i in range(queries):
            _, text = DEMO_QUERIES[i % len(DEMO_QUERIES)]
            started = time.perf_counter()
            await client.ask("rr", text, reinforce=False)
            times.append((time.perf_counter() - started) * 1000)
        return times


def pipeline_figures(settings: Settings, size: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """On one embedded broker (4 partitions): ingest with one worker, replay,
    round trips and idle CPU, then ingest with a second worker added."""
    home = Path(tempfile.mkdtemp(prefix="emgas-bench-"))
    bench = settings.model_copy(update={"home": home, "partitions": 4, "turn_partitions": 4})
    cluster = start_embedded(bench)
    live = bench.model_copy(update={"broker": cluster.bootstrap_servers})
    procs = [start_worker(live, home / "worker-1.log", name="worker-1")]
    repeats = size["repeats"]
    out: dict[str, Any] = {}
    try:
        asyncio.run(_ready(live, [f"bench-{i}" for i in range(8)] + ["rr"]))
        totals: dict[str, int] = {}
        _ingest_rates(live, 50, 1, "warm-up", totals, progress)  # first extraction, first writes
        out["ingest_turns_per_s"] = figure(_ingest_rates(live, size["ingest"], repeats, "one", totals, progress), 1)
        progress("replay")
        out["replay_events_per_s"] = figure([
            asyncio.run(replay(live, home / f"replayed-{i}", None, Selection(), verify=False)).report.events_per_s
            for i in range(repeats)
        ], 1)
        progress("round trips")
        graph_turns = [t.model_copy(update={"graph_id": "rr"}) for t in synthetic_turns(size["rr_turns"], graphs=1)]
        asyncio.run(_ingest_s(live, graph_turns, totals))
        rounds = [asyncio.run(_round_trips(live, size["rr_queries"])) for _ in range(repeats)]
        out["rr_graph_turns"] = size["rr_turns"]
        out["rr_p50_ms"] = figure([percentile(r, 0.5) for r in rounds], 2)
        out["rr_p99_ms"] = figure([percentile(r, 0.99) for r in rounds], 2)
        time.sleep(1.0)
        cpu = _cpu_seconds(procs[0].pid)
        time.sleep(size["idle_s"])
        out["idle_worker_cpu_percent"] = round((_cpu_seconds(procs[0].pid) - cpu) / size["idle_s"] * 100, 2)
        procs.append(start_worker(live, home / "worker-2.log", name="worker-2"))
        progress("a second worker joins")
        if asyncio.run(_workers_serving(live, {"worker-1", "worker-2"}, 90)):
            out["ingest_turns_per_s_2_workers"] = figure(
                _ingest_rates(live, size["ingest"], repeats, "two", totals, progress), 1
            )
        else:
            out["ingest_turns_per_s_2_workers"] = None
            out["ingest_2_workers_error"] = "the workers did not share the partitions within 90 s (mock cluster SyncGroup race)"
        return out
    finally:
        for proc in procs:
            stop_worker(proc)
        cluster.close()
        shutil.rmtree(home, ignore_errors=True)


def forget_figures(days: int, repeats: int) -> dict[str, Any]:
    from processors.events import Forget
    from state.driver import LocalLog
    from state.rocks import RocksStore
    from streams.simulation import GRAPH, Stream, turns

    stream = Stream(days=days)
    with tempfile.TemporaryDirectory(prefix="emgas-bench-forget-") as tmp:
        log = LocalLog(GraphParams(), RocksStore(Path(tmp)))
        log.extend(turns(stream))
        at = log.state.repo.meta(GraphRef(GRAPH, 1)).clock
        middle = days * stream.turns_per_day // 2  # a turn from the middle of the stream
        timings = []
        for i in range(repeats):
            started = time.perf_counter()
            log.append(Forget(graph_id=GRAPH, request_id=f"bench-{i}", timestamp=at, turn_ids=(f"t{middle + i}",)))
            timings.append((time.perf_counter() - started) * 1000)
        ref = GraphRef(GRAPH, 1)
        journal = sum(len(entry.event) for entry in log.state.repo.journal(ref))
        turns_held = log.state.repo.meta(ref).turns
        log.state.close()
    return {
        "forget_ms": figure(timings, 1), "forget_graph_turns": turns_held,
        "journal_bytes_per_turn": round(journal / turns_held),
    }


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {p: version(p) for p in ("numpy", "yake", "rocksdict", "aiokafka", "faust-streaming", "confluent-kafka")},
    }


def run_bench(settings: Settings, quick: bool, progress: Progress = print) -> dict[str, Any]:
    size = (
        dict(extract=100, concepts=10_000, edges=200_000, queries=50, ingest=200, rr_turns=300, rr_queries=50, idle_s=3.0, forget_days=60, repeats=2)
        if quick
        else dict(extract=1000, concepts=100_000, edges=2_000_000, queries=300, ingest=2000, rr_turns=700, rr_queries=200, idle_s=10.0, forget_days=1080, repeats=3)
    )
    figures: dict[str, Any] = {"quick": quick, "machine": machine()}
    progress("extraction")
    figures.update(extraction_figures(size["extract"], size["repeats"]))
    progress("queries on the synthetic graph")
    figures.update(query_figures(size["concepts"], size["edges"], size["queries"], size["repeats"]))
    progress("forgetting a turn")
    figures.update(forget_figures(size["forget_days"], size["repeats"]))
    figures.update(pipeline_figures(settings, size, progress))
    return figures


def format_figures(figures: dict[str, Any]) -> str:
    lines = []
    for name, value in figures.items():
        if isinstance(value, dict) and "median" in value:
            lines.append(f"{name:>30}: {value['median']:>10}  (min {value['min']}, max {value['max']}, {value['repeats']} repeats)")
        elif name != "machine":
            lines.append(f"{name:>30}: {value}")
    return "\n".join(lines)
