"""Applying decay ticks and retrievals: what goes, what stays, and idempotency."""

from datetime import timedelta

import pytest

from emgas.processors.dynamics import DAY_S, DecayParams
from emgas.processors.events import Boost, Decay, PrunedConcept, PrunedEdge, Retrieved
from emgas.processors.graph import GraphParams, GraphRef
from emgas.state import keys
from emgas.state.digest import _Version, link_lines, partition_digests
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from emgas.state.snapshots import as_links, as_rows, as_unlinks, graph_content, in_store_layout, stored_content
from emgas.service.scheduler import Scheduler
from tests.support.factories import T0, ingested

G = GraphRef("g", 1)
# Half-life 1 day, concepts below 0.1 go; edges: S = 1 day per co-occurrence, below 0.05 go.
DECAY = DecayParams(model="exponential", half_life_s=DAY_S, concept_threshold=0.1, edge_stability_s=DAY_S)
PARAMS = GraphParams(decay=DECAY, window_s=0, consolidate_every_s=0)


def state_with(*events) -> PartitionState:
    state = PartitionState(MemoryStore(), PARAMS)
    for offset, event in enumerate(events):
        state.apply(event, offset)
    return state


def tick(days: float, concepts=(), edges=()) -> Decay:
    return Decay(
        graph_id="g", graph_version=1, timestamp=T0 + timedelta(days=days), trigger="manual", params=DECAY,
        concepts=tuple(concepts), edges=tuple(edges),
    )


def test_the_scheduler_lists_what_falls_below_the_thresholds():
    state = state_with(
        ingested("g", "t1", {"kafka": 0.8, "lag": 0.3}),  # lag: 0.3 → 0.075 after 2 days
        ingested("g", "t2", {"kafka": 0.9, "broker": 0.9}, minute=60 * 24 * 2),
    )
    decay = Scheduler(PARAMS).decay(state, G, T0 + timedelta(days=3.5), "manual")
    assert [(c.id, c.reason) for c in decay.concepts] == [("lag", "activation")]
    assert decay.concepts[0].value == pytest.approx(0.3 * 2**-3.5)
    # kafka–lag (R = e^−3.5 < 0.05) is listed too, in case lag is reinforced
    # before the tick applies; kafka–broker is fresh (R = e^−1.5 ≈ 0.22).
    assert [(e.a, e.b) for e in decay.edges] == [("kafka", "lag")]


def test_a_tick_removes_concepts_edges_links_and_orphaned_passages():
    state = state_with(
        ingested("g", "t1", {"kafka": 0.8, "lag": 0.3}),
        ingested("g", "t2", {"lag": 0.2}, minute=1),  # a passage only lag links to
    )
    # lag: 0.3 + 0.2 = 0.5, a sixteenth of it after 4 days; kafka: 0.8 → 0.05 but not listed.
    outcome = state.apply(tick(4, [PrunedConcept(id="lag", reason="activation", value=0.0)]), 2)
    assert outcome == Outcome.APPLIED
    assert state.repo.concepts(G, ["kafka", "lag"]).keys() == {"kafka"}
    assert state.repo.pairs(G, [("kafka", "lag")]) == {}
    assert state.repo.links(G, [("lag", "t1"), ("kafka", "t1"), ("lag", "t2")]) == {("kafka", "t1")}
    assert "lag" not in state.view("g").index
    assert state.repo.passages(G, ["t1", "t2"]).keys() == {"t1"}  # kafka still links to t1
    assert state.repo.has_turn(G, "t2")  # and a second delivery of t2 is still a duplicate
    assert state.apply(ingested("g", "t2", {"lag": 0.2}, minute=1), 3) == Outcome.DUPLICATE_TURN
    assert state.view("g").concepts == 1 and state.view("g").edges == 0


def test_a_concept_reinforced_after_the_decision_is_kept():
    state = state_with(ingested("g", "t1", {"kafka": 0.8, "lag": 0.3}))
    decided = Scheduler(PARAMS).decay(state, G, T0 + timedelta(days=3), "window")
    # lag: 0.3/8 < 0.1; kafka: 0.8/8 = 0.1 stays, but lag was its only edge.
    assert [(c.id, c.reason) for c in decided.concepts] == [("lag", "activation"), ("kafka", "isolated")]
    assert [(e.a, e.b) for e in decided.edges] == [("kafka", "lag")]  # R = e^−3 < 0.05
    state.apply(ingested("g", "t2", {"lag": 0.9}, minute=60 * 24 * 3 - 1), 1)  # lands first
    state.apply(decided, 2)
    # lag was reinforced: kept. Their edge was not: it goes, and kafka with it.
    assert set(state.view("g").index) == {"lag"}


def test_an_edge_below_threshold_goes_and_leaves_its_ends_isolated():
    state = state_with(ingested("g", "t1", {"kafka": 0.9, "lag": 0.9}))
    # R = exp(−4) ≈ 0.018 < 0.05 after 4 days; both ends had only that edge.
    decided = Scheduler(PARAMS.model_copy(update={"decay": DECAY.model_copy(update={"concept_threshold": 0.0})})).decay(
        state, G, T0 + timedelta(days=4), "manual"
    )
    assert [(e.a, e.b) for e in decided.edges] == [("kafka", "lag")]
    assert [(c.id, c.reason) for c in decided.concepts] == [("kafka", "isolated"), ("lag", "isolated")]
    state.apply(decided, 1)
    assert state.view("g").concepts == 0 and state.repo.passages(G, ["t1"]) == {}


