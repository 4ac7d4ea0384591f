"""Tenants: a query for graph A never returns a concept or a passage of graph B,
even when the graphs share a partition and their vocabularies overlap."""

from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.activation import ActivationParams
from emgas.processors.events import ActivationQuery
from emgas.processors.extract import ExtractionParams
from emgas.processors.graph import GraphParams
from emgas.state.memory import MemoryStore
from emgas.state.projector import PartitionState
from emgas.service.retrieval import answer
from tests.support.factories import ingested

WORDS = [f"w{i}" for i in range(12)]  # every graph draws from the same words
GRAPHS = ["a", "b", "c"]
turn = st.tuples(st.sampled_from(GRAPHS), st.lists(st.sampled_from(WORDS), min_size=1, max_size=5, unique=True))


@settings(max_examples=60, deadline=None)
@given(st.lists(turn, min_size=1, max_size=40), st.data(), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
def test_a_query_sees_only_its_own_graph(turns, data, seeds):
    # The graph asked is one that got turns: every example asserts something.
    graph = data.draw(st.sampled_from(sorted({g for g, _ in turns})), label="graph asked")
    state = PartitionState(MemoryStore(), GraphParams(window_s=0, consolidate_every_s=0))
    own_turns: dict[str, set[str]] = {g: set() for g in GRAPHS}
    own_concepts: dict[str, set[str]] = {g: set() for g in GRAPHS}
    for offset, (g, words) in enumerate(turns):
        turn_id = f"{g}-{offset}"
        state.apply(ingested(g, turn_id, {w: 0.5 for w in words}, minute=offset), offset)
        own_turns[g].add(turn_id)
        own_concepts[g].update(words)
    assert state.view(graph) is not None
    query = ActivationQuery(request_id="q", graph_id=graph, seeds=tuple(seeds), params={"top_passages": 50, "top_concepts": 50})
    reply = answer(state, query, ActivationParams(), ExtractionParams(), lambda: 0.0)
    assert {c.id for c in reply.concepts} <= own_concepts[graph]
    assert {p.turn_id for p in reply.passages} <= own_turns[graph]
    assert reply.stats.turns == len(own_turns[graph])
