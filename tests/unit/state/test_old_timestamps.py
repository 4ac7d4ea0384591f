"""Old timestamps never erase new memories (issue 25).

A turn can arrive long after its event time (an import of past chats, a
backfill, a client with a wrong clock) and Kafka gives no order across
producers. Its contributions count as old as they are: they add to what
they mention but never age it, and what the graph's newest turns mention
survives the next tick whatever arrived in between.
"""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.dynamics import DAY_S, DecayParams, seconds
from emgas.processors.events import Concept, TurnIngested
from emgas.processors.graph import (
    ConceptState, GraphMeta, GraphParams, concept_after_mention, concept_after_retrieval, on_grid, with_contribution,
)
from emgas.processors.pruning import PairState, edge_end_s, outlived_its_edges
from emgas.state.digest import graph_digest
from emgas.state.memory import MemoryStore
from emgas.state.projector import PartitionState
from emgas.testing import LocalLog

NOW = datetime(2026, 11, 23, 10, 30, tzinfo=timezone.utc)  # 30 minutes into a window
EXP = DecayParams(model="exponential", half_life_s=10 * DAY_S)
HOURLY = GraphParams(window_s=3600, decay=EXP)


def concept(activation: float = 1.0, at: datetime = NOW, **more) -> ConceptState:
    return ConceptState(id="c", text="c", count=1, base_activation=activation, created_at=at, last_accessed=at, **more)


@pytest.mark.parametrize(
    ("contributed_at", "params", "activation", "reference"),
    [
        # an earlier window: decayed from its own time to the reference, which stays
        (NOW - timedelta(days=10), HOURLY, 1.0 + 0.5 * 0.5, NOW),
        (NOW - timedelta(days=365 * 56), HOURLY, 1.0, NOW),  # 1970: adds nothing left
        # the same window: simultaneous (any order of a window's turns folds alike)
        (NOW - timedelta(minutes=20), HOURLY, 1.5, NOW),
        (NOW + timedelta(minutes=20), HOURLY, 1.5, NOW),
        # the next window or the one after: taken as of the reference (a tick is on its way)
        (NOW + timedelta(minutes=149), HOURLY, 1.5, NOW),
        (NOW + timedelta(minutes=150), HOURLY, on_grid(2 ** (-9000 / (10 * DAY_S))) + 0.5, NOW + timedelta(minutes=150)),
        # further ahead: the concept first comes to the start of the contribution's window
        (NOW + timedelta(days=10, minutes=10), HOURLY, on_grid(2 ** (-(10 * DAY_S - 1800) / (10 * DAY_S))) + 0.5,
         NOW + timedelta(days=10) - timedelta(minutes=30)),
        # no windows: older is older by any amount; nothing is brought forward
        (NOW - timedelta(days=10), HOURLY.model_copy(update={"window_s": 0}), 1.25, NOW),
        (NOW + timedelta(days=10), HOURLY.model_copy(update={"window_s": 0}), 1.5, NOW),
    ],
)
def test_a_contribution_counts_from_its_own_time(contributed_at, params, activation, reference):
    after = with_contribution(concept(), 0.5, contributed_at, GraphMeta(), params, contributed_at)
    assert after.base_activation == pytest.approx(activation, abs=1e-9)
    assert after.decay_reference == reference


def test_a_late_old_mention_keeps_the_reference_and_records_the_earliest_mention():
    old = NOW - timedelta(days=365 * 56)
    after = concept_after_mention(concept(), "c", "c", 0.5, old, HOURLY, GraphMeta())
    assert (after.count, after.created_at, after.last_accessed, after.decay_reference) == (2, old, NOW, NOW)


def test_a_retrieval_is_never_brought_past_the_graphs_clock():
    """A query's wall time can be years after a conversation's event time."""
    meta = GraphMeta(turns=1, first_seen=NOW, clock=NOW)
    after = concept_after_retrieval(concept(), 0.25, NOW + timedelta(days=900), meta, HOURLY)
    assert (after.base_activation, after.decay_reference) == (1.25, NOW)


DEFAULT = DecayParams()  # edges: S = 90 days per co-occurrence, θ_e = 0.05
YEAR = timedelta(days=365)


@pytest.mark.parametrize(
    ("mentioned", "lost", "outlived"),
    [
        # an old turn's edge (it would have gone in ~270 days) lost after a mention now
        (NOW, [(PairState(1, NOW - 3 * YEAR), None)], True),
        # one lost edge still alive at the mention: isolated as always
        (NOW, [(PairState(1, NOW - 3 * YEAR), None), (PairState(1, NOW - timedelta(days=1)), None)], False),
        # its partner's activation reached θ years ago, before the edge would have expired
        (NOW, [(PairState(9, NOW - 2 * YEAR), concept(0.02, NOW - 2 * YEAR))], True),
        # mentioned only together with what it loses: a leftover of those associations
        (NOW - 3 * YEAR, [(PairState(1, NOW - 3 * YEAR), None)], False),
        (NOW, [], False),
    ],
)
def test_a_concept_is_not_isolated_by_edges_that_ended_before_its_newest_mention(mentioned, lost, outlived):
    assert outlived_its_edges(concept(at=mentioned), lost, DEFAULT) is outlived


