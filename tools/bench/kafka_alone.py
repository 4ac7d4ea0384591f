"""Kafka alone, without the worker's work: the passthrough that bounds
ingest, and the hop that bounds a round trip."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import time
from multiprocessing.connection import Connection
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from emgas.processors.codec import encode
from emgas.processors.events import Turn
from emgas.processors.extract import ExtractionParams, extractor_id, ingest
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.settings import PRODUCE_BATCH_BYTES, Settings, TopicSpec
from emgas.tools.bench.ingest import tagged
from emgas.tools.figures import Progress, figure
from emgas.tools.harness import percentile

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
        fetch_max_wait_ms=settings.fetch_wait_ms(), check_crcs=False, **settings.kafka_options(),
    )


def _producer(settings: Settings) -> AIOKafkaProducer:
    """A producer acknowledged and batched like the worker's (acks=all, no
    linger, batches of up to PRODUCE_BATCH_BYTES)."""
    return AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_servers(), acks="all", max_batch_size=PRODUCE_BATCH_BYTES,
        **settings.kafka_options(),
    )


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
    """Seconds from publishing `turns` (as `harness.ingest_s` does) until the
    passthrough process has counted `target` records in all."""
    async with MemoryClient(settings.model_copy(update={"turns_topic": PASSTHROUGH_TURNS})) as client:
        started = time.perf_counter()
        await client.publish(turns)
        await asyncio.to_thread(_reached, report, target, PASSTHROUGH_DEADLINE_S)
        return time.perf_counter() - started


def passthrough_rates(live: Settings, turns: int, repeats: int, progress: Progress) -> list[float]:
    """Turns per second through `passthrough_agent`: a warm-up round, then
    `repeats` rounds of `turns`, like `ingest_rates`. The agent runs in a
    process of its own, as the worker does, so it shares no event loop (and
    no GIL) with the publishing client and the broker's threads."""
    rounds = [tagged(50, "pass-warm-up"), *(tagged(turns, f"pass{r}") for r in range(repeats))]
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
