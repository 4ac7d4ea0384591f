"""Decoding for the fold (`processors.fold_codec`) against the codec: a turn
read as a `TurnRow`, a consolidation as a `ConsolidateRow`, a tick as a
`DecayRow`, has the fields `decode_graph_event` gives, and anything the
fast path is not sure of gets the codec's answer (its event, or its
refusal with the same reason)."""

import gc
import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.errors import DecodeError
from emgas.processors.events import (
    Concept, Consolidate, Decay, GraphVersionSwitched, PrunedConcept, PrunedEdge, TopicNode, TurnIngested,
)
from emgas.processors.fold_codec import (
    ConsolidateRow, DecayRow, TurnRow, concept_ids, decode_for_fold, is_consolidation, is_decay, is_turn,
)
from emgas.processors.dynamics import DecayParams

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
OFFSETS = [timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
names = st.text(min_size=1, max_size=12)
turns = st.builds(
    lambda graph, version, turn, speaker, text, seconds, us, tz, session, metadata, concepts: TurnIngested(
        graph_id=graph, graph_version=version, turn_id=turn, speaker=speaker, text=text,
        timestamp=(T0 + timedelta(seconds=seconds, microseconds=us)).astimezone(tz), session_id=session,
        metadata=metadata, language="en", extractor="x", concepts=tuple(
            Concept(id=cid, text=text, importance=importance) for cid, (text, importance) in concepts.items()
        ),
    ),
    names.filter(lambda s: s.isprintable() and not s.isspace()), st.none() | st.integers(1, 5),
    names.filter(lambda s: s.isprintable() and not s.isspace()), st.text(max_size=8), st.text(max_size=60),
    st.integers(-10**9, 10**9), st.sampled_from([0, 1, 999_999]), st.sampled_from(OFFSETS), st.none() | names,
    st.dictionaries(names, st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(-1e6, 1e6) | names, max_size=3),
    st.dictionaries(names, st.tuples(names, st.floats(0.001, 1.0)), max_size=6),
)


def same_turn(row: TurnRow, model: TurnIngested) -> None:
    for field in ("graph_id", "graph_version", "turn_id", "speaker", "text", "session_id", "metadata", "language",
                  "extractor"):
        assert getattr(row, field) == getattr(model, field), field
        assert type(getattr(row, field)) is type(getattr(model, field)), field
    for key, value in model.metadata.items():
        assert type(row.metadata[key]) is type(value), key
    assert row.timestamp == model.timestamp and row.timestamp.utcoffset() == model.timestamp.utcoffset()
    assert [(c.id, c.text, c.importance) for c in row.concepts] == [(c.id, c.text, c.importance) for c in model.concepts]
    assert all(type(c.importance) is float for c in row.concepts)
    assert row.model() == model


def a_row_or_the_codecs(raw: bytes, row: type) -> object | None:
    """What the fold decodes from a worker's event: a `row` with the codec's
    fields (checked by `reads_as_the_codec`), or with an escape in it the
    codec's own event; the row, or None."""
    reads_as_the_codec(raw)
    decoded = decode_for_fold(raw)
    if b"\\u" in raw:  # an escape: the codec decides
        assert decoded == decode_graph_event(raw)
        return None
    assert isinstance(decoded, row)
    return decoded


@settings(max_examples=300, deadline=None)
@given(turns)
def test_a_turn_a_worker_wrote_reads_as_a_row_with_the_codecs_fields(turn):
    decoded = a_row_or_the_codecs(encode(turn), TurnRow)
    assert decoded is None or is_turn(decoded)
    if decoded is not None:  # the ids a row brings are those its model would give, sorted
        assert concept_ids(decoded) == concept_ids(turn) == tuple(sorted(c.id for c in turn.concepts))


def edited(turn: TurnIngested, **changes) -> bytes:
    obj = json.loads(encode(turn))
    obj.update(changes)
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


TURN = TurnIngested(
    graph_id="g", turn_id="t1", speaker="ana", text="hello", timestamp=T0, language="en", extractor="x",
    concepts=(Concept(id="hello", text="hello", importance=0.5),),
)
EDITS = {
    "a concept twice": {"concepts": [{"id": "a", "text": "a", "importance": 0.5}] * 2},
    "importance above one": {"concepts": [{"id": "a", "text": "a", "importance": 1.5}]},
    "importance zero": {"concepts": [{"id": "a", "text": "a", "importance": 0}]},
    "an integer importance": {"concepts": [{"id": "a", "text": "a", "importance": 1}]},
    "an empty concept id": {"concepts": [{"id": "", "text": "a", "importance": 0.5}]},
    "a blank graph id": {"graph_id": "   "},
    "a control character in a turn id": {"turn_id": "t\x07"},
    "a graph id too long": {"graph_id": "g" * 257},
    "version zero": {"graph_version": 0},
    "a version as a string": {"graph_version": "2"},
    "a version as true": {"graph_version": True},
    "a naive timestamp": {"timestamp": "2024-05-01T12:00:00"},
    "a timestamp before 1970": {"timestamp": "1969-12-31T23:59:59Z"},
    "a timestamp in 2200": {"timestamp": "2200-01-01T00:00:00Z"},
    "a timestamp with a space": {"timestamp": "2024-05-01 12:00:00Z"},
    "milliseconds": {"timestamp": "2024-05-01T12:00:00.5Z"},
    "an unknown field": {"mood": "happy"},
    "a list in metadata": {"metadata": {"k": [1]}},
    "a huge integer in metadata": {"metadata": {"k": 2**70}},
    "a lone surrogate": {"text": "\ud800"},
    "schema version 1": {"schema_version": 1},
    "no concepts field": {"concepts": None},
    "a thirteenth month": {"timestamp": "2024-13-01T12:00:00Z"},
    "a 30th of February": {"timestamp": "2024-02-30T12:00:00Z"},
    "hour 25": {"timestamp": "2024-05-01T25:00:00Z"},
}


def reads_as_the_codec(raw: bytes) -> None:
    """`decode_for_fold(raw)` gives the codec's event (as a row, for a turn) or its refusal, word for word."""
    try:
        expected = decode_graph_event(raw)
    except DecodeError as err:
        with pytest.raises(DecodeError) as got:
            decode_for_fold(raw)
        assert (got.value.code, str(got.value)) == (err.code, str(err))
        return
    decoded = decode_for_fold(raw)
    if isinstance(decoded, TurnRow):
        same_turn(decoded, expected)
    elif isinstance(decoded, ConsolidateRow):
        same_consolidation(decoded, expected)
    elif isinstance(decoded, DecayRow):
        same_tick(decoded, expected)
    else:
        assert decoded == expected


@pytest.mark.parametrize("case", EDITS)
def test_what_the_fast_path_is_not_sure_of_gets_the_codecs_answer(case):
    raw = edited(TURN, **EDITS[case]) if case != "a lone surrogate" else encode(TURN).replace(b'"hello"', b'"\\ud800"', 1)
    reads_as_the_codec(raw)


def test_other_events_are_the_codecs():
    switch = GraphVersionSwitched(graph_id="g", version=2, timestamp=T0)
    assert decode_for_fold(encode(switch)) == switch
    with pytest.raises(DecodeError):
        decode_for_fold(b"not json")
    with pytest.raises(DecodeError) as refused:
        decode_for_fold(encode(TURN).replace(b'"hello"', b'"h\xff\xfe"', 1))  # not UTF-8
    assert refused.value.code == "not_utf8"
    for empty in (None, b""):  # a record without a value (a tombstone)
        with pytest.raises(DecodeError) as refused:
            decode_for_fold(empty)
        assert refused.value.code == "empty"


def test_a_field_given_twice_reads_as_the_codec_reads_it():
    raw = encode(TURN).replace(b'"turn_id":"t1"', b'"turn_id":"t1","turn_id":"t2"')
    expected, decoded = decode_graph_event(raw), decode_for_fold(raw)
    assert expected.turn_id == decoded.turn_id


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_any_bytes_near_a_turn_read_as_the_codec_reads_them(data):
    """A turn's bytes with a byte changed, dropped or put in: the fast path
    gives the codec's event or its refusal, never another answer."""
    reads_as_the_codec(bytes_near(data, TURN))


def bytes_near(data, event) -> bytes:
    """`event`'s bytes with one byte changed, dropped or put in, where `data` draws."""
    raw = bytearray(encode(event))
    at = data.draw(st.integers(0, len(raw) - 1), label="where")
    how = data.draw(st.sampled_from(["change", "drop", "insert"]), label="how")
    byte = data.draw(st.integers(0, 255), label="byte")
    if how == "change":
        raw[at] = byte
    elif how == "drop":
        del raw[at]
    else:
        raw.insert(at, byte)
    return bytes(raw)


consolidations = st.builds(
    lambda graph, version, seconds, us, tz, topics: Consolidate(
        graph_id=graph, graph_version=version, timestamp=(T0 + timedelta(seconds=seconds, microseconds=us)).astimezone(tz),
        topics=tuple(TopicNode(id=tid, label=label, members=members) for tid, label, members in topics),
    ),
    names.filter(lambda s: s.isprintable() and not s.isspace()), st.integers(1, 5),
    st.integers(-10**9, 10**9), st.sampled_from([0, 1, 999_999]), st.sampled_from(OFFSETS),
    st.lists(st.tuples(names, st.text(max_size=20), st.lists(names, max_size=5).map(tuple)), max_size=5),
)


def same_consolidation(row: ConsolidateRow, model: Consolidate) -> None:
    assert (row.graph_id, row.graph_version, row.type) == (model.graph_id, model.graph_version, model.type)
    assert row.timestamp == model.timestamp and row.timestamp.utcoffset() == model.timestamp.utcoffset()
    assert [(t.id, t.label, t.members) for t in row.topics] == [(t.id, t.label, t.members) for t in model.topics]
    assert all(type(t.members) is tuple for t in row.topics)
    assert row.model() == model


@settings(max_examples=300, deadline=None)
@given(consolidations)
def test_a_consolidation_a_worker_wrote_reads_as_a_row_with_the_codecs_fields(event):
    decoded = a_row_or_the_codecs(encode(event), ConsolidateRow)
    assert decoded is None or (is_consolidation(decoded) and not is_turn(decoded))


CONSOLIDATION = Consolidate(graph_id="g", graph_version=1, timestamp=T0, topics=(
    TopicNode(id="topic:kafka", label="kafka lag", members=("kafka", "lag")),
))
CONSOLIDATION_EDITS = {
    "version zero": {"graph_version": 0},
    "no version": {"graph_version": None},
    "a version as true": {"graph_version": True},
    "a version of 1.0": {"graph_version": 1.0},
    "a blank graph id": {"graph_id": " "},
    "a naive timestamp": {"timestamp": "2024-05-01T12:00:00"},
    "a 30th of February": {"timestamp": "2024-02-30T12:00:00Z"},
    "an unknown field": {"mood": "calm"},
    "an unknown field in a topic": {"topics": [{"id": "k", "label": "k", "members": ["a"], "weight": 1}]},
    "a member that is a number": {"topics": [{"id": "k", "label": "k", "members": [1]}]},
    "a topic without a label": {"topics": [{"id": "k", "members": ["a", "b"]}]},
    "no topics": {"topics": []},
    "topics as null": {"topics": None},
    "schema version 2": {"schema_version": 2},
}


@pytest.mark.parametrize("case", CONSOLIDATION_EDITS)
def test_a_consolidation_the_fast_path_is_not_sure_of_gets_the_codecs_answer(case):
    reads_as_the_codec(edited(CONSOLIDATION, **CONSOLIDATION_EDITS[case]))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_bytes_near_a_consolidation_read_as_the_codec_reads_them(data):
    reads_as_the_codec(bytes_near(data, CONSOLIDATION))


params = st.builds(
    DecayParams, model=st.sampled_from(["exponential", "power", "hybrid"]), half_life_s=st.floats(1.0, 1e9),
    power_tau_s=st.floats(1.0, 1e7), power_beta=st.floats(0.01, 3.0), hybrid_after=st.integers(1, 9),
    concept_threshold=st.floats(0.0, 0.5), edge_stability_s=st.floats(1.0, 1e9), edge_threshold=st.floats(0.0, 0.99),
)
ticks = st.builds(
    lambda graph, version, seconds, us, tz, trigger, decay, concepts, edges: Decay(
        graph_id=graph, graph_version=version, timestamp=(T0 + timedelta(seconds=seconds, microseconds=us)).astimezone(tz),
        trigger=trigger, params=decay,
        concepts=tuple(PrunedConcept(id=cid, reason=reason, value=value) for cid, reason, value in concepts),
        edges=tuple(PrunedEdge(a=a, b=b, value=value) for a, b, value in edges),
    ),
    names.filter(lambda s: s.isprintable() and not s.isspace()), st.integers(1, 5),
    st.integers(-10**9, 10**9), st.sampled_from([0, 1, 999_999]), st.sampled_from(OFFSETS),
    st.sampled_from(["window", "idle", "manual"]), params,
    st.lists(st.tuples(st.text(max_size=8), st.sampled_from(["activation", "isolated"]), st.floats(0.0, 1.0)), max_size=4),
    st.lists(st.tuples(names, names, st.floats(0.0, 1.0)), max_size=6),
)


def same_tick(row: DecayRow, model: Decay) -> None:
    assert (row.graph_id, row.graph_version, row.type, row.trigger) == (
        model.graph_id, model.graph_version, model.type, model.trigger)
    assert row.timestamp == model.timestamp and row.timestamp.utcoffset() == model.timestamp.utcoffset()
    assert row.params.model_dump_json() == model.params.model_dump_json() and type(row.params) is DecayParams
    assert [(c.id, c.reason, c.value) for c in row.concepts] == [(c.id, c.reason, c.value) for c in model.concepts]
    assert [(e.a, e.b, e.value) for e in row.edges] == [(e.a, e.b, e.value) for e in model.edges]
    assert all(type(c.value) is float for c in row.concepts) and all(type(e.value) is float for e in row.edges)
    assert row.model() == model


@settings(max_examples=300, deadline=None)
@given(ticks)
def test_a_tick_a_worker_wrote_reads_as_a_row_with_the_codecs_fields(event):
    decoded = a_row_or_the_codecs(encode(event), DecayRow)
    assert decoded is None or (is_decay(decoded) and not is_turn(decoded) and not is_consolidation(decoded))


TICK = Decay(
    graph_id="g", graph_version=1, timestamp=T0, trigger="window", params=DecayParams(),
    concepts=(PrunedConcept(id="kafka", reason="activation", value=0.004),),
    edges=(PrunedEdge(a="kafka", b="lag", value=0.04),),
)
TICK_EDITS = {
    "version zero": {"graph_version": 0},
    "no version": {"graph_version": None},
    "a version of 1.0": {"graph_version": 1.0},
    "a version as true": {"graph_version": True},
    "a blank graph id": {"graph_id": " "},
    "a naive timestamp": {"timestamp": "2024-05-01T12:00:00"},
    "an unknown trigger": {"trigger": "hourly"},
    "an unknown field": {"mood": "calm"},
    "a half-life of zero": {"params": {**DecayParams().model_dump(), "half_life_s": 0.0}},
    "an edge threshold of one": {"params": {**DecayParams().model_dump(), "edge_threshold": 1.0}},
    "hybrid after 1.5": {"params": {**DecayParams().model_dump(), "hybrid_after": 1.5}},
    "a param missing": {"params": {k: v for k, v in DecayParams().model_dump().items() if k != "power_beta"}},
    "an unknown param": {"params": {**DecayParams().model_dump(), "speed": 2}},
    "an unknown reason": {"concepts": [{"id": "a", "reason": "old", "value": 0.1}]},
    "a value as a string": {"edges": [{"a": "a", "b": "b", "value": "0.1"}]},
    "an integer value": {"edges": [{"a": "a", "b": "b", "value": 0}]},
    "a value past a float's range": {"edges": [{"a": "a", "b": "b", "value": 1e999}]},
    "an edge without b": {"edges": [{"a": "a", "value": 0.1}]},
    "no concepts field": {"concepts": None},
    "schema version 2": {"schema_version": 2},
}


def test_rows_are_not_tracked_by_the_cyclic_collector():
    """A batch's rows are never in a cycle: the collector's pass after each batch skips them."""
    rows = [decode_for_fold(encode(event)) for event in (TURN, CONSOLIDATION, TICK)]
    assert [type(row) for row in rows] == [TurnRow, ConsolidateRow, DecayRow]
    assert not any(gc.is_tracked(row) for row in rows)
    turn, consolidation, tick = rows
    parts = [*turn.concepts, *consolidation.topics, *tick.concepts, *tick.edges]  # nor their parts (a topic,
    assert parts and not any(gc.is_tracked(part) for part in parts)  # holding a tuple, was)


def test_a_ticks_parameters_keep_the_sign_of_a_zero():
    for threshold in (0.0, -0.0, 0.0):  # equal as numbers: a cache by equality would give the first one's
        reads_as_the_codec(edited(TICK, params={**DecayParams().model_dump(), "concept_threshold": threshold}))


@pytest.mark.parametrize("case", TICK_EDITS)
def test_a_tick_the_fast_path_is_not_sure_of_gets_the_codecs_answer(case):
    raw = edited(TICK, **TICK_EDITS[case])
    if case == "a value past a float's range":
        raw = raw.replace(b"Infinity", b"1e999")  # json.dumps writes an infinite float as a bare name
    reads_as_the_codec(raw)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_bytes_near_a_tick_read_as_the_codec_reads_them(data):
    reads_as_the_codec(bytes_near(data, TICK))
