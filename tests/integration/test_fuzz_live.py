"""Generated garbage thrown at a live worker's agents: on `emgas.turns`,
`emgas.queries` and `emgas.graph-events`, mixed with valid turns.

A seeded mutational fuzzer (bounded: a few hundred messages) starts from
valid messages and breaks them: random bytes, truncation, flipped bytes,
fields replaced by values of other types, deep nesting, huge numbers,
non-finite numbers, control characters, records without a value. The
decoders are the oracle: what they accept must be applied (or answered),
what they refuse must be in the dead-letter metrics with the same count,
the worker must stay up, and the live graphs must equal a replay.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from datetime import datetime, timezone

import pytest
from aiokafka import AIOKafkaProducer

from emgas.processors.codec import decode_graph_event, decode_request, decode_turn, encode
from emgas.processors.errors import DecodeError
from emgas.processors.extract import ExtractionParams, extractor_id, ingest
from emgas.replay.fold import Selection
from emgas.streams.interfaces.admin import replay
from emgas.streams.interfaces.client import MemoryClient
from emgas.tools.harness import demo_turns
from emgas.testing import wait_for_turns
from tests.support.live import run, serving
from tests.support.metrics import scrape, value

pytestmark = pytest.mark.integration
SEED = 20261121
PER_TOPIC = 150
ODD_VALUES = [None, True, -1, 0, 2**63, 1e308, -1e-308, "", " ", "\u0000", "\u202e", "x" * 300, [], {}, [1, [2]],
              {"a": {"b": 1}}, "2099-01-01T00:00:00Z", "1969-01-01T00:00:00Z", "emgas.replies"]


def mutate(rng: random.Random, valid: bytes) -> bytes | None:
    """One piece of garbage made from a valid message (None: a record without a value)."""
    kind = rng.randrange(9)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    if kind == 1:
        return valid[: rng.randrange(len(valid))]
    if kind == 2:
        flipped = bytearray(valid)
        for _ in range(rng.randrange(1, 4)):
            flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        return bytes(flipped)
    if kind == 3:
        return None
    if kind == 4:
        return b"[" * rng.choice([10, 2_000, 100_000]) + b"]"
    obj = json.loads(valid)
    field = rng.choice(sorted(obj))
    if kind == 5:
        obj[field] = rng.choice(ODD_VALUES)
    elif kind == 6:
        del obj[field]
    elif kind == 7:
        obj[rng.choice(["extra", "type", "schema_version"])] = rng.choice(ODD_VALUES + ["turn", "forget", 1, 2, 99])
    else:
        return json.dumps(obj).replace(f'"{field}"', f'"{field}": NaN, "{field}"', 1).encode()
    return json.dumps(obj).encode()


def garbage(rng: random.Random, valid: list[bytes]) -> list[bytes | None]:
    return [mutate(rng, rng.choice(valid)) for _ in range(PER_TOPIC)]


def accepted(decode, raw: bytes | None) -> bool:
    try:
        decode(raw)
        return True
    except DecodeError:
        return False
    except Exception:  # noqa: BLE001 - the worker turns these into dead letters too (`decoder_error`)
        return False


def test_the_agents_survive_generated_garbage_and_lose_no_valid_turn(tmp_path):
    rng = random.Random(SEED)
    base = [t for t in demo_turns() if t.graph_id == "bob"]
    with serving(tmp_path / "fuzz", 2, base) as (live, port):
        now = datetime.now(timezone.utc)
        turns = [t.model_copy(update={"turn_id": f"fuzz-{i}", "timestamp": now}) for i, t in enumerate(base)]
        turn_garbage = garbage(rng, [encode(t) for t in turns])
        queries = [json.dumps({"request_id": f"q{i}", "graph_id": "bob", "text": t.text, "reinforce": False,
                               "reply_to": live.settings.replies_topic}).encode() for i, t in enumerate(base)]
        query_garbage = garbage(rng, queries)
        tag = extractor_id(ExtractionParams())
        events = [encode(ingest(t, ExtractionParams(), tag).model_copy(update={"turn_id": f"ev-{i}"}))
                  for i, t in enumerate(base)]
        # Graph events are written by the system only; there, only what no decoder accepts.
        event_garbage = [g for g in garbage(rng, events) if not accepted(decode_graph_event, g)]

        def decoded_turn(raw: bytes | None):
            try:
                return decode_turn(raw, now, live.settings.max_future_s)
            except DecodeError:
                return None

        garbage_turns = [decoded_turn(g) for g in turn_garbage]
        turn_ids: dict[str, set[str]] = {"bob": {t.turn_id for t in base}}
        for turn in garbage_turns + turns:
            if turn is not None:  # what the decoder accepts is applied, once per id
                turn_ids.setdefault(turn.graph_id, set()).add(turn.turn_id)
        expected = {g: len(ids) for g, ids in turn_ids.items()}
        refused = {
            live.settings.turns_topic: garbage_turns.count(None),
            live.settings.queries_topic: sum(not accepted(decode_request, g) for g in query_garbage),
            live.settings.graph_events_topic: len(event_garbage),
        }

        async def publish() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=live.settings.bootstrap_servers())
            await producer.start()
            try:
                for i, message in enumerate(turn_garbage):
                    await producer.send(live.settings.turns_topic, message, key=b"bob")
                    if i % 5 == 0 and turns:
                        await producer.send(live.settings.turns_topic, encode(turns[i // 5 % len(turns)]), key=b"bob")
                for t in turns:
                    await producer.send(live.settings.turns_topic, encode(t), key=b"bob")
                for message in query_garbage:
                    await producer.send(live.settings.queries_topic, message, key=b"bob")
                for message in event_garbage:
                    await producer.send(live.settings.graph_events_topic, message, key=b"bob")
                await producer.flush()
            finally:
                await producer.stop()

        started = time.monotonic()
        run(publish())

        async def applied() -> None:
            async with MemoryClient(live.settings) as client:
                await wait_for_turns(client, expected, deadline_s=120)
                reply = await client.ask("bob", "marathon training", reinforce=False)
                assert reply.type == "activation_reply", reply

        run(applied())

        async def dead_letters_counted() -> str:
            for _ in range(200):
                status, text = scrape(port, "/metrics")
                counts = {topic: value(text, "emgas_dead_letters_total", topic=topic) for topic in refused}
                if status == 200 and counts == refused:
                    return text
                await asyncio.sleep(0.1)
            raise AssertionError(f"dead letters {counts}, expected {refused}")

        run(dead_letters_counted())
        assert live.workers["w"].poll() is None, live.logs()
        print(f"garbage: {sum(refused.values())} refused of {len(turn_garbage) + len(query_garbage) + len(event_garbage)} "
              f"({refused}); valid turns applied {expected}; {time.monotonic() - started:.1f} s")
        result = run(replay(live.settings, tmp_path / "rebuilt", None, Selection(), verify=True))
        assert result.differences == []
