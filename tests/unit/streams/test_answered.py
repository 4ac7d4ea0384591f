"""Which queries a worker answered as owner (streams.runtime.answered), said when it stops and heeded by the next owner."""

import asyncio
import time
from types import SimpleNamespace

import pytest

from emgas.streams.runtime.answered import AnsweredQueries, answered_key
from emgas.streams.runtime.metrics import Metrics
from emgas.streams.runtime.serving import Owners, QueryServer
from tests.support.graph_log import RecordingLog


@pytest.mark.parametrize("steps, through", [
    ([], None),  # nothing read
    ([("read", 4), ("read", 5)], 6),  # answered as read (or left, their clients gone)
    ([("read", 4), ("missed", 4), ("read", 5)], 4),  # covered read-only, or not this worker's: stops there
    ([("read", 4), ("later", 4), ("read", 5)], 4),  # held: its answer is still to come
    ([("read", 4), ("later", 4), ("read", 5), ("done", 4)], 6),  # ... and came
    ([("read", 4), ("later", 4), ("read", 5), ("lost", 4)], 4),  # ... or never will (revoked, stopped)
    ([("read", 4), ("later", 4), ("later", 4), ("done", 4)], 4),  # held, then its digests on a thread
    ([("read", 4), ("later", 4), ("later", 4), ("done", 4), ("done", 4)], 5),
    ([("read", 4), ("missed", 4), ("read", 5), ("read", 6), ("missed", 6)], 4),  # the first miss counts
])
def test_the_offset_before_which_every_query_read_was_answered(steps, through):
    answered = AnsweredQueries()
    for step, offset in steps:
        if step == "read":
            answered.read(0, offset)
        elif step == "missed":
            answered.missed(0, offset)
        elif step == "later":
            answered.later(0, offset)
        else:
            answered.done(0, offset, answered=step == "done")
    assert answered.through(0) == through
    assert answered.through(1) is None


def test_the_owners_board_reads_announcements_and_answered_offsets():
    owners = Owners("w1")
    for key, value in [(b"0", b"w1"), (answered_key(0), b"17"), (b"1/answered", b"3"), (answered_key(0), b"20"),
                       (b"x/answered", b"1"), (b"2/answered", b"many")]:
        owners.read(key, value)
    assert owners.latest == {0: "w1"}
    assert owners.answered == {0: 20, 1: 3}


class _CaughtUpLater:
    """Partition 0 assigned here and catching up until `caught_up` is set."""

    def __init__(self) -> None:
        self.caught_up = asyncio.Event()

    def ready_partitions(self) -> list[int]:
        return [0] if self.caught_up.is_set() else []

    def assigned_partitions(self) -> list[int]:
        return [0]

    async def wait(self, partition: int) -> bool:
        await self.caught_up.wait()
        return True


def _server(metrics: Metrics, log: RecordingLog) -> QueryServer:
    settings = SimpleNamespace(worker_name="w2", partitions=1, query_timeout_s=10.0, owners_topic="o", queries_topic="q")
    query_server = QueryServer(settings, None, _CaughtUpLater(), metrics, log)  # type: ignore[arg-type]
    query_server._since_ms = 1000 * time.time() - 60_000
    return query_server


def _query(offset: int) -> SimpleNamespace:
    return SimpleNamespace(partition=0, offset=offset, timestamp=1000 * time.time(), key=b"%d" % offset, value=b"{}",
                           headers=())


def test_a_takeover_answers_only_the_queries_its_predecessor_did_not():
    # The stopped owner said it answered partition 0 before offset 2; the
    # owners topic is read while the new owner catches up.
    metrics, log, answered = Metrics(), RecordingLog(), []
    query_server = _server(metrics, log)

    async def answer(record, covering):
        answered.append((record.offset, covering))

    query_server._answer = answer  # type: ignore[method-assign]

    async def scenario() -> None:
        for offset in range(4):
            await query_server._take("q", _query(offset))
        await query_server._take("o", SimpleNamespace(key=answered_key(0), value=b"2"))
        query_server.recovery.caught_up.set()
        await asyncio.gather(*query_server._held)
        await query_server._take("q", _query(4))  # ready now: answered at once

    asyncio.run(scenario())
    assert answered == [(2, False), (3, False), (4, False)]
    assert metrics.answered_before._value.get() == 2


@pytest.mark.parametrize("said_before, covered, says", [
    (None, None, b"6"),  # every query read was answered as owner
    (None, 5, b"5"),  # the one at 5 only read-only (covering): stops there
    (b"6", None, None),  # nothing new to say
])
def test_a_worker_that_stops_says_up_to_which_query_it_answered(said_before, covered, says):
    metrics, log = Metrics(), RecordingLog()
    query_server = _server(metrics, log)
    query_server.recovery.caught_up.set()
    query_server._served_here.add(0)
    query_server.owners.latest[0] = "w2"
    if said_before is not None:
        query_server.owners.read(answered_key(0), said_before)

    async def answer(record, covering):
        pass

    query_server._answer = answer  # type: ignore[method-assign]

    async def scenario() -> None:
        for offset in range(3, 6):
            if offset == covered:  # revoked: covered while the new owner catches up
                query_server.recovery.ready_partitions = lambda: []
            await query_server._take("q", _query(offset))
        await query_server.stop()

    asyncio.run(scenario())
    assert log.sent == ([] if says is None else [("o", b"0/answered", says)])


def test_a_held_query_cancelled_when_serving_ends_is_not_said_to_be_answered():
    metrics, log = Metrics(), RecordingLog()
    query_server = _server(metrics, log)
    query_server._served_here.add(0)

    async def scenario() -> None:
        await query_server._take("q", _query(7))  # held: the partition is still catching up
        for task in query_server._held:
            task.cancel()
        await asyncio.gather(*query_server._held, return_exceptions=True)
        await query_server.stop()

    asyncio.run(scenario())
    assert query_server.answered.through(0) == 7
    assert log.sent == [("o", b"0/answered", b"7")]
