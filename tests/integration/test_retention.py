"""Recovery on the embedded broker when retention dropped the log's beginning.

The mock cluster keeps about 5 MiB per partition and silently drops the
oldest records past that. A worker that held the partition before the drop
wrote a snapshot after it; a fresh worker then recovers the graph
completely from that snapshot. Without one, recovery says which offsets are
missing. Recovery is driven in-process here (the same `Recovery` a worker
runs on assignment), with its appends going to the broker.
"""

import asyncio
from datetime import datetime, timedelta, timezone

import pytest
from aiokafka import AIOKafkaProducer

from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.events import GraphEvent, SnapshotStarted
from emgas.replay.errors import ReplayError
from emgas.replay.fold import Selection
from emgas.streams.interfaces.admin import replay
from emgas.streams.kafka.reader import log_reader
from emgas.state.digest import partition_digests
from emgas.service.snapshot_writer import SnapshotPolicy
from emgas.streams.kafka.local import start_embedded
from emgas.streams.runtime.partitions import PartitionStates
from emgas.streams.runtime.recovery import Recovery
from emgas.streams.settings import Settings
from tests.support.factories import ingested

pytestmark = pytest.mark.integration
FILLER_BYTES = 60_000  # a duplicate turn this big: 100 of them pass the mock's 5 MiB
AT = datetime(2026, 11, 1, tzinfo=timezone.utc)


class Owner:
    """A partition owner: its states on disk and its appends to the broker."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.settings = settings
        self.states = PartitionStates(settings.home / name, settings.graph, snapshots=SnapshotPolicy(min_bytes=0))
        self.producer: AIOKafkaProducer | None = None

    async def append_at(self, events: list[GraphEvent]) -> list[int]:
        if self.producer is None:
            self.producer = AIOKafkaProducer(bootstrap_servers=self.settings.bootstrap_servers(), max_request_size=2**20)
            await self.producer.start()
        acks = []
        for event in events:
            key = event.graph_id.encode() if hasattr(event, "graph_id") else None
            partition = None if key is not None else event.partition
            acks.append(await self.producer.send(self.settings.graph_events_topic, encode(event), key=key, partition=partition))
        return [metadata.offset for metadata in await asyncio.gather(*acks)]

    async def catch_up(self, limit: int = Recovery.catch_up_limit) -> Recovery:
        """One assignment's recovery of partition 0 (it folds to the end of the log)."""
        recovery = Recovery(self.settings, self.states, self)  # type: ignore[arg-type]  # its append_at only
        recovery.catch_up_limit = limit
        assert await recovery.wait(0)
        return recovery

    async def live(self) -> None:
        """What the apply agent does with the records after the state's offset:
        decode, step, append what became due (snapshot parts, checkpoints),
        commit; until nothing new comes."""
        worker, topic = self.states.worker(0), self.settings.graph_events_topic
        while True:
            async with log_reader(self.settings) as reader:
                _, end = (await reader.bounds(topic, [0]))[0]
                if end <= worker.state.applied_offset + 1:
                    return
                async for batch in reader.read(topic, 0, worker.state.applied_offset + 1, end):
                    for record in batch:
                        _, due = worker.on_graph_event(decode_graph_event(record.value), record.offset, AT, record.value)
                        await self.append_at(due)
            worker.state.commit()

    async def close(self) -> None:
        if self.producer is not None:
            await self.producer.stop()
        self.states.close()


def turns(n: int, start: int = 0) -> list[GraphEvent]:
    return [ingested("g", f"t{i}", {f"c{i % 7}": 0.8, f"c{(i * 3) % 11}": 0.5}, minute=i) for i in range(start, start + n)]


def filler(n: int) -> list[GraphEvent]:
    """Big duplicates of turn t0: the fold skips them, retention counts them."""
    return [ingested("g", "t0", {"c0": 0.8}, text="x" * FILLER_BYTES) for _ in range(n)]


async def bounds(settings: Settings) -> tuple[int, int]:
    async with log_reader(settings) as reader:
        return (await reader.bounds(settings.graph_events_topic, [0]))[0]


