"""The soak's load: turns published at a steady rate, each publish's
acknowledgement recorded; queries asked at a steady rate, each attempt
recorded, and a query not answered asked again until it is."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import cycle
from typing import Callable, NamedTuple

from aiokafka import AIOKafkaProducer

from emgas.processors.codec import encode
from emgas.processors.events import MAX_TEXT_BYTES, ActivationReply, ErrorReply, Turn
from emgas.streams.errors import BrokerError, QueryTimeout
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.settings import Settings
from emgas.tools.soak.reconcile import ACKED, UNACKED, Attempt, BadRecord

TICKS_PER_S = 20  # publishing is paced in this many batches a second
RETRY_PAUSE_S = 0.2


def producer(settings: Settings) -> AIOKafkaProducer:
    """A producer as the product's client makes one: acks from every in-sync replica, idempotent."""
    return AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers(), acks="all", enable_idempotence=True,
                            linger_ms=0, **settings.kafka_options())


def interleaved(turns: list[Turn]) -> list[Turn]:
    """The turns graph by graph in turn, each graph's in its own order (as many users talk at once)."""
    by_graph: dict[str, list[Turn]] = {}
    for t in turns:
        by_graph.setdefault(t.graph_id, []).append(t)
    queues = list(by_graph.values())
    out: list[Turn] = []
    for i in range(max(len(q) for q in queues)):
        out.extend(q[i] for q in queues if i < len(q))
    return out


@dataclass
class Publisher:
    """Publishes `turns` at `rate` a second until they run out or `stop` is set;
    `status[graph][turn_id]`: ACKED, UNACKED, or absent while its ack is awaited."""

    settings: Settings
    kafka: AIOKafkaProducer
    turns: list[Turn]
    rate: float
    status: dict[str, dict[str, str]] = field(default_factory=dict)
    texts: dict[str, list[str]] = field(default_factory=dict)  # graph -> texts published, for queries
    pending: set[asyncio.Task[None]] = field(default_factory=set)
    sent: int = 0  # turns handed to Kafka so far
    errors: Counter[str] = field(default_factory=Counter)  # failed publishes by exception type
    # Test-only: this many turns, from the `drop_from`-th on, are recorded as acknowledged but never
    # sent (a broker that acknowledged and lost them): the reconciliation must find them lost.
    drop: int = 0
    drop_from: int = 0

    async def run(self, stop: asyncio.Event, count: int | None = None) -> None:
        """Publish until `stop` is set, the turns run out or `count` more are sent."""
        started, first, per_tick = time.monotonic(), self.sent, max(1, round(self.rate / TICKS_PER_S))
        last = len(self.turns) if count is None else min(len(self.turns), first + count)
        while self.sent < last and not stop.is_set():
            batch = self.turns[self.sent : min(last, self.sent + per_tick)]
            for turn in batch:
                self.status.setdefault(turn.graph_id, {})
                self.sent += 1
                if self.drop > 0 and self.sent > self.drop_from:
                    self.drop -= 1
                    self.status[turn.graph_id][turn.turn_id] = ACKED
                    continue
                try:
                    future = await self.kafka.send(self.settings.turns_topic, encode(turn), key=turn.graph_id.encode())
                except Exception as exc:  # noqa: BLE001 - refused before it was sent: unacknowledged
                    self._failed(turn, exc)
                    continue
                task = asyncio.create_task(self._acked(turn, future))
                self.pending.add(task)
                task.add_done_callback(self.pending.discard)
            ahead = started + (self.sent - first) / self.rate - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
            elif ahead < -1.0:  # held up (a stalled broker): go on at the rate, without a burst to catch up
                started -= ahead

    async def _acked(self, turn: Turn, future: asyncio.Future) -> None:
        try:
            await future
            self.status[turn.graph_id][turn.turn_id] = ACKED
            self.texts.setdefault(turn.graph_id, []).append(turn.text)
        except Exception as exc:  # noqa: BLE001 - any failed publish is an unacknowledged turn, by its type
            self._failed(turn, exc)

    def _failed(self, turn: Turn, exc: Exception) -> None:
        self.status[turn.graph_id][turn.turn_id] = UNACKED
        self.errors[type(exc).__name__] += 1

    async def settle(self, timeout_s: float) -> None:
        """Wait for the acks still due; those that never come are unacknowledged."""
        if self.pending:
            await asyncio.wait(set(self.pending), timeout=timeout_s)
        for task in list(self.pending):
            task.cancel()

    def offered(self) -> dict[str, dict[str, str]]:
        """graph -> turn id -> ACKED or UNACKED, for every turn handed to Kafka."""
        out: dict[str, dict[str, str]] = {}
        for turn in self.turns[: self.sent]:
            out.setdefault(turn.graph_id, {})[turn.turn_id] = self.status.get(turn.graph_id, {}).get(turn.turn_id, UNACKED)
        return out


