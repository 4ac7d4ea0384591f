"""A worker's sealing (`streams.runtime.sealer`): keys written before what
they seal, and what a forget erases, at once or after a catch-up."""

import asyncio
from datetime import datetime, timezone

from emgas.processors.events import Checkpoint, Forget, Snapshot, SnapshotLocation
from emgas.processors.sealing import KeyEncryptionKey, envelope_of, open_sealed, snapshot_of_key_id, turn_of_key_id
from emgas.replay.keyring import KeyRing
from emgas.streams.kafka.sealer import ROLL_KEY, Sealer
from tests.support.key_topic import TOPIC, KeyTopic

KEK = KeyEncryptionKey(bytes(range(32)))
AT = datetime(2026, 11, 1, tzinfo=timezone.utc)


class Topic(KeyTopic):
    """The key topic as the sealer writes it and the ring reads it (one partition)."""

    def erased(self) -> set[bytes]:
        """The record keys whose latest version is a tombstone."""
        return {key for key, value in self.latest().items() if value is None and key != ROLL_KEY}

    def latest(self) -> dict[bytes, bytes | None]:
        return dict(self.records)

    def snapshots_held(self, graph: str) -> list[int]:
        """The offsets of the graph's snapshots with a key, as compaction leaves them."""
        return sorted(snapshot_of_key_id(key_id) for key, value in self.latest().items()
                      if value is not None and key.startswith(f"{graph}\x00snapshot/".encode())
                      for key_id in KEK.open_keys(key, value))

    def turns_held(self, graph: str) -> list[str]:
        """The turn ids with a key in the graph's key sets, as compaction leaves them."""
        return sorted(turn_of_key_id(key_id) for key, value in self.latest().items()
                      if value is not None and key.startswith(f"{graph}\x00turn/".encode())
                      for key_id in KEK.open_keys(key, value))


def sealer(topic: Topic, roll_after_s: float = 60.0) -> Sealer:
    # One partition: every graph's keys in partition 0.
    return Sealer(KEK, KeyRing(KEK, TOPIC, topic), TOPIC, 1, topic.produce, roll_after_s)


def seal_turns(s: Sealer, *turns: tuple[str, str]) -> list[bytes]:
    return asyncio.run(s.seal_turns([(g, t, AT.isoformat(), f'{{"turn":"{t}"}}'.encode()) for g, t in turns]))


def test_each_turn_is_sealed_under_a_key_written_before_it():
    topic = Topic()
    s = sealer(topic)
    sealed = seal_turns(s, ("g", "t1"), ("g", "t1"), ("h", "t2"))  # t1 sent twice: two keys
    assert len(topic.records) == 2  # a key set per graph of the batch
    sets = topic.latest()
    keys = set()
    for raw, turn in zip(sealed, ["t1", "t1", "t2"]):
        envelope, data = envelope_of(raw)
        data_key = KEK.open_keys(envelope.key, sets[envelope.key])[envelope.key_id]
        assert open_sealed(envelope, data, data_key) == f'{{"turn":"{turn}"}}'.encode()
        keys.add(data_key)
    assert len(keys) == 3


def test_a_forget_erases_every_sealing_of_its_turns_and_nothing_else():
    topic = Topic()
    s = sealer(topic)
    seal_turns(s, ("g", "t1"), ("g", "t1"), ("g", "t10"), ("g", "t2"), ("h", "t1"))

    async def forget_t1():
        await s.forgotten(Forget(graph_id="g", request_id="f", timestamp=AT, turn_ids=("t1",)))

    asyncio.run(forget_t1())
    assert topic.turns_held("g") == ["t10", "t2"] and topic.turns_held("h") == ["t1"]


def test_forgetting_a_whole_graph_erases_its_turns_keys_only():
    topic = Topic()
    s = sealer(topic)
    seal_turns(s, ("g", "t1"), ("g", "t2"), ("h", "t1"))

    async def forget_g():
        await s.forgotten(Forget(graph_id="g", request_id="f", timestamp=AT, whole_graph=True))

    asyncio.run(forget_g())
    assert topic.turns_held("g") == [] and topic.turns_held("h") == ["t1"]
    assert topic.erased() == {topic.records[0][0]}  # g's set: nothing left in it, so a tombstone


def part(graph: str, as_of: int) -> Snapshot:
    return Snapshot(graph_id=graph, as_of=as_of, part=0, parts=1, data="", timestamp=AT)


def checkpoint(**listed: int) -> Checkpoint:
    return Checkpoint(log_id="l", partition=0, as_of=max(listed.values()), timestamp=AT, snapshots=tuple(
        SnapshotLocation(graph_id=g, as_of=a, first=a + 1, last=a + 1, parts=1) for g, a in listed.items()))


def test_a_checkpoint_after_a_forget_erases_the_graphs_older_snapshots():
    topic = Topic()
    s = sealer(topic)

    async def run():
        for graph, as_of in [("g", 10), ("g", 20), ("h", 10), ("g", 40)]:
            await s.seal_snapshot_part(part(graph, as_of), b"{}")
        await s.checkpointed(checkpoint(g=20, h=10))  # nothing forgotten yet: nothing erased
        assert topic.erased() == set()
        await s.forgotten(Forget(graph_id="g", request_id="f", timestamp=AT, turn_ids=("t1",)))
        await s.checkpointed(checkpoint(g=40, h=10))

    asyncio.run(run())
    assert topic.snapshots_held("g") == [40] and topic.snapshots_held("h") == [10]


def test_a_catch_up_erases_what_a_forget_applied_before_it_did_not():
    topic = Topic()
    s = sealer(topic)
    seal_turns(s, ("g", "t1"), ("g", "t2"), ("h", "t1"))

    async def run():
        await s.seal_snapshot_part(part("g", 5), b"{}")
        await s.seal_snapshot_part(part("g", 9), b"{}")
        fresh = sealer(topic)  # another worker, after the one that applied the forget stopped
        await fresh.reconcile(0, lambda graph: {"t1"} if graph == "g" else set(), {"g": 9})

    asyncio.run(run())
    assert topic.turns_held("g") == ["t2"] and topic.turns_held("h") == ["t1"]
    assert topic.snapshots_held("g") == [9]


def test_erasing_rolls_the_key_partition_a_segment_later():
    topic = Topic()
    s = sealer(topic, roll_after_s=0.0)
    seal_turns(s, ("g", "t1"))

    async def run():
        await s.forgotten(Forget(graph_id="g", request_id="f", timestamp=AT, turn_ids=("t1",)))
        for _ in range(100):
            if topic.records[-1] == (ROLL_KEY, None):
                return
            await asyncio.sleep(0.02)

    asyncio.run(run())
    assert topic.records[-1] == (ROLL_KEY, None)
