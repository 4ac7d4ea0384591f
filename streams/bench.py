"""`emgas bench`: the speed figures of this memory, measured on this machine.

Every figure is the median of several repeats, with their min and max:

- extract_turns_per_s: the product's extraction (`processors.extract.ingest`)
  on chat turns, one core; yake_reference_turns_per_s: the `yake` package
  (n=3, top 10) on the same turns in the same run.
- fold_events_per_s: the fold alone (`PartitionState.apply` and its
  commits, as replay calls them) of graph events already decoded in memory
  into a fresh RocksDB state: fold_events events of synthetic LoCoMo-shaped
  conversations (`streams.synthetic`: sessions of turns minutes apart,
  days between sessions), put through `state.driver.LocalLog` so the decay
  ticks and consolidations due are among them; fold_extract_turns_per_s:
  extraction of those same turns, so fold and extraction compare on
  identical turns.
- ingest_turns_per_s(_2_workers): publish -> applied and visible to
  queries, end to end on the embedded broker, one worker (two workers).
- passthrough_turns_per_s: the same two Kafka hops as ingest (turns topic ->
  graph-events-sized records on a second topic -> a consumer that counts
  them), by a process that neither extracts nor folds: the most ingest
  can reach on this broker; same turns count and repeats as ingest.
- query_p50_ms / query_p99_ms: in-process spreading activation, scoring and
  top-k (what a worker runs per query) on a synthetic co-occurrence-shaped
  graph (seeded; Zipf-distributed node popularity), 3 seeds drawn by
  degree; ppr_p50_ms: personalised PageRank on the same graph and seeds.
- rr_p50_ms / rr_p99_ms: query round trip through Kafka request/reply on the
  embedded broker against a graph of LoCoMo size; rr_worker_p50_ms: the
  worker's own time per query in those round trips (the replies'
  `timings.total_ms`); idle_worker_cpu_percent: the worker's CPU use while
  nobody talks to it.
- kafka_hop_p50_ms / kafka_hop_p99_ms: one produce -> consume hop of a small
  record on the same broker, with the worker's fetch settings, one record
  at a time (a round trip is two hops plus the worker's time).
- replay_events_per_s: rebuilding state from `emgas.graph-events`;
  log_read_events_per_s: reading and decoding the same records with the same
  reader, without folding them (what replay costs without the fold).
- resident_bytes_per_edge: resident memory of the query structures of the
  synthetic graph, per undirected edge.
- forget_ms: applying a request to forget one turn of a graph of
  forget_graph_turns simulated turns (decay ticks, consolidations, RocksDB
  state): the graph version is re-folded from its journal without the turn;
  journal_bytes_per_turn: the journal that makes it possible (every event
  applied to the graph, ticks included), per turn.

`limits` relates figures that bound each other (medians), each with its
goal: the fold should not be much slower than extraction
(fold / extract >= 0.5), replay not much slower than reading the log
(replay / log read >= 0.5), ingest not much slower than its Kafka hops
alone (ingest / passthrough >= 0.5), and a round trip not much more than
two hops and the worker's time (rr / (2 hops + worker) <= 1.3).
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import heapq
import itertools
import multiprocessing
import os
import platform
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import version
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from processors.activation import ActivationParams, concept_scores, spread, top_concepts
from processors.codec import decode_graph_event, encode
from processors.errors import DecodeError
from processors.events import ActivationReply, GraphEvent, Turn
from processors.extract import ExtractionParams, detect_language, extractor_id, ingest
from processors.walks import personalised_pagerank
from replay.bench import synthetic_turns
from replay.fold import Selection
from replay.reader import LogRecord
from replay.run import log_reader, replay
from state.driver import LocalLog
from state.projector import PartitionState
from state.rocks import RocksStore
from state.transaction import COMMIT_EVERY
from state.view import GraphView
from processors.graph import GraphParams, GraphRef
from processors.dynamics import DecayParams
from streams.client import MemoryClient
from streams.demo import DEMO_QUERIES, demo_turns, percentile, start_worker, stop_worker, turns_per_graph, wait_for_turns
from streams.embedded import TopicSpec
from streams.local import start_embedded
from streams.settings import Settings
from streams.synthetic import conversations

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


def synthetic_log(turns: list[Turn], params: GraphParams) -> list[GraphEvent]:
    """The graph events of `turns`: each graph's turns extracted and put
    through `LocalLog`, which appends the decay ticks and consolidations as
    they become due; the graphs' logs merged by event time (each graph's
    order kept), as one partition would hold them."""
    extraction = ExtractionParams()
    tag = extractor_id(extraction)
    logs: dict[str, LocalLog] = {}
    for turn in turns:
        logs.setdefault(turn.graph_id, LocalLog(params)).extend([ingest(turn, extraction, tag)])
    return list(heapq.merge(*(log.log for log in logs.values()), key=lambda e: e.timestamp))


def decoded_records(events: list[GraphEvent]) -> list[tuple[GraphEvent, LogRecord]]:
    """`events` written as log records of one partition, each with its event
    decoded back from the record: what a reader hands to the fold."""
    records = [
        LogRecord(0, offset, int(e.timestamp.timestamp() * 1000), e.graph_id.encode(), encode(e))
        for offset, e in enumerate(events)
    ]
    return [(decode_graph_event(r.value), r) for r in records]


def _fold_s(events: list[tuple[GraphEvent, LogRecord]], state_dir: Path, params: GraphParams) -> float:
    """Seconds to fold `events` into a fresh RocksDB state, applied and
    committed as `replay.fold.fold_records` does (every COMMIT_EVERY events
    and after the last), without its decoding."""
    state = PartitionState(RocksStore(state_dir), params)
    started = time.perf_counter()
    for n, (event, record) in enumerate(events, start=1):
        state.apply(event, record.offset, raw=record.value)
        if n % COMMIT_EVERY == 0:
            state.commit()
    state.commit()
    elapsed = time.perf_counter() - started
    state.close()
    return elapsed


def fold_figures(turns: int, repeats: int) -> dict[str, Any]:
    """The fold alone, and extraction on the same synthetic turns."""
    synthetic = conversations(turns)
    params = GraphParams()
    events = decoded_records(synthetic_log(synthetic, params))
    with tempfile.TemporaryDirectory(prefix="emgas-bench-fold-") as tmp:
        folds = [len(events) / _fold_s(events, Path(tmp) / f"state-{i}", params) for i in range(repeats)]
    extraction = ExtractionParams()
    tag = extractor_id(extraction)
    return {
        "fold_turns": turns,
        "fold_events": len(events),
        "fold_events_per_s": figure(folds, 1),
        "fold_extract_turns_per_s": figure(_rate(turns, lambda: [ingest(t, extraction, tag) for t in synthetic], repeats), 1),
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


def _tagged(turns: int, tag: str) -> list[Turn]:
    """`turns` demo turns over 8 graphs, with turn ids no other batch has."""
    return [t.model_copy(update={"turn_id": f"{tag}-{t.turn_id}"}) for t in synthetic_turns(turns, graphs=8)]


def _ingest_rates(
    live: Settings, turns: int, repeats: int, tag: str, totals: dict[str, int], progress: Progress
) -> list[float]:
    rates = []
    for r in range(repeats):
        batch = _tagged(turns, f"{tag}{r}")
        progress(f"ingest {tag} {r + 1}/{repeats}")
        rates.append(turns / asyncio.run(_ingest_s(live, batch, totals)))
    return rates


# The passthrough and the hop use topics of their own on the bench's broker,
# not a second embedded cluster: the same broker (its threads, its fetch
# behaviour) and the same partition counts as the worker's topics, so they
# differ from ingest and round trips only by the worker's work; the worker,
# subscribed to its own topics only, never sees their records, and its
# state stays as it is.
PASSTHROUGH_TURNS = "emgas-bench.passthrough-turns"
PASSTHROUGH_EVENTS = "emgas-bench.passthrough-events"
HOP_TOPIC = "emgas-bench.hop"
HOP_RECORD = bytes(256)  # about an encoded activation query
# Each hop's record is sent after this pause, so it finds the consumer idle
# with a fetch waiting at the broker, as a query finds the worker and a reply
# the client. Sent right after the previous record was taken, it would race
# the consumer's next fetch request and arrive in ~0.5 ms, which no query sees.
HOP_IDLE_S = 0.005
PASSTHROUGH_DEADLINE_S = 600.0  # the passthrough process gives up (and exits) after this


def bench_topics(settings: Settings) -> list[TopicSpec]:
    return [
        TopicSpec(PASSTHROUGH_TURNS, settings.turn_partitions),
        TopicSpec(PASSTHROUGH_EVENTS, settings.partitions),
        TopicSpec(HOP_TOPIC, 1),
    ]


def _consumer(settings: Settings) -> AIOKafkaConsumer:
    """A consumer with the worker's fetch settings (no group: assigned by hand)."""
    return AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers(), enable_auto_commit=False,
        fetch_max_wait_ms=settings.fetch_max_wait_ms, check_crcs=False, **settings.kafka_options(),
    )


