"""`emgas bench`: the speed figures of this memory, measured on this machine.

Every figure is the median of several repeats, with their min and max:

- extract_turns_per_s: the product's extraction (`processors.extract.ingest`)
  on chat turns, one core; yake_reference_turns_per_s: the `yake` package
  (n=3, top 10) on the same turns in the same run.
- fold_events_per_s: the fold alone (`PartitionState.apply` and its
  commits, as replay calls them) of graph events already decoded in memory
  into a fresh RocksDB state: fold_events events of synthetic LoCoMo-shaped
  conversations (`tools.synthetic`: sessions of turns minutes apart,
  days between sessions), put through `tools.driver.LocalLog` so the decay
  ticks and consolidations due are among them; fold_extract_turns_per_s:
  extraction of those same turns, so fold and extraction compare on
  identical turns.
- ingest_turns_per_s(_2_workers): publish -> applied and visible to
  queries, end to end on the broker (Apache Kafka, or the mock with --mock), one worker (two workers).
- passthrough_turns_per_s: the same two Kafka hops as ingest (turns topic ->
  graph-events-sized records on a second topic -> a consumer that counts
  them), by a process that neither extracts nor folds: the most ingest
  can reach on this broker; same turns count and repeats as ingest.
- query_p50_ms / query_p99_ms: in-process spreading activation, scoring and
  top-k (what a worker runs per query) on a synthetic co-occurrence-shaped
  graph (seeded; Zipf-distributed node popularity), 3 seeds drawn by
  degree; ppr_p50_ms: personalised PageRank on the same graph and seeds.
- rr_p50_ms / rr_p99_ms: query round trip through Kafka request/reply on the
  same broker against a graph of LoCoMo size; rr_worker_p50_ms: the
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
- forget_ms: applying (and committing) a request to forget one turn from
  the middle of a graph of forget_graph_turns simulated turns (decay ticks,
  consolidations, RocksDB state): the graph version is re-folded from its
  journal without the turn; forget_after_snapshot_ms: a turn after the
  graph's latest snapshot (taken nine tenths into its history), re-folded
  from that snapshot's fold point (`state.fold_points`);
  journal_bytes_per_turn: the journal that makes it possible (every event
  applied to the graph, ticks included), per turn.

Scaling out (worker_cpu_ms_per_turn_1/_2/_3, partitions_per_worker_N,
max_unavailable_s_join/_leave): see `tools.scaling_bench`.

Taking over a partition. Both parts use one graph of synthetic turns
(`tools.synthetic`) put through `LocalLog` (its decay ticks and
consolidations included): its history once ("1x"), or that whole history
published 10 times ("10x": the 9 later copies are duplicates, which the
fold skips, so the final state is the same and the bench checks it).
Duplicates are the cheapest history to fold (a lookup each), so the
no-snapshot figures at 10x are a lower bound for a history of real
retrievals and ticks.

- recovery_in_process_s_1x / _10x: recovery alone, without Kafka or a
  process: a fresh RocksDB state restored from the log's checkpoint
  (`PartitionState.restore_checkpoint`: its snapshot parts assembled, the
  graph written, its view built, its digests checked) and the log after
  the snapshot folded; recovery_in_process_s_1x_no_snapshots / _10x_...:
  the whole log before the snapshot request folded instead (as `_fold_s`).
  recovery_in_process_turns turns (more than the live part can hold);
  every state recovered must have the same digests, or the bench fails.
- snapshot_bytes_per_edge: the graph's snapshot (the parts' compressed
  bytes, base64 removed) per edge of the graph (snapshot_graph_edges), at
  recovery_in_process_turns turns; snapshot_serialize_ms: the owner
  serving a snapshot request of that graph on a RocksDB state
  (`SnapshotWriter.serve`: content read, digests, packed, cut into parts).
- takeover_s_history_1x / _10x (and _no_snapshots): live, on a fresh
  broker per history (1 partition) whose log holds the
  takeover_turns-turn graph's history: from just before a worker with no
  state (new name, new data directory, automatic snapshot rounds off)
  is started until an activation query for the graph (asked again every
  second until answered) gets an activation reply: process start, group
  join, recovery, first answer. Without snapshots the log has no
  checkpoint; with, a worker that folded it wrote a snapshot on request
  (`emgas snapshot`) before the takeovers. Each takeover's worker is
  stopped before the next starts. recovery_s_history_* and
  recovery_records_read_history_*: the worker's own account of that
  catch-up (`/health` `recoveries`): seconds and records read.
  takeover_digests_equal: whether every takeover served the same graph.
  On Apache Kafka (the default) the full run's history is 3,000 turns
  (about 34,000 events at 10x); on the mock (`--mock`) its 5 MiB per
  partition bounds the history, so keep the quick sizes there.
- snapshot_write_s: from appending the snapshot request until its
  checkpoint is in the log (`request_snapshots`, the owner idle and
  caught up), one per history log (the same state), median of the two.

`limits` relates figures that bound each other (medians), each with its
goal: the fold should not be much slower than extraction
(fold / extract >= 0.5), replay not much slower than reading the log
(replay / log read >= 0.5), ingest not much slower than its Kafka hops
alone (ingest / passthrough >= 0.5), a round trip not much more than
two hops and the worker's time (rr / (2 hops + worker) <= 1.3), a
takeover not much slower for ten times the history with snapshots
(10x / 1x <= 1.5), and snapshots making the takeover of the long history
much faster (10x without / 10x with >= 5).
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
import gc
import heapq
import itertools
import json
import multiprocessing
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import version
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from emgas.processors.activation import ActivationParams, concept_scores, spread, top_concepts
from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.errors import DecodeError
from emgas.processors.events import ActivationReply, Checkpoint, GraphEvent, Snapshot, SnapshotStarted, Turn
from emgas.processors.extract import ExtractionParams, detect_language, extractor_id, ingest
from emgas.tools.graph_arrays import degrees, edge_arrays
from emgas.tools.walks import personalised_pagerank
from emgas.tools.replay_bench import synthetic_turns
from emgas.replay.fold import Selection
from emgas.replay.reader import LogRecord
from emgas.streams.interfaces.admin import replay
from emgas.streams.kafka.reader import log_reader
from emgas.state.digest import partition_digests
from emgas.tools.driver import LocalLog
from emgas.state.projector import PartitionState
from emgas.state.rocks import RocksStore
from emgas.state.snapshot_writer import SnapshotWriter
from emgas.state.snapshots import LogIdentity
from emgas.state.transaction import COMMIT_EVERY
from emgas.state.view import GraphView
from emgas.processors.graph import GraphParams, GraphRef
from emgas.processors.dynamics import DecayParams
from emgas.streams.interfaces.client import MemoryClient
from emgas.tools.demo import DEMO_QUERIES
from emgas.tools.harness import (
    cpu_seconds, demo_turns, free_port, health, percentile, resident_bytes, start_worker, stop_worker, turns_per_graph,
    wait_for_turns, wait_for_workers,
)
from emgas.streams.settings import TopicSpec
from emgas.streams.errors import QueryTimeout
from emgas.streams.kafka.local import choose, kafka_jars, start_scratch_broker
from emgas.streams.settings import Settings
from emgas.streams.interfaces.snapshots import request_snapshots
from emgas.tools.scaling_bench import SCALE_GRAPHS, scaling_figures
from emgas.tools.synthetic import Shape, conversations

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
    decoded back from the record: what a reader hands to the fold. Keyed by
    graph (a checkpoint, about the partition, has no key)."""
    records = [
        LogRecord(0, offset, int(e.timestamp.timestamp() * 1000), _key(e), encode(e))
        for offset, e in enumerate(events)
    ]
    return [(decode_graph_event(r.value), r) for r in records]


