"""Who answers a partition's queries (streams.runtime.serving): the owners board and the hand-over."""

import asyncio
import time
from types import SimpleNamespace

import pytest

from emgas.streams.runtime.serving import Owners, QueryServer
from tests.support.graph_log import RecordingLog


def test_the_latest_announcement_of_a_partition_names_who_answers_it():
    owners = Owners("w1")
    for key, value in [(b"0", b"w1"), (b"1", b"w2"), (b"0", b"w3"), (b"x", b"w9"), (None, b"w9")]:
        owners.read(key, value)
    assert owners.latest == {0: "w3", 1: "w2"}
    assert not owners.announced_here(0) and owners.announced_elsewhere(0)
    assert not owners.announced_elsewhere(5)  # never announced: nobody else answers it


def server(me: str, announcements: dict[int, str]) -> QueryServer:
    settings = SimpleNamespace(worker_name=me, partitions=3)
    query_server = QueryServer(settings, None, None, None, RecordingLog())  # type: ignore[arg-type]
    query_server.owners.latest = dict(announcements)
    return query_server


@pytest.mark.parametrize("announcements, leaves, kept", [
    ({0: "w1", 1: "w1", 2: "w1"}, False, [0, 1, 2]),  # alone: stops at once, nothing to hand over to
    ({}, False, []),  # never announced anything
])
def test_a_worker_with_no_one_to_hand_over_to_stops_at_once(announcements, leaves, kept):
    left = []

    async def leave() -> None:
        left.append(True)

    query_server = server("w1", announcements)
    assert asyncio.run(query_server.hand_over(leave, timeout_s=30)) == kept
    assert bool(left) == leaves and query_server.leaving


def test_a_worker_hands_over_until_the_new_owners_have_announced():
    query_server = server("w1", {0: "w1", 1: "w2"})

    async def scenario() -> list[int]:
        async def new_owner_announces() -> None:
            await asyncio.sleep(0.1)
            query_server.owners.read(b"0", b"w2")

        announcing = asyncio.create_task(new_owner_announces())
        async def leave() -> None:
            pass

        kept = await query_server.hand_over(leave, timeout_s=5)
        await announcing
        return kept

    assert asyncio.run(scenario()) == []  # handed over


class _Recovery:
    """Partition 0 ready, 1 and 2 assigned and catching up until `catch_up`, 3 not assigned."""

    def __init__(self) -> None:
        self.caught_up = asyncio.Event()

    def ready_partitions(self) -> list[int]:
        return [0, 1, 2] if self.caught_up.is_set() else [0]

    def assigned_partitions(self) -> list[int]:
        return [0, 1, 2]

    async def wait(self, partition: int) -> bool:
        await self.caught_up.wait()
        return True


@pytest.mark.parametrize("partition, announced, served, now, later", [
    (0, "w1", True, [("answer", False)], []),  # ready here
    (1, "w1", True, [("answer", True)], []),  # announced by this process, catching up again: covered read-only
    (1, "w1", False, [], [("answer", False)]),  # announced before a restart: its state lags, held until caught up
    (1, "w2", False, [], [("answer", False)]),  # a takeover from w2 (maybe gone): held until caught up
    (2, None, False, [], [("answer", False)]),  # a first start: held until caught up
    (3, "w2", False, [], []),  # not ours: its owner answers
])
def test_who_answers_a_query_and_when(partition, announced, served, now, later):
    query_server = server("w1", {} if announced is None else {partition: announced})
    if served:
        query_server._served_here.add(partition)
    query_server.settings.queries_topic, query_server.settings.owners_topic = "q", "o"
    query_server.settings.query_timeout_s = 10.0
    query_server.recovery = recovery = _Recovery()
    answered: list[tuple[str, bool]] = []

    async def answer(record, covering):
        answered.append(("answer", covering))

    query_server._answer = answer
    sent_ms = 1000 * time.time()
    record = SimpleNamespace(partition=partition, offset=0, timestamp=sent_ms, key=b"r", value=b"{}", headers=())

    async def scenario() -> tuple[list, list]:
        query_server._since_ms = sent_ms - 1
        await query_server._take("q", record)
        await asyncio.sleep(0)
        before = list(answered)
        recovery.caught_up.set()
        await asyncio.gather(*query_server._held)
        return before, answered[len(before):]

    assert asyncio.run(scenario()) == (now, later)


