"""One rule per graph event type, and a type without one fails loudly in every path."""

import typing
from typing import Literal

import pytest

from emgas.processors.events import LOG_EVENTS, Consolidate, Forget, GraphEvent, GraphVersionSwitched
from emgas.processors.events.base import Event, EventTime
from emgas.processors.evolve import Slice
from emgas.processors.graph import GraphParams, GraphRef
from emgas.processors.writes import UnknownWrite
from emgas.processors.dynamics import DecayParams
from emgas.state.memory import MemoryStore
from emgas.state.projector import PartitionState
from emgas.state.projector import LOG_RECORDS
from emgas.state.rules import RULES, UnregisteredEvent, evolve, rule_for, version_named
from emgas.state.view import GraphView
from tests.support.factories import T0, ingested

G = GraphRef("g", 1)


class Renamed(Event):
    """A graph event type added to the schema without a rule."""

    type: Literal["renamed"] = "renamed"
    graph_id: str
    timestamp: EventTime


class Bookmark:
    """A write type that no store or graph applies."""


def graph_event_types() -> set[type]:
    union = typing.get_args(GraphEvent)[0]
    return set(typing.get_args(union)) - set(LOG_EVENTS)


def test_every_graph_event_type_of_the_schema_has_a_rule():
    assert set(RULES) == graph_event_types()


def test_an_unregistered_type_fails_before_its_guard_and_changes_nothing():
    state = PartitionState(MemoryStore(), GraphParams())
    state.apply(ingested("g", "t1", {"kafka": 0.8, "lag": 0.5}), 0)
    pending, offset = len(state.txn), state.applied_offset
    with pytest.raises(UnregisteredEvent, match="no rule registered for the graph event type Renamed"):
        state.apply(Renamed(graph_id="g", timestamp=T0), 1)
    assert (len(state.txn), state.applied_offset) == (pending, offset)  # not skipped as a duplicate, not half-applied
    with pytest.raises(UnregisteredEvent):
        rule_for(Renamed(graph_id="g", timestamp=T0))


def test_an_unregistered_type_has_no_evolve():
    with pytest.raises(UnregisteredEvent, match="no rule registered for the graph event type Renamed"):
        evolve(Renamed(graph_id="g", timestamp=T0), Slice(ref=G), GraphParams())


def test_every_record_type_of_the_log_itself_has_its_entry():
    assert set(LOG_RECORDS) == set(LOG_EVENTS)


def test_a_write_type_without_a_case_fails_in_the_store_and_in_the_graph():
    state = PartitionState(MemoryStore(), GraphParams())
    with pytest.raises(UnknownWrite, match="the store has no case for the write Bookmark"):
        state.repo.apply(G, (Bookmark(),), None)
    with pytest.raises(UnknownWrite, match="the in-memory graph has no case for the write Bookmark"):
        GraphView(G, DecayParams()).apply(Bookmark())


@pytest.mark.parametrize("event, version", [
    (ingested("g", "t1", {"kafka": 0.8}), None),  # names none: the graph's active version
    (ingested("g", "t1", {"kafka": 0.8}).model_copy(update={"graph_version": 3}), 3),
    (GraphVersionSwitched(graph_id="g", version=2, timestamp=T0), 2),  # the version it switches to
    (Consolidate(graph_id="g", graph_version=4, timestamp=T0, topics=()), 4),
    (Forget(graph_id="g", request_id="f", turn_ids=("t1",), timestamp=T0), None),  # a forget is of the whole graph
])
def test_the_version_an_event_applies_to_is_its_rules(event, version):
    assert version_named(event) == version
    state = PartitionState(MemoryStore(), GraphParams())
    assert state.ref_of(event) == GraphRef("g", version or 1)