def _key(event: GraphEvent) -> bytes | None:
    graph_id = getattr(event, "graph_id", None)
    return None if graph_id is None else graph_id.encode()


def _fold_s(events: list[tuple[GraphEvent, LogRecord]], state_dir: Path, params: GraphParams) -> float:
    """Seconds to fold `events` into a fresh RocksDB state, applied and
    committed as `replay.fold.fold_records` does (every COMMIT_EVERY events
    and after the last), without its decoding."""
    state = PartitionState(RocksStore(state_dir), params)
    started = time.perf_counter()
    _fold_into(state, events)
    elapsed = time.perf_counter() - started
    state.close()
    return elapsed


def _fold_into(state: PartitionState, events: list[tuple[GraphEvent, LogRecord]]) -> None:
    """Apply `events` to `state`, committing every COMMIT_EVERY events and after the last."""
    for n, (event, record) in enumerate(events, start=1):
        state.apply(event, record.offset, raw=record.value)
        if n % COMMIT_EVERY == 0:
            state.commit()
    state.commit()


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
    return resident_bytes()


def query_figures(concepts: int, edges: int, queries: int, repeats: int, seed: int = 11) -> dict[str, Any]:
    before = _rss_bytes()
    view = synthetic_view(concepts, edges, seed)
    params = ActivationParams()
    resident = (_rss_bytes() - before) / max(view.edges, 1)
    degree = degrees(view)
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
    src, dst, weight = edge_arrays(view, params.weight)
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
        await client.publish(turns)
        await wait_for_turns(client, totals, deadline_s=900)
        return time.perf_counter() - started


