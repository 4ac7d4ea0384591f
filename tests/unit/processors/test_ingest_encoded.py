"""A worker's turn_ingested bytes (`extract.ingest_encoded`) are the model's
(`codec.encode(extract.ingest(...))`), byte for byte, without the model."""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors import extract
from emgas.processors.codec import encode
from emgas.processors.events import Turn
from emgas.processors.extract import ExtractionParams, encode_all, extractor_id, ingest, ingest_encoded
from emgas.tools.harness import demo_turns
from emgas.tools.synthetic import CHINESE, conversations

PARAMS = ExtractionParams()
TAG = extractor_id(PARAMS)


def same_bytes(turn: Turn, params: ExtractionParams = PARAMS) -> bool:
    tag = extractor_id(params)
    return ingest_encoded(turn, params, tag) == encode(ingest(turn, params, tag))


@pytest.mark.parametrize("turns", [conversations(120), conversations(120, CHINESE), demo_turns()],
                         ids=["english", "chinese", "demo"])
def test_the_bytes_are_the_models(turns):
    assert all(same_bytes(turn) for turn in turns)


def test_the_bytes_are_the_models_without_the_speaker_too():
    assert all(same_bytes(turn, ExtractionParams(include_speaker=False)) for turn in conversations(50))


_ids = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=20).filter(lambda s: s.strip())
_metadata = st.dictionaries(
    st.text(max_size=8),
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=20),
              st.floats(allow_nan=False, allow_infinity=False)),
    max_size=4,
)
_times = st.builds(
    lambda at, offset_min: (datetime(1970, 1, 1, tzinfo=timezone.utc) + at).astimezone(timezone(timedelta(minutes=offset_min))),
    st.timedeltas(min_value=timedelta(days=1), max_value=timedelta(days=365 * 200)),
    st.integers(-14 * 60, 14 * 60),
)
_turns = st.builds(
    Turn, graph_id=_ids, turn_id=_ids, speaker=st.one_of(st.just(""), _ids),
    text=st.text(min_size=1, max_size=120).filter(lambda s: s.strip()), timestamp=_times,
    session_id=st.one_of(st.none(), _ids), metadata=_metadata,
)


@settings(max_examples=150, deadline=None)
@given(_turns)
def test_any_turn_gives_the_models_bytes(turn):
    assert same_bytes(turn)


@pytest.mark.parametrize("concepts", [
    [("kafka", "Kafka", 0.5), ("kafka", "kafka", 0.4)],  # an id twice
    [("", "Kafka", 0.5)], [("kafka", "", 0.5)],  # empty
    [("kafka", "Kafka", 0.0)], [("kafka", "Kafka", 1.5)],  # importance out of (0, 1]
])
def test_concepts_the_model_would_refuse_are_refused(monkeypatch, concepts):
    monkeypatch.setattr(extract, "_chosen", lambda text, params, language: concepts)
    turn = conversations(1)[0]
    with pytest.raises(ValueError):
        ingest(turn, PARAMS, TAG)
    with pytest.raises(ValueError):
        ingest_encoded(turn, PARAMS, TAG)
    assert encode_all([turn], PARAMS, TAG)[0].startswith("ValueError: ")
