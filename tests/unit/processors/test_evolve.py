"""Each rule of `processors.evolve`, table-driven, with no store: a slice in, its writes out."""

from datetime import timedelta

import pytest

from emgas.processors.dynamics import DAY_S, DecayParams
from emgas.processors.events import (
    Boost, Consolidate, Decay, Forget, GraphVersionSwitched, PrunedConcept, PrunedEdge, Retrieved, TopicNode,
)
from emgas.processors.evolve import Slice, pair_after
from emgas.processors.writes import (
    AddPassage, CoOccur, Forgetting, KeepEdges, MarkRetrieval, PrunePassage, PutConcept, PutMeta, Refolded, Register,
    RemoveConcept, RemoveLink, RemovePairs, SetTopics, SwitchVersion, of_type,
)
from emgas.processors.graph import ConceptState, GraphMeta, GraphParams, GraphRef, on_grid
from emgas.processors.pruning import PairState, PairTable
from emgas.state.rules import UnregisteredEvent, evolve
from tests.support.factories import T0, ingested

G = GraphRef("g", 1)
DECAY = DecayParams(model="exponential", half_life_s=DAY_S, concept_threshold=0.1, edge_stability_s=DAY_S)
PARAMS = GraphParams(decay=DECAY)


def at(days: float = 0, minutes: float = 0):
    return T0 + timedelta(days=days, minutes=minutes)


def concept(cid: str, activation: float, count: int = 1, created=T0, **more) -> ConceptState:
    return ConceptState(
        id=cid, text=cid, count=count, base_activation=activation, created_at=created, last_accessed=created, **more
    )


def passage(turn_id: str, *concept_ids: str) -> tuple[str, ...]:
    return concept_ids  # what a tick reads of a passage: the concepts it names


def tick(days: float, concepts=(), edges=()) -> Decay:
    return Decay(
        graph_id="g", graph_version=1, timestamp=at(days), trigger="manual", params=DECAY,
        concepts=tuple(PrunedConcept(id=c, reason=r, value=0.0) for c, r in concepts),
        edges=tuple(PrunedEdge(a=a, b=b, value=0.0) for a, b in edges),
    )


# -- the pair arithmetic ------------------------------------------------------

@pytest.mark.parametrize(
    "old, when, expected",
    [
        (None, at(1), PairState(1, at(1))),  # first co-occurrence
        (PairState(3, at(1)), at(2), PairState(4, at(2))),  # later: last moves
        (PairState(3, at(2)), at(1), PairState(4, at(2))),  # earlier (out of order): last stays
    ],
)
def test_a_co_occurrence_adds_one_and_keeps_the_latest_time(old, when, expected):
    assert pair_after(old, when) == expected


# -- turns ----------------------------------------------------------------------

def test_a_first_turn_creates_concepts_pairs_passage_and_meta():
    writes = evolve(ingested("g", "t1", {"kafka": 0.8, "lag": 0.5}, minute=3), Slice(ref=G), PARAMS)
    concepts = [w.concept for w in of_type(writes, PutConcept)]
    assert [(c.id, c.count, c.base_activation) for c in concepts] == [("kafka", 1, on_grid(0.8)), ("lag", 1, on_grid(0.5))]
    assert of_type(writes, CoOccur) == [CoOccur(("kafka", "lag"), at(minutes=3))]
    [passage] = [w.passage for w in of_type(writes, AddPassage)]
    assert passage.concept_ids == ("kafka", "lag") and passage.seq == 0  # a source link per concept id
    [meta] = [w.meta for w in of_type(writes, PutMeta)]
    assert (meta.turns, meta.clock, meta.first_seen) == (1, at(minutes=3), at(minutes=3))
    assert writes[0] == Register()


def test_a_later_turn_reinforces_what_the_slice_holds():
    meta = GraphMeta(turns=5, first_seen=at(0), clock=at(1))
    held = Slice(ref=G, meta=meta, concepts={"kafka": concept("kafka", 0.5)},
                 pairs=PairTable.of({("kafka", "lag"): PairState(2, at(1))}))
    writes = evolve(ingested("g", "t9", {"kafka": 0.25, "lag": 0.5}, minute=10), held, PARAMS)
    kafka = next(w.concept for w in of_type(writes, PutConcept) if w.concept.id == "kafka")
    assert (kafka.count, kafka.base_activation) == (2, 0.5 + on_grid(0.25))
    # The pair is counted where pairs are kept (pair_after: +1, the later last).
    assert of_type(writes, CoOccur) == [CoOccur(("kafka", "lag"), at(minutes=10))]
    [meta] = [w.meta for w in of_type(writes, PutMeta)]
    assert (meta.turns, meta.clock, meta.first_seen) == (6, at(1), at(0))
    assert of_type(writes, AddPassage)[0].passage.seq == 5