async def _ready(settings: Settings, graphs: list[str]) -> None:
    async with MemoryClient(settings) as client:
        await wait_for_turns(client, {g: 0 for g in graphs}, deadline_s=120)


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


def broker_in_use(settings: Settings) -> str:
    """Which broker the live figures are measured on ("Apache Kafka 4.1.2", or the mock and why)."""
    kind, reason = choose(settings)
    if kind == "kafka":
        jars = kafka_jars(settings)
        return f"Apache Kafka {jars.version if jars else '?'} (one KRaft node)"
    return "librdkafka mock cluster" + (f" ({reason})" if reason else "")


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
        fetch_max_wait_ms=settings.fetch_wait_ms(), check_crcs=False, **settings.kafka_options(),
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
        await client.publish(turns)
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
    """On one fresh broker (4 partitions): ingest with one worker, the
    passthrough, replay and log read, round trips, Kafka hops and idle CPU,
    then ingest with a second worker added."""
    home = Path(tempfile.mkdtemp(prefix="emgas-bench-"))
    bench = settings.model_copy(update={"home": home, "partitions": 4, "turn_partitions": 4})
    cluster = start_scratch_broker(bench, home / "kafka", extra_topics=bench_topics(bench))
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
        broker_pid = cluster.details.get("jvm_pid")  # the mock runs inside this process: not measured
        cpu = cpu_seconds(procs[0].pid)
        broker_cpu = cpu_seconds(broker_pid) if broker_pid else None
        time.sleep(size["idle_s"])
        out["idle_worker_cpu_percent"] = round((cpu_seconds(procs[0].pid) - cpu) / size["idle_s"] * 100, 2)
        if broker_pid:
            out["idle_broker_cpu_percent"] = round((cpu_seconds(broker_pid) - broker_cpu) / size["idle_s"] * 100, 2)
        procs.append(start_worker(live, home / "worker-2.log", name="worker-2"))
        progress("a second worker joins")
        asyncio.run(wait_for_workers(live, {"worker-1", "worker-2"}, 90))
        out["ingest_turns_per_s_2_workers"] = figure(_ingest_rates(live, size["ingest"], repeats, "two", totals, progress), 1)
        return out
    finally:
        for proc in procs:
            stop_worker(proc)
        cluster.close()
        shutil.rmtree(home, ignore_errors=True)


def forget_figures(days: int, repeats: int) -> dict[str, Any]:
    from emgas.processors.events import Forget, SnapshotStarted
    from emgas.tools.simulation import GRAPH, Stream, turns

    stream = Stream(days=days)
    held = list(turns(stream))
    snapshot_at = len(held) * 9 // 10  # the graph's latest snapshot: nine tenths into its history
    with tempfile.TemporaryDirectory(prefix="emgas-bench-forget-") as tmp:
        log = LocalLog(GraphParams(), RocksStore(Path(tmp)))
        log.extend(held[:snapshot_at])
        log.append(SnapshotStarted(graph_id=GRAPH, reason="policy", timestamp=held[snapshot_at - 1].timestamp))
        log.extend(held[snapshot_at:])
        at = log.state.repo.meta(GraphRef(GRAPH, 1)).clock

        def forget_ms(turn: int, request: str) -> float:
            started = time.perf_counter()
            log.append(Forget(graph_id=GRAPH, request_id=request, timestamp=at, turn_ids=(f"t{turn}",)))
            log.state.commit()
            return (time.perf_counter() - started) * 1000

        # After the snapshot first: forgetting a turn before it drops the point (it holds the turn).
        recent = [forget_ms(len(held) - 1 - i, f"recent-{i}") for i in range(repeats)]
        middle = len(held) // 2  # a turn from the middle of the stream
        timings = [forget_ms(middle + i, f"bench-{i}") for i in range(repeats)]
        ref = GraphRef(GRAPH, 1)
        journal = sum(len(entry.event) for entry in log.state.repo.journal(ref))
        turns_held = log.state.repo.meta(ref).turns
        log.state.close()
    return {
        "forget_ms": figure(timings, 1), "forget_after_snapshot_ms": figure(recent, 1),
        "forget_graph_turns": turns_held, "journal_bytes_per_turn": round(journal / turns_held),
    }


