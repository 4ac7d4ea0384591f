"""The fold: a turn's writes (counts, pairs, activation boost, event time)."""

from datetime import timedelta

import pytest

from emgas.processors.events import Concept
from emgas.processors.evolve import Slice
from emgas.processors.graph import GraphParams, GraphRef
from emgas.processors.writes import AddPassage, CoOccur, PutConcept, of_type
from emgas.state.rules import evolve
from tests.support.factories import T0, ingested


class TurnWrites:
    """A turn's writes, by kind."""

    def __init__(self, writes) -> None:  # noqa: ANN001
        self.concepts = [w.concept for w in of_type(writes, PutConcept)]
        [self.passage] = [w.passage for w in of_type(writes, AddPassage)]
        self.co_occurrences = of_type(writes, CoOccur)


def apply_turn(event, version, existing, params):  # noqa: ANN001, ANN201
    """The turn's writes on graph version `version` holding the `existing` concepts."""
    return TurnWrites(evolve(event, Slice(ref=GraphRef(event.graph_id, version), concepts=existing), params))


def test_new_concepts_take_importance_and_event_time():
    delta = apply_turn(ingested("g", "t1", {"kafka": 0.8, "lag": 0.5}, minute=3), 1, {}, GraphParams())
    by_id = {c.id: c for c in delta.concepts}
    assert by_id["kafka"].base_activation == pytest.approx(0.8, abs=2**-32) and by_id["kafka"].count == 1
    assert by_id["kafka"].created_at == T0 + timedelta(minutes=3)
    assert [w.ids for w in delta.co_occurrences] == [("kafka", "lag")]
    assert delta.passage.concept_ids == ("kafka", "lag")


def test_repeated_mention_boosts_and_counts():
    first = apply_turn(ingested("g", "t1", {"kafka": 0.8}), 1, {}, GraphParams())
    existing = {c.id: c for c in first.concepts}
    second = apply_turn(ingested("g", "t2", {"kafka": 0.4}, minute=10), 1, existing, GraphParams(mention_boost=0.5))
    kafka = second.concepts[0]
    assert kafka.count == 2
    assert kafka.base_activation == pytest.approx(0.8 + 0.5 * 0.4)
    assert kafka.created_at == T0 and kafka.last_accessed == T0 + timedelta(minutes=10)


def test_out_of_order_event_does_not_move_last_accessed_back():
    first = apply_turn(ingested("g", "t1", {"kafka": 0.8}, minute=10), 1, {}, GraphParams())
    later = apply_turn(ingested("g", "t0", {"kafka": 0.8}, minute=1), 1, {c.id: c for c in first.concepts}, GraphParams())
    assert later.concepts[0].last_accessed == T0 + timedelta(minutes=10)


def test_out_of_order_event_moves_created_at_back():
    first = apply_turn(ingested("g", "t1", {"kafka": 0.8}, minute=10), 1, {}, GraphParams())
    earlier = apply_turn(ingested("g", "t0", {"kafka": 0.8}, minute=1), 1, {c.id: c for c in first.concepts}, GraphParams())
    assert earlier.concepts[0].created_at == T0 + timedelta(minutes=1)


def test_pairs_are_every_pair_of_the_sorted_concepts():
    delta = apply_turn(ingested("g", "t", {"c": 0.5, "a": 0.5, "b": 0.5}), 1, {}, GraphParams())
    assert [w.ids for w in delta.co_occurrences] == [("a", "b", "c")]


def test_surface_text_is_the_earliest_mentions_whatever_the_order():
    early = ingested("g", "t1", {"kafka": 0.5}, minute=1).model_copy(
        update={"concepts": (Concept(id="kafka", text="Kafka", importance=0.5),)})
    late = ingested("g", "t2", {"kafka": 0.5}, minute=9).model_copy(
        update={"concepts": (Concept(id="kafka", text="KAFKA", importance=0.5),)})
    for first, second in ((early, late), (late, early)):
        seen = {c.id: c for c in apply_turn(first, 1, {}, GraphParams()).concepts}
        assert apply_turn(second, 1, seen, GraphParams()).concepts[0].text == "Kafka"


def test_activation_sums_are_exact_and_order_free():
    weights = [0.1, 0.2, 0.3, 0.7, 0.11]
    def total(order):
        state = {}
        for i in order:
            event = ingested("g", f"t{i}", {"x": weights[i]})
            state = {c.id: c for c in apply_turn(event, 1, state, GraphParams()).concepts}
        return state["x"].base_activation
    assert total([0, 1, 2, 3, 4]) == total([4, 3, 2, 1, 0]) == total([2, 0, 4, 1, 3])
