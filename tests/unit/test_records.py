"""Records encoded from their values (`state.records`, the fold's pending
concepts and passages) are what their models' `model_dump_json` writes,
byte for byte."""

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.graph import ConceptState, Passage, concept_record, concept_values
from emgas.state.concept_columns import ConceptColumns
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


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(texts, st.integers(1, 10**6), st.floats(0, 1e6, allow_nan=False), times, times,
                          st.none() | times, st.integers(0, 99), st.none() | times, st.none() | times), max_size=6))
def test_columns_encode_each_concept_as_its_model(concepts):
    """A commit's concept records, encoded a column at a time (`ConceptColumns.encoded`)."""
    columns = ConceptColumns()
    slots = [columns.add(text) for text, *_ in concepts]
    for slot, values in zip(slots, concepts):
        columns.put_values(slot, list(values))
    ids = [f"c{slot}" for slot in slots]
    assert columns.encoded(slots, ids) == [
        concept_record(cid, list(values)).model_dump_json().encode() for cid, values in zip(ids, concepts)
    ]
