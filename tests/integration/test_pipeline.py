"""Two graphs through the real pipeline: right passages back, never the other graph's."""

import asyncio
import base64
import json

import pytest

from emgas.processors.codec import decode_turn
from emgas.processors.events import ActivationReply, ErrorReply
from emgas.streams.interfaces.client import MemoryClient
from emgas.testing import wait_for_turns

pytestmark = pytest.mark.integration

TURNS = {
    "ann": [
        "I adopted a golden retriever called Biscuit last spring.",
        "Biscuit loves swimming in the fjord near Bergen.",
        "My sister Ingrid lives in Bergen and plays the cello.",
        "Ingrid has a cello recital at the Grieg Hall in May.",
        "At work I tune Kafka consumers for the payment service.",
    ],
    "ben": [
        "I grow tomatoes and basil on my balcony in Lisbon.",
        "The basil attracts bees every morning in summer.",
        "My cousin Duarte repairs vintage bicycles in Porto.",
        "Duarte rides a restored bicycle to the tomato market.",
    ],
}


def turns():
    for graph, texts in TURNS.items():
        for i, text in enumerate(texts):
            line = {"graph_id": graph, "turn_id": f"{graph}-{i}", "speaker": graph,
                    "text": text, "timestamp": f"2026-05-01T10:{i:02d}:00+02:00"}
            yield decode_turn(json.dumps(line).encode())


@pytest.fixture(scope="module")
def loaded(pipeline):
    async def load():
        async with MemoryClient(pipeline) as client:
            await wait_for_turns(client, {"ann": 0, "ben": 0}, deadline_s=120)
            await client.publish(list(turns()))
            await wait_for_turns(client, {g: len(t) for g, t in TURNS.items()}, deadline_s=60)

    asyncio.run(load())
    return pipeline


@pytest.mark.parametrize(
    ("graph", "query", "expected_turn"),
    [
        ("ann", "Where does Biscuit swim?", "ann-1"),
        ("ann", "When is the cello recital?", "ann-3"),
        ("ben", "Who repairs bicycles?", "ben-2"),
        ("ben", "What grows on the balcony?", "ben-0"),
    ],
)
async def test_expected_passage_comes_back(loaded, graph, query, expected_turn):
    async with MemoryClient(loaded) as client:
        reply = await client.ask(graph, query)
    assert isinstance(reply, ActivationReply), reply
    assert expected_turn in [p.turn_id for p in reply.passages]
    assert reply.stats.turns == len(TURNS[graph])


async def test_association_reaches_a_passage_that_never_mentions_the_seed(loaded):
    # Biscuit -> Bergen (ann-1) -> Ingrid's turn (ann-2), which never names Biscuit.
    async with MemoryClient(loaded) as client:
        reply = await client.ask("ann", "Biscuit")
    assert reply.seeds == ("biscuit",)
    assert "ann-2" in [p.turn_id for p in reply.passages]
    assert "bergen" in [c.id for c in reply.concepts]


async def test_no_passage_of_one_graph_in_the_other(loaded):
    async with MemoryClient(loaded) as client:
        for graph, other in (("ann", "ben"), ("ben", "ann")):
            for text in TURNS[other] + TURNS[graph]:
                reply = await client.ask(graph, text)
                assert isinstance(reply, ActivationReply)
                assert all(p.turn_id.startswith(graph) for p in reply.passages)
                own_words = " ".join(TURNS[graph]).lower()
                assert all(c.text.lower() in own_words for c in reply.concepts)


async def test_unknown_graph_gets_an_error_reply(loaded):
    async with MemoryClient(loaded) as client:
        reply = await client.ask("nobody-here", "anything at all")
    assert isinstance(reply, ErrorReply) and reply.code == "graph_not_found"


async def test_bad_turn_goes_to_dlq_with_its_bytes_and_the_next_turn_is_applied(loaded):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from emgas.processors.codec import encode
    from emgas.processors.events import DeadLetter

    servers = loaded.bootstrap_servers()
    producer = AIOKafkaProducer(bootstrap_servers=servers)
    await producer.start()
    try:
        await producer.send_and_wait("emgas.turns", b"\xff not json", key=b"ann")
        good = next(t for t in turns() if t.graph_id == "ann").model_copy(
            update={"turn_id": "ann-after-garbage", "text": "The harbour seals in Bergen are noisy."}
        )
        await producer.send_and_wait("emgas.turns", encode(good), key=b"ann")
    finally:
        await producer.stop()
    async with MemoryClient(loaded) as client:
        await wait_for_turns(client, {"ann": len(TURNS["ann"]) + 1}, deadline_s=30)
    consumer = AIOKafkaConsumer("emgas.dlq", bootstrap_servers=servers, auto_offset_reset="earliest")
    await consumer.start()
    try:
        message = await asyncio.wait_for(consumer.getone(), 30)
    finally:
        await consumer.stop()
    letter = DeadLetter.model_validate_json(message.value)
    assert letter.topic == "emgas.turns" and letter.reason == "not_utf8"
    assert base64.b64decode(letter.value_b64) == b"\xff not json"
