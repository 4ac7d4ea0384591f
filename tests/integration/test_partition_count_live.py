"""Clients learn the partition count from the topics, not from EMGAS_PARTITIONS.

A broker whose graph topics have 12 partitions, asked by a client left at
the default of 8: every `--all` must cover all 12, say in one line that
the setting disagrees, and a worker so misconfigured must refuse to start.
"""

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from emgas.processors.events import Turn
from emgas.replay.reader import partition_of
from emgas.testing import free_port, turns_per_graph
from tests.support.live import live_pipeline, publish_and_wait, run

pytestmark = pytest.mark.integration
PARTITIONS = 12


def graphs_on_every_partition() -> list[str]:
    """One graph id keyed to each of the 12 partitions."""
    found: dict[int, str] = {}
    for i in range(1000):
        found.setdefault(partition_of(f"user-{i}".encode(), PARTITIONS), f"user-{i}")
    assert len(found) == PARTITIONS
    return [found[p] for p in sorted(found)]


def emgas(live, *args: str, partitions: int = 8) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EMGAS_BROKER": live.settings.bootstrap_servers(), "EMGAS_HOME": str(live.home),
           "EMGAS_PARTITIONS": str(partitions), "EMGAS_GRAPH": live.settings.graph.model_dump_json(),
           "EMGAS_WEB_PORT": str(free_port())}
    return subprocess.run([sys.executable, "-m", "emgas", *args], env=env, capture_output=True, text=True, timeout=180)


def test_every_all_covers_every_partition_whatever_the_clients_setting(tmp_path):
    graphs = graphs_on_every_partition()
    start = datetime.now(timezone.utc) - timedelta(hours=1)
    turns = [Turn(graph_id=g, turn_id="t1", speaker="u", text=f"{g} keeps a greyhound called Pretzel",
                  timestamp=start + timedelta(seconds=i)) for i, g in enumerate(graphs)]
    with live_pipeline(tmp_path / "home", partitions=PARTITIONS) as live:
        run(publish_and_wait(live.settings, turns, batch=50, expected=turns_per_graph(turns)))

        digest = emgas(live, "digest", "--all", "--json")
        assert digest.returncode == 0, digest.stderr
        assert sorted(d["graph_id"] for d in json.loads(digest.stdout)) == sorted(graphs)
        said = [line for line in digest.stderr.splitlines() if "EMGAS_PARTITIONS" in line]
        assert len(said) == 1 and "has 12 partitions, not the 8" in said[0], digest.stderr

        verify = emgas(live, "replay", "--all", "--verify")
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert f"verified: all {len(graphs)} graph version(s) equal the live ones" in verify.stdout

        same = emgas(live, "digest", "--all", "--json", partitions=PARTITIONS)  # a matching setting: no word
        assert same.returncode == 0 and "EMGAS_PARTITIONS" not in same.stderr, same.stderr

        worker = emgas(live, "worker")
        assert worker.returncode == 2, worker.stdout + worker.stderr
        assert "has 12 partitions, not the 8 of EMGAS_PARTITIONS: set EMGAS_PARTITIONS=12" in worker.stderr
        assert "Traceback" not in worker.stderr
