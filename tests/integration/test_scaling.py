"""Three workers in one consumer group (two: test_rebalance.py).

In a module of its own so that no other broker and workers share the two
cores while the group rebalances.
"""

import asyncio
import os
import time

import pytest

from emgas.tools.harness import demo_turns, turns_per_graph
from emgas.processors.events import StatsReply
from emgas.streams.client import MemoryClient
from emgas.streams.errors import QueryTimeout
from tests.integration.live import ATTEMPTS, group_formed, live_pipeline, publish_and_wait, run

pytestmark = [
    pytest.mark.integration,
    # The mock cluster's SyncGroup race (tests/integration/live.py) hits a
    # three-member group often on this machine: in one run all 4 fresh
    # starts failed. Opt in to run it.
    pytest.mark.skipif(
        not os.environ.get("EMGAS_TEST_THREE_WORKERS"),
        reason="three workers on the mock cluster: set EMGAS_TEST_THREE_WORKERS=1 (flaky SyncGroup, see module)",
    ),
]


def test_three_workers_share_the_partitions_and_answer_for_every_graph(tmp_path_factory):
    """1, 2 and 3 workers in one group: with three, each holds one of the
    three partitions and every graph is answered, whichever worker holds it."""
    turns = [t.model_copy(update={"graph_id": f"three-{i}-{t.graph_id}"}) for i in range(3) for t in demo_turns()]
    for _ in range(ATTEMPTS):
        with live_pipeline(tmp_path_factory.mktemp("three"), partitions=3, workers=1) as live:
            run(publish_and_wait(live.settings, turns, len(turns), turns_per_graph(turns)))
            live.start("worker-2")
            if not group_formed(live):
                continue
            live.start("worker-3")
            if not group_formed(live, ("worker-1", "worker-2", "worker-3")):
                continue
            # group_formed saw each of the three answer for a partition of its
            # own; now every graph answers, whichever worker holds it.
            run(answers(live.settings, list(turns_per_graph(turns))))
            return
    raise AssertionError(f"the mock cluster's SyncGroup error hit all {ATTEMPTS} starts")


async def answers(settings, graphs: list[str], deadline_s: float = 60) -> None:
    """Until every graph answers a stats query (a rebalance may still be settling)."""
    pending, started = set(graphs), time.monotonic()
    async with MemoryClient(settings) as client:
        while pending and time.monotonic() - started < deadline_s:
            for graph in sorted(pending):
                try:
                    if isinstance(await client.stats(graph, top=0, timeout_s=3), StatsReply):
                        pending.discard(graph)
                except QueryTimeout:  # its partition is moving: ask again
                    pass
            await asyncio.sleep(0.2)
    assert not pending, f"{sorted(pending)} did not answer within {deadline_s} s"