def test_a_retrieval_does_not_count_as_a_mention_for_isolation():
    retrieved = concept(at=NOW - 3 * YEAR).model_copy(update={"last_accessed": NOW, "last_retrieved": NOW, "retrievals": 1})
    assert not outlived_its_edges(retrieved, [(PairState(1, NOW - 3 * YEAR), None)], DEFAULT)


def test_an_edge_ends_at_its_lifetime_or_its_partners_due_time():
    pair = PairState(1, NOW)
    assert edge_end_s(pair, None, DEFAULT) == pytest.approx(seconds(NOW) + 90 * DAY_S * 2.995732, rel=1e-6)
    assert edge_end_s(pair, concept(0.01, NOW), DEFAULT) == seconds(NOW)


# -- the property: any arrival order ------------------------------------------------------

VOCABULARY = ["dog", "beach", "sister", "leeds", "bread", "lisbon"]
HORIZON = timedelta(days=2)
# Within HORIZON of the clock, with the windows' slack (a contribution is
# taken up to three windows early) and any number of intermediate
# references, importance ≥ 0.2 stays above θ = 0.01 in every decay model
# (power law: ≥ 0.2·exp(-β·(2 days + 3 h)/τ) ≈ 0.07) and an edge's
# retention above θ_e (exp(-2/90)).
PROPERTY_PARAMS = GraphParams(window_s=3600, consolidate_every_s=0)


@st.composite
def turns(draw):
    """Turns said within HORIZON of the newest one, and old ones (5-50 years before)."""
    count = draw(st.integers(2, 9))
    out = []
    for n in range(count):
        ids = draw(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=3, unique=True))
        if draw(st.booleans()):
            at = NOW - timedelta(minutes=draw(st.integers(0, int(HORIZON.total_seconds() // 60))))
        else:
            at = NOW - timedelta(days=draw(st.integers(5 * 365, 50 * 365)), minutes=draw(st.integers(0, 1440)))
        concepts = tuple(Concept(id=c, text=c, importance=draw(st.floats(0.2, 1.0))) for c in ids)
        out.append(TurnIngested(
            graph_id="g", turn_id=f"t{n}", speaker="user", text=" ".join(ids), timestamp=at,
            language="en", extractor="test", concepts=concepts,
        ))
    return draw(st.permutations(out))  # the arrival order


def recent(applied: list[TurnIngested]) -> tuple[set[str], set[tuple[str, str]]]:
    """The concepts and pairs whose newest mention is within HORIZON of the clock."""
    clock = max(t.timestamp for t in applied)
    newest_concept: dict[str, datetime] = {}
    newest_pair: dict[tuple[str, str], datetime] = {}
    for turn in applied:
        ids = sorted(c.id for c in turn.concepts)
        for cid in ids:
            newest_concept[cid] = max(newest_concept.get(cid, turn.timestamp), turn.timestamp)
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                newest_pair[(a, b)] = max(newest_pair.get((a, b), turn.timestamp), turn.timestamp)
    return (
        {c for c, t in newest_concept.items() if clock - t <= HORIZON},
        {p for p, t in newest_pair.items() if clock - t <= HORIZON},
    )


@settings(max_examples=150, deadline=None)
@given(turns())
def test_in_any_arrival_order_nothing_recent_is_pruned_and_the_log_folds_alike(arrivals):
    log = LocalLog(PROPERTY_PARAMS)
    applied: list[TurnIngested] = []
    for turn in arrivals:
        log.append(turn)  # and the ticks it makes due
        applied.append(turn)
        ref = log.state.ref("g")
        held = log.state.repo.concepts(ref, VOCABULARY)
        concepts, pairs = recent(applied)
        assert concepts <= set(held), f"pruned though recent: {sorted(concepts - set(held))}"
        assert pairs <= set(log.state.repo.pairs(ref, sorted(pairs))), "a recent edge was pruned"
    log.tick("g", max(t.timestamp for t in applied) + timedelta(hours=1))
    ref = log.state.ref("g")
    concepts, pairs = recent(applied)
    assert concepts <= set(log.state.repo.concepts(ref, VOCABULARY))
    assert pairs <= set(log.state.repo.pairs(ref, sorted(pairs)))
    replayed = PartitionState(MemoryStore(), PROPERTY_PARAMS)
    for offset, event in enumerate(log.log):
        replayed.apply(event, offset)
    assert graph_digest(replayed.repo, ref) == graph_digest(log.state.repo, ref)
