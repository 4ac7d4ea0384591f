"""Bad input on a live worker: every row of the table goes to the DLQ with its
reason, the valid turns around it are all applied, and the worker keeps
answering. Then the worker stops: a query times out within its deadline."""

import asyncio
import time

import pytest
from aiokafka import AIOKafkaProducer

from emgas.processors.codec import encode
from emgas.processors.events import ActivationReply
from emgas.streams.interfaces.client import MemoryClient
from emgas.tools.harness import demo_turns
from emgas.testing import stop_worker
from emgas.streams.errors import QueryTimeout
from tests.support.live import run, serving
from tests.support.metrics import scrape, value
from tests.support.bad_input import QUERY, QUERY_ROWS, TURN, TURN_ROWS, raw

pytestmark = pytest.mark.integration


def test_bad_input_goes_to_the_dlq_and_the_valid_turns_around_it_are_applied(tmp_path):
    base = [t for t in demo_turns() if t.graph_id == "bob"]
    with serving(tmp_path / "bad", 1, base) as (live, port):
        good = [base[i % len(base)].model_copy(update={"turn_id": f"after-{i}"}) for i in range(len(TURN_ROWS))]
        now_stamped = {**TURN, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

        async def publish() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=live.settings.bootstrap_servers())
            await producer.start()
            try:
                for (case, message, _), turn in zip(TURN_ROWS, good):
                    if case == "timestamp far in the future":  # relative to the worker's clock
                        message = raw({**now_stamped, "timestamp": "2099-01-01T00:00:00Z"})
                    await producer.send_and_wait(live.settings.turns_topic, message, key=b"bob")
                    await producer.send_and_wait(live.settings.turns_topic, encode(turn), key=b"bob")
                for _, change in QUERY_ROWS:
                    await producer.send_and_wait(live.settings.queries_topic, raw({**QUERY, "graph_id": "bob", **change}), key=b"bob")
            finally:
                await producer.stop()

        run(publish())

        async def applied_and_answering() -> ActivationReply:
            async with MemoryClient(live.settings) as client:
                for _ in range(200):
                    reply = await client.ask("bob", "How is the marathon training going?", reinforce=False)
                    if isinstance(reply, ActivationReply) and reply.stats.turns == len(base) + len(good):
                        return reply
                    await asyncio.sleep(0.05)
            raise AssertionError("the valid turns were not all applied")

        assert run(applied_and_answering()).passages
        _, text = scrape(port, "/metrics")
        for code in {code for _, _, code in TURN_ROWS}:
            expected = sum(1 for _, _, c in TURN_ROWS if c == code)
            assert value(text, "emgas_dead_letters_total", topic="emgas.turns", reason=code) == expected, code
        assert value(text, "emgas_dead_letters_total", topic="emgas.queries", reason="invalid_fields") == len(QUERY_ROWS)

        stop_worker(live.workers.pop("w"))

        async def ask_a_dead_graph() -> float:
            async with MemoryClient(live.settings) as client:
                started = time.monotonic()
                with pytest.raises(QueryTimeout):
                    await client.ask("bob", "marathon", timeout_s=3)
                return time.monotonic() - started

        assert 3 <= run(ask_a_dead_graph()) < 5  # a clear timeout at its deadline, not a hang