# -- taking over a partition: histories of one graph, with and without snapshots --

HISTORY_COPIES = 10  # the long history: the short one published this many times


def history_log(turns: list[Turn], copies: int, params: GraphParams) -> LocalLog:
    """One graph's log: its `turns` extracted and put through `LocalLog` (with
    the decay ticks and consolidations they bring), then that whole history
    re-published `copies - 1` more times: duplicates, which the fold skips,
    so every copy count gives the same final state. The state names a log
    (as a worker's does), so a snapshot request appended to it ends in a
    checkpoint."""
    extraction = ExtractionParams()
    tag = extractor_id(extraction)
    log = LocalLog(params)
    log.state.ledger.set_identity(LogIdentity("bench", -1))
    log.extend([ingest(t, extraction, tag) for t in turns])
    history = list(log.log)
    for _ in range(copies - 1):
        log.extend(history)
    return log


def _checkpoint_parts(events: list[GraphEvent], checkpoint: Checkpoint) -> dict[str, list[Snapshot]]:
    """The parts of each snapshot `checkpoint` lists, from where they lie in `events`."""
    return {
        loc.graph_id: [e for e in events[loc.first : loc.last + 1]
                       if isinstance(e, Snapshot) and e.graph_id == loc.graph_id and e.as_of == loc.as_of]
        for loc in checkpoint.snapshots
    }


def _recovered(
    events: list[tuple[GraphEvent, LogRecord]], state_dir: Path, params: GraphParams, checkpoint_at: int | None
) -> tuple[float, PartitionState]:
    """A fresh RocksDB state brought up to the end of `events` and the seconds
    it took: the whole log folded (`checkpoint_at` None), or the checkpoint
    at that offset restored and the log after its snapshots folded."""
    state = PartitionState(RocksStore(state_dir), params)
    started = time.perf_counter()
    if checkpoint_at is not None:
        checkpoint = events[checkpoint_at][0]
        assert isinstance(checkpoint, Checkpoint)
        state.restore_checkpoint(checkpoint, _checkpoint_parts([e for e, _ in events], checkpoint))
    _fold_into(state, events[state.applied_offset + 1 :])
    return time.perf_counter() - started, state


def _digests(state: PartitionState) -> dict[tuple[str, int], str]:
    return {(d.graph_id, d.version): d.digest for d in partition_digests(state.repo)}


def _serialize_ms(state: PartitionState, graph: str, as_of: int) -> float:
    """Milliseconds for the owner to serve a snapshot request of `graph` on
    `state`: its content read, its digests, packed and cut into parts."""
    marker = SnapshotStarted(graph_id=graph, reason="request", timestamp=datetime.now(timezone.utc))
    started = time.perf_counter()
    SnapshotWriter(None, 0).serve(state, marker, as_of)
    return (time.perf_counter() - started) * 1000


def _snapshotted(turns: list[Turn], copies: int, params: GraphParams) -> tuple[LocalLog, int, int]:
    """`history_log` with a snapshot request of its graph appended (served:
    parts, then a checkpoint); the log, the request's offset and the checkpoint's."""
    log = history_log(turns, copies, params)
    marker_at = len(log.log)
    log.append(SnapshotStarted(graph_id=turns[0].graph_id, reason="request", timestamp=log.log[-1].timestamp))
    return log, marker_at, max(i for i, e in enumerate(log.log) if isinstance(e, Checkpoint))


def _recovery_s(
    events: list[tuple[GraphEvent, LogRecord]], state_dir: Path, params: GraphParams, checkpoint_at: int | None,
    digests: set[tuple],
) -> float:
    """`_recovered`'s seconds; the state's digests are added to `digests`."""
    seconds, state = _recovered(events, state_dir, params, checkpoint_at)
    digests.add(tuple(sorted(_digests(state).items())))
    state.close()
    return seconds


