"""Faults on the embedded broker: the broker goes down and comes back in the
middle of ingestion; afterwards every turn is applied once and the live
graphs equal a replay of the log. (A worker SIGKILLed mid-ingest:
test_crash.py; a worker stopped: test_rebalance.py; a query whose worker
is down: test_bad_input_live.py.)"""

import asyncio
import time

import pytest

from replay.fold import Selection
from replay.run import replay
from streams.client import MemoryClient
from streams.demo import demo_turns, turns_per_graph, wait_for_turns
from tests.integration.live import live_pipeline, run

pytestmark = pytest.mark.integration


def test_broker_down_and_up_during_ingest(tmp_path):
    turns = demo_turns()
    first, second = turns[: len(turns) // 2], turns[len(turns) // 2 :]
    with live_pipeline(tmp_path / "down", partitions=2) as live:

        async def ingest_half() -> None:
            async with MemoryClient(live.settings) as client:
                await wait_for_turns(client, {g: 0 for g in turns_per_graph(turns)}, deadline_s=120)
                await client.publish(first)
                await wait_for_turns(client, turns_per_graph(first), deadline_s=60)

        run(ingest_half())
        live.cluster.set_broker_down(1)
        time.sleep(5)  # the outage itself: nothing to wait on, the broker is gone
        live.cluster.set_broker_up(1)

        async def ingest_rest() -> None:
            async with MemoryClient(live.settings) as client:
                for _ in range(60):  # the client reconnects once the broker is back
                    try:
                        await client.publish(second)
                        break
                    except Exception:  # noqa: BLE001 - still reconnecting
                        await asyncio.sleep(1)
                await wait_for_turns(client, turns_per_graph(turns), deadline_s=120)

        run(ingest_rest())
        result = run(replay(live.settings, tmp_path / "replayed", None, Selection(), verify=True))
        assert result.differences == [] and {d.graph_id for d in result.digests} == {"alice", "bob"}
        assert {d.graph_id: d.sections["passages"].count for d in result.digests} == turns_per_graph(turns)
