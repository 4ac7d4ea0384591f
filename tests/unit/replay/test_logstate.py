"""The log's own records, read by prefix: what recovery scans for."""

import asyncio
import inspect
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from aiokafka.consumer.fetcher import Fetcher

from emgas.processors.codec import encode
from emgas.processors.events import Checkpoint, LogStarted, SnapshotLocation
from emgas.processors.graph import GraphParams
from emgas.replay.errors import LogTruncated, SnapshotCorrupt
from emgas.replay.logstate import (
    _CHECKPOINT, _LOG_STARTED, FIRST_SCAN_WINDOW, SCAN_WINDOW, _decoded, _ranges, first_log_started, latest_checkpoint,
    restore_checkpoint,
)
from emgas.replay.reader import FETCH_BYTES, FEW_RECORDS_BYTES, LogReader, LogRecord
from emgas.state.memory import MemoryStore
from emgas.state.projector import PartitionState

AT = datetime(2026, 11, 1, tzinfo=timezone.utc)


def record(value: bytes | None) -> LogRecord:
    return LogRecord(0, 7, 0, None, value)


@pytest.mark.parametrize("value, prefix, found", [
    (encode(Checkpoint(log_id="L", partition=0, as_of=3, snapshots=(), timestamp=AT)), _CHECKPOINT, Checkpoint),
    (encode(LogStarted(log_id="L", partition=0, timestamp=AT)), _LOG_STARTED, LogStarted),
    (encode(LogStarted(log_id="L", partition=0, timestamp=AT)), _CHECKPOINT, type(None)),
    (None, _CHECKPOINT, type(None)),  # a record without a value
    (b"", _CHECKPOINT, type(None)),
    (b'{"type":"checkpoint", "broken', _CHECKPOINT, type(None)),  # the prefix, but not an event
])
def test_only_whole_records_of_the_kind_asked_are_found(value, prefix, found):
    assert isinstance(_decoded(record(value), prefix), found)


@pytest.mark.parametrize("spans, merged", [
    ([], []),
    ([(5, 9)], [(5, 9)]),
    ([(5, 9), (1, 3)], [(1, 3), (5, 9)]),
    ([(1, 5), (5, 9)], [(1, 9)]),
    ([(1, 8), (3, 5)], [(1, 8)]),
])
def test_snapshot_ranges_are_read_once(spans, merged):
    assert _ranges(spans) == merged


class ScriptedLog:
    """A reader over records given as (offset, value): it notes each range
    read and the fetch size asked for."""

    def __init__(self, values: dict[int, bytes]) -> None:
        self.values = values
        self.reads: list[tuple[int, int, int]] = []
        self.opened: list[bool] = []  # whether each read opened sealed records

    async def read(self, topic, partition, start, stop, fetch_bytes=FETCH_BYTES, open_sealed=True):
        self.reads.append((start, stop, fetch_bytes))
        self.opened.append(open_sealed)
        batch = [LogRecord(partition, o, 0, None, v) for o, v in sorted(self.values.items()) if start <= o < stop]
        if batch:
            yield batch


FILLER = b'{"type":"turn_ingested"}'
CHECKPOINT = encode(Checkpoint(log_id="L", partition=0, as_of=3, snapshots=(), timestamp=AT))


@pytest.mark.parametrize("at, end, windows", [
    (9_990, 10_000, [(10_000 - FIRST_SCAN_WINDOW, 10_000)]),  # among the last records: one small read
    (9_000, 10_000, [(10_000 - FIRST_SCAN_WINDOW, 10_000),  # further back: then windows of SCAN_WINDOW
                     (10_000 - FIRST_SCAN_WINDOW - SCAN_WINDOW, 10_000 - FIRST_SCAN_WINDOW)]),
    (None, 30, [(0, 30)]),  # none: the whole log read once
])
def test_the_checkpoint_scan_starts_small_and_finds_the_last_one(at, end, windows):
    values = {o: FILLER for o in range(end)}
    if at is not None:
        values[at - 3] = CHECKPOINT  # an older one, not found first
        values[at] = CHECKPOINT
    log = ScriptedLog(values)
    found = asyncio.run(latest_checkpoint(log, "t", 0, 0, end))
    assert (found[0] if found else None) == at
    assert [(lo, hi) for lo, hi, _ in log.reads] == windows
    assert not any(log.opened)  # a checkpoint is never sealed: the scan waits for no key