def _snapshot_figures(log: LocalLog, marker_at: int, checkpoint_at: int, tmp: Path, repeats: int) -> dict[str, Any]:
    """The snapshot of the log's graph: compressed bytes per edge of the
    graph, and the time to serve it on a RocksDB state (restored from it)."""
    graph = log.log[marker_at].graph_id
    parts = [e for e in log.log[marker_at:] if isinstance(e, Snapshot)]
    edges = log.state.view(graph).edges
    _, state = _recovered(decoded_records(log.log), tmp, log.params, checkpoint_at)
    try:
        serialize = [_serialize_ms(state, graph, marker_at) for _ in range(repeats)]
    finally:
        state.close()
    return {
        "snapshot_graph_edges": edges,
        "snapshot_bytes_per_edge": round(sum(len(base64.b64decode(p.data)) for p in parts) / max(edges, 1), 1),
        "snapshot_serialize_ms": figure(serialize, 1),
    }


def in_process_recovery_figures(turns: int, repeats: int, params: GraphParams) -> dict[str, Any]:
    """Recovery alone, without Kafka, of a graph of `turns` synthetic turns
    with a history of 1 and HISTORY_COPIES times its events: the whole log
    folded into a fresh RocksDB state, against its checkpoint restored and
    the tail folded; the snapshot's size per edge and the time to serve it."""
    synthetic = conversations(turns, Shape(graphs=1))
    out: dict[str, Any] = {"recovery_in_process_turns": turns}
    digests: set[tuple] = set()
    with tempfile.TemporaryDirectory(prefix="emgas-bench-recovery-") as tmp:
        for copies in (1, HISTORY_COPIES):
            tag = f"{copies}x"
            log, marker_at, checkpoint_at = _snapshotted(synthetic, copies, params)
            events = decoded_records(log.log)
            whole = [_recovery_s(events[:marker_at], Path(tmp) / f"{tag}-whole-{r}", params, None, digests)
                     for r in range(repeats)]
            restored = [_recovery_s(events, Path(tmp) / f"{tag}-restored-{r}", params, checkpoint_at, digests)
                        for r in range(repeats)]
            out[f"recovery_in_process_events_{tag}"] = marker_at
            out[f"recovery_in_process_s_{tag}"] = figure(restored, 3)
            out[f"recovery_in_process_s_{tag}_no_snapshots"] = figure(whole, 3)
            if copies == 1:
                out.update(_snapshot_figures(log, marker_at, checkpoint_at, Path(tmp) / "snapshot", repeats))
    if len(digests) != 1:
        raise RuntimeError(f"recovery gave {len(digests)} different states of one graph: a bug in snapshots or the fold")
    return out


# A worker that takes over: no automatic snapshot rounds, so the one
# snapshot in the log is the one the bench asks for.
TAKEOVER_ENV = {"EMGAS_SNAPSHOT_MIN_BYTES": "0"}
TAKEOVER_DEADLINE_S = 180.0  # a takeover not answered by then fails the bench
ASK_TIMEOUT_S = 1.0  # each query of a takeover; unanswered: asked again


async def _emit_history(live: Settings, events: list[GraphEvent]) -> None:
    """Append `events` to the graph-events log; an error if the embedded
    broker's retention dropped any of them (the log must hold them all)."""
    async with MemoryClient(live) as client:
        await client.emit(events)
    topic = live.graph_events_topic
    async with log_reader(live) as reader:
        start, end = (await reader.bounds(topic, [0]))[0]
    if start > 0 or end < len(events):
        raise RuntimeError(f"{topic}[0] holds offsets {start}..{end} of {len(events)} events appended: "
                           "the embedded broker dropped some (5 MiB per partition); use fewer turns")


async def _first_answer(client: MemoryClient, worker: subprocess.Popen[bytes], graph: str, text: str) -> ActivationReply:
    """The first activation reply for `graph`, asking again after each timeout
    or error reply (the partition not served yet)."""
    deadline = time.monotonic() + TAKEOVER_DEADLINE_S
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise RuntimeError(f"the worker exited with {worker.returncode} before answering")
        try:
            reply = await client.ask(graph, text, reinforce=False, timeout_s=ASK_TIMEOUT_S)
        except QueryTimeout:
            continue
        if isinstance(reply, ActivationReply):
            return reply
        await asyncio.sleep(0.05)
    raise QueryTimeout(f"no worker answered for graph {graph!r} within {TAKEOVER_DEADLINE_S:g} s")


