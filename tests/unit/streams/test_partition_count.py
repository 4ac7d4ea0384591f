"""A client asks every partition the topic has, whatever its `partitions` setting."""

import logging

import pytest

from emgas.processors.events import DigestReply
from emgas.replay.errors import ReplayError
from emgas.streams.interfaces import admin
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.settings import Settings


class Producer:
    def __init__(self, partitions: int) -> None:
        self.count = partitions

    async def partitions_for(self, topic: str) -> set[int]:
        return set(range(self.count))


def client_of(setting: int, topic: int) -> tuple[MemoryClient, list[int]]:
    """A client set for `setting` partitions on a queries topic of `topic`; the partitions its digest requests go to."""
    client = MemoryClient(Settings(broker="kafka:9092", partitions=setting))
    client._producer = Producer(topic)  # type: ignore[assignment]
    asked: list[int] = []

    async def request(query, about, timeout_s, key=None, partition=None):
        asked.append(partition)
        return DigestReply(request_id=query.request_id, worker="w", partition=partition, applied_offset=0, graphs=())

    client._request = request  # type: ignore[method-assign]
    return client, asked


@pytest.mark.parametrize("setting, topic", [(8, 12), (8, 8), (12, 4), (1, 3)])
async def test_digests_of_every_graph_ask_every_partition_of_the_topic(caplog, setting, topic):
    client, asked = client_of(setting, topic)
    with caplog.at_level(logging.WARNING, logger="emgas.streams.interfaces.client"):
        await client.digests()
        await client.digests()
    assert sorted(asked) == sorted(list(range(topic)) * 2)
    said = [r.getMessage() for r in caplog.records]
    if setting == topic:
        assert said == []
    else:  # once per client, one line
        assert len(said) == 1 and "\n" not in said[0]
        assert f"has {topic} partitions, not the {setting} of EMGAS_PARTITIONS" in said[0]


class Reader:
    def __init__(self, partitions: int) -> None:
        self.count = partitions

    async def partitions(self, topic: str) -> list[int]:
        return list(range(self.count))


@pytest.mark.parametrize("answered, in_log, refused", [(8, 12, True), (12, 12, False), (0, 1, True)])
async def test_a_verification_without_every_partitions_digest_is_refused(answered, in_log, refused):
    stops = {p: 1 for p in range(answered)}
    check = admin._check_every_partition_answered(Reader(in_log), "emgas.graph-events", stops)  # type: ignore[arg-type]
    if refused:
        with pytest.raises(ReplayError, match=f"no live digest for partitions .* of the {in_log} of emgas.graph-events: not verified"):
            await check
    else:
        await check


class SizedLog:
    async def partitions(self, topic: str) -> list[int]:
        return [0, 1, 2]

    async def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return {0: (0, 1_000), 1: (500, 15_500), 2: (0, 0)}


async def test_the_wait_for_a_partitions_digests_grows_with_its_records(monkeypatch):
    waits: list[float | None] = []

    async def digests(self, graph_id=None, timeout_s=None):  # noqa: ANN001, ANN202
        waits.append(timeout_s)
        return []

    monkeypatch.setattr(MemoryClient, "digests", digests)
    monkeypatch.setattr(MemoryClient, "__aenter__", lambda self: _itself(self))
    monkeypatch.setattr(MemoryClient, "__aexit__", lambda self, *exc: _itself(None))
    settings = Settings(broker="kafka:9092", query_timeout_s=5)
    largest = await admin._largest(SizedLog(), "emgas.graph-events")
    await admin.live_digests(settings, None, largest)
    await admin.live_digests(settings, "alice", largest)  # one graph: hashed in no time
    assert largest == 15_000
    assert waits == [5 + 15_000 * admin.DIGEST_S_PER_RECORD, 5]


async def _itself(value):  # noqa: ANN001, ANN202
    return value
