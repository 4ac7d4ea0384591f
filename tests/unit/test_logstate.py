"""The log's own records, read by prefix: what recovery scans for."""

from datetime import datetime, timezone

import pytest

from emgas.processors.codec import encode
from emgas.processors.events import Checkpoint, LogStarted
from emgas.replay.logstate import _CHECKPOINT, _LOG_STARTED, _decoded, _ranges
from emgas.replay.reader import LogRecord

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
