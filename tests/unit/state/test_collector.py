"""The cyclic garbage collector is paused while a batch is folded, and never left off."""

import gc
import weakref

import pytest

from emgas.processors.codec import encode
from emgas.processors.graph import GraphParams, GraphRef
from emgas.replay.fold import FoldCounts, Selection, fold_records
from emgas.replay.reader import LogRecord
from emgas.state import keys, projector
from emgas.state.collector import collector_paused
from emgas.state.memory import MemoryStore
from emgas.state.projector import PartitionState
from tests.support.factories import ingested


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("enabled_before", [True, False])
def test_paused_inside_and_as_it_was_after(enabled_before):
    (gc.enable if enabled_before else gc.disable)()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # nested: the inner one leaves it to the outer
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled() is enabled_before


def test_enabled_again_when_the_batch_raises():
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("a rule's bug")
    assert gc.isenabled()


def _events(n: int) -> list:
    return [ingested("g", f"t{k}", {"kafka": 0.8, f"c{k % 5}": 0.5}, minute=k) for k in range(n)]


def test_a_batch_and_a_replay_fold_with_the_collector_paused(monkeypatch):
    seen = []
    apply_graph = PartitionState._apply_graph

    def watched(self, *args):
        seen.append(gc.isenabled())
        return apply_graph(self, *args)

    monkeypatch.setattr(projector.PartitionState, "_apply_graph", watched)
    state = PartitionState(MemoryStore(), GraphParams())
    state.apply_batch([(event, k, None) for k, event in enumerate(_events(3))])
    records = [LogRecord(0, k, 0, b"g", encode(event)) for k, event in enumerate(_events(4))]
    fold_records(PartitionState(MemoryStore(), GraphParams()), records, Selection(), FoldCounts())
    assert seen and not any(seen)
    assert gc.isenabled()


def test_a_state_and_its_views_let_go_of_are_freed_without_the_collector():
    """No reference cycle holds them (a forget's scratch state is a whole
    graph re-folded: the collector would traverse all of it to free it)."""
    gc.disable()
    state = PartitionState(MemoryStore(), GraphParams())
    state.apply_batch([(ingested("g", f"t{k}", {"kafka": 0.5, "lag": 0.3, f"w{k}": 0.2}), k, None) for k in range(3)])
    view = state.view("g")
    assert view is not None and view.edges > 0
    freed_state, freed_view, freed_txn = weakref.ref(state), weakref.ref(view), weakref.ref(state.txn)
    state.views.pop(view.ref)
    del view
    assert freed_view() is None
    del state
    assert freed_state() is None and freed_txn() is None


def test_a_repository_kept_alone_still_settles_its_views():
    """The transaction holds the views: what they keep is staged even once the state is let go of."""
    state = PartitionState(MemoryStore(), GraphParams())
    state.apply_batch([(ingested("g", "t1", {"kafka": 0.5, "lag": 0.3}), 0, None)])
    repo = state.repo
    del state
    stored = dict(repo.store.scan(b""))  # a scan settles the views' changes first
    assert keys.row(GraphRef("g", 1), "kafka") in stored


def test_a_worker_step_folds_its_whole_batch_with_the_collector_paused(monkeypatch):
    """`PartitionSteps.on_graph_events` (the in-process driver's step) as `apply_batch`:
    paused from the batch's first event to its last, not only inside each piece."""
    from datetime import datetime, timezone

    from emgas.service.steps import PartitionSteps

    seen = []
    scan = PartitionState.batch_pieces

    def watched(self, *args):
        for step in scan(self, *args):
            seen.append(gc.isenabled())  # between two pieces
            yield step

    monkeypatch.setattr(projector.PartitionState, "batch_pieces", watched)
    events = [ingested(g, f"t{k}", {"kafka": 0.8}, minute=k) for k, g in enumerate("ghgh")]
    worker = PartitionSteps(PartitionState(MemoryStore(), GraphParams()), GraphParams())
    worker.on_graph_events([(event, k, None) for k, event in enumerate(events)], datetime(2026, 6, 1, tzinfo=timezone.utc))
    assert seen and not any(seen)
    assert gc.isenabled()
