"""The fold with commits, crashes and evictions anywhere gives the graph of one clean pass.

A generated stream (turns of two graphs in any time order, duplicates,
the decay ticks and consolidations a worker emits for them, retrievals
and a forget) is folded twice: once in one pass with a single commit (the
reference), once with commits after arbitrary events and crashes at
arbitrary points (the uncommitted transaction and in-memory graph lost,
the state reopened from the store, the events after its offset delivered
again; the in-memory graphs evicted). Both give the same digests, and each in-memory graph equals the
one loaded from the store it serves. The rules themselves are pinned by
the golden log's digests (`test_golden`).
"""

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emgas.processors.dynamics import DAY_S, DecayParams
from emgas.processors.codec import encode
from emgas.processors.fold_codec import decode_for_fold
from emgas.state import mention_columns
from emgas.processors.events import Boost, Forget, GraphEvent, Retrieved
from emgas.processors.graph import GraphParams, GraphRef
from emgas.state.digest import partition_digests
from emgas.state.memory import MemoryStore
from emgas.state.projector import PartitionState
from emgas.state.view import load_view
from emgas.testing import LocalLog
from tests.support.factories import T0, ingested

# Short lifetimes, so ticks prune concepts, edges and passages within the stream.
PARAMS = GraphParams(
    window_s=3600, consolidate_every_s=DAY_S,
    decay=DecayParams(model="exponential", half_life_s=DAY_S, concept_threshold=0.2, edge_stability_s=DAY_S),
)
WORDS = ["kafka", "lag", "broker", "cat", "dog", "\u732b"]

turn = st.tuples(
    st.sampled_from(["g", "h"]),
    st.integers(0, 11),  # turn ids repeat: duplicates
    st.dictionaries(st.sampled_from(WORDS), st.floats(0.05, 1.0), min_size=1, max_size=4),
    st.integers(0, 8 * 24 * 60),  # minutes: eight days, in any order
)


def stream(turns: list, boosts: list[int], forget: int | None) -> list[GraphEvent]:
    """The turns through a worker (with what it emits), retrievals, a forget."""
    log = LocalLog(PARAMS)
    for k, (graph, tid, concepts, minute) in enumerate(turns):
        log.append(ingested(graph, f"t{tid}", concepts, minute=minute))
        if k in boosts:
            at = T0 + timedelta(minutes=minute)
            log.append(Retrieved(graph_id=graph, graph_version=1, request_id=f"q{k}", timestamp=at,
                                 boosts=tuple(Boost(id=w, amount=0.25) for w in sorted(concepts))))
    if forget is not None:
        log.append(Forget(graph_id="g", request_id="f", timestamp=T0, turn_ids=(f"t{forget}",)))
    return log.log


def folded(events: list[GraphEvent], commits: set[int], crashes: set[int], evictions: frozenset = frozenset()
           ) -> PartitionState:
    """`events` applied at offsets 0.., committing after the offsets in
    `commits`; at each offset in `crashes` (once), everything not committed
    is lost and delivery resumes after the committed offset; after the
    offsets in `evictions`, every in-memory graph is dropped (loaded again
    on its next use)."""
    store = MemoryStore()
    state = PartitionState(store, PARAMS)
    crashed: set[int] = set()
    offset = 0
    while offset < len(events):
        if offset in crashes and offset not in crashed:
            crashed.add(offset)
            state.txn.rollback()
            state = PartitionState(store, PARAMS)  # a restart: the store as of its last commit
            offset = state.committed_offset + 1
            continue
        state.apply(events[offset], offset)
        if offset in commits:
            state.commit()
        if offset in evictions:
            state.views.evict_unused(1)
            state.views.evict_unused(1)  # unused for more than one round: dropped
            assert not state.views.loaded()
        offset += 1
    state.commit()
    return state


def in_memory_equals_stored(state: PartitionState) -> None:
    for ref, view in state.views.items():
        loaded = load_view(state.repo, ref, PARAMS.decay)
        assert view.snapshot() == loaded.snapshot(), ref
        assert {c: sorted(view.passage_ids[i]) for c, i in view.index.items()} == \
            {c: sorted(loaded.passage_ids[i]) for c, i in loaded.index.items()}
        assert view.edges == loaded.edges and view.turns == loaded.turns
        assert {c: view.columns.values(i) for c, i in view.index.items()} == \
            {c: loaded.columns.values(i) for c, i in loaded.index.items()}


# Turns of two graphs (some boosted), perhaps a forget of one of them, and what a test draws from them.
RUN = (
    st.lists(turn, min_size=1, max_size=25), st.sets(st.integers(0, 24), max_size=4), st.none() | st.integers(0, 11),
    st.data(),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*RUN)
def test_commits_and_crashes_anywhere_give_the_reference_fold(turns, boosts, forget, data):
    events = stream(turns, boosts, forget)
    offsets = st.sets(st.integers(0, len(events) - 1), max_size=6)
    commits, crashes = data.draw(offsets, "commits"), data.draw(offsets, "crashes")
    evictions = frozenset(data.draw(offsets, "evictions"))
    reference = folded(events, set(), set())
    state = folded(events, commits, crashes, evictions)
    assert partition_digests(state.repo) == partition_digests(reference.repo)
    assert state.views.keys() == reference.views.keys()
    in_memory_equals_stored(state)
    in_memory_equals_stored(reference)
    assert state.repo.graph_refs() == reference.repo.graph_refs()
    assert all(ref in (GraphRef("g", 1), GraphRef("h", 1)) for ref in state.repo.graph_refs())