def _producer(settings: Settings) -> AIOKafkaProducer:
    """A producer acknowledged like the worker's (acks=all, no linger)."""
    return AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers(), acks="all", **settings.kafka_options())


async def _assign_at_end(consumer: AIOKafkaConsumer, topic: str, partitions: int) -> None:
    """Read every partition of `topic` from its current end; positions are
    resolved here, so no record sent afterwards is missed."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    await consumer.seek_to_end(*tps)
    for tp in tps:
        await consumer.position(tp)


async def _relay(turns_in: AIOKafkaConsumer, producer: AIOKafkaProducer, values: dict[bytes, bytes]) -> None:
    """The first hop's agent: each batch of turns becomes records on the
    second topic (same key), their acks awaited together, like the extract agent."""
    while True:
        batches = await turns_in.getmany(timeout_ms=1000)
        sends = [
            await producer.send(PASSTHROUGH_EVENTS, values.get(r.value, r.value), key=r.key)
            for records in batches.values() for r in records
        ]
        await asyncio.gather(*sends)


async def _count(events_in: AIOKafkaConsumer, targets: list[int], report: Connection) -> None:
    """The second hop's agent: counts records; reports each target count reached."""
    seen, pending = 0, list(targets)
    while pending:
        batches = await events_in.getmany(timeout_ms=1000)
        seen += sum(len(records) for records in batches.values())
        while pending and seen >= pending[0]:
            report.send(pending.pop(0))