async def _takeover(live: Settings, name: str, graph: str, text: str, procs: list[subprocess.Popen[bytes]]) -> dict[str, Any]:
    """Start a worker with no state (a new name, so a new data directory) and
    time it from just before its process starts until the first activation
    reply for `graph`; then its graph (turns, digest) and its `/health`
    account of partition 0's catch-up. The process is left running, in `procs`."""
    port = free_port()
    async with MemoryClient(live) as client:
        started = time.perf_counter()
        worker = start_worker(live, live.home / f"{name}.log", name=name, web_port=port, env=TAKEOVER_ENV)
        procs.append(worker)
        reply = await _first_answer(client, worker, graph, text)
        seconds = time.perf_counter() - started
        [digests] = await client.digests(graph)
    recovery = (await asyncio.to_thread(health, port))["recoveries"]["0"]
    return {
        "seconds": seconds, "turns": reply.stats.turns, "recovery_s": recovery["seconds"],
        "records_read": recovery["records_read"], "checkpoint": recovery["checkpoint"],
        "digests": tuple(sorted((d.version, d.digest) for d in getattr(digests, "graphs", ()))),
    }


def _takeovers(live: Settings, tag: str, graph: str, text: str, repeats: int, procs: list, progress: Progress) -> list[dict]:
    """`repeats` takeovers one after the other, each worker stopped before the
    next starts, but the last left running."""
    runs = []
    for r in range(repeats):
        if procs:
            stop_worker(procs[-1])
        progress(f"takeover {tag} {r + 1}/{repeats}")
        runs.append(asyncio.run(_takeover(live, f"{tag}-{r}", graph, text, procs)))
    return runs


def _history_takeovers(
    settings: Settings, events: list[GraphEvent], graph: str, text: str, tag: str, repeats: int, progress: Progress
) -> tuple[list[dict], list[dict], float]:
    """On a fresh broker (1 partition) whose log holds `events`:
    takeovers with no checkpoint in the log; the last of those workers
    then writes a snapshot on request (timed until its checkpoint is in the
    log) and stops; then takeovers that start from that checkpoint."""
    home = Path(tempfile.mkdtemp(prefix="emgas-bench-takeover-"))
    bench = settings.model_copy(update={"home": home, "partitions": 1, "turn_partitions": 1})
    cluster = start_scratch_broker(bench, home / "kafka")
    live = bench.model_copy(update={"broker": cluster.bootstrap_servers})
    procs: list[subprocess.Popen[bytes]] = []
    try:
        asyncio.run(_emit_history(live, events))
        plain = _takeovers(live, f"{tag}-no-snapshots", graph, text, repeats, procs, progress)
        progress(f"snapshot {tag}")
        started = time.perf_counter()
        asyncio.run(request_snapshots(live, graph, wait_s=60))
        snapshot_s = time.perf_counter() - started
        stop_worker(procs[-1])
        restored = _takeovers(live, f"{tag}-snapshots", graph, text, repeats, procs, progress)
        return plain, restored, snapshot_s
    finally:
        for proc in procs:
            stop_worker(proc)
        cluster.close()
        shutil.rmtree(home, ignore_errors=True)


def _takeover_keys(tag: str, runs: list[dict]) -> dict[str, Any]:
    return {
        f"takeover_s_{tag}": figure([r["seconds"] for r in runs], 2),
        f"recovery_s_{tag}": figure([r["recovery_s"] for r in runs], 3),
        f"recovery_records_read_{tag}": figure([r["records_read"] for r in runs], 0),
    }


