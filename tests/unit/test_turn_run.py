"""Runs of turns with the ticks that list nothing and the consolidations
inside them: the batch fold gives the outcomes and the state of folding
one event at a time."""

from datetime import timedelta

import pytest

from emgas.processors.dynamics import DAY_S, DecayParams
from emgas.processors.events import Consolidate, Decay, GraphEvent, PrunedEdge, TopicNode
from emgas.processors.graph import GraphParams, GraphRef
from emgas.state import turn_run
from emgas.state.digest import partition_digests
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from tests.support.factories import T0, ingested

PARAMS = GraphParams(decay=DecayParams(model="exponential", half_life_s=DAY_S))
DECAY = PARAMS.decay


def tick(graph: str, hours: float, version: int = 1, **lists) -> Decay:
    return Decay(graph_id=graph, graph_version=version, timestamp=T0 + timedelta(hours=hours), trigger="window",
                 params=DECAY, **lists)


def consolidation(graph: str, hours: float, *topics: tuple[str, ...], version: int = 1) -> Consolidate:
    return Consolidate(graph_id=graph, graph_version=version, timestamp=T0 + timedelta(hours=hours), topics=tuple(
        TopicNode(id=f"topic:{members[0]}", label=" ".join(members), members=members) for members in topics
    ))


def turn(graph: str, turn_id: str, hours: float, concepts: dict[str, float]) -> GraphEvent:
    return ingested(graph, turn_id, concepts, minute=int(hours * 60))


def fold(events: list[GraphEvent], batched: bool) -> tuple[list[Outcome], PartitionState]:
    state = PartitionState(MemoryStore(), PARAMS)
    if batched:
        outcomes = state.apply_batch([(event, offset, None) for offset, event in enumerate(events)])
    else:
        outcomes = [state.apply(event, offset) for offset, event in enumerate(events)]
    state.commit()
    return outcomes, state


CASES = {
    "a tick between two turns moves the mentions after it": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), tick("g", 30), turn("g", "t2", 31, {"kafka": 0.6}),
    ],
    "a tick of a graph no turn has made yet": [tick("g", 1), turn("g", "t1", 2, {"kafka": 0.8})],
    "a tick not later than the last one": [
        turn("g", "t1", 0, {"kafka": 0.8}), tick("g", 5), tick("g", 5), tick("g", 3), turn("g", "t2", 6, {"kafka": 0.4}),
    ],
    "a run of ticks only": [turn("g", "t1", 0, {"kafka": 0.8}), tick("h", 1), tick("g", 2), tick("g", 30)],
    "a duplicate turn after a tick": [
        turn("g", "t1", 0, {"kafka": 0.8}), tick("g", 30), turn("g", "t1", 31, {"kafka": 0.8}),
    ],
    "a tick of a version that does not exist": [turn("g", "t1", 0, {"kafka": 0.8}), tick("g", 30, version=2)],
    "a consolidation keeps the members held before the run or made before it": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), tick("g", 20, edges=(PrunedEdge(a="kafka", b="lag", value=0.0),)),
        turn("g", "t2", 21, {"broker": 0.6}), consolidation("g", 22, ("kafka", "lag", "broker", "cat"), ("cat", "dog")),
        turn("g", "t3", 23, {"cat": 0.6, "dog": 0.3}),
    ],
    "two consolidations in a run: the last one's topics stay": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), consolidation("g", 24, ("kafka", "lag")),
        turn("g", "t2", 25, {"broker": 0.6, "cat": 0.1}), consolidation("g", 48, ("broker", "cat"), ("kafka", "dog")),
        turn("g", "t3", 49, {"dog": 0.6}),
    ],
    "a consolidation's topics replace those of one before the run": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), consolidation("g", 24, ("kafka", "lag")),
        tick("g", 30, edges=(PrunedEdge(a="kafka", b="lag", value=0.0),)),
        turn("g", "t2", 31, {"broker": 0.6, "kafka": 0.1}), consolidation("g", 48, ("broker", "kafka")),
    ],
    "a consolidation not later than the last one, and one of a version not known": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), consolidation("g", 24, ("kafka", "lag")),
        consolidation("g", 24, ("kafka", "broker")), consolidation("g", 12, ("kafka", "lag")),
        consolidation("g", 30, ("kafka", "lag"), version=2), consolidation("h", 30, ("kafka", "lag")),
    ],
    "a tick that lists an edge ends the run": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), tick("g", 30, edges=(PrunedEdge(a="kafka", b="lag", value=0.0),)),
        turn("g", "t2", 31, {"kafka": 0.6, "lag": 0.2}),
    ],
}


@pytest.mark.parametrize("events", CASES.values(), ids=CASES.keys())
def test_a_run_with_ticks_inside_folds_as_its_events_one_at_a_time(events):
    one_by_one, expected = fold(events, batched=False)
    batched, state = fold(events, batched=True)
    assert batched == one_by_one
    assert partition_digests(state.repo) == partition_digests(expected.repo)


def test_only_a_tick_that_lists_nothing_joins_a_run():
    assert turn_run.joins_run(tick("g", 1))
    assert turn_run.joins_run(consolidation("g", 1, ("kafka", "lag")))
    assert turn_run.joins_run(turn("g", "t1", 0, {"kafka": 1.0}))
    assert not turn_run.joins_run(tick("g", 1, edges=(PrunedEdge(a="kafka", b="lag", value=0.0),)))


def test_a_tick_inside_a_run_brings_a_mentioned_concept_to_it_first():
    events = CASES["a tick between two turns moves the mentions after it"]
    _, state = fold(events, batched=True)
    concept = state.repo.concepts(GraphRef("g", 1), ["kafka"])["kafka"]
    assert state.repo.meta(GraphRef("g", 1)).decayed_to == T0 + timedelta(hours=30)
    assert concept.decayed_to == T0 + timedelta(hours=30), "the second mention decayed the first to the tick"
    assert concept.count == 2


def test_a_consolidation_inside_a_run_keeps_only_the_members_present_at_its_time():
    events = CASES["a consolidation keeps the members held before the run or made before it"]
    _, state = fold(events, batched=True)
    ref = GraphRef("g", 1)
    assert [t.members for t in state.repo.topics(ref)] == [("kafka", "lag", "broker")], "cat came after it"
    assert [t.members for t in state.view("g").topics] == [("kafka", "lag", "broker")]
    assert state.repo.meta(ref).consolidated_to == T0 + timedelta(hours=22)
