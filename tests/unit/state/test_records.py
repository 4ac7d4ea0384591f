"""Records encoded from their values (`state.records`, the fold's pending
concepts and passages) are what their models' `model_dump_json` writes,
byte for byte."""

from datetime import datetime, timedelta, timezone

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.graph import ConceptState, Passage, concept_record, concept_values
from emgas.state.concept_columns import ConceptColumns
from emgas.state.records import decode_concept, decode_passage_concepts, decode_passage_place
from emgas.state.repository import PendingConcept, PendingPassage

OFFSETS = [timezone.utc, timezone(timedelta(0)), timezone(timedelta(hours=5, minutes=45)), timezone(timedelta(hours=-8))]
times = st.builds(
    lambda s, us, tz: (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=s, microseconds=us)).astimezone(tz),
    st.integers(0, 7_000_000_000), st.sampled_from([0, 1, 500_000, 999_999]), st.sampled_from(OFFSETS),
)
texts = st.text(min_size=1, max_size=20)
metadata = st.dictionaries(
    texts, st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | texts, max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(texts, texts, st.integers(1, 10**6), st.floats(0, 1e6, allow_nan=False), times, times, st.none() | times,
       st.integers(0, 99), st.none() | times, st.none() | times)
def test_a_pending_concept_encodes_as_its_model(cid, text, count, activation, created, last, decayed, retrievals,
                                                 first, latest):
    values = [text, count, activation, created, last, decayed, retrievals, first, latest]
    record = concept_record(cid, values)
    assert PendingConcept(cid, values).encode() == record.model_dump_json().encode()
    assert concept_values(ConceptState.model_validate_json(PendingConcept(cid, values).encode())) == values


@settings(max_examples=300, deadline=None)
@given(texts, texts, st.text(max_size=200), times, st.none() | texts, metadata,
       st.lists(texts, max_size=5, unique=True), st.integers(0, 10**7))
def test_a_pending_passage_encodes_as_its_model(turn_id, speaker, text, at, session, meta, concepts, seq):
    pending = PendingPassage(turn_id, speaker, text, at, session, meta, tuple(sorted(concepts)), seq)
    assert pending.encode() == pending.model().model_dump_json().encode()
    assert Passage.model_validate_json(pending.encode()) == pending.model()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(texts, st.integers(1, 10**6), st.floats(0, 1e6, allow_nan=False) | st.floats(1e-320, 1e20) | st.floats(0, 1e22), times, times,
                          st.none() | times, st.integers(0, 99), st.none() | times, st.none() | times), max_size=6))
def test_columns_encode_each_concept_as_its_model(concepts):
    """A commit's concept records, encoded a column at a time (`ConceptColumns.encoded`):
    by msgspec, or where an activation is 10^16 or more (written `1e+16`
    by pydantic, `1e16` by msgspec) by orjson."""
    columns = ConceptColumns()
    slots = [columns.add(text) for text, *_ in concepts]
    for slot, values in zip(slots, concepts):
        columns.put_values(slot, list(values))
    ids = [f"c{slot}" for slot in slots]
    assert columns.encoded(slots, ids) == [
        concept_record(cid, list(values)).model_dump_json().encode() for cid, values in zip(ids, concepts)
    ]


@settings(max_examples=300, deadline=None)
@given(texts, texts, st.integers(1, 10**6), st.floats(0, 1e6, allow_nan=False), times, times, st.none() | times,
       st.integers(0, 99), st.none() | times, st.none() | times)
def test_a_concept_record_decodes_to_its_models_values(cid, text, count, activation, created, last, decayed,
                                                       retrievals, first, latest):
    """Loading a view reads concept records without their models: the same values, offsets included."""
    raw = PendingConcept(cid, [text, count, activation, created, last, decayed, retrievals, first, latest]).encode()
    model = ConceptState.model_validate_json(raw)
    decoded = decode_concept(raw)
    assert decoded == (model.id, concept_values(model))
    assert [t.utcoffset() if isinstance(t, datetime) else t for t in decoded[1]] == \
        [t.utcoffset() if isinstance(t, datetime) else t for t in concept_values(model)]
    assert concept_record(*decoded).model_dump_json().encode() == raw


CONCEPT = {"id": "kafka", "text": "Kafka", "count": 1, "base_activation": 0.5,
           "created_at": "2024-03-01T10:00:00Z", "last_accessed": "2024-03-01T10:00:00.250000+05:45"}
NOT_AS_WRITTEN = {
    "a time without its offset": {**CONCEPT, "created_at": "2024-03-01T10:00:00"},
    "an offset without its colon": {**CONCEPT, "last_accessed": "2024-03-01T10:00:00+0545"},
    "milliseconds": {**CONCEPT, "decayed_to": "2024-03-01T10:00:00.250Z"},
    "a count written as a float": {**CONCEPT, "count": 1.0},
    "a field missing": {k: v for k, v in CONCEPT.items() if k != "text"},
    "no such day": {**CONCEPT, "created_at": "2024-02-30T10:00:00Z"},
}


@pytest.mark.parametrize("fields", NOT_AS_WRITTEN.values(), ids=NOT_AS_WRITTEN.keys())
def test_a_concept_record_not_as_the_encoder_writes_it_is_left_to_its_model(fields):
    assert decode_concept(orjson.dumps(fields)) is None


def test_the_written_form_decodes():
    cid, values = decode_concept(orjson.dumps(CONCEPT))
    assert (cid, values[3], values[4].utcoffset()) == (
        "kafka", datetime(2024, 3, 1, 10, tzinfo=timezone.utc), timedelta(hours=5, minutes=45))


@settings(max_examples=200, deadline=None)
@given(texts, texts, st.text(max_size=200), times, st.none() | texts, metadata,
       st.lists(texts, max_size=5, unique=True), st.integers(0, 10**7))
def test_a_passage_record_decodes_to_its_place(turn_id, speaker, text, at, session, meta, concepts, seq):
    pending = PendingPassage(turn_id, speaker, text, at, session, meta, tuple(sorted(concepts)), seq)
    place, model = decode_passage_place(pending.encode()), pending.model()
    assert place is not None
    assert (place.turn_id, place.speaker, tuple(place.concept_ids), place.session_id, place.seq) == \
        (model.turn_id, model.speaker, model.concept_ids, model.session_id, model.seq)
    assert decode_passage_place(b'{"turn_id": "t1", "speaker": 3, "concept_ids": []}') is None
    assert decode_passage_concepts(pending.encode()) == model.concept_ids


@pytest.mark.parametrize("raw", [b'{"turn_id": "t1"}', b'{"concept_ids": [1]}', b'{"concept_ids": "ab"}', b"[", b""])
def test_a_passage_record_not_as_the_encoder_writes_it_names_no_concepts_here(raw):
    assert decode_passage_concepts(raw) is None  # its model reads it, or says why not
