"""Figures through the broker: ingest and its passthrough limit, hops, round trips, log reads and replay."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import shutil
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.errors import DecodeError
from emgas.processors.events import ActivationReply, Turn
from emgas.processors.extract import ExtractionParams, extractor_id, ingest
from emgas.tools.harness import synthetic_turns
from emgas.replay.fold import Selection
from emgas.streams.interfaces.admin import replay
from emgas.streams.kafka.reader import log_reader
from emgas.streams.interfaces.client import MemoryClient
from emgas.tools.demo import DEMO_QUERIES
from emgas.tools.harness import (
    cpu_seconds, percentile, start_worker, stop_worker, turns_per_graph,
    wait_for_turns, wait_for_workers,
)
from emgas.streams.settings import TopicSpec
from emgas.streams.kafka.local import choose, kafka_jars, start_scratch_broker
from emgas.streams.settings import Settings
from emgas.tools.figures import Progress, figure


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
