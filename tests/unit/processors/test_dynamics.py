"""Decay and pruning math, hand-computed (exponential, power law, hybrid, edges)."""

import math
from datetime import datetime, timedelta, timezone
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.dynamics import (
    DAY_S,
    DecayParams,
    decay_factor,
    edge_lifetime,
    edge_retention,
    microseconds,
    time_to_threshold,
    window_start,
)
from emgas.processors.graph import ConceptState, GraphMeta, GraphParams, activation_at, brought_to_tick, concept_after_retrieval, on_grid
from emgas.processors import pruning
from emgas.processors.pruning import (
    PairState, PairTable, edge_expired, expired_at, expired_concepts, expired_edges, expired_mask, isolated_by,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
EXP = DecayParams(model="exponential", half_life_s=10 * DAY_S)
POWER = DecayParams(model="power", power_tau_s=DAY_S, power_beta=0.5)
HYBRID = DecayParams(model="hybrid", half_life_s=10 * DAY_S, power_tau_s=DAY_S, power_beta=0.5, hybrid_after=3)


@pytest.mark.parametrize(
    ("params", "days", "reinforcements", "expected"),
    [
        (EXP, 0, 1, 1.0),
        (EXP, 10, 1, 0.5),  # one half-life
        (EXP, 30, 1, 0.125),  # three half-lives
        (POWER, 3, 1, 0.5),  # (1 + 3/1)^-0.5
        (POWER, 99, 1, 0.1),  # (1 + 99)^-0.5
        (HYBRID, 10, 2, 0.5),  # young: exponential
        (HYBRID, 3, 3, 0.5),  # reinforced 3 times: power law
        (EXP, -5, 1, 1.0),  # no growth backwards in time
    ],
)
def test_decay_factor(params, days, reinforcements, expected):
    assert decay_factor(days * DAY_S, reinforcements, params) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("params", "activation", "reinforcements", "days"),
    [
        (EXP.model_copy(update={"concept_threshold": 0.01}), 0.64, 1, 60.0),  # log2(64) = 6 half-lives
        (POWER.model_copy(update={"concept_threshold": 0.01}), 0.04, 1, 15.0),  # τ·(4² − 1)
        (HYBRID.model_copy(update={"concept_threshold": 0.01}), 0.04, 5, 15.0),
        (HYBRID.model_copy(update={"concept_threshold": 0.01}), 0.04, 1, 20.0),  # 2 half-lives
        (EXP, 0.001, 1, 0.0),  # already below
    ],
)
def test_time_to_threshold(params, activation, reinforcements, days):
    assert time_to_threshold(activation, reinforcements, params) / DAY_S == pytest.approx(days, rel=1e-12)
    if days:  # and the activation there is θ exactly
        factor = decay_factor(days * DAY_S, reinforcements, params)
        assert activation * factor == pytest.approx(params.concept_threshold, rel=1e-9)


def test_edge_retention_is_ebbinghaus_with_stability_growing_with_count():
    params = DecayParams(edge_stability_s=30 * DAY_S, edge_threshold=0.05)
    assert edge_retention(30 * DAY_S, 1, params) == pytest.approx(math.exp(-1))
    assert edge_retention(60 * DAY_S, 2, params) == pytest.approx(math.exp(-1))  # S = 60 days
    assert edge_lifetime(1, params) / DAY_S == pytest.approx(30 * math.log(20))
    assert edge_lifetime(3, params) == pytest.approx(3 * edge_lifetime(1, params))


def test_windows_are_aligned_on_the_epoch():
    t = datetime(2026, 3, 2, 9, 59, 59, tzinfo=timezone.utc)
    assert window_start(t, 3600) == datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    assert window_start(t, DAY_S) == datetime(2026, 3, 2, tzinfo=timezone.utc)
    assert window_start(t.replace(hour=10, minute=0, second=0), 3600) == t.replace(hour=10, minute=0, second=0)


def concept(cid="kafka", activation=0.8, count=1, created=T0, decayed_to=None, retrievals=0):
    return ConceptState(
        id=cid, text=cid, count=count, base_activation=activation, created_at=created,
        last_accessed=created, decayed_to=decayed_to, retrievals=retrievals,
    )


def test_a_mention_brings_the_concept_to_the_last_tick_first():
    meta = GraphMeta(decayed_to=T0 + timedelta(days=10), decay=EXP)
    brought = brought_to_tick(concept(activation=0.8), meta)
    assert brought.base_activation == on_grid(0.4) and brought.decayed_to == meta.decayed_to
    assert brought_to_tick(brought, meta) == brought  # already there


def test_activation_at_decays_from_the_last_tick_brought_to():
    c = concept(activation=0.4, decayed_to=T0 + timedelta(days=10))
    assert activation_at(c, T0 + timedelta(days=20), EXP) == pytest.approx(0.2)


NO_WINDOWS = GraphParams(window_s=0)


def test_retrieval_records_count_first_last_and_frequency():
    meta = GraphMeta()
    c = concept(activation=0.5)
    for day in (3, 1, 7):
        c = concept_after_retrieval(c, 0.25, T0 + timedelta(days=day), meta, NO_WINDOWS)
    assert c.retrievals == 3 and c.base_activation == 1.25
    assert c.first_retrieved == T0 + timedelta(days=1) and c.last_retrieved == T0 + timedelta(days=7)
    assert c.retrieval_frequency() == pytest.approx(3 / 6)  # n / T in retrievals per day
    assert c.reinforcements == 4


def test_concepts_below_threshold_at_the_tick_expire():
    params = EXP.model_copy(update={"concept_threshold": 0.1})
    at = T0 + timedelta(days=30)  # 3 half-lives: factor 1/8
    kept, gone = concept("kept", 0.9), concept("gone", 0.7)
    pruned = expired_concepts([kept, gone], at, params)
    assert [(p.id, p.reason) for p in pruned] == [("gone", "activation")]
    assert pruned[0].value == pytest.approx(0.7 / 8)


