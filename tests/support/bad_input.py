"""Malformed turns and queries, each with the reason code it gets (the unit table and the live test)."""

import json

from emgas.processors.events import MAX_TEXT_BYTES

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
