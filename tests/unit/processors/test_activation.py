"""Spreading activation: the formula, stopping rules, multi-hop and hubs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.activation import (
    ActivationParams,
    concept_scores,
    rank_passages,
    spread,
    top_concepts,
)
from emgas.processors.events import QueryParams


def graph(edges: dict[tuple[int, int], float], n: int):
    adj = {i: {} for i in range(n)}
    for (a, b), w in edges.items():
        adj[a][b] = w
        adj[b][a] = w

    def neighbours(i):
        row = adj[i]
        return np.array(list(row), dtype=np.int64), np.array(list(row.values()), dtype=float)

    return neighbours


def test_one_iteration_matches_formula():
    # 0 -(0.8)- 1 ; seed 0; D = 0.5; spend: 0 keeps 1 * (1 - 0.5)
    p = ActivationParams(max_iterations=1, propagation_decay=0.5, firing_threshold=0.1, fan=False)
    a, its = spread(2, [0], graph({(0, 1): 0.8}, 2), p)
    assert its == 1
    assert a[1] == pytest.approx(1.0 * 0.8 * 0.5)
    assert a[0] == pytest.approx(0.5)


def test_without_spend_firing_node_keeps_its_activation():
    p = ActivationParams(max_iterations=1, propagation_decay=0.5, spend=False, fan=False)
    a, _ = spread(2, [0], graph({(0, 1): 0.8}, 2), p)
    assert a[0] == pytest.approx(1.0)


def test_nothing_fires_below_threshold():
    p = ActivationParams(firing_threshold=1.0)
    a, its = spread(3, [0], graph({(0, 1): 1.0}, 3), p)
    assert its == 0 and a.tolist() == [1.0, 0.0, 0.0]


def test_stops_when_change_below_epsilon():
    p = ActivationParams(max_iterations=50, epsilon=0.5, fan=False)
    _, its = spread(2, [0], graph({(0, 1): 0.1}, 2), p)
    assert its < 50


def test_multi_hop_node_linked_to_two_seeds_outranks_single_seed_neighbours():
    # seeds 0 and 1; node 2 bridges both; 3 hangs off 0 only, 4 off 1 only,
    # each with a stronger single edge than either of 2's edges.
    edges = {(0, 2): 0.5, (1, 2): 0.5, (0, 3): 0.7, (1, 4): 0.7}
    p = ActivationParams(fan=False, max_iterations=1)
    a, _ = spread(5, [0, 1], graph(edges, 5), p)
    assert a[2] > a[3] and a[2] > a[4]
    order = top_concepts(a, a, 5, list("abcde"))
    assert order.index(2) < order.index(3)


def test_query_params_override_defaults():
    p = ActivationParams().overridden_by(QueryParams(propagation_decay=0.9, top_passages=3))
    assert p.propagation_decay == 0.9 and p.top_passages == 3
    assert p.firing_threshold == ActivationParams().firing_threshold


def test_hub_is_outranked_by_specific_concept_with_equal_activation():
    activation = np.array([0.5, 0.5])
    spec = np.array([0.0, 1.0])  # node 0 in every turn, node 1 in one
    scores = concept_scores(activation, spec, hub_floor=0.1)
    assert top_concepts(scores, activation, 2, ["hub", "rare"]) == [1, 0]
    assert scores[0] == pytest.approx(0.05)


def test_top_concepts_break_ties_by_id_not_by_position():
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.1])
    assert top_concepts(scores, scores, 3, ["d", "x", "b", "c", "a"]) == [1, 2, 3]
    assert top_concepts(scores, scores, 9, ["d", "x", "b", "c", "a"]) == [1, 2, 3, 0, 4]


def test_rank_passages_sums_scores_and_breaks_ties_by_id():
    ranked = rank_passages([(1.0, ["t2", "t1"]), (0.5, ["t2"]), (1.0, ["t3"])], k=3)
    assert ranked == [("t2", 1.5), ("t1", 1.0), ("t3", 1.0)]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.integers(0, 7), st.integers(0, 7)).filter(lambda e: e[0] != e[1]),
        st.floats(0.01, 1.0),
        max_size=20,
    ),
    st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True),
)
def test_with_fan_and_spend_energy_is_conserved(edges, seeds):
    nb = graph(edges, 8)

    def fanned(i):
        idx, w = nb(i)
        return idx, (w / w.sum() if w.size else w)

    a, _ = spread(8, seeds, fanned, ActivationParams(max_iterations=4))
    assert (a >= -1e-12).all()
    # isolated seeds keep only (1 - D); otherwise every unit is conserved
    assert a.sum() <= len(seeds) + 1e-9
