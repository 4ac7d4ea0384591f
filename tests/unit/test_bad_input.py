"""The bad-input table: each kind of malformed message and the reason code it gets.

Turns and queries that fail here go to `emgas.dlq` with these codes (the
live path is tested in tests/integration/test_bad_input_live.py); a valid
query for a graph that does not exist gets an error reply instead.
"""

import json
from datetime import datetime, timezone

import pytest

from emgas.processors.codec import decode_graph_event, decode_request, decode_turn
from emgas.processors.errors import DecodeError
from emgas.processors.events import MAX_TEXT_BYTES

NOW = datetime(2026, 11, 21, tzinfo=timezone.utc)
TURN = {"graph_id": "g", "turn_id": "t1", "speaker": "ann", "text": "Hello there", "timestamp": "2026-11-20T10:00:00Z"}
QUERY = {"request_id": "q1", "graph_id": "g", "text": "hello"}


def raw(obj) -> bytes:
    return json.dumps(obj).encode()


TURN_ROWS = [
    ("invalid JSON", b'{"graph_id": "g",', "not_json"),
    ("no value", b"", "empty"),
    ("JSON nested too deeply", b"[" * 100_000, "not_json"),
    ("not UTF-8", b"\xff\xfe\x00garbage", "not_utf8"),
    ("not an object", b"[1, 2, 3]", "not_object"),
    ("missing field", raw({k: v for k, v in TURN.items() if k != "text"}), "invalid_fields"),
    ("wrongly typed field", raw({**TURN, "speaker": 42}), "invalid_fields"),
    ("unknown event type", raw({**TURN, "type": "turnip"}), "unknown_type"),
    ("unknown schema version", raw({**TURN, "schema_version": 7}), "unknown_version"),
    ("unknown field", raw({**TURN, "mood": "happy"}), "invalid_fields"),
    ("metadata value not finite", raw({**TURN, "metadata": {"score": float("nan")}}), "invalid_fields"),
    ("empty text", raw({**TURN, "text": ""}), "invalid_fields"),
    ("whitespace-only text", raw({**TURN, "text": " \n\t "}), "invalid_fields"),
    ("text over the size limit", raw({**TURN, "text": "é" * (MAX_TEXT_BYTES // 2 + 1)}), "text_too_long"),
    ("timestamp far in the future", raw({**TURN, "timestamp": "2027-06-01T00:00:00Z"}), "timestamp_out_of_range"),
    ("timestamp before 1970", raw({**TURN, "timestamp": "1969-12-31T23:59:59Z"}), "timestamp_out_of_range"),
    ("timestamp without offset", raw({**TURN, "timestamp": "2026-11-20T10:00:00"}), "invalid_fields"),
    ("empty graph_id", raw({**TURN, "graph_id": ""}), "invalid_fields"),
    ("graph_id too long", raw({**TURN, "graph_id": "g" * 257}), "invalid_fields"),
    ("graph_id with a control character", raw({**TURN, "graph_id": "a\x07b"}), "invalid_fields"),
    ("empty turn_id", raw({**TURN, "turn_id": ""}), "invalid_fields"),
    ("turn_id too long", raw({**TURN, "turn_id": "t" * 257}), "invalid_fields"),
    ("turn_id with a control character", raw({**TURN, "turn_id": "t\x00"}), "invalid_fields"),
]


@pytest.mark.parametrize(("case", "message", "code"), TURN_ROWS, ids=[r[0] for r in TURN_ROWS])
def test_bad_turns_are_refused_with_a_reason(case, message, code):
    with pytest.raises(DecodeError) as refused:
        decode_turn(message, NOW, max_future_s=86_400)
    assert refused.value.code == code


QUERY_ROWS = [
    ("firing threshold above 1", {"params": {"firing_threshold": 1.5}}),
    ("negative propagation decay", {"params": {"propagation_decay": -0.1}}),
    ("zero iterations", {"params": {"max_iterations": 0}}),
    ("huge iterations", {"params": {"max_iterations": 10_000}}),
    ("huge top-N", {"params": {"top_passages": 1_000_000}}),
    ("reply_to that is not a topic name", {"reply_to": "../etc/passwd"}),
    ("no text and no seeds", {"text": None}),
    ("graph_id with a control character", {"graph_id": "g\x1b[31m"}),
]


@pytest.mark.parametrize(("case", "change"), QUERY_ROWS, ids=[r[0] for r in QUERY_ROWS])
def test_bad_queries_are_refused(case, change):
    with pytest.raises(DecodeError) as refused:
        decode_request(raw({**QUERY, **change}))
    assert refused.value.code == "invalid_fields"


def test_the_valid_neighbours_decode():
    assert decode_turn(raw(TURN), NOW).turn_id == "t1"
    assert decode_turn(raw({**TURN, "timestamp": "2026-11-21T23:00:00Z"}), NOW).turn_id == "t1"  # 23 h ahead: fine
    assert decode_request(raw(QUERY)).graph_id == "g"


@pytest.mark.parametrize("decode", [decode_turn, decode_request, decode_graph_event])
def test_a_record_without_a_value_is_refused(decode):
    with pytest.raises(DecodeError) as refused:
        decode(None)
    assert refused.value.code == "empty"


def test_a_decoder_that_fails_unexpectedly_gives_a_dead_letter_not_a_dead_agent():
    from emgas.streams.dlq import guarded

    def broken(raw: bytes):
        raise KeyError("a bug")

    with pytest.raises(DecodeError) as refused:
        guarded(broken, b"{}")
    assert refused.value.code == "decoder_error" and "KeyError" in refused.value.message
