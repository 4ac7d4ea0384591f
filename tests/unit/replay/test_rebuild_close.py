"""A rebuild's partitions hashed, then closed: each close (RocksDB's flush)
on a thread beside the next partition's digests (`rebuild.closed_with_digests`)."""

import pytest

from emgas.processors.graph import GraphParams
from emgas.replay.rebuild import closed_with_digests, open_rebuild_state
from emgas.state.digest import partition_digests
from emgas.state.errors import StoreClosed
from tests.support.factories import ingested


def test_every_partition_is_hashed_then_closed_and_its_store_written(tmp_path):
    open_state = open_rebuild_state(tmp_path / "rebuilt", GraphParams())
    for partition, graph in enumerate(["g", "h", "k"]):
        state = open_state(partition)
        for offset, minute in enumerate((1, 5)):
            state.apply(ingested(graph, f"t{minute}", {"kafka": 0.5, f"w{minute}": 0.4}, minute=minute), offset)
        state.commit()
    expected = {p: partition_digests(open_state(p).repo) for p in range(3)}
    assert closed_with_digests(open_state, range(3), None) == expected
    for partition in range(3):
        with pytest.raises(StoreClosed):
            open_state(partition).repo.store.get(b"x")
    reopened = open_rebuild_state(tmp_path / "rebuilt", GraphParams())  # each store flushed as it closed
    assert {p: partition_digests(reopened(p).repo) for p in range(3)} == expected
    for partition in range(3):
        reopened(partition).close()


def test_a_store_that_fails_to_close_says_so(tmp_path, monkeypatch):
    open_state = open_rebuild_state(tmp_path / "rebuilt", GraphParams())
    state = open_state(0)

    def fails() -> None:
        raise OSError("the disk went away")

    monkeypatch.setattr(state, "close", fails)
    with pytest.raises(OSError, match="the disk went away"):
        closed_with_digests(open_state, [0], None)
