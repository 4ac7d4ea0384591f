"""Logs written by the first schema version still replay, into the same graphs."""

import json
from pathlib import Path

from emgas.processors.codec import decode_graph_event
from emgas.processors.graph import GraphParams
from emgas.replay.fold import FoldCounts, Selection, fold_records
from emgas.replay.reader import LogRecord
from emgas.state.digest import partition_digests
from emgas.state.memory import MemoryStore
from emgas.state.projector import PartitionState

GOLDEN = Path(__file__).parents[2] / "golden"


def golden_records() -> list[LogRecord]:
    lines = (GOLDEN / "graph-events-v1.jsonl").read_bytes().splitlines()
    return [LogRecord(0, offset, 0, None, line) for offset, line in enumerate(lines)]


def test_golden_log_is_in_the_first_schema_version():
    versions = {json.loads(r.value)["schema_version"] for r in golden_records()}
    assert versions == {1}


def test_v1_events_are_upcast_to_the_active_graph_version():
    event = decode_graph_event(golden_records()[0].value)
    assert event.schema_version == 2 and event.graph_version is None


def test_golden_log_replays_into_the_expected_digests():
    state = PartitionState(MemoryStore(), GraphParams())
    counts = FoldCounts()
    fold_records(state, golden_records(), Selection(), counts)
    assert counts.outcomes == {"applied": 34, "duplicate_turn": 1} and counts.undecodable == 0
    expected = json.loads((GOLDEN / "expected-digests.json").read_text())
    assert {d.graph_id: d.digest for d in partition_digests(state.repo)} == expected
    assert all(d.version == 1 and d.active for d in partition_digests(state.repo))