async def _passthrough(settings: Settings, values: dict[bytes, bytes], targets: list[int], report: Connection) -> None:
    turns_in, events_in, producer = _consumer(settings), _consumer(settings), _producer(settings)
    for client in (turns_in, events_in, producer):
        await client.start()
    try:
        await _assign_at_end(turns_in, PASSTHROUGH_TURNS, settings.turn_partitions)
        await _assign_at_end(events_in, PASSTHROUGH_EVENTS, settings.partitions)
        report.send(0)  # ready: publish now
        agents = [asyncio.create_task(_relay(turns_in, producer, values)), asyncio.create_task(_count(events_in, targets, report))]
        done, _ = await asyncio.wait(agents, timeout=PASSTHROUGH_DEADLINE_S, return_when=asyncio.FIRST_COMPLETED)
        for agent in agents:
            agent.cancel()
        for agent in done:
            agent.result()  # the relay's failure, if it failed
    finally:
        for client in (turns_in, events_in, producer):
            await client.stop()


def passthrough_agent(settings: Settings, values: dict[bytes, bytes], targets: list[int], report: Connection) -> None:
    """A process that moves turns through the same two Kafka hops as ingest
    without extracting or folding: relays each turn as `values[turn bytes]`
    (its encoded graph event) to a second topic, and counts what arrives
    there, sending `report` each cumulative count of `targets` reached. It
    exits after the last one (or after PASSTHROUGH_DEADLINE_S)."""
    asyncio.run(_passthrough(settings, values, targets, report))


def _reached(report: Connection, target: int, deadline_s: float) -> None:
    """Block until the passthrough process reports `target` (TimeoutError if not within `deadline_s`)."""
    deadline = time.monotonic() + deadline_s
    while report.poll(max(0.0, deadline - time.monotonic())):
        if report.recv() >= target:
            return
    raise TimeoutError(f"the passthrough did not relay {target} records within {deadline_s:g} s")


async def _passthrough_s(settings: Settings, turns: list[Turn], report: Connection, target: int) -> float:
    """Seconds from publishing `turns` (as `_ingest_s` does) until the
    passthrough process has counted `target` records in all."""
    async with MemoryClient(settings.model_copy(update={"turns_topic": PASSTHROUGH_TURNS})) as client:
        started = time.perf_counter()
        for i in range(0, len(turns), 500):
            await client.publish(turns[i : i + 500])
        await asyncio.to_thread(_reached, report, target, PASSTHROUGH_DEADLINE_S)
        return time.perf_counter() - started


