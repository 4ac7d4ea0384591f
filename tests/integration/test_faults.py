"""Faults on Apache Kafka (one node): the broker goes down and comes back in the
middle of ingestion; a worker joining the group is killed or stopped in the
middle of the rebalance, while turns keep coming. Afterwards every turn is
applied once and the live graphs equal a replay of the log. (A worker
SIGKILLed under turns and queries: test_crash.py; a worker stopped:
test_rebalance.py; a query whose worker is down: test_bad_input_live.py.)"""

import asyncio
import signal
import time
import urllib.error

import pytest

from emgas.replay.fold import Selection
from emgas.streams.interfaces.admin import replay
from emgas.streams.interfaces.client import MemoryClient
from emgas.tools.harness import demo_turns
from emgas.testing import free_port, start_worker, turns_per_graph, wait_for_turns
from tests.support.live import live_pipeline, run
from tests.support.turns import stream_of_turns
from tests.support.metrics import scrape, value

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


def assigned_partitions(port: int) -> float:
    """Partitions the worker on `port` holds (catching up or ready); 0 before its web server is up."""
    try:
        status, text = scrape(port, "/metrics")
    except (urllib.error.URLError, OSError):
        return 0
    return value(text, "emgas_partitions_recovering") + value(text, "emgas_partitions_ready") if status == 200 else 0


async def until_assigned(port: int, deadline_s: float) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if assigned_partitions(port) > 0:
            return True
        await asyncio.sleep(0.02)
    return False


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "stopped"])
def test_a_worker_lost_in_the_middle_of_a_rebalance_loses_nothing(tmp_path, how):
    """worker-2 joins while turns flow; the moment the rebalance has handed
    it partitions it is killed (or stopped), so the group rebalances again
    and worker-1 takes everything back, catching up from the log."""
    turns = stream_of_turns()
    first, second, third = turns[:120], turns[120:240], turns[240:]
    with live_pipeline(tmp_path / how.name, partitions=3) as live:

        async def scenario() -> None:
            async with MemoryClient(live.settings) as client:
                await wait_for_turns(client, {g: 0 for g in turns_per_graph(turns)}, deadline_s=120)
                await client.publish(first)
                await wait_for_turns(client, turns_per_graph(first), deadline_s=60)
                port = free_port()
                joining = live.workers["worker-2"] = start_worker(
                    live.settings, live.home / "worker-2.log", name="worker-2", web_port=port
                )
                await client.publish(second)  # the rebalance happens under load
                assert await until_assigned(port, 60), live.logs()
                joining.send_signal(how)
                joining.wait(30)
                del live.workers["worker-2"]
                await client.publish(third)
                await wait_for_turns(client, turns_per_graph(turns), deadline_s=120)

        run(scenario())
        result = run(replay(live.settings, tmp_path / f"replayed-{how.name}", None, Selection(), verify=True))
        assert result.differences == []
        assert sum(d.sections["passages"].count for d in result.digests) == len(turns)
