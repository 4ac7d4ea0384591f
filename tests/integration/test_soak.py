"""A short soak (`emgas soak`): turns and queries flow on three Kafka nodes and
two workers while every kind of fault comes once (a worker SIGKILLed, one
stopped with SIGTERM, one restarted without its state directory, the leader
of the busiest partition SIGKILLed, a broker stalled with SIGSTOP, a burst of
bad records); then nothing may be lost or applied twice, every digest must
equal the replay's, every bad record be dead-lettered once with its reason,
no query hang, and no worker's memory run away."""

import json

import pytest

from emgas.streams.settings import Settings
from emgas.tools.soak import SoakOptions, run_soak
from tests.support.brokers import require_kafka

pytestmark = pytest.mark.integration
RSS_GROWTH_LIMIT = 1.5  # a worker process's peak over its first sample


def test_a_short_soak_with_every_fault_loses_nothing(tmp_path):
    require_kafka()
    options = SoakOptions(
        duration_s=60, rate=30, queries_per_s=4, graphs=12, fault_every_s=4, first_fault_s=5, stall_s=(10, 10),
        every_kind=True, bad_per_kind=1, seed=37, rss_every_s=1,
    )
    figures = run_soak(Settings(home=tmp_path / "home"), options, keep=tmp_path / "soak")
    summary = {k: v for k, v in figures.items() if k not in ("rss_mib", "unanswered_outside_faults")}
    print(json.dumps(summary, indent=1))
    assert figures["fault_kinds_missing"] == []
    assert figures["turns_applied"] == figures["turns_acknowledged"] > 0
    assert figures["turns_lost"] == 0 and figures["turns_applied_twice"] == 0
    assert figures["digests_equal"] and figures["replayed_graphs"] == options.graphs
    assert figures["bad_records_dead_lettered"] == figures["bad_records_acknowledged"] > 0
    assert figures["failures"] == []
    for worker, level in figures["rss_summary"].items():
        assert level["peak_mib"] <= RSS_GROWTH_LIMIT * level["first_mib"], (worker, level)


def test_a_soak_that_loses_a_turn_fails(tmp_path):
    # A test-only hook records one turn as acknowledged but never sends it: the
    # reconciliation must find it lost, and the soak fail on it.
    require_kafka()
    options = SoakOptions(
        duration_s=8, rate=20, queries_per_s=2, query_users=2, graphs=4, fault_every_s=1_000, seed=37,
        drop_turns=1, drain_timeout_s=10,
    )
    figures = run_soak(Settings(home=tmp_path / "home"), options)
    assert figures["faults"] == []
    assert figures["turns_acknowledged"] == figures["turns_applied"] + 1
    assert figures["turns_lost"] == 1 and figures["turns_applied_twice"] == 0
    assert not figures["ok"]
    assert any("never applied" in failure for failure in figures["failures"]), figures["failures"]
