"""The codec: hand-written JSON accepted, bad input refused with a reason code."""

import json

import pytest

from emgas.processors.codec import decode_graph_event, decode_query, decode_reply, decode_request, decode_turn, encode
from emgas.processors.errors import DecodeError
from emgas.processors.events import DigestQuery, ErrorReply
from tests.support.factories import ingested

TURN = {"graph_id": "u1", "turn_id": "t1", "speaker": "alice", "text": "hi there", "timestamp": "2026-01-01T10:00:00Z"}


def raw(obj) -> bytes:
    return json.dumps(obj).encode()


def test_plain_turn_without_type_or_version_is_accepted():
    turn = decode_turn(raw(TURN))
    assert turn.type == "turn" and turn.schema_version == 1
    assert turn.timestamp.tzinfo is not None


def test_turn_round_trips():
    turn = decode_turn(raw(TURN))
    assert decode_turn(encode(turn)) == turn


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (b"\xff\xfe", "not_utf8"),
        (b"{not json", "not_json"),
        (b"[1, 2]", "not_object"),
        (raw({**TURN, "text": "   "}), "invalid_fields"),
        (raw({**TURN, "graph_id": ""}), "invalid_fields"),
        (raw({**TURN, "graph_id": "a\x00b"}), "invalid_fields"),
        (raw({**TURN, "timestamp": "2026-01-01T10:00:00"}), "invalid_fields"),  # naive
        (raw({**TURN, "turn_id": 5}), "invalid_fields"),
        (raw({**TURN, "colour": "red"}), "invalid_fields"),
        (raw({**TURN, "type": "nonsense"}), "unknown_type"),
        (raw({**TURN, "schema_version": 99}), "unknown_version"),
        (raw({k: v for k, v in TURN.items() if k != "text"}), "invalid_fields"),
        (raw({**TURN, "text": "é" * 40000}), "text_too_long"),
    ],
)
def test_bad_turns_are_refused_with_a_code(payload, code):
    with pytest.raises(DecodeError) as info:
        decode_turn(payload)
    assert info.value.code == code


def test_query_needs_text_or_seeds():
    with pytest.raises(DecodeError, match="text` or `seeds"):
        decode_query(raw({"request_id": "r", "graph_id": "g"}))


@pytest.mark.parametrize(
    "params", [{"firing_threshold": 1.5}, {"propagation_decay": -0.1}, {"max_iterations": 0}, {"top_passages": 10**6}]
)
def test_query_params_out_of_range_are_refused(params):
    with pytest.raises(DecodeError):
        decode_query(raw({"request_id": "r", "graph_id": "g", "text": "x", "params": params}))


def test_reply_to_must_be_a_topic_name():
    with pytest.raises(DecodeError):
        decode_query(raw({"request_id": "r", "graph_id": "g", "text": "x", "reply_to": "no spaces allowed"}))


def test_graph_event_and_reply_round_trip():
    event = ingested("g", "t1", {"kafka": 0.9})
    assert decode_graph_event(encode(event)) == event
    reply = ErrorReply(request_id="r", graph_id="g", code="graph_not_found", message="m")
    assert decode_reply(encode(reply)) == reply


def test_v1_query_is_upcast_to_the_active_graph_version():
    raw = b'{"schema_version":1,"request_id":"q","graph_id":"g","seeds":["kafka"]}'
    query = decode_request(raw)
    assert query.schema_version == 3 and query.graph_version is None and query.reinforce


def test_digest_query_is_read_from_the_queries_topic():
    query = decode_request(b'{"type":"digest_query","request_id":"d","graph_id":"g"}')
    assert isinstance(query, DigestQuery) and query.graph_id == "g"
    with pytest.raises(DecodeError) as err:
        decode_request(b'{"type":"digest_query","request_id":"d","graph_id":"a\\u0000b"}')
    assert err.value.code == "invalid_fields"


def test_current_versions_are_what_the_models_say():
    from emgas.processors.codec import CURRENT_VERSIONS, UPCASTERS
    from emgas.processors.events import ActivationQuery, Snapshot, TurnIngested

    for model in (ActivationQuery, Snapshot, TurnIngested):
        assert CURRENT_VERSIONS[model.model_fields["type"].default] == model.model_fields["schema_version"].default
    assert {"turn", "turn_ingested", "decay", "forget", "checkpoint", "passages_reply", "dead_letter"} <= set(CURRENT_VERSIONS)
    for kind, version in UPCASTERS:  # every upcaster leads to a version that exists
        assert version < CURRENT_VERSIONS[kind]
