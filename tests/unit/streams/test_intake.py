"""Records in batches: the intake, and the consumer that fills it and acknowledges it (patches, 7)."""

import asyncio
import gc
from collections import namedtuple

import pytest
from faust.types import TP

from emgas.streams.runtime.intake import Intake
from emgas.streams.runtime.patches import App

Record = namedtuple("Record", "topic partition offset key value")


def records(topic: str, partition: int, offsets) -> list[Record]:
    return [Record(topic, partition, o, b"k", f"{topic}@{o}".encode()) for o in offsets]


_CONSUMERS: list = []


@pytest.fixture(autouse=True)
def _close_consumer_loops():
    """Each consumer's thread (never started here) made an event loop of its
    own; closed after the test, not left to the collector (whose finaliser
    then met the loop's socket closed first, an unraisable error in a later test)."""
    yield
    while _CONSUMERS:
        _CONSUMERS.pop()._thread.thread_loop.close()


async def consumer_with(intake: Intake):
    """A worker's consumer (not started) subscribed to the intake's topics, its flow on."""
    app = App("emgas-test", broker="kafka://127.0.0.1:9", fetch_max_wait_ms=100)
    for topic in ("turns", "events"):
        app.topics.add(app.topic(topic))
    await app.topics._update_indices()  # what the subscription does: acknowledgements enabled for them
    app.take_in_batches(intake)
    consumer = app.consumer
    consumer.resume_flow()
    _CONSUMERS.append(consumer)
    return app, consumer


async def test_batches_wait_per_topic_in_order_and_a_take_waits_for_one():
    intake = Intake(["turns", "events"])
    first = intake.put("turns", records("turns", 0, [0, 1]))
    second = intake.put("turns", records("turns", 1, [5]))
    assert await intake.take("turns") is first and await intake.take("turns") is second
    waiting = asyncio.create_task(intake.take("events"))
    await asyncio.sleep(0)
    assert not waiting.done()
    third = intake.put("events", records("events", 0, [9]))
    assert await asyncio.wait_for(waiting, 1) is third


async def test_room_runs_out_at_depth_and_comes_back_when_taken_or_cleared():
    intake = Intake(["turns"], depth=2)
    intake.put("turns", records("turns", 0, [0]))
    assert intake.has_room()
    intake.put("turns", records("turns", 0, [1]))
    assert not intake.has_room()
    await intake.take("turns")
    assert intake.has_room()
    intake.put("turns", records("turns", 0, [2]))
    intake.clear()
    assert intake.has_room() and intake.waiting() == 0


async def test_a_fetch_becomes_one_batch_per_topic_held_until_done():
    intake = Intake(["turns", "events"])
    _, consumer = await consumer_with(intake)
    fetched = {TP("turns", 0): records("turns", 0, [0, 1, 2]), TP("events", 1): records("events", 1, [7, 8]),
               TP("turns", 1): records("turns", 1, [3])}
    await consumer._deliver(intake, fetched, None)
    turns, events = await intake.take("turns"), await intake.take("events")
    assert [(r.partition, r.offset) for r in turns.records] == [(0, 0), (0, 1), (0, 2), (1, 3)]
    assert [r.offset for r in events.records] == [7, 8]
    assert set(consumer._unacked_messages) == {turns, events}  # a rebalance waits for them
    intake.done(turns)
    assert consumer._new_offset(TP("turns", 0)) == 3 and consumer._new_offset(TP("turns", 1)) == 4
    assert consumer._new_offset(TP("events", 1)) is None  # not done: not committed
    consumer._clean_unacked_messages()
    assert set(consumer._unacked_messages) == {events}


async def test_records_read_before_are_dropped_and_a_gap_is_committed_across():
    intake = Intake(["events"])
    _, consumer = await consumer_with(intake)
    tp = TP("events", 0)
    consumer._read_offset[tp] = 4
    await consumer._deliver(intake, {tp: records("events", 0, [2, 3, 4, 5, 9, 10])}, None)
    batch = await intake.take("events")
    assert [r.offset for r in batch.records] == [4, 5, 9, 10] and consumer._read_offset[tp] == 10
    intake.done(batch)
    # 6..8 (no records: a gap) do not hold the commit back. Faust's gap
    # interval also holds 9, so its bookkeeping passes 9 in two steps, as it
    # does for records delivered one by one.
    assert [consumer._new_offset(tp), consumer._new_offset(tp)] == [10, 11]


async def test_partitions_not_active_are_left_out():
    intake = Intake(["events"])
    _, consumer = await consumer_with(intake)
    fetched = {TP("events", 0): records("events", 0, [0]), TP("events", 1): records("events", 1, [0])}
    await consumer._deliver(intake, fetched, {TP("events", 1)})
    assert [r.partition for r in (await intake.take("events")).records] == [1]


async def test_a_stopped_flow_delivers_nothing_and_seeks_back(monkeypatch):
    intake = Intake(["events"])
    _, consumer = await consumer_with(intake)
    consumer.stop_flow()
    sought = []

    async def perform_seek():
        sought.append(True)

    monkeypatch.setattr(consumer, "perform_seek", perform_seek)
    await consumer._deliver(intake, {TP("events", 0): records("events", 0, [0])}, None)
    assert sought == [True] and intake.waiting() == 0


async def test_a_full_intake_holds_the_fetch_until_there_is_room():
    intake = Intake(["events"], depth=1)
    _, consumer = await consumer_with(intake)
    delivering = asyncio.create_task(consumer._deliver(intake, {TP("events", 0): records("events", 0, [0])}, None))
    await asyncio.sleep(0.01)
    assert not delivering.done()
    await intake.take("events")
    await asyncio.wait_for(delivering, 1)


async def test_faust_flow_control_clears_the_intake_and_a_dropped_batch_is_no_longer_in_hand():
    intake = Intake(["events"])
    app, consumer = await consumer_with(intake)
    await consumer._deliver(intake, {TP("events", 0): records("events", 0, [0, 1])}, None)
    app.flow_control.clear()  # what a rebalance does to the agents' buffers
    gc.collect()
    assert intake.waiting() == 0 and not list(consumer._unacked_messages)


@pytest.mark.parametrize("twice", [False, True])
async def test_done_acknowledges_each_offset_once(twice):
    intake = Intake(["events"])
    _, consumer = await consumer_with(intake)
    await consumer._deliver(intake, {TP("events", 0): records("events", 0, [0, 1])}, None)
    batch = await intake.take("events")
    intake.done(batch)
    if twice:
        intake.done(batch)
    assert consumer._acked[TP("events", 0)] == [0, 1] and consumer._n_acked == 2


async def test_take_up_to_merges_the_batches_that_come_within_the_wait_and_no_more_than_asked():
    intake = Intake(["events"], depth=10)
    first = intake.put("events", records("events", 0, [0, 1]))

    async def later() -> None:
        await asyncio.sleep(0.005)
        intake.put("events", records("events", 1, [0]))

    arriving = asyncio.create_task(later())
    taken = await intake.take_up_to("events", most=10, within_s=0.5)
    await arriving
    assert taken[0] is first and [len(b.records) for b in taken] == [2, 1]  # the second came within the wait
    full = [intake.put("events", records("events", 0, range(k * 3, k * 3 + 3))) for k in range(3)]
    assert await intake.take_up_to("events", most=5, within_s=0.5) == full[:2]  # enough records: no more taken
    assert await intake.take_up_to("events", most=10, within_s=0.01) == full[2:]  # nothing more came: the wait ends