def passthrough_rates(live: Settings, turns: int, repeats: int, progress: Progress) -> list[float]:
    """Turns per second through `passthrough_agent`: a warm-up round, then
    `repeats` rounds of `turns`, like `_ingest_rates`. The agent runs in a
    process of its own, as the worker does, so it shares no event loop (and
    no GIL) with the publishing client and the broker's threads."""
    rounds = [_tagged(50, "pass-warm-up"), *(_tagged(turns, f"pass{r}") for r in range(repeats))]
    extraction = ExtractionParams()
    tag = extractor_id(extraction)
    values = {encode(t): encode(ingest(t, extraction, tag)) for batch in rounds for t in batch}
    targets = list(itertools.accumulate(len(batch) for batch in rounds))
    context = multiprocessing.get_context("spawn")
    report, send = context.Pipe(duplex=False)
    agent = context.Process(target=passthrough_agent, args=(live, values, targets, send), daemon=True)
    agent.start()
    send.close()  # the agent holds the only sending end: its exit ends `report`
    try:
        _reached(report, 0, 120)
        rates = []
        for r, (batch, target) in enumerate(zip(rounds, targets)):
            progress(f"passthrough {r}/{repeats}" if r else "passthrough warm-up")
            rates.append(len(batch) / asyncio.run(_passthrough_s(live, batch, report, target)))
        return rates[1:]
    finally:
        agent.join(30)
        if agent.is_alive():
            agent.terminate()
            agent.join()
        report.close()


async def _hop_times(settings: Settings, hops: int) -> list[float]:
    """Milliseconds from sending a small record until an assigned consumer
    (the worker's fetch settings) has it, one record at a time, each sent to
    an idle consumer (see HOP_IDLE_S)."""
    producer, consumer = _producer(settings), _consumer(settings)
    await producer.start()
    await consumer.start()
    try:
        await _assign_at_end(consumer, HOP_TOPIC, 1)
        times = []
        for _ in range(hops):
            await asyncio.sleep(HOP_IDLE_S)
            started = time.perf_counter()
            sent = await producer.send(HOP_TOPIC, HOP_RECORD)
            await consumer.getone()
            times.append((time.perf_counter() - started) * 1000)
            await sent
        return times
    finally:
        await producer.stop()
        await consumer.stop()


def hop_figures(live: Settings, hops: int, repeats: int) -> dict[str, Any]:
    asyncio.run(_hop_times(live, 10))  # warm up: connections, metadata
    rounds = [asyncio.run(_hop_times(live, hops)) for _ in range(repeats)]
    return {
        "kafka_hops": hops,
        "kafka_hop_p50_ms": figure([percentile(r, 0.5) for r in rounds], 3),
        "kafka_hop_p99_ms": figure([percentile(r, 0.99) for r in rounds], 3),
    }


async def _log_read(settings: Settings) -> tuple[int, float]:
    """Every record of every partition of the graph-events topic, from its
    start to its end, read and decoded without folding: (records, seconds),
    timed as `replay.rebuild.rebuild` times a replay."""
    topic = settings.graph_events_topic
    async with log_reader(settings) as reader:
        bounds = await reader.bounds(topic, await reader.partitions(topic))
        records = 0
        started = time.perf_counter()
        for partition, (start, end) in sorted(bounds.items()):
            async for batch in reader.read(topic, partition, start, end):
                for record in batch:
                    try:
                        decode_graph_event(record.value)
                    except DecodeError:
                        pass  # counted as read, as a replay counts it
                records += len(batch)
        return records, time.perf_counter() - started


