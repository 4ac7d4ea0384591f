"""`emgas bench --quick`: runs and writes every figure, each one required (a smoke test: no timing assertions)."""

import json
import os
import subprocess
import sys

import pytest

KEYS = {
    "extract_turns_per_s", "yake_reference_turns_per_s", "ingest_turns_per_s", "ingest_turns_per_s_2_workers",
    "query_p50_ms", "query_p99_ms", "ppr_p50_ms", "rr_p50_ms", "rr_p99_ms", "replay_events_per_s",
    "resident_bytes_per_edge", "forget_ms", "forget_after_snapshot_ms", "fold_events_per_s", "fold_extract_turns_per_s",
    "log_read_events_per_s", "passthrough_turns_per_s", "kafka_hop_p50_ms", "kafka_hop_p99_ms", "rr_worker_p50_ms",
    "snapshot_serialize_ms", "snapshot_write_s",
    "worker_cpu_ms_per_turn_1", "worker_cpu_ms_per_turn_2", "worker_cpu_ms_per_turn_3",
    "max_unavailable_s_join", "max_unavailable_s_leave",
    "ingest_in_process_turns_per_s_en", "ingest_in_process_turns_per_s_zh", "ingest_in_process_zh_vs_en",
    "ingest_sealed_vs_unsealed", "replay_sealed_vs_unsealed", "seal_us_per_turn", "open_us_per_turn",
    "read_back_us_per_turn",
    *(f"{figure}_{history}{snapshots}"
      for figure in ("takeover_s_history", "recovery_s_history", "recovery_in_process_s")
      for history in ("1x", "10x") for snapshots in ("", "_no_snapshots")),
}
LIMITS = {
    "fold_vs_extraction", "replay_vs_log_read", "ingest_vs_passthrough", "round_trip_vs_hops",
    "takeover_history_10x_vs_1x", "takeover_snapshots_vs_none_10x", "worker_cpu_2_vs_1", "worker_cpu_3_vs_1",
    "worker_cpu_vs_extraction", "chinese_vs_english", "ingest_sealed_vs_unsealed", "replay_sealed_vs_unsealed",
}


@pytest.mark.slow  # the quick bench, live: the slowest test
@pytest.mark.timeout(1600)
def test_bench_quick_writes_every_figure(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run(
        # On the mock: the full bench's hand-off scenario (a worker leaving by SIGTERM)
        # has hung twice on Apache Kafka in its availability probe, not yet explained.
        [sys.executable, "-m", "emgas", "bench", "--quick", "--mock", "--json", str(out)],
        capture_output=True, text=True, timeout=1500, env={**os.environ, "EMGAS_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert KEYS <= set(figures), KEYS - set(figures)
    assert figures["machine"]["cores"] >= 1 and "numpy" in figures["machine"]["versions"]
    for key in KEYS - {"resident_bytes_per_edge"}:
        assert {"median", "min", "max", "repeats"} <= set(figures[key]) and figures[key]["median"] > 0, key
    assert figures["forget_graph_turns"] > 0 and figures["journal_bytes_per_turn"] > 0
    assert figures["key_topic_bytes_per_turn"] > 0 and figures["sealed_vs_plain_turn_bytes"] > 1
    assert figures["fold_events"] > figures["fold_turns"] > 0  # decay ticks and consolidations among the turns
    assert figures["snapshot_bytes_per_edge"] > 0 and figures["takeover_digests_equal"] is True
    for history in ("1x", "10x"):  # with a checkpoint, a takeover reads its snapshot and little else
        assert 0 < figures[f"recovery_records_read_history_{history}"]["max"] \
            < figures[f"recovery_records_read_history_{history}_no_snapshots"]["min"]
    assert set(figures["limits"]) == LIMITS
    for limit in figures["limits"].values():
        assert limit["ratio"] > 0 and limit["met"] in (True, False) and limit["goal"].split()[0] in (">=", "<="), limit
    for workers in (1, 2, 3):  # six partitions divided among the workers, every one owned
        owned = figures[f"partitions_per_worker_{workers}"]
        assert len(owned) == workers and sum(owned) == figures["scale_partitions"] and min(owned) >= 1, owned
    assert figures["unavailability_history_events"] > 0
    if figures["broker"].startswith("Apache Kafka"):  # the live figures say which broker they were measured on
        assert figures["idle_broker_cpu_percent"] >= 0
    else:
        assert figures["broker"].startswith("librdkafka mock cluster")
