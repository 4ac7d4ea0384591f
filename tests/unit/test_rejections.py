"""Errors as data: an event the fold cannot apply is a rejection, the same on
every fold; a turn whose extraction fails is reported alone."""

from datetime import timedelta

import pytest

from emgas.processors.codec import encode
from emgas.processors.events import Boost, Retrieved
from emgas.processors.extract import ExtractionParams, extractor_id, ingest_all
from emgas.processors.graph import GraphParams, GraphRef
from emgas.replay.fold import FoldCounts, Selection, fold_records
from emgas.replay.reader import LogRecord
from emgas.state.digest import partition_digests
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from emgas.tools.harness import demo_turns
from tests.factories import T0, ingested

G = GraphRef("g", 1)
PARAMS = GraphParams(window_s=0, consolidate_every_s=0)


def poison() -> Retrieved:
    """Decodes (amounts are only bounded below), but A + on_grid(1e300) overflows the grid."""
    return Retrieved(graph_id="g", graph_version=1, request_id="poison", timestamp=T0 + timedelta(minutes=5),
                     boosts=(Boost(id="kafka", amount=0.25), Boost(id="lag", amount=1e300)))


def records() -> list[LogRecord]:
    events = [
        ingested("g", "t1", {"kafka": 0.8, "lag": 0.5}),
        poison(),
        ingested("g", "t2", {"kafka": 0.4, "broker": 0.5}, minute=10),
    ]
    return [LogRecord(0, offset, 0, b"g", encode(e)) for offset, e in enumerate(events)]


def test_a_poison_event_is_rejected_and_the_next_events_apply():
    state = PartitionState(MemoryStore(), PARAMS)
    outcomes = [state.apply(_decode(r), r.offset) for r in records()]
    assert outcomes == [Outcome.APPLIED, Outcome.REJECTED, Outcome.APPLIED]
    assert state.applied_offset == 2
    assert "OverflowError" in state.last_rejection
    [(offset, rejection)] = state.repo.rejections()
    assert offset == 1 and rejection["type"] == "retrieved" and "OverflowError" in rejection["reason"]
    kafka = state.repo.concepts(G, ["kafka"])["kafka"]
    assert kafka.retrievals == 0  # nothing of the rejected event was applied, not even its valid boost
    assert not state.repo.has_retrieval(G, "poison")


def test_a_replay_rejects_it_the_same_way_and_gives_the_same_digests():
    live = PartitionState(MemoryStore(), PARAMS)
    for r in records():
        live.apply(_decode(r), r.offset)
    replayed = PartitionState(MemoryStore(), PARAMS)
    counts = FoldCounts()
    fold_records(replayed, records(), Selection(), counts)
    assert counts.outcomes == {"applied": 2, "rejected": 1}
    assert partition_digests(replayed.repo) == partition_digests(live.repo)
    assert replayed.repo.rejections() == live.repo.rejections()


def _decode(record: LogRecord):
    from emgas.processors.codec import decode_graph_event

    return decode_graph_event(record.value)


def test_extraction_failing_on_one_turn_leaves_the_rest_of_the_batch(monkeypatch):
    import emgas.processors.extract as extract

    turns = demo_turns()[:3]
    real = extract.ingest

    def failing(turn, params, extractor):  # noqa: ANN001
        if turn.turn_id == turns[1].turn_id:
            raise ValueError("extractor bug")
        return real(turn, params, extractor)

    monkeypatch.setattr(extract, "ingest", failing)
    params = ExtractionParams()
    results = ingest_all(turns, params, extractor_id(params))
    assert [type(r).__name__ for r in results] == ["TurnIngested", "str", "TurnIngested"]
    assert results[1] == "ValueError: extractor bug"


@pytest.mark.parametrize("amount", [0.0, 0.5, 1e6])
def test_ordinary_amounts_are_not_rejected(amount):
    state = PartitionState(MemoryStore(), PARAMS)
    state.apply(ingested("g", "t1", {"kafka": 0.8}), 0)
    event = Retrieved(graph_id="g", graph_version=1, request_id="q", timestamp=T0, boosts=(Boost(id="kafka", amount=amount),))
    assert state.apply(event, 1) == Outcome.APPLIED