# A snapshot part as a later release might write it: a schema version this code does not know.
NEWER_PART = (b'{"type":"snapshot","schema_version":99,"graph_id":"g","as_of":5,"part":0,"parts":2,'
              b'"data":"","timestamp":"2026-11-01T00:00:00Z"}')


@pytest.mark.parametrize("held, refused", [
    ({6: NEWER_PART, 7: NEWER_PART}, SnapshotCorrupt),  # in the log, unreadable here: folded without
    ({6: FILLER, 7: FILLER}, LogTruncated),  # not in the log: a gap, served around as before
])
def test_a_checkpoint_whose_parts_cannot_be_read_is_not_taken_for_a_gap(held, refused):
    location = SnapshotLocation(graph_id="g", as_of=5, first=6, last=7, parts=2)
    checkpoint = Checkpoint(log_id="L", partition=0, as_of=5, snapshots=(location,), timestamp=AT)
    state = PartitionState(MemoryStore(), GraphParams())
    with pytest.raises(refused):
        asyncio.run(restore_checkpoint(ScriptedLog(held), "t", 0, state, (8, checkpoint)))
    assert state.applied_offset == -1  # nothing restored


def test_a_logs_first_records_are_read_with_a_small_fetch():
    log = ScriptedLog({0: encode(LogStarted(log_id="L", partition=0, timestamp=AT)), 1: FILLER})
    found = asyncio.run(first_log_started(log, "t", 0, 0, 2))
    assert found is not None and found[0] == 0 and found[1].log_id == "L"
    assert log.reads == [(0, 2, FEW_RECORDS_BYTES)] and log.opened == [False]  # never sealed: no key waited for


def test_the_reader_can_still_size_aiokafkas_fetches():
    """`LogReader._fetch_bytes` sets a private attribute of aiokafka's fetcher,
    which it reads for each fetch request: an upgrade that renames it fails here."""
    source = inspect.getsource(Fetcher)
    assert "self._max_partition_fetch_bytes = max_partition_fetch_bytes" in source
    assert "self._max_partition_fetch_bytes," in source or "self._max_partition_fetch_bytes)" in source


class _Keys:
    """A key ring that notes the records it is asked to open."""

    def __init__(self) -> None:
        self.asked: list[list[bytes]] = []

    async def open(self, partition, values, times_ms):
        self.asked.append(values)
        return [b"opened"] * len(values)


def _reader_of(values: list[bytes], keys: _Keys) -> LogReader:
    """A `LogReader` whose consumer's fetches return `values` from offset 0 (no broker)."""
    reader = LogReader("127.0.0.1:9", keys=keys)
    fetched = [SimpleNamespace(offset=o, timestamp=0, key=None, value=v) for o, v in enumerate(values)]

    async def bounds(topic, partitions):
        return {p: (0, len(values)) for p in partitions}

    async def fetch(tp):
        return fetched

    reader.bounds, reader._fetch, reader._fetch_bytes = bounds, fetch, lambda limit: None
    for name in ("assign", "seek", "pause"):
        setattr(reader._consumer, name, lambda *args: None)
    return reader


@pytest.mark.parametrize("open_sealed, values, asked", [
    (True, [b"v0", b"v1"], 1),
    (False, [b"v0", b"v1"], 0),  # as the log holds them, the ring never asked
])
def test_a_read_opens_sealed_records_unless_told_not_to(open_sealed, values, asked):
    keys = _Keys()

    async def read() -> list[bytes]:
        reader = _reader_of(values, keys)
        try:
            return [r.value async for batch in reader.read("t", 0, 0, 2, open_sealed=open_sealed) for r in batch]
        finally:
            await reader._consumer.stop()  # never started: closed, so not reported unclosed

    got = asyncio.run(read())
    assert len(keys.asked) == asked and got == ([b"opened"] * 2 if open_sealed else values)
