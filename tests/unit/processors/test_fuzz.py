"""Generated garbage at the decoders: they answer with a value or a DecodeError, never anything else."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.codec import decode_graph_event, decode_reply, decode_request, decode_turn
from emgas.processors.errors import DecodeError

DECODERS = (decode_turn, decode_request, decode_graph_event, decode_reply)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=20,
)
FIELDS = ["type", "schema_version", "graph_id", "turn_id", "speaker", "text", "timestamp", "request_id",
          "seeds", "params", "reply_to", "graph_version", "concepts", "boosts", "topics", "at", "reinforce"]
near_events = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=10)


def only_decode_errors(raw: bytes) -> None:
    for decode in DECODERS:
        try:
            decode(raw)
        except DecodeError as err:
            assert err.code and err.message


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes(raw):
    only_decode_errors(raw)


@settings(max_examples=300, deadline=None)
@given(near_events)
def test_objects_with_the_right_field_names_and_wrong_values(obj):
    only_decode_errors(json.dumps(obj).encode())


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json(value):
    only_decode_errors(json.dumps(value).encode())