@pytest.mark.parametrize("age_s, waits_s, answered", [
    (0.5, None, True), (9.0, None, True), (11.0, None, False), (600.0, None, False),
    (0.5, 1.0, True), (2.0, 1.0, False),  # its client said it waits 1 s (`streams.kafka.requests`)
    (11.0, 60.0, False),  # ... and never longer than the worker's query timeout
])
def test_a_query_older_than_its_clients_wait_or_the_query_timeout_is_not_answered(age_s, waits_s, answered):
    # Its client has given up: answering it would only delay the queries behind it.
    import time

    from emgas.streams.kafka.requests import timeout_header

    from emgas.streams.runtime.metrics import Metrics

    settings = SimpleNamespace(worker_name="w1", partitions=3, query_timeout_s=10.0, owners_topic="emgas.owners")
    metrics = Metrics()
    query_server = QueryServer(settings, None, SimpleNamespace(ready_partitions=lambda: [0]), metrics,  # type: ignore[arg-type]
                               RecordingLog())
    taken = []

    async def answer(record, covering):
        taken.append(record)

    query_server._answer = answer  # type: ignore[method-assign]
    headers = () if waits_s is None else timeout_header(waits_s)
    record = SimpleNamespace(partition=0, offset=0, timestamp=int((time.time() - age_s) * 1000), value=b"{}", headers=headers)
    asyncio.run(query_server._take("emgas.queries", record))
    assert bool(taken) == answered
    assert metrics.expired._value.get() == (0 if answered else 1)


def test_a_query_held_through_a_catch_up_longer_than_its_timeout_is_not_answered():
    # A takeover that held queries for longer than their clients wait: the
    # stale ones would delay the fresh ones, asked again, behind them.
    from emgas.streams.runtime.metrics import Metrics

    settings = SimpleNamespace(worker_name="w1", partitions=3, query_timeout_s=10.0, owners_topic="o",
                               queries_topic="q")
    metrics = Metrics()
    query_server = QueryServer(settings, None, _Recovery(), metrics, RecordingLog())  # type: ignore[arg-type]
    taken = []

    async def answer(record, covering):
        taken.append(record.key)

    query_server._answer = answer  # type: ignore[method-assign]
    now_ms = 1000 * time.time()
    stale = SimpleNamespace(partition=1, offset=0, timestamp=now_ms - 4000, key=b"stale", value=b"{}", headers=())
    fresh = SimpleNamespace(partition=1, offset=1, timestamp=now_ms - 1000, key=b"fresh", value=b"{}", headers=())

    async def scenario() -> None:
        query_server._since_ms = now_ms - 60_000
        await query_server._take("q", stale)
        await query_server._take("q", fresh)
        settings.query_timeout_s = 2.0  # the catch-up outlasted the first one's timeout, not the second's
        query_server.recovery.caught_up.set()
        await asyncio.gather(*query_server._held)

    asyncio.run(scenario())
    assert taken == [b"fresh"] and metrics.expired._value.get() == 1


@pytest.mark.parametrize("announced, assigned, busy, released", [
    ("w2", [], False, True),  # revoked here and announced by its new owner: closed
    ("w1", [], False, False),  # revoked, its new owner not announced yet: kept, to cover its queries
    (None, [], False, False),  # never announced: kept
    ("w2", [0], False, False),  # assigned here again (catching up): kept
    ("w2", [], True, False),  # a thread works on it: kept until it ends
])
def test_a_partition_announced_elsewhere_has_its_state_committed_and_closed(
    tmp_path, monkeypatch, announced, assigned, busy, released
):
    from emgas.processors.graph import GraphParams
    from emgas.streams.runtime import partitions, serving
    from emgas.streams.runtime.partitions import PartitionStates

    trims, dropped = [], []
    monkeypatch.setattr(serving, "return_freed_memory", lambda: trims.append(1) or True)
    monkeypatch.setattr(partitions, "drop_vectors", lambda state: dropped.append(state) or 0)

    states = PartitionStates(tmp_path, GraphParams())
    state = states.get(0)
    state.txn.put(b"probe", b"1")  # applied, not committed yet
    query_server = server("w1", {} if announced is None else {0: announced})
    query_server.states = states
    query_server.recovery = SimpleNamespace(assigned_partitions=lambda: assigned)
    query_server._served_here.add(0)
    if busy:
        states._busy[0] += 1
    query_server._release_handed_over()
    assert (states.open_partitions() == []) == released
    assert (0 in query_server._served_here) != released
    assert bool(trims) == released  # the freed memory goes back to the system only when something was freed
    assert bool(dropped) == released  # and the partition's graphs' concept vectors with it
    if released:
        assert states.get(0).txn.store.get(b"probe") == b"1"  # committed before it was closed; reopened on use
    states.close()


def test_freed_memory_is_handed_back_where_the_c_library_can():
    import ctypes.util

    from emgas.streams.c_heap import return_freed_memory

    glibc = "libc.so" in (ctypes.util.find_library("c") or "")  # Linux with glibc has malloc_trim; musl and macOS not
    assert return_freed_memory() is glibc


def test_work_in_a_thread_keeps_a_partition_open_until_the_thread_ends(tmp_path):
    import threading

    from emgas.processors.graph import GraphParams
    from emgas.streams.runtime.partitions import PartitionStates

    states = PartitionStates(tmp_path, GraphParams())
    states.get(0)
    go = threading.Event()

    async def scenario() -> list[bool]:
        work = asyncio.ensure_future(states.in_thread(0, lambda: go.wait(5)))
        await asyncio.sleep(0.05)
        work.cancel()  # the caller gives up; the thread goes on
        await asyncio.sleep(0.05)
        during = states.release(0)
        go.set()
        while states._busy[0] > 0:
            await asyncio.sleep(0.01)
        return [during, states.release(0)]

    assert asyncio.run(scenario()) == [False, True]
    states.close()


