"""One partition of a key topic in memory: written as `streams.kafka.sealer.Sealer`
writes it (`produce`), read as `replay.keyring.KeyRing` reads it (a `LogReader`)."""

from __future__ import annotations

import asyncio
from typing import Any

from emgas.replay.reader import LogRecord

TOPIC = "emgas.keys"


class KeyTopic:
    def __init__(self, records: list[tuple[bytes, bytes | None]] | None = None) -> None:
        self.records: list[tuple[bytes, bytes | None]] = list(records or [])
        self.reads = 0

    async def produce(self, topic: str, key: bytes, value: bytes | None, partition: int) -> Any:
        """One record of partition 0; its acknowledgement, already done."""
        assert topic == TOPIC and partition == 0
        self.records.append((key, value))
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    def __call__(self) -> "KeyTopic":  # the ring's reader factory
        return self

    async def __aenter__(self) -> "KeyTopic":
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return {p: (0, len(self.records)) for p in partitions}

    async def read(self, topic: str, partition: int, start: int, stop: int) -> Any:
        self.reads += 1
        yield [LogRecord(partition, k, 0, key, value) for k, (key, value) in enumerate(self.records) if start <= k < stop]