def folded_in_batches(
    events: list[GraphEvent], cuts: set[int], crashes: set[int], evictions: frozenset, read: bool = False,
) -> PartitionState:
    """`events` applied with `apply_batch`, cut into batches before the offsets
    in `cuts`, each batch committed; before a batch starting at an offset in
    `crashes` (once), the state is reopened from its store after a batch
    applied but not committed (its events are delivered again); after a batch
    ending at an offset in `evictions`, every in-memory graph is dropped.
    `read`: each event as a reader hands it over (its bytes, decoded for the fold)."""
    store = MemoryStore()
    state = PartitionState(store, PARAMS)
    bounds = sorted({0, len(events)} | {c for c in cuts if 0 < c < len(events)})
    crashed: set[int] = set()
    k = 0
    while k < len(bounds) - 1:
        start, end = bounds[k], bounds[k + 1]
        state.apply_batch([
            (decode_for_fold(encode(event)), offset, encode(event)) if read else (event, offset, None)
            for offset, event in enumerate(events[start:end], start)
        ])
        if start in crashes and start not in crashed:
            crashed.add(start)
            state.txn.rollback()
            state = PartitionState(store, PARAMS)  # the batch is lost: delivered again from the committed offset
            k = max(i for i, b in enumerate(bounds[:-1]) if b <= state.committed_offset + 1)
            continue
        state.commit()
        if end - 1 in evictions:
            state.views.evict_unused(1)
            state.views.evict_unused(1)
        k += 1
    state.commit()
    return state


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*RUN)
def test_batches_of_any_size_and_crashes_between_them_give_the_event_by_event_fold(turns, boosts, forget, data):
    """Batch boundaries never show: the batch fold, cut anywhere, with crashes
    between batches, equals applying one event at a time."""
    check_batches(turns, boosts, forget, data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*RUN)
def test_runs_folded_by_mentions_give_the_event_by_event_fold(turns, boosts, forget, data):
    """The same, with every run's mentions folded one at a time (`Mentions`,
    on values read from the concept columns: a window the kernel cannot take)."""
    saved, mention_columns.columns_apply = mention_columns.columns_apply, lambda params: False
    try:
        check_batches(turns, boosts, forget, data)
    finally:
        mention_columns.columns_apply = saved


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*RUN)
def test_batches_of_events_decoded_for_the_fold_give_the_event_by_event_fold(turns, boosts, forget, data):
    """The same, each event read from its bytes as replay and the workers read it (turns as `TurnRow`s)."""
    check_batches(turns, boosts, forget, data, read=True)


def check_batches(turns, boosts, forget, data, read: bool = False) -> None:
    events = stream(turns, boosts, forget)
    offsets = st.sets(st.integers(0, len(events) - 1), max_size=8)
    cuts, crashes = data.draw(offsets, "cuts"), data.draw(offsets, "crashes")
    evictions = frozenset(data.draw(offsets, "evictions"))
    reference = folded(events, set(), set())
    state = folded_in_batches(events, cuts, crashes, evictions, read)
    assert partition_digests(state.repo) == partition_digests(reference.repo)
    assert state.views.keys() == reference.views.keys()
    in_memory_equals_stored(state)
    assert state.repo.graph_refs() == reference.repo.graph_refs()


def folded_in_pieces(events: list[GraphEvent], cuts: set[int], most: int, evict_at: set[int]) -> PartitionState:
    """`events` cut into batches before the offsets in `cuts`, each folded a
    piece at a time (`PartitionState.batch_pieces`, `most` events a piece at
    most) and committed. At each pause every graph's view is read, as a
    query reads it, and at the pauses counted in `evict_at` every view is
    dropped first (loaded again from the store and the pending writes)."""
    state = PartitionState(MemoryStore(), PARAMS)
    bounds = sorted({0, len(events)} | {c for c in cuts if 0 < c < len(events)})
    pauses = 0
    for start, end in zip(bounds, bounds[1:]):
        batch = [(event, offset, None) for offset, event in enumerate(events[start:end], start)]
        outcomes: list = [None] * len(batch)
        for _ in state.batch_pieces(batch, outcomes, most):
            if pauses in evict_at:
                state.views.evict_unused(1)
                state.views.evict_unused(1)
            for ref in list(state.views):
                state.views[ref].snapshot()
            pauses += 1
        assert None not in outcomes
        state.commit()
    return state


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*RUN)
def test_batches_folded_in_pieces_with_queries_between_give_the_event_by_event_fold(turns, boosts, forget, data):
    """A live worker folds a batch a piece at a time (a graph's events, a few
    at most) and answers queries between pieces: the same graphs as one
    event at a time."""
    events = stream(turns, boosts, forget)
    cuts = data.draw(st.sets(st.integers(0, len(events) - 1), max_size=4), "cuts")
    most = data.draw(st.integers(1, 6), "most")
    evict_at = data.draw(st.sets(st.integers(0, 30), max_size=4), "evictions")
    reference = folded(events, set(), set())
    state = folded_in_pieces(events, cuts, most, evict_at)
    assert partition_digests(state.repo) == partition_digests(reference.repo)
    assert state.views.keys() == reference.views.keys()
    in_memory_equals_stored(state)
