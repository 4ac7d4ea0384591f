"""The bad-input table: each kind of malformed message and the reason code it gets.

Turns and queries that fail here go to `emgas.dlq` with these codes (the
live path is tested in tests/integration/test_bad_input_live.py); a valid
query for a graph that does not exist gets an error reply instead.
"""

from datetime import datetime, timezone

import pytest

from emgas.processors.codec import decode_graph_event, decode_request, decode_turn
from emgas.processors.errors import DecodeError

from tests.support.bad_input import QUERY, QUERY_ROWS, TURN, TURN_ROWS, raw

NOW = datetime(2026, 11, 21, tzinfo=timezone.utc)
@pytest.mark.parametrize(("case", "message", "code"), TURN_ROWS, ids=[r[0] for r in TURN_ROWS])
def test_bad_turns_are_refused_with_a_reason(case, message, code):
    with pytest.raises(DecodeError) as refused:
        decode_turn(message, NOW, max_future_s=86_400)
    assert refused.value.code == code


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
    from emgas.streams.runtime.dlq import guarded

    def broken(raw: bytes):
        raise KeyError("a bug")

    with pytest.raises(DecodeError) as refused:
        guarded(broken, b"{}")
    assert refused.value.code == "decoder_error" and "KeyError" in refused.value.message


# -- graph events: values no worker writes are refused when decoded ----------------------

CONCEPT = {"id": "dog", "text": "dog", "importance": 0.5}
INGESTED = {**TURN, "type": "turn_ingested", "schema_version": 2, "language": "en", "extractor": "x",
            "concepts": [CONCEPT, {**CONCEPT, "id": "beach", "text": "beach"}]}
RETRIEVED = {"type": "retrieved", "schema_version": 1, "graph_id": "g", "graph_version": 1, "request_id": "q1",
             "timestamp": "2026-11-20T10:00:00Z", "boosts": [{"id": "dog", "amount": 0.5}]}
DECAY = {"type": "decay", "schema_version": 1, "graph_id": "g", "graph_version": 1, "timestamp": "2026-11-20T10:00:00Z",
         "trigger": "window", "params": {}, "concepts": [{"id": "dog", "reason": "activation", "value": 0.001}]}
SECTION = {"count": 1, "digest": "0" * 64}
SNAPSHOT = {"type": "snapshot", "schema_version": 1, "graph_id": "g", "as_of": 3, "part": 0, "parts": 1, "data": "",
            "timestamp": "2026-11-20T10:00:00Z",
            "digests": [{"graph_id": "g", "version": 1, "active": True, "digest": "0" * 64, "sections": {"meta": SECTION}}]}
CHECKPOINT = {"type": "checkpoint", "schema_version": 1, "log_id": "l", "partition": 0, "as_of": 9, "timestamp": "2026-11-20T10:00:00Z",
              "snapshots": [{"graph_id": "g", "as_of": 3, "first": 4, "last": 4, "parts": 1}]}


def boosted(amount) -> bytes:  # noqa: ANN001
    return raw({**RETRIEVED, "boosts": [{"id": "dog", "amount": amount}]})


def decay_params(**params) -> bytes:
    return raw({**DECAY, "params": params})


GRAPH_ROWS = [
    ("boost not a number", boosted(float("nan")), "invalid_fields"),
    ("boost infinite", b'{"type": "retrieved", "schema_version": 1, "graph_id": "g", "graph_version": 1, '
     b'"request_id": "q1", "timestamp": "2026-11-20T10:00:00Z", "boosts": [{"id": "dog", "amount": 1e999}]}', "invalid_fields"),
    ("boost above any the worker emits", boosted(10.5), "invalid_fields"),
    ("boost that overflows the grid", boosted(1e300), "invalid_fields"),
    ("negative boost", boosted(-0.1), "invalid_fields"),
    ("importance not a number", raw({**INGESTED, "concepts": [{**CONCEPT, "importance": float("nan")}]}), "invalid_fields"),
    ("importance above 1", raw({**INGESTED, "concepts": [{**CONCEPT, "importance": 3.0}]}), "invalid_fields"),
    ("a concept twice in one turn", raw({**INGESTED, "concepts": [CONCEPT, CONCEPT]}), "invalid_fields"),
    ("turn dated before 1970", raw({**INGESTED, "timestamp": "1969-07-20T20:17:00Z"}), "timestamp_out_of_range"),
    ("turn dated in 2300", raw({**INGESTED, "timestamp": "2300-01-01T00:00:00Z"}), "timestamp_out_of_range"),
    ("retrieval dated year 1", raw({**RETRIEVED, "timestamp": "0001-01-01T00:00:00Z"}), "timestamp_out_of_range"),
    ("tick at the end of time", raw({**DECAY, "timestamp": "9999-12-31T23:59:59Z"}), "timestamp_out_of_range"),
    ("half-life infinite", decay_params(half_life_s=1e999), "invalid_fields"),
    ("threshold not a number", decay_params(concept_threshold=float("nan")), "invalid_fields"),
    ("negative threshold", decay_params(edge_threshold=-1), "invalid_fields"),
    ("pruned value not a number", raw({**DECAY, "concepts": [{"id": "dog", "reason": "activation", "value": float("nan")}]}), "invalid_fields"),
    ("negative record count", raw({**SNAPSHOT, "digests": [{**SNAPSHOT["digests"][0], "sections": {"meta": {**SECTION, "count": -1}}}]}), "invalid_fields"),
    ("negative snapshot offset", raw({**CHECKPOINT, "snapshots": [{**CHECKPOINT["snapshots"][0], "first": -4}]}), "invalid_fields"),
    ("a snapshot of no parts", raw({**CHECKPOINT, "snapshots": [{**CHECKPOINT["snapshots"][0], "parts": 0}]}), "invalid_fields"),
]


@pytest.mark.parametrize(("case", "message", "code"), GRAPH_ROWS, ids=[r[0] for r in GRAPH_ROWS])
def test_graph_events_with_values_no_worker_writes_are_refused(case, message, code):
    with pytest.raises(DecodeError) as refused:
        decode_graph_event(message)
    assert refused.value.code == code


@pytest.mark.parametrize(
    "event",
    [INGESTED, RETRIEVED, DECAY, SNAPSHOT, CHECKPOINT, {**INGESTED, "timestamp": "1970-01-01T00:00:00Z"},
     {**RETRIEVED, "boosts": [{"id": "dog", "amount": 10.0}]}],
    ids=["turn", "retrieval", "tick", "snapshot", "checkpoint", "the epoch itself", "the largest boost"],
)
def test_their_valid_neighbours_decode(event):
    assert decode_graph_event(raw(event)).type == event["type"]