def takeover_figures(settings: Settings, turns: int, repeats: int, progress: Progress) -> dict[str, Any]:
    """Live takeovers of one partition by a worker with no state, for a graph
    of `turns` synthetic turns whose log holds its history once and
    HISTORY_COPIES times (the same final state), each with and without a
    checkpoint in the log."""
    synthetic = conversations(turns, Shape(graphs=1))
    history = history_log(synthetic, 1, settings.graph).log
    graph, text = synthetic[0].graph_id, synthetic[0].text
    out: dict[str, Any] = {"takeover_turns": turns}
    runs: list[dict] = []
    snapshot_s = []
    for copies in (1, HISTORY_COPIES):
        tag = f"history_{copies}x"
        plain, restored, seconds = _history_takeovers(settings, history * copies, graph, text, tag, repeats, progress)
        if any(r["checkpoint"] is None for r in restored) or any(r["checkpoint"] is not None for r in plain):
            raise RuntimeError(f"takeover {tag}: workers did not start from the checkpoint as expected")
        out[f"takeover_history_events_{copies}x"] = len(history) * copies
        out.update(_takeover_keys(tag, restored))
        out.update(_takeover_keys(f"{tag}_no_snapshots", plain))
        runs += plain + restored
        snapshot_s.append(seconds)
    if {r["turns"] for r in runs} != {turns}:
        raise RuntimeError(f"takeovers served {sorted({r['turns'] for r in runs})} turns, not {turns}")
    out["takeover_digests_equal"] = len({r["digests"] for r in runs}) == 1
    out["snapshot_write_s"] = figure(snapshot_s, 2)
    return out


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
    "takeover_history_10x_vs_1x": Limit(
        "takeover_s_history_10x / takeover_s_history_1x",
        lambda m: m("takeover_s_history_10x") / m("takeover_s_history_1x"), 1.5, False,
    ),
    "takeover_snapshots_vs_none_10x": Limit(
        "takeover_s_history_10x_no_snapshots / takeover_s_history_10x",
        lambda m: m("takeover_s_history_10x_no_snapshots") / m("takeover_s_history_10x"), 5.0, True,
    ),
    # The work divides: the same turns cost the workers no more CPU in all when there are more of them.
    "worker_cpu_2_vs_1": Limit(
        "worker_cpu_ms_per_turn_2 / worker_cpu_ms_per_turn_1",
        lambda m: m("worker_cpu_ms_per_turn_2") / m("worker_cpu_ms_per_turn_1"), 1.15, False,
    ),
    "worker_cpu_3_vs_1": Limit(
        "worker_cpu_ms_per_turn_3 / worker_cpu_ms_per_turn_1",
        lambda m: m("worker_cpu_ms_per_turn_3") / m("worker_cpu_ms_per_turn_1"), 1.15, False,
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


def run_bench(
    settings: Settings, quick: bool, progress: Progress = print, partial: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Every figure; `partial(figures so far)` after each part (a long run that fails late keeps the rest)."""
    size = (
        dict(extract=100, fold_turns=1500, concepts=10_000, edges=200_000, queries=50, ingest=200, rr_turns=300, rr_queries=50,
             hops=50, idle_s=3.0, forget_days=60, takeover_turns=100, recovery_turns=300, repeats=2,
             scale_turns=150, handoff_turns=600, scale_repeats=1)
        if quick
        else dict(extract=1000, fold_turns=8000, concepts=100_000, edges=2_000_000, queries=300, ingest=2000, rr_turns=700,
                  rr_queries=200, hops=200, idle_s=10.0, forget_days=1080, takeover_turns=3000, recovery_turns=2000, repeats=3,
                  scale_turns=1500, handoff_turns=4000, scale_repeats=3)
    )
    figures: dict[str, Any] = {"quick": quick, "machine": machine(), "broker": broker_in_use(settings)}
    progress("extraction")
    _part(partial, figures)
    figures.update(extraction_figures(size["extract"], size["repeats"]))
    progress("the fold alone")
    _part(partial, figures)
    figures.update(fold_figures(size["fold_turns"], size["repeats"]))
    progress("queries on the synthetic graph")
    _part(partial, figures)
    figures.update(query_figures(size["concepts"], size["edges"], size["queries"], size["repeats"]))
    progress("forgetting a turn")
    _part(partial, figures)
    figures.update(forget_figures(size["forget_days"], size["repeats"]))
    progress("recovery from a checkpoint, in process")
    _part(partial, figures)
    figures.update(in_process_recovery_figures(size["recovery_turns"], size["repeats"], settings.graph))
    _part(partial, figures)
    figures.update(pipeline_figures(settings, size, progress))
    _part(partial, figures)
    figures.update(takeover_figures(settings, size["takeover_turns"], size["repeats"], progress))
    progress("scaling out: CPU per turn, hand-offs")
    handoff_history = history_log(conversations(size["handoff_turns"], Shape(graphs=SCALE_GRAPHS)), 1, settings.graph).log
    _part(partial, figures)
    figures.update(scaling_figures(settings, size, handoff_history, progress))
    figures["limits"] = limits(figures)
    return figures


def _part(partial: Callable[[dict[str, Any]], None] | None, figures: dict[str, Any]) -> None:
    if partial is not None:
        partial(figures)


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