async def scenario(settings: Settings, snapshot: bool, returning: bool = False) -> tuple[dict, Recovery, tuple[int, int]]:
    """Turns, a drop by retention, (a snapshot), more turns; a fresh worker
    recovers (`returning`: a worker that stopped after the first turns)."""
    old = Owner(settings, "old")
    try:
        await old.append_at(turns(40))
        await old.catch_up()  # names the log, folds the turns
        if returning:
            lagging = Owner(settings, "fresh")
            await lagging.catch_up()
            await lagging.close()
        for _ in range(5):  # the owner folds as they come, as a live worker does
            await old.append_at(filler(20))
            await old.catch_up()
        if snapshot:
            await old.append_at([SnapshotStarted(graph_id="g", reason="request", timestamp=AT)])
            await old.live()  # serves the snapshot, folds its parts, appends the checkpoint
        await old.append_at(turns(5, start=40))
        await old.catch_up()
        expected = {d.version: d.digest for d in partition_digests(old.states.get(0).repo)}
    finally:
        await old.close()
    fresh = Owner(settings, "fresh")
    try:
        recovery = await fresh.catch_up()
        found = {d.version: d.digest for d in partition_digests(fresh.states.get(0).repo)}
        return {"expected": expected, "found": found}, recovery, await bounds(settings)
    finally:
        await fresh.close()


def settings_for(tmp_path) -> tuple[Settings, object]:
    settings = Settings(home=tmp_path, partitions=1, turn_partitions=1)
    cluster = start_embedded(settings)
    return settings.model_copy(update={"broker": cluster.bootstrap_servers}), cluster


def test_a_fresh_worker_recovers_a_truncated_partition_from_its_snapshot(tmp_path):
    settings, cluster = settings_for(tmp_path)
    try:
        digests, recovery, (start, _) = asyncio.run(scenario(settings, snapshot=True))
        assert start > 40, "retention must have dropped the first turns"
        assert digests["found"] == digests["expected"] and digests["found"]
        assert recovery.recoveries[0]["checkpoint"] is not None
        assert recovery.problems == {}
    finally:
        cluster.close()


def test_without_a_snapshot_recovery_names_the_missing_offsets(tmp_path):
    settings, cluster = settings_for(tmp_path)
    try:
        digests, recovery, (start, _) = asyncio.run(scenario(settings, snapshot=False))
        assert start > 40
        assert f"offsets 0..{start - 1} were dropped by retention" in recovery.problems[0]
        assert digests["found"] != digests["expected"]
    finally:
        cluster.close()


def test_a_worker_whose_state_fell_behind_retention_restarts_from_the_snapshot(tmp_path):
    settings, cluster = settings_for(tmp_path)
    try:
        digests, recovery, (start, _) = asyncio.run(scenario(settings, snapshot=True, returning=True))
        assert digests["found"] == digests["expected"] and start > 40
        assert "truncated" in recovery.problems[0] and "rebuilt from the latest checkpoint" in recovery.problems[0]
    finally:
        cluster.close()


def test_a_worker_far_behind_starts_from_a_checkpoint_after_its_state(tmp_path):
    settings, cluster = settings_for(tmp_path)

    async def lagging_then_back() -> tuple[Recovery, dict, dict]:
        old, lagging = Owner(settings, "old"), Owner(settings, "lagging")
        try:
            await old.append_at(turns(10))
            await old.catch_up()
            await lagging.catch_up()  # holds the first 10 turns, then stops
            await old.append_at(turns(60, start=10))
            await old.append_at([SnapshotStarted(graph_id="g", reason="request", timestamp=AT)])
            await old.live()
            await old.append_at(turns(3, start=70))
            await old.catch_up()
            back = await lagging.catch_up(limit=20)
            return back, *(
                {d.version: d.digest for d in partition_digests(o.states.get(0).repo)} for o in (old, lagging)
            )
        finally:
            await old.close()
            await lagging.close()

    try:
        recovery, expected, found = asyncio.run(lagging_then_back())
        assert found == expected and recovery.recoveries[0]["checkpoint"] is not None
        assert recovery.recoveries[0]["records_read"] < 20 and recovery.problems == {}
    finally:
        cluster.close()


def test_an_as_of_before_what_retention_left_says_so(tmp_path):
    settings, cluster = settings_for(tmp_path)
    try:
        asyncio.run(scenario(settings, snapshot=True))
        with pytest.raises(ReplayError, match="before the oldest record left"):
            asyncio.run(replay(settings, tmp_path / "as-of", None, Selection(as_of=AT - timedelta(days=400)), verify=False))
    finally:
        cluster.close()