def replay_figures(live: Settings, home: Path, repeats: int) -> dict[str, Any]:
    """Replay, and reading the same log without the fold, in turn."""
    replays, reads = [], []
    for i in range(repeats):
        replays.append(asyncio.run(replay(live, home / f"replayed-{i}", None, Selection(), verify=False)).report.events_per_s)
        records, seconds = asyncio.run(_log_read(live))
        reads.append(records / seconds)
    return {"replay_events_per_s": figure(replays, 1), "log_read_events_per_s": figure(reads, 1)}


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def pipeline_figures(settings: Settings, size: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """On one embedded broker (4 partitions): ingest with one worker, the
    passthrough, replay and log read, round trips, Kafka hops and idle CPU,
    then ingest with a second worker added."""
    home = Path(tempfile.mkdtemp(prefix="emgas-bench-"))
    bench = settings.model_copy(update={"home": home, "partitions": 4, "turn_partitions": 4})
    cluster = start_embedded(bench)
    cluster.create_topics(bench_topics(bench))
    live = bench.model_copy(update={"broker": cluster.bootstrap_servers})
    procs = [start_worker(live, home / "worker-1.log", name="worker-1")]
    repeats = size["repeats"]
    out: dict[str, Any] = {}
    try:
        asyncio.run(_ready(live, [f"bench-{i}" for i in range(8)] + ["rr"]))
        totals: dict[str, int] = {}
        _ingest_rates(live, 50, 1, "warm-up", totals, progress)  # first extraction, first writes
        out["ingest_turns_per_s"] = figure(_ingest_rates(live, size["ingest"], repeats, "one", totals, progress), 1)
        out["passthrough_turns_per_s"] = figure(passthrough_rates(live, size["ingest"], repeats, progress), 1)
        progress("replay")
        out.update(replay_figures(live, home, repeats))
        progress("round trips")
        graph_turns = [t.model_copy(update={"graph_id": "rr"}) for t in synthetic_turns(size["rr_turns"], graphs=1)]
        asyncio.run(_ingest_s(live, graph_turns, totals))
        out["rr_graph_turns"] = size["rr_turns"]
        out.update(round_trip_figures(live, size["rr_queries"], repeats))
        progress("kafka hops")
        out.update(hop_figures(live, size["hops"], repeats))
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


@dataclass(frozen=True)
class Limit:
    """A ratio of median figures that should stay within `goal`."""

    ratio: str  # how it is computed, as printed
    compute: Callable[[Callable[[str], float]], float]  # from a median lookup
    goal: float
    at_least: bool  # True: ratio >= goal; False: ratio <= goal


LIMITS = {
    "fold_vs_extraction": Limit(
        "fold_events_per_s / extract_turns_per_s",
        lambda m: m("fold_events_per_s") / m("extract_turns_per_s"), 0.5, True,
    ),
    "replay_vs_log_read": Limit(
        "replay_events_per_s / log_read_events_per_s",
        lambda m: m("replay_events_per_s") / m("log_read_events_per_s"), 0.5, True,
    ),
    "ingest_vs_passthrough": Limit(
        "ingest_turns_per_s / passthrough_turns_per_s",
        lambda m: m("ingest_turns_per_s") / m("passthrough_turns_per_s"), 0.5, True,
    ),
    "round_trip_vs_hops": Limit(
        "rr_p50_ms / (2 * kafka_hop_p50_ms + rr_worker_p50_ms)",
        lambda m: m("rr_p50_ms") / (2 * m("kafka_hop_p50_ms") + m("rr_worker_p50_ms")), 1.3, False,
    ),
}


def limits(figures: dict[str, Any]) -> dict[str, Any]:
    """Each limit's ratio of the median figures, its goal and whether it is
    met (ratio and met None where a figure is missing)."""

    def median(name: str) -> float:
        value = figures.get(name)
        if not isinstance(value, dict):
            raise KeyError(name)
        return value["median"]

    out = {}
    for name, limit in LIMITS.items():
        try:
            ratio: float | None = round(limit.compute(median), 3)
        except (KeyError, ZeroDivisionError):
            ratio = None
        met = None if ratio is None else (ratio >= limit.goal if limit.at_least else ratio <= limit.goal)
        out[name] = {"ratio": ratio, "of": limit.ratio, "goal": f"{'>=' if limit.at_least else '<='} {limit.goal}", "met": met}
    return out


def run_bench(settings: Settings, quick: bool, progress: Progress = print) -> dict[str, Any]:
    size = (
        dict(extract=100, fold_turns=1500, concepts=10_000, edges=200_000, queries=50, ingest=200, rr_turns=300, rr_queries=50,
             hops=50, idle_s=3.0, forget_days=60, repeats=2)
        if quick
        else dict(extract=1000, fold_turns=8000, concepts=100_000, edges=2_000_000, queries=300, ingest=2000, rr_turns=700,
                  rr_queries=200, hops=200, idle_s=10.0, forget_days=1080, repeats=3)
    )
    figures: dict[str, Any] = {"quick": quick, "machine": machine()}
    progress("extraction")
    figures.update(extraction_figures(size["extract"], size["repeats"]))
    progress("the fold alone")
    figures.update(fold_figures(size["fold_turns"], size["repeats"]))
    progress("queries on the synthetic graph")
    figures.update(query_figures(size["concepts"], size["edges"], size["queries"], size["repeats"]))
    progress("forgetting a turn")
    figures.update(forget_figures(size["forget_days"], size["repeats"]))
    figures.update(pipeline_figures(settings, size, progress))
    figures["limits"] = limits(figures)
    return figures


def _limit_line(name: str, limit: dict[str, Any]) -> str:
    met = {True: "met", False: "NOT met", None: "not measured"}[limit["met"]]
    return f"{name:>30}: {str(limit['ratio']):>10}  ({limit['of']}; goal {limit['goal']}: {met})"


def format_figures(figures: dict[str, Any]) -> str:
    lines = []
    for name, value in figures.items():
        if isinstance(value, dict) and "median" in value:
            lines.append(f"{name:>30}: {value['median']:>10}  (min {value['min']}, max {value['max']}, {value['repeats']} repeats)")
        elif name == "limits":
            lines.append(f"{'limits':>30}:")
            lines.extend(_limit_line(limit, v) for limit, v in value.items())
        elif name != "machine":
            lines.append(f"{name:>30}: {value}")
    return "\n".join(lines)