# -- version switch -------------------------------------------------------------

def test_a_version_switch_names_the_new_active_version():
    event = GraphVersionSwitched(graph_id="g", version=2, timestamp=T0)
    assert evolve(event, Slice(ref=GraphRef("g", 2)), PARAMS) == (SwitchVersion(2),)


# -- decay ticks -----------------------------------------------------------------

DECAY_CASES = {
    # name: (slice, tick, removed concepts, removed pairs, removed passages, kept edges)
    "a listed concept below θ goes, with its edges and links": (
        Slice(ref=G, concepts={"lag": concept("lag", 0.5)}, neighbours={"lag": ("kafka",)},
              sources={"lag": ("t1", "t2")}, passages={"t1": passage("t1", "kafka", "lag"), "t2": passage("t2", "lag")},
              links=frozenset({("kafka", "t1"), ("lag", "t1"), ("lag", "t2")})),
        tick(4, [("lag", "activation")]),
        ("lag",), (("kafka", "lag"),), ("t2",), (),
    ),
    "a concept reinforced after the decision is kept": (
        Slice(ref=G, concepts={"lag": concept("lag", 5.0)}, neighbours={"lag": ("kafka",)}),
        tick(4, [("lag", "activation")]),
        (), (), (), (),
    ),
    "a listed edge past its retention goes; one co-occurring since is kept": (
        Slice(ref=G, pairs=PairTable.of({("a", "b"): PairState(1, at(0)), ("a", "c"): PairState(1, at(3.9))}),
              neighbours={}),
        tick(4, edges=[("a", "b"), ("a", "c")]),
        (), (("a", "b"),), (), ((("a", "c"), PairState(1, at(3.9))),),
    ),
    "a concept listed as isolated goes when the tick takes its last edge": (
        Slice(ref=G, pairs=PairTable.of({("a", "b"): PairState(1, at(0))}), neighbours={"b": ("a",)},
              sources={"b": ("t1",)}, passages={"t1": passage("t1", "a", "b")},
              links=frozenset({("a", "t1"), ("b", "t1")})),
        tick(4, [("b", "isolated")], edges=[("a", "b")]),
        ("b",), (("a", "b"),), (), (),
    ),
    "a concept listed as isolated that still has an edge stays": (
        Slice(ref=G, pairs=PairTable.of({("a", "b"): PairState(1, at(0))}), neighbours={"b": ("a", "c")}),
        tick(4, [("b", "isolated")], edges=[("a", "b")]),
        (), (("a", "b"),), (), (),
    ),
    "an orphaned passage goes; one another concept links to stays": (
        Slice(ref=G, concepts={"x": concept("x", 0.2), "y": concept("y", 0.2)}, neighbours={"x": (), "y": ()},
              sources={"x": ("t1", "t2"), "y": ("t2",)},
              passages={"t1": passage("t1", "x", "z"), "t2": passage("t2", "x", "y")},
              links=frozenset({("x", "t1"), ("z", "t1"), ("x", "t2"), ("y", "t2")})),
        tick(4, [("x", "activation"), ("y", "activation")]),
        ("x", "y"), (), ("t2",), (),
    ),
}


@pytest.mark.parametrize("name", DECAY_CASES)
def test_a_decay_tick(name):
    held, event, concepts, pairs, passages, kept = DECAY_CASES[name]
    writes = evolve(event, held, PARAMS)
    assert tuple(w.cid for w in of_type(writes, RemoveConcept)) == concepts
    assert tuple(e for w in of_type(writes, RemovePairs) for e in w.edges) == pairs
    assert tuple(w.turn_id for w in of_type(writes, PrunePassage)) == passages
    assert tuple(pair for w in of_type(writes, KeepEdges) for pair in w.pairs.items()) == kept
    [meta] = [w.meta for w in of_type(writes, PutMeta)]
    assert (meta.decayed_to, meta.decay) == (event.timestamp, DECAY)
    assert {w.cid for w in of_type(writes, RemoveLink)} <= set(concepts)


