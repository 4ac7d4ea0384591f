"""Three workers in one consumer group (two: test_rebalance.py).

In a module of its own so that no other broker and workers share the two
cores while the group rebalances.
"""

import pytest

from streams.demo import demo_turns, turns_per_graph
from tests.integration.live import ATTEMPTS, group_formed, live_digests, live_pipeline, publish_and_wait, run

pytestmark = pytest.mark.integration


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
            replies = run(live_digests(live.settings))
            holders = {r.partition: r.worker for r in replies}
            assert sorted(holders.values()) == ["worker-1", "worker-2", "worker-3"]
            served = {d.graph_id for r in replies for d in r.graphs}
            assert served == set(turns_per_graph(turns))
            return
    raise AssertionError(f"the mock cluster's SyncGroup error hit all {ATTEMPTS} starts")