def test_edges_below_threshold_expire():
    params = DecayParams(edge_stability_s=DAY_S, edge_threshold=0.05)  # lifetime ln(20) ≈ 3.0 days per count
    at = T0 + timedelta(days=4)
    pruned = expired_edges({("a", "b"): PairState(1, T0), ("a", "c"): PairState(2, T0)}, at, params)
    assert [(e.a, e.b) for e in pruned] == [("a", "b")]
    assert pruned[0].value == pytest.approx(math.exp(-4))


@pytest.mark.parametrize(
    ("pruned_concepts", "pruned_edges", "isolated"),
    [
        ([], [("a", "b")], ["b"]),  # b's only edge goes; a keeps a–c
        (["a"], [], ["b"]),  # a goes with its edges: b is left alone, c keeps c–d
        (["a"], [("c", "d")], ["b", "c", "d"]),
        ([], [], []),
    ],
)
def test_concepts_left_without_edges_are_isolated(pruned_concepts, pruned_edges, isolated):
    graph = {"a": ["b", "c"], "b": ["a"], "c": ["a", "d"], "d": ["c"], "e": []}  # e never had an edge
    found = isolated_by(pruned_concepts, pruned_edges, lambda c: graph[c])
    assert [c.id for c in found] == isolated and all(c.reason == "isolated" for c in found)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.tuples(st.sampled_from("abcdef"), st.sampled_from("abcdef")).filter(lambda e: e[0] < e[1])),
       st.data())
def test_isolated_among_allowed_is_isolated_then_filtered(edges, data):
    """`isolated_by` with `allowed` (what a tick's fold passes: the concepts
    it lists as isolated) equals the unfiltered answer filtered."""
    graph: dict[str, list[str]] = {c: [] for c in "abcdef"}
    for a, b in sorted(edges):
        graph[a].append(b)
        graph[b].append(a)
    pruned = data.draw(st.sets(st.sampled_from("abcdef")))
    removed = data.draw(st.sets(st.sampled_from(sorted(edges)))) if edges else set()
    allowed = data.draw(st.sets(st.sampled_from("abcdef")))
    every = isolated_by(sorted(pruned), sorted(removed), lambda c: graph[c])
    assert isolated_by(sorted(pruned), sorted(removed), lambda c: graph[c], allowed.__contains__) == [
        c for c in every if c.id in allowed
    ]


# `expired_mask` decides a small table edge by edge and a larger one with
# numpy: each test runs with either for every table.
EITHER_PATH = pytest.mark.parametrize("few_edges", [0, 10**6], ids=["numpy", "one-by-one"])


@EITHER_PATH
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50), st.integers(-10**13, 10**13)), max_size=20),
       st.sampled_from([0.05, 0.2, 0.5]), st.sampled_from([3600.0, 86400.0 * 90]))
def test_expired_edges_at_once_decide_as_one_by_one(few_edges, pairs, threshold, stability):
    """`expired_mask` on arrays gives `edge_retention(...) < θ_e` edge by edge
    (with `math.exp`), close calls included."""
    params = DecayParams(edge_threshold=threshold, edge_stability_s=stability)
    at = T0 + timedelta(days=400)
    table = PairTable.of({(f"a{k}", f"b{k}"): PairState(c, at - timedelta(microseconds=d)) for k, (c, d) in enumerate(pairs)})
    expected = [edge_retention((at - pair.last).total_seconds(), pair.count, params) < threshold for _, pair in table.items()]
    with patch.object(pruning, "_FEW_EDGES", few_edges):
        assert expired_mask(table, at, params).tolist() == expected


@EITHER_PATH
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50), st.integers(0, 10**13), st.integers(-10**12, 10**12)), max_size=40),
       st.sampled_from([0.05, 0.2, 0.5]))
def test_edges_at_their_own_times_decide_as_one_by_one(few_edges, pairs, threshold):
    """`expired_at`, each edge at its own time (a group's ticks), gives
    `edge_expired` edge by edge."""
    params = DecayParams(edge_threshold=threshold, edge_stability_s=86400.0)
    at0 = microseconds(T0 + timedelta(days=400))
    counts, lasts, ats = (np.array(x, dtype=np.int64) for x in zip(*pairs)) if pairs else (np.zeros(0, np.int64),) * 3
    lasts, ats = at0 - lasts, at0 + ats
    expected = [edge_expired(c, last, at, params) for c, last, at in zip(counts.tolist(), lasts.tolist(), ats.tolist())]
    with patch.object(pruning, "_FEW_EDGES", few_edges):
        assert expired_at(counts, lasts, ats, params).tolist() == expected


@EITHER_PATH
def test_a_retention_at_the_threshold_is_decided_with_math_exp(few_edges):
    """Where numpy's exp and `math.exp` differ in the last bit, a threshold
    between the two: the decision is `math.exp`'s."""
    at = T0 + timedelta(days=10)
    for us in range(1_000_000, 1_000_000 + 50_000, 7):
        x = -(us / 1e6) / 1.0
        ours, theirs = float(np.exp(np.array([x]))[0]), math.exp(x)
        if ours != theirs:
            break
    params = DecayParams(edge_threshold=max(ours, theirs), edge_stability_s=1.0)
    table = PairTable.of({("a", "b"): PairState(1, at - timedelta(microseconds=us))})
    with patch.object(pruning, "_FEW_EDGES", few_edges):
        assert expired_mask(table, at, params).tolist() == [edge_retention(us / 1e6, 1, params) < params.edge_threshold]