# -- consolidation ---------------------------------------------------------------

@pytest.mark.parametrize(
    "members, present, kept",
    [
        (("a", "b", "c"), {"a", "b", "c"}, ("a", "b", "c")),
        (("a", "b", "c"), {"a", "c"}, ("a", "c")),  # a member pruned since
        (("a", "b", "c"), {"a"}, None),  # fewer than two left: no topic
    ],
)
def test_consolidation_keeps_the_members_still_in_the_graph(members, present, kept):
    event = Consolidate(graph_id="g", graph_version=1, timestamp=at(1),
                        topics=(TopicNode(id="topic:a", label="a", members=members),))
    writes = evolve(event, Slice(ref=G, present=frozenset(present), topic_ids=("topic:old",)), PARAMS)
    [topics] = of_type(writes, SetTopics)
    assert [t.members for t in topics.topics] == ([kept] if kept else [])
    assert topics.removed == ("topic:old",)
    assert of_type(writes, PutMeta)[0].meta.consolidated_to == at(1)


# -- retrieval ---------------------------------------------------------------------

def test_a_retrieval_boosts_the_concepts_still_held_and_marks_the_request():
    event = Retrieved(graph_id="g", graph_version=1, request_id="q1", timestamp=at(1),
                      boosts=(Boost(id="kafka", amount=0.25), Boost(id="gone", amount=0.5)))
    meta = GraphMeta(turns=1, first_seen=T0, clock=T0)  # the graph's clock: its one turn
    writes = evolve(event, Slice(ref=G, meta=meta, concepts={"kafka": concept("kafka", 0.5)}), PARAMS)
    [kafka] = [w.concept for w in of_type(writes, PutConcept)]
    assert (kafka.base_activation, kafka.retrievals, kafka.first_retrieved, kafka.last_retrieved) == (0.75, 1, at(1), at(1))
    assert of_type(writes, MarkRetrieval) == [MarkRetrieval("q1")]


# -- forgetting ---------------------------------------------------------------------

V1, V2 = GraphRef("g", 1), GraphRef("g", 2)


@pytest.mark.parametrize(
    "event, held, tombstones, refolded, erased, clear_active",
    [
        (Forget(graph_id="g", request_id="r", timestamp=T0, turn_ids=("t1",)),
         Slice(ref=V1, versions=(V1, V2), refolds={V1: Refolded({b"k": b"v"}, (7,)), V2: None}),
         ("t1",), {V1: Refolded({b"k": b"v"}, (7,))}, (V2,), False),
        (Forget(graph_id="g", request_id="r", timestamp=T0, turn_ids=("t1",)),
         Slice(ref=V1, versions=(V1,), refolds={V1: None}),
         ("t1",), {}, (V1,), True),
        (Forget(graph_id="g", request_id="r", timestamp=T0, whole_graph=True),
         Slice(ref=V1, versions=(V1, V2), turn_ids={V1: frozenset({"t1", "t2"}), V2: frozenset({"t3"})}),
         ("t1", "t2", "t3"), {}, (V1, V2), True),
    ],
)
def test_forgetting(event, held, tombstones, refolded, erased, clear_active):
    [forgetting] = of_type(evolve(event, held, PARAMS), Forgetting)
    assert forgetting.tombstones == tombstones
    assert dict(forgetting.refolded) == refolded
    assert forgetting.erased == erased
    assert forgetting.clear_active is clear_active


def test_an_event_type_with_no_rule_fails_loudly():
    with pytest.raises(UnregisteredEvent, match="no rule registered for the graph event type str"):
        evolve("not an event", Slice(ref=G), PARAMS)


def test_a_poison_value_raises_in_evolve():
    """A boost that overflows the activation grid, built past validation (decoding
    refuses it): what gets through anyway is rejected by the projector."""
    boost = Boost.model_construct(id="kafka", amount=1e300)
    event = Retrieved(graph_id="g", graph_version=1, request_id="q", timestamp=at(1), boosts=(boost,))
    with pytest.raises(OverflowError):
        evolve(event, Slice(ref=G, concepts={"kafka": concept("kafka", 0.5)}), PARAMS)
