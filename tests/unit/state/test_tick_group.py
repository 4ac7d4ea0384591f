"""Pruning ticks decided and applied as a group (`state.tick_group`,
`processors.pruning_group`) give what their rule gives applied tick by tick.

A generated graph (turns over a few days, in any time order) is followed
by a batch of pruning ticks listing random concepts (for their activation
or as isolated, some listed twice or not held), random edges (either way
round, some absent) at increasing times: folded as one batch, the ticks
are one group; folded one at a time, each goes through its rule
(`evolve_decay` on its own slice). Both give the same outcomes, digests
and in-memory graph, due times included.
"""

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emgas.processors.dynamics import DAY_S, DecayParams
from emgas.processors.events import Decay, PrunedConcept, PrunedEdge
from emgas.processors.graph import GraphParams
from emgas.state.digest import partition_digests
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from tests.support.factories import T0, ingested

PARAMS = GraphParams(decay=DecayParams(model="exponential", half_life_s=DAY_S))
# The ticks' own parameters: a concept unmentioned for a few days goes, and an edge for two.
PRUNING = DecayParams(model="exponential", half_life_s=DAY_S, concept_threshold=0.2, edge_stability_s=DAY_S)
WORDS = ["kafka", "lag", "broker", "cat", "dog", "jvm", "\u732b"]

turns = st.lists(
    st.tuples(st.dictionaries(st.sampled_from(WORDS), st.floats(0.05, 1.0), min_size=1, max_size=4),
              st.integers(0, 5 * 24 * 60)),  # minutes: five days, in any order
    min_size=1, max_size=20,
)
listed_concept = st.tuples(st.sampled_from(WORDS), st.sampled_from(["activation", "isolated"]))
tick = st.tuples(
    st.integers(1, 48),  # hours after the tick before it
    st.lists(listed_concept, max_size=4),
    st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS)).filter(lambda e: e[0] != e[1]), max_size=5),
)


def pruning_ticks(drawn: list, start_hours: float) -> list[Decay]:
    ticks, hours = [], start_hours
    for gap, concepts, edges in drawn:
        hours += gap
        ticks.append(Decay(
            graph_id="g", graph_version=1, timestamp=T0 + timedelta(hours=hours), trigger="window", params=PRUNING,
            concepts=tuple(PrunedConcept(id=c, reason=reason, value=0.0) for c, reason in concepts),
            edges=tuple(PrunedEdge(a=a, b=b, value=0.0) for a, b in edges),
        ))
    return ticks


def folded(history: list, ticks: list[Decay], grouped: bool) -> tuple[list[Outcome], PartitionState]:
    state = PartitionState(MemoryStore(), PARAMS)
    outcomes = state.apply_batch([(event, offset, None) for offset, event in enumerate(history)])
    if grouped:
        outcomes += state.apply_batch([(t, len(history) + k, None) for k, t in enumerate(ticks)])
    else:
        outcomes += [state.apply(t, len(history) + k) for k, t in enumerate(ticks)]
    state.commit()
    return outcomes, state


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns, st.lists(tick, min_size=1, max_size=8), st.integers(0, 10 * 24))
def test_a_group_of_pruning_ticks_gives_its_ticks_applied_one_at_a_time(drawn, ticks, start_hours):
    history = [ingested("g", f"t{k}", concepts, minute=minute) for k, (concepts, minute) in enumerate(drawn)]
    group = pruning_ticks(ticks, start_hours)
    one_by_one, expected = folded(history, group, grouped=False)
    grouped, state = folded(history, group, grouped=True)
    assert grouped == one_by_one
    assert partition_digests(state.repo) == partition_digests(expected.repo)
    view, reference = state.view("g"), expected.view("g")
    assert view.snapshot() == reference.snapshot()
    assert {c: view.passage_ids[i] for c, i in view.index.items()} == \
        {c: reference.passage_ids[i] for c, i in reference.index.items()}
    assert view.due_edges(T0 + timedelta(days=60)) == reference.due_edges(T0 + timedelta(days=60))
    assert view.due_concepts(T0 + timedelta(days=60)) == reference.due_concepts(T0 + timedelta(days=60))


def test_the_generated_groups_prune():
    """A group of this shape removes concepts, edges and passages, so the property shows something."""
    history = [ingested("g", "t1", {"kafka": 0.8, "lag": 0.5}, minute=0),
               ingested("g", "t2", {"cat": 0.6, "dog": 0.3, "lag": 0.2}, minute=60 * 24)]
    group = pruning_ticks([(72, [("kafka", "activation")], [("lag", "kafka")]),
                           (48, [("dog", "activation"), ("cat", "isolated")], [("cat", "lag")])], 0)
    _, state = folded(history, group, grouped=True)
    assert not {"kafka", "cat", "dog"} & set(state.view("g").index)
    assert state.view("g").edges == 0, "every edge went"


def test_a_tick_that_lists_a_concept_twice_removes_it_once():
    """Applied alone it once failed on the second removal, outside its rule (a crash, not a rejection)."""
    history = [ingested("g", "t1", {"kafka": 0.5}, minute=0)]
    group = pruning_ticks([(1, [("kafka", "activation"), ("kafka", "activation")], [])], 31)
    for grouped in (False, True):
        outcomes, state = folded(history, group, grouped=grouped)
        assert outcomes == [Outcome.APPLIED, Outcome.APPLIED]
        assert "kafka" not in state.view("g").index
