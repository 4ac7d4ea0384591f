"""The apply agent folds a batch a piece at a time, answering between pieces
(`streams.runtime.app.Agents.apply_batch`), and while it does, the partition
is neither committed, nor hashed, nor caught up (`PartitionStates.folding`)."""

import asyncio
from datetime import datetime, timezone
from types import SimpleNamespace

from emgas.processors.codec import encode
from emgas.processors.graph import GraphParams
from emgas.streams.runtime import app
from emgas.streams.runtime.partitions import PartitionStates
from emgas.streams.settings import Settings
from tests.support.factories import ingested

GRAPHS = ["g", "h", "k"]
WALL = datetime(2026, 6, 1, tzinfo=timezone.utc)


def a_batch(turns: int) -> list:
    """`turns` turns over three graphs, interleaved, as (event, offset, bytes)."""
    events = [ingested(GRAPHS[k % 3], f"t{k}", {"kafka": 0.5, f"w{k % 7}": 0.4}, minute=k) for k in range(turns)]
    return [(event, offset, encode(event)) for offset, event in enumerate(events)]


def agents_on(states: PartitionStates) -> app.Agents:
    async def ready(partition: int) -> bool:
        return True

    counter = SimpleNamespace(inc=lambda n=1: None)
    metrics = SimpleNamespace(applied=SimpleNamespace(labels=lambda *labels: counter))
    return app.Agents(Settings(), states, recovery=SimpleNamespace(wait=ready), metrics=metrics, log=None,
                      sealer=None, extraction=None)


def test_queries_are_answered_between_the_pieces_of_a_batch_and_digests_wait_for_its_end(tmp_path, monkeypatch):
    monkeypatch.setattr(app, "APPLY_PAUSE_S", 0.0)  # a turn of the loop after every piece
    monkeypatch.setattr(app, "APPLY_PIECE", 4)
    states = PartitionStates(tmp_path, GraphParams())
    agents = agents_on(states)
    added = []
    checkpoint = SimpleNamespace(add=lambda worker, due: added.append(worker))
    seen = []  # what a query finds at each of its turns: (folding, read, turns of each graph)

    async def queries(done: asyncio.Event) -> None:
        while not done.is_set():
            state = states.get(0)
            seen.append((states.is_folding(0), states.reading(0), [state.repo.meta(state.ref(g)).turns for g in GRAPHS]))
            await asyncio.sleep(0)

    async def digest(order: list) -> None:
        await asyncio.sleep(0)
        await states.settled(0)
        order.append(("digest", states.is_folding(0), states.get(0).applied_offset))

    async def scenario() -> list:
        done, order = asyncio.Event(), []
        asking = asyncio.create_task(queries(done))
        hashing = asyncio.create_task(digest(order))
        await agents.apply_batch(0, a_batch(60), checkpoint)
        order.append(("batch done", states.is_folding(0), states.get(0).applied_offset))
        done.set()
        await asking
        await hashing
        return order

    order = asyncio.run(scenario())
    folding = [turns for busy, read, turns in seen if busy]
    assert len(folding) >= 10 and all(read for busy, read, _ in seen if busy)  # answered between pieces, never committed
    assert any(min(turns) < max(turns) for turns in folding)  # graphs at offsets of their own meanwhile
    state = states.get(0)
    assert [state.repo.meta(state.ref(g)).turns for g in GRAPHS] == [20, 20, 20]
    assert order[0] == ("batch done", False, 59) and order[1] == ("digest", False, 59)
    assert added == [states.worker(0)] and not states.reading(0)


def test_settled_returns_at_once_when_nothing_is_folded(tmp_path):
    states = PartitionStates(tmp_path, GraphParams())

    async def check() -> bool:
        await asyncio.wait_for(states.settled(3), 1.0)
        with states.folding(3):
            waiting = asyncio.create_task(states.settled(3))
            await asyncio.sleep(0.01)
            still = not waiting.done()
        await asyncio.wait_for(waiting, 1.0)
        return still

    assert asyncio.run(check())
    assert not states.reading(3) and not states.is_folding(3)


def test_a_batch_stopped_part_way_leaves_the_state_at_its_last_commit(tmp_path, monkeypatch):
    """The worker stopping cancels the apply agent, maybe between two pieces:
    the partition's state then holds some graphs' events of the batch and
    not others, at no offset of the log. It goes back to its last commit
    (nothing of the batch is committed), so the restart reads the batch again."""
    monkeypatch.setattr(app, "APPLY_PAUSE_S", 0.0)
    monkeypatch.setattr(app, "APPLY_PIECE", 4)
    states = PartitionStates(tmp_path, GraphParams())
    agents = agents_on(states)
    first = a_batch(60)
    states.worker(0).on_graph_events([(e, o, b) for e, o, b in first[:6]], WALL)
    states.get(0).commit()  # committed at offset 5

    async def stopped_part_way() -> None:
        folding = asyncio.create_task(agents.apply_batch(0, first[6:], SimpleNamespace(add=None)))
        while True:  # until some graph has more of the batch than another
            await asyncio.sleep(0)
            state = states.get(0)
            turns = [state.repo.meta(state.ref(g)).turns for g in GRAPHS]
            if min(turns) < max(turns):
                break
        folding.cancel()
        try:
            await folding
        except asyncio.CancelledError:
            pass

    asyncio.run(stopped_part_way())
    assert not states.is_folding(0) and not states.reading(0)
    states.close(commit=True)  # a clean stop commits what it holds: the batch is not in it
    reopened = PartitionStates(tmp_path, GraphParams()).get(0)
    assert reopened.applied_offset == 5
    assert [reopened.repo.meta(reopened.ref(g)).turns for g in GRAPHS] == [2, 2, 2]


def test_closing_does_not_commit_a_partition_part_way_through_a_batch(tmp_path):
    states = PartitionStates(tmp_path, GraphParams())
    steps = states.worker(0).fold_steps(a_batch(12), WALL, 2)
    next(steps)  # one piece of the batch folded, the rest not
    states._folding[0] = asyncio.Event()  # as `folding` marks it while the agent pauses
    states.close(commit=True)
    assert PartitionStates(tmp_path, GraphParams()).get(0).applied_offset == -1


def test_a_partition_is_committed_when_idle_only(tmp_path):
    """`commit_if_idle` (a catch-up's commit, a moment after it serves)
    commits nothing while a batch is folded or a thread reads the state."""
    states = PartitionStates(tmp_path, GraphParams())
    assert states.commit_if_idle(0) is True  # nothing open: nothing to commit
    state = states.get(0)
    for event, offset, raw in a_batch(3):
        state.apply(event, offset, raw=raw)
    assert state.uncommitted
    with states.folding(0):
        assert states.commit_if_idle(0) is False and state.uncommitted
    assert states.commit_if_idle(0) is True
    assert not state.uncommitted and state.committed_offset == 2
    states.close()
