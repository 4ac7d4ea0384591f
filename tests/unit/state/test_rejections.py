"""Errors as data: an event the fold cannot apply is a rejection, the same on
every fold; a turn whose extraction fails is reported alone."""

import logging
from datetime import timedelta

import pytest

from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.errors import DecodeError
from emgas.processors.events import Boost, Retrieved
from emgas.processors.extract import ExtractionParams, extractor_id, ingest_all
from emgas.processors.graph import GraphParams, GraphRef
from emgas.replay.fold import FoldCounts, Selection, fold_records
from emgas.replay.reader import LogRecord
from emgas.state.digest import partition_digests
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from emgas.tools.harness import demo_turns
from tests.support.factories import T0, ingested
from tests.support.rule_bug import POISON, RuleBug, install

G = GraphRef("g", 1)
PARAMS = GraphParams(window_s=0, consolidate_every_s=0)


def poison() -> Retrieved:
    """Decodes, but the retrieval rule has a bug for it (`tests.support.rule_bug`)."""
    return Retrieved(graph_id="g", graph_version=1, request_id=f"{POISON}-1", timestamp=T0 + timedelta(minutes=5),
                     boosts=(Boost(id="kafka", amount=0.25), Boost(id="lag", amount=0.5)))


def records() -> list[LogRecord]:
    events = [
        ingested("g", "t1", {"kafka": 0.8, "lag": 0.5}),
        poison(),
        ingested("g", "t2", {"kafka": 0.4, "broker": 0.5}, minute=10),
    ]
    return [LogRecord(0, offset, 0, b"g", encode(e)) for offset, e in enumerate(events)]


@pytest.fixture(autouse=True)
def rule_bug():
    uninstall = install()
    yield
    uninstall()


def test_a_poison_event_is_rejected_and_the_next_events_apply():
    state = PartitionState(MemoryStore(), PARAMS)
    outcomes = [state.apply(_decode(r), r.offset) for r in records()]
    assert outcomes == [Outcome.APPLIED, Outcome.REJECTED, Outcome.APPLIED]
    assert state.applied_offset == 2
    assert "RuleBug" in state.last_rejection
    [(offset, rejection)] = state.repo.rejections()
    assert offset == 1 and rejection["type"] == "retrieved" and "RuleBug" in rejection["reason"]
    kafka = state.repo.concepts(G, ["kafka"])["kafka"]
    assert kafka.retrievals == 0  # nothing of the rejected event was applied, not even its valid boost
    assert not state.repo.has_retrieval(G, f"{POISON}-1")


def test_a_rejection_is_one_line_in_the_log_and_its_traceback_is_below_it(caplog):
    state = PartitionState(MemoryStore(), PARAMS)
    with caplog.at_level(logging.DEBUG, logger="emgas.state.projector"):
        for r in records():
            state.apply(_decode(r), r.offset)
    [line] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.getMessage() == (
        "graph event at offset 1 (retrieved of g v1) rejected: RuleBug: a bug in the retrieval rule (request poison-1)"
    )
    assert line.exc_info is None
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [RuleBug]  # at debug level


def test_a_replay_rejects_it_the_same_way_and_gives_the_same_digests():
    live = PartitionState(MemoryStore(), PARAMS)
    for r in records():
        live.apply(_decode(r), r.offset)
    replayed = PartitionState(MemoryStore(), PARAMS)
    counts = FoldCounts()
    fold_records(replayed, records(), Selection(), counts)
    assert counts.outcomes == {"applied": 2, "rejected": 1}
    assert [(r.partition, r.offset, r.type, r.graph_id) for r in counts.rejections] == [(0, 1, "retrieved", "g")]
    assert "RuleBug" in counts.rejections[0].reason
    assert partition_digests(replayed.repo) == partition_digests(live.repo)
    assert replayed.repo.rejections() == live.repo.rejections()


def test_a_value_no_worker_writes_is_refused_when_decoded_and_skipped_by_a_replay():
    """An overflowing boost never reaches the fold: the live worker dead-letters it, a replay skips it."""
    boost = Boost.model_construct(id="kafka", amount=1e300)
    raw = encode(Retrieved(graph_id="g", graph_version=1, request_id="q", timestamp=T0, boosts=(boost,)))
    with pytest.raises(DecodeError, match="less than or equal to 10"):
        decode_graph_event(raw)
    counts = FoldCounts()
    fold_records(PartitionState(MemoryStore(), PARAMS), [LogRecord(0, 0, 0, b"g", raw)], Selection(), counts)
    assert (counts.undecodable, counts.outcomes) == (1, {})


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


@pytest.mark.parametrize("amount", [0.0, 0.5, 10.0])
def test_ordinary_amounts_are_not_rejected(amount):
    state = PartitionState(MemoryStore(), PARAMS)
    state.apply(ingested("g", "t1", {"kafka": 0.8}), 0)
    event = Retrieved(graph_id="g", graph_version=1, request_id="q", timestamp=T0, boosts=(Boost(id="kafka", amount=amount),))
    assert state.apply(event, 1) == Outcome.APPLIED