def bad_records(graphs: list[str], per_kind: int, now: Callable[[], str]) -> list[tuple[str, str, bytes, bytes]]:
    """(kind, reason it must get, key, value) of a burst: each kind `per_kind` times, keyed by the soak's graphs."""
    keys = cycle(graphs)

    def turn(**change: object) -> bytes:
        body = {"graph_id": "soak-bad", "turn_id": "bad", "speaker": "ann", "text": "Hello there", "timestamp": now()}
        return json.dumps({**body, **change}).encode()

    kinds = [
        ("invalid_json", "not_json", lambda: b'{"graph_id": "soak-bad",'),
        ("oversized", "text_too_long", lambda: turn(text="é" * (MAX_TEXT_BYTES // 2 + 1))),  # under the length, over the bytes
        ("graph_id_too_long", "invalid_fields", lambda: turn(graph_id="g" * 257)),
        ("timestamp_in_future", "timestamp_out_of_range", lambda: turn(timestamp="2099-01-01T00:00:00Z")),
    ]
    return [(kind, reason, next(keys).encode(), make()) for _ in range(per_kind) for kind, reason, make in kinds]


async def send_bad(settings: Settings, kafka: AIOKafkaProducer, burst: list[tuple[str, str, bytes, bytes]]) -> list[BadRecord]:
    """Send a burst; where each landed (partition, offset), or None where its publish failed."""
    sent = []
    for kind, reason, key, value in burst:
        try:
            metadata = await asyncio.wait_for(kafka.send_and_wait(settings.turns_topic, value, key=key), 60)
            sent.append(BadRecord(kind, reason, metadata.partition, metadata.offset))
        except Exception:  # noqa: BLE001 - not acknowledged: reported, not expected in the DLQ
            sent.append(BadRecord(kind, reason, None, None))
    return sent


class Ask(NamedTuple):
    """A query, from its first attempt until it was answered or, at the end of the load, given up."""

    graph: str
    first_s: float
    end_s: float
    answered: bool

    @property
    def wait_s(self) -> float:
        return self.end_s - self.first_s


@dataclass
class Asker:
    """`loops` users asking in turn over the graphs that have turns, together
    about `rate` queries a second while they are answered quickly. A user asks
    one query at a time (a stalled cluster gets no pile of queries, and the
    worker is not flooded with retries); a query not answered (a timeout, a
    refusal) is asked again until it is, so the time from its first attempt
    to its answer is how long a user went unanswered."""

    client: MemoryClient
    texts: dict[str, list[str]]
    rate: float
    timeout_s: float
    clock: Callable[[], float]  # seconds since the load began
    loops: int = 4
    attempts: list[Attempt] = field(default_factory=list)
    asks: list[Ask] = field(default_factory=list)

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._user(k, stop) for k in range(self.loops)))

    async def _user(self, k: int, stop: asyncio.Event) -> None:
        interval = self.loops / self.rate
        while not stop.is_set():
            tick = time.monotonic()
            graphs = sorted(g for g, t in self.texts.items() if t)
            if graphs:
                graph = graphs[k % len(graphs)]
                texts = self.texts[graph]
                await self._ask(graph, texts[(k * 7) % len(texts)][:120], stop)
                k += self.loops
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - tick)))

    async def _ask(self, graph: str, text: str, stop: asyncio.Event) -> None:
        first = self.clock()
        while True:
            sent = self.clock()
            outcome = await self._attempt(graph, text)
            self.attempts.append(Attempt(graph, sent, self.clock() - sent, outcome))
            if outcome == "answered":
                self.asks.append(Ask(graph, first, self.clock(), True))
                return
            if stop.is_set():
                self.asks.append(Ask(graph, first, self.clock(), False))
                return
            await asyncio.sleep(RETRY_PAUSE_S)

    async def _attempt(self, graph: str, text: str) -> str:
        try:
            reply = await self.client.ask(graph, text, timeout_s=self.timeout_s)
        except QueryTimeout:
            return "timeout"
        except BrokerError as exc:  # the client's own clear reason (e.g. no broker reachable)
            return f"refused:broker:{str(exc)[:40]}"
        except Exception as exc:  # noqa: BLE001 - anything else is a failure of the reconciliation
            return f"error:{type(exc).__name__}"
        if isinstance(reply, ActivationReply):
            return "answered"
        if isinstance(reply, ErrorReply):
            return f"refused:{reply.code}"
        return f"error:unexpected {reply.type}"


async def committed_past(settings: Settings, sent: list[BadRecord], timeout_s: float) -> bool:
    """Until the workers' group has committed the turns topic past every record of `sent`
    (their dead letters are then written for good: a worker stopping later does not
    read them again); False if not within `timeout_s`."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    due: dict[int, int] = {}  # partition -> the last offset of the burst in it
    for bad in sent:
        if bad.partition is not None and bad.offset is not None:
            due[bad.partition] = max(due.get(bad.partition, -1), bad.offset)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_servers(), group_id=settings.app_id,
                                enable_auto_commit=False, **settings.kafka_options())
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                offsets = {p: await consumer.committed(TopicPartition(settings.turns_topic, p)) for p in due}
            except Exception:  # noqa: BLE001 - the coordinator moving (a broker fault): ask again
                offsets = {}
            if offsets and all((offsets[p] or 0) > last for p, last in due.items()):
                return True
            await asyncio.sleep(0.5)
        return False
    finally:
        await consumer.stop()