def test_a_tick_not_later_than_the_last_is_a_duplicate():
    state = state_with(ingested("g", "t1", {"kafka": 0.8}))
    assert state.apply(tick(1), 1) == Outcome.APPLIED
    assert state.apply(tick(1), 2) == Outcome.DUPLICATE_TICK
    assert state.apply(tick(0.5), 3) == Outcome.DUPLICATE_TICK
    assert state.repo.meta(G).decayed_to == T0 + timedelta(days=1)


def test_an_edge_listed_but_reinforced_since_is_kept():
    state = state_with(ingested("g", "t1", {"kafka": 0.9, "lag": 0.9}))
    state.apply(ingested("g", "t2", {"kafka": 0.9, "lag": 0.9}, minute=60 * 24 * 4), 1)
    state.apply(tick(4, edges=[PrunedEdge(a="kafka", b="lag", value=0.0)]), 2)
    assert state.view("g").edges == 1


def test_a_retrieval_is_applied_once():
    state = state_with(ingested("g", "t1", {"kafka": 0.5}))
    retrieved = Retrieved(graph_id="g", graph_version=1, request_id="q1", timestamp=T0, boosts=(Boost(id="kafka", amount=0.25),))
    assert state.apply(retrieved, 1) == Outcome.APPLIED
    assert state.apply(retrieved, 2) == Outcome.DUPLICATE_RETRIEVAL
    kafka = state.repo.concepts(G, ["kafka"])["kafka"]
    assert kafka.base_activation == 0.75 and kafka.retrievals == 1


def test_dynamics_for_a_graph_version_never_seen_change_nothing():
    state = state_with(ingested("g", "t1", {"kafka": 0.5}))
    assert state.apply(tick(1).model_copy(update={"graph_version": 2}), 1) == Outcome.UNKNOWN_GRAPH


def test_an_idle_graph_is_ticked_as_its_clock_moves_on_at_wall_speed():
    params = PARAMS.model_copy(update={"window_s": 3600.0})
    state = state_with(ingested("g", "t1", {"kafka": 0.8}, minute=10))
    scheduler = Scheduler(params)
    wall = T0.replace(year=2030)  # the wall clock is years ahead of the conversation's time
    assert scheduler.idle_due(state, wall) == []  # first sight: idle from now on
    assert scheduler.idle_due(state, wall + timedelta(minutes=59)) == []
    [idle] = scheduler.idle_due(state, wall + timedelta(hours=2, minutes=5))
    # the graph's clock (its last turn, 00:10) plus 2 h 05 of idleness: the window of 02:00
    assert idle.trigger == "idle" and idle.timestamp == T0 + timedelta(hours=2)
    assert scheduler.idle_due(state, wall + timedelta(hours=2, minutes=6)) == []  # emitted, not yet applied


def test_links_a_tick_took_reach_snapshots_and_digests_as_link_records():
    """Links live in their passages but for the `u` records of a pruned
    concept; a version 1 snapshot carried one record per link (format 4's
    layout) and restores the same state, and the digest lists the links
    that are left."""
    state = state_with(
        ingested("g", "t1", {"kafka": 0.8, "lag": 0.3}),
        ingested("g", "t2", {"lag": 0.2, "broker": 0.9}, minute=1),
        tick(4, [PrunedConcept(id="lag", reason="activation", value=0.0)]),
    )
    state.commit()
    stored = list(state.repo.records(G))
    assert [key for key, _ in stored if key.startswith(keys.section(G, b"u"))] == [
        keys.unlinked(G, "t1", "lag"), keys.unlinked(G, "t2", "lag"),
    ] == keys.unlinks(G, [("lag", "t1"), ("lag", "t2")])
    assert state.repo.links(G, [("lag", "t1"), ("kafka", "t1"), ("broker", "t2")]) == {("kafka", "t1"), ("broker", "t2")}
    carried = as_links(stored)
    assert [key for key, _ in carried if key.startswith(keys.section(G, b"s"))] == [
        keys.concept_passage(G, "broker", "t2"), keys.concept_passage(G, "kafka", "t1"),
    ]
    assert not any(key.startswith(keys.section(G, b"u")) for key, _ in carried)
    assert sorted(as_unlinks(carried)) == sorted(stored)
    assert list(link_lines(_Version(state.repo, G))) == ['[["broker","t2"],null]', '[["kafka","t1"],null]']
    restored = PartitionState(MemoryStore(), PARAMS)
    restored.restore("g", in_store_layout(graph_content(state.txn, "g")))
    assert partition_digests(restored.repo) == partition_digests(state.repo)
    sources = lambda view: {cid: view.passage_ids[i] for cid, i in view.index.items()}  # noqa: E731
    assert sources(restored.view("g")) == sources(state.view("g")) == {"kafka": ["t1"], "broker": ["t2"]}


def test_a_snapshot_of_a_state_restores_to_its_very_records():
    """The `pairs` layout and back (`as_pairs`, `as_links`; `as_rows`,
    `as_unlinks`): the store's records, in key order, of a graph whose tick
    pruned a concept, a passage and edges, which the `rows` layout carries
    as they are."""
    state = state_with(
        ingested("g", "t1", {"kafka": 0.8, "lag": 0.3, "broker": 0.5}),
        ingested("g", "t2", {"lag": 0.2, "broker": 0.9}, minute=1),
        ingested("g", "t3", {"kafka": 0.7, "broker": 0.6}, minute=2),
        tick(4, [PrunedConcept(id="lag", reason="activation", value=0.0)]),
    )
    state.commit()
    stored = [(keys.active("g"), state.txn.get(keys.active("g")))] if state.txn.get(keys.active("g")) else []
    stored += [record for prefix in keys.graph_content_prefixes("g") for record in state.txn.scan(prefix)]
    assert as_unlinks(as_rows(graph_content(state.txn, "g"))) == stored == stored_content(state.txn, "g")