def test_only_a_partitions_digests_outlive_the_query_timeout_in_the_servers_queue():
    from emgas.processors.codec import encode
    from emgas.processors.events import ActivationQuery, DigestQuery
    from emgas.streams.runtime.serving import _asks_digests

    assert _asks_digests(encode(DigestQuery(request_id="d")))
    assert not _asks_digests(encode(DigestQuery(request_id="d", graph_id="alice")))  # one graph: answered inline
    assert not _asks_digests(encode(ActivationQuery(request_id="q", graph_id="alice", text="cats")))
    assert not _asks_digests(b"{not json")


@pytest.mark.parametrize("age_s, waits_s, answered", [
    (600.0, None, True),  # no header: a partition's digests are never given up
    (20.0, 30.0, True),  # its client waits longer than the query timeout: kept that long
    (40.0, 30.0, False),  # ... and no longer
])
def test_a_partitions_digests_are_kept_as_long_as_their_client_waits(age_s, waits_s, answered):
    import time

    from emgas.processors.codec import encode
    from emgas.processors.events import DigestQuery
    from emgas.streams.kafka.requests import timeout_header
    from emgas.streams.runtime.metrics import Metrics

    settings = SimpleNamespace(worker_name="w1", partitions=3, query_timeout_s=10.0, owners_topic="emgas.owners")
    query_server = QueryServer(settings, None, SimpleNamespace(ready_partitions=lambda: [0]), Metrics(),  # type: ignore[arg-type]
                               RecordingLog())
    headers = () if waits_s is None else timeout_header(waits_s)
    record = SimpleNamespace(partition=0, offset=0, timestamp=int((time.time() - age_s) * 1000),
                             value=encode(DigestQuery(request_id="d")), headers=headers)
    assert query_server._expired(record) is not answered


def test_queries_held_through_a_catch_up_are_answered_before_the_digests_held_with_them():
    from emgas.processors.codec import encode
    from emgas.processors.events import ActivationQuery, DigestQuery
    from emgas.streams.runtime.metrics import Metrics

    settings = SimpleNamespace(worker_name="w1", partitions=3, query_timeout_s=10.0, owners_topic="o",
                               queries_topic="q")
    query_server = QueryServer(settings, None, _Recovery(), Metrics(), RecordingLog())  # type: ignore[arg-type]
    answered = []

    async def answer(record, covering):
        if record.key == b"query":
            await asyncio.sleep(0.01)  # its reply is sent: the digests wait for it
        answered.append(record.key)

    query_server._answer = answer  # type: ignore[method-assign]
    now_ms = 1000 * time.time()
    requests = [(b"graph-digests", DigestQuery(request_id="d1", graph_id="alice")),
                (b"partition-digests", DigestQuery(request_id="d2")),
                (b"query", ActivationQuery(request_id="q", graph_id="alice", text="cats"))]

    async def scenario() -> None:
        query_server._since_ms = now_ms - 60_000
        for offset, (key, request) in enumerate(requests):
            await query_server._take("q", SimpleNamespace(partition=1, offset=offset, timestamp=now_ms, key=key,
                                                          value=encode(request), headers=()))
        query_server.recovery.caught_up.set()
        await asyncio.gather(*query_server._held)

    asyncio.run(scenario())
    assert answered == [b"query", b"graph-digests", b"partition-digests"]


def test_closing_the_states_waits_for_a_thread_still_on_one(tmp_path):
    import threading

    from emgas.processors.graph import GraphParams
    from emgas.streams.runtime.partitions import PartitionStates

    states = PartitionStates(tmp_path, GraphParams())
    state = states.get(0)
    state.txn.put(b"probe", b"1")
    go, wrote = threading.Event(), []

    def slow_write() -> None:
        go.wait(5)
        state.txn.store.write({b"late": b"2"})  # would fail on a closed store
        wrote.append(True)

    async def scenario() -> None:
        work = asyncio.ensure_future(states.in_thread(0, slow_write))
        await asyncio.sleep(0.05)
        work.cancel()  # the worker stops: its tasks are cancelled, the thread goes on
        threading.Timer(0.1, go.set).start()

    loop = asyncio.new_event_loop()
    loop.run_until_complete(scenario())
    loop.close()  # as a stopping worker's: without waiting for its executor's threads
    states.close()  # waits for the thread, then commits and closes
    assert wrote == [True]
    reopened = PartitionStates(tmp_path, GraphParams()).get(0)
    assert reopened.txn.store.get(b"late") == b"2" and reopened.txn.store.get(b"probe") == b"1"
