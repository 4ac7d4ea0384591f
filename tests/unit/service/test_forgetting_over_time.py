"""Forgetting over simulated time, through the same fold and scheduler as a worker."""

from datetime import timedelta

import pytest

from emgas.processors.dynamics import DAY_S, DecayParams, edge_lifetime, time_to_threshold
from emgas.processors.events import ActivationQuery, Decay, Retrieved
from emgas.processors.extract import ExtractionParams
from emgas.processors.activation import ActivationParams
from emgas.processors.graph import GraphParams, GraphRef
from emgas.replay.explain import explain, format_steps
from emgas.replay.reader import LogRecord
from emgas.state import keys
from emgas.state.rows import decode_row
from emgas.state.digest import graph_digest
from emgas.testing import LocalLog
from emgas.state.memory import MemoryStore
from emgas.state.projector import PartitionState
from emgas.tools.simulation import GRAPH, ONCE, START as STREAM_START, WEEKLY, Stream, simulate, turns

STREAM = Stream(days=360, turns_per_day=12)  # 4,320 turns over a simulated year
# The defaults' time constants (90 days) need years of simulated time to
# plateau (`emgas simulate` shows it); the same mechanism, ten times faster:
PARAMS = GraphParams(decay=DecayParams(half_life_s=10 * DAY_S, edge_stability_s=10 * DAY_S))


@pytest.fixture(scope="module")
def run():
    return simulate(STREAM, PARAMS, every_days=60)


def records(log: LocalLog) -> list[LogRecord]:
    from emgas.processors.codec import encode

    return [LogRecord(0, offset, 0, None, encode(event)) for offset, event in enumerate(log.log)]


def test_graph_size_plateaus_under_drift(run):
    _, samples = run
    static_log, static = simulate(STREAM, GraphParams(window_s=0, consolidate_every_s=0), every_days=60)
    last, half_year_before = samples[-1], samples[-3]
    assert static[-1].concepts > 2 * last.concepts  # without forgetting it keeps growing
    assert static[-1].concepts > 1.4 * static[-3].concepts
    assert last.concepts < 1.1 * half_year_before.concepts  # with it: under 10% in the last half year
    assert last.edges < 1.1 * half_year_before.edges


def test_the_view_stays_compact_too(run):
    log, _ = run
    view = log.state.view(GRAPH)
    assert view.dead <= view.concepts + 1024 and not view.needs_compaction()
    rows = log.state.repo.store.scan(keys.section(view.ref, b"r"))
    assert view.edges == sum(len(decode_row(raw)) for _, raw in rows)  # each edge in its lower end's row


def test_a_concept_mentioned_every_week_survives(run):
    log, _ = run
    view = log.state.view(GRAPH)
    assert WEEKLY in view.index
    weekly = log.state.repo.concepts(view.ref, [WEEKLY])[WEEKLY]
    assert weekly.count == len(range(0, STREAM.days, 7))


def test_a_concept_mentioned_once_is_pruned_at_the_expected_time(run):
    log, _ = run
    first = next(turns(STREAM))
    importance = next(c.importance for c in first.concepts if c.id == ONCE)
    decay = PARAMS.decay
    # Its edges (count 1) fade first unless its activation does; it goes as
    # soon as either happens, at the next tick.
    expected = first.timestamp + timedelta(seconds=min(time_to_threshold(importance, 1, decay), edge_lifetime(1, decay)))
    [tick] = [e for e in log.log if isinstance(e, Decay) and any(c.id == ONCE for c in e.concepts)]
    assert expected <= tick.timestamp < expected + timedelta(days=1)
    assert ONCE not in log.state.view(GRAPH).index
    assert edge_lifetime(1, decay) / DAY_S == pytest.approx(10 * 2.995732, rel=1e-6)  # S·ln(1/0.05)


def test_replaying_the_log_gives_the_live_digest(run):
    log, _ = run
    # Add reinforcement by retrieval to the log, then replay all of it.
    for i in range(3):
        query = ActivationQuery(request_id=f"q{i}", graph_id=GRAPH, seeds=(WEEKLY,))
        log.ask(query, ActivationParams(), ExtractionParams())
    kinds = {type(e).__name__ for e in log.log}
    assert {"TurnIngested", "Decay", "Consolidate", "Retrieved"} <= kinds
    assert any(e.concepts or e.edges for e in log.log if isinstance(e, Decay))
    replayed = PartitionState(MemoryStore(), PARAMS)
    for offset, event in enumerate(log.log):
        replayed.apply(event, offset)
    ref = GraphRef(GRAPH, 1)
    assert graph_digest(replayed.repo, ref) == graph_digest(log.state.repo, ref)


def test_retrieval_reinforces_with_records(run):
    log, _ = run
    ref = GraphRef(GRAPH, 1)
    before = log.state.repo.concepts(ref, [WEEKLY])[WEEKLY]
    log.ask(ActivationQuery(request_id="r-extra", graph_id=GRAPH, seeds=(WEEKLY,)), ActivationParams(), ExtractionParams())
    after = log.state.repo.concepts(ref, [WEEKLY])[WEEKLY]
    assert isinstance(log.log[-1], Retrieved) and after.retrievals == before.retrievals + 1
    assert after.base_activation > before.base_activation and after.last_retrieved is not None


def test_explain_names_the_pruning_event(run):
    log, _ = run
    steps = explain(records(log), GRAPH, [ONCE], PARAMS)
    kinds = [s.kind for s in steps]
    assert kinds[0] == "created" and kinds[-1] == "pruned" and "decayed" in kinds
    pruned = steps[-1]
    assert isinstance(log.log[pruned.offset], Decay) and "last edge was pruned" in pruned.detail
    text = format_steps(steps)
    assert f"@{pruned.offset}" in text and "pruned" in text


def test_explain_tells_retrievals_with_their_frequency():
    log = LocalLog(PARAMS.model_copy(update={"window_s": 0.0, "consolidate_every_s": 0.0}))
    log.append(next(turns(STREAM)))
    for day in (1, 3):
        query = ActivationQuery(request_id=f"q{day}", graph_id=GRAPH, seeds=(ONCE,), at=STREAM_START + timedelta(days=day))
        log.ask(query, ActivationParams(), ExtractionParams())
    steps = explain(records(log), GRAPH, [ONCE], PARAMS)
    assert [s.kind for s in steps] == ["created", "retrieved", "retrieved"]
    assert "retrievals: 2; f = n/T = 1 per day" in steps[-1].detail  # 2 retrievals over 2 days
