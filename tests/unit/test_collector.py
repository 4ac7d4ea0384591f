"""The cyclic garbage collector is paused while a batch is folded, and never left off."""

import gc

import pytest

from emgas.processors.codec import encode
from emgas.processors.graph import GraphParams
from emgas.replay.fold import FoldCounts, Selection, fold_records
from emgas.replay.reader import LogRecord
from emgas.state import projector
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
    apply_graphs = PartitionState._apply_graphs

    def watched(self, *args):
        seen.append(gc.isenabled())
        return apply_graphs(self, *args)

    monkeypatch.setattr(projector.PartitionState, "_apply_graphs", watched)
    state = PartitionState(MemoryStore(), GraphParams())
    state.apply_batch([(event, k, None) for k, event in enumerate(_events(3))])
    records = [LogRecord(0, k, 0, b"g", encode(event)) for k, event in enumerate(_events(4))]
    fold_records(PartitionState(MemoryStore(), GraphParams()), records, Selection(), FoldCounts())
    assert seen and not any(seen)
    assert gc.isenabled()
