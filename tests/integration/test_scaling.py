"""Several workers in one consumer group: they always form it, the work
divides, and graphs keep answering while workers join and leave.

In a module of its own so that no other broker and workers share the two
cores while the group rebalances.
"""

import asyncio
import signal
import time

import pytest

from emgas.replay.fold import Selection
from emgas.streams.interfaces.admin import replay
from emgas.streams.interfaces.client import MemoryClient
from emgas.tools.availability import Availability
from emgas.tools.harness import demo_turns
from emgas.testing import turns_per_graph, wait_for_turns
from tests.support import hooked_worker
from emgas.testing import wait_for_workers
from tests.support.live import live_pipeline, publish_and_wait, run

pytestmark = pytest.mark.integration
WORKERS = ("worker-1", "worker-2", "worker-3")


def graphs_turns(tag: str, copies: int = 3) -> list:
    return [t.model_copy(update={"graph_id": f"{tag}-{i}-{t.graph_id}"}) for i in range(copies) for t in demo_turns()]


def metric(text: str, series: str) -> float:
    """The value of one series in a Prometheus exposition (0 when absent)."""
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(series + " ")]
    return values[0] if values else 0.0


def owners(live, names=WORKERS) -> dict[str, list[int]]:
    """worker -> the graph-events partitions it has been assigned (its /health)."""
    return {name: live.health(name)["partitions"]["assigned"] for name in names}


def assert_each_partition_owned_once(live, names=WORKERS) -> None:
    held = owners(live, names)
    every = sorted(p for partitions in held.values() for p in partitions)
    assert every == list(range(live.settings.partitions)), held
    assert all(held.values()), held  # three partitions, three workers: one each


@pytest.mark.parametrize("start", [1, 2, 3])
def test_three_workers_started_together_form_one_group(tmp_path, start):
    """Started at once, so their SyncGroups race at the embedded broker (a
    follower's late one is refused there); every start forms the group."""
    with live_pipeline(tmp_path / f"start-{start}", partitions=3, workers=0) as live:
        for name in WORKERS:
            live.start(name)
        run(wait_for_workers(live.settings, set(WORKERS), deadline_s=90))
        assert_each_partition_owned_once(live)


def test_a_worker_whose_sync_group_fails_rejoins_by_itself(tmp_path):
    """The out-of-group case, made deterministic: worker-2's first SyncGroup
    is refused (INVALID_REQUEST, as the embedded broker's race answers). The
    worker rejoins at once instead of waiting outside the group (or crashing)."""
    turns = graphs_turns("heal", copies=1)
    with live_pipeline(tmp_path, partitions=3) as live:
        run(publish_and_wait(live.settings, turns, len(turns), turns_per_graph(turns)))
        live.start("worker-2", command=hooked_worker.command(sync_group_errors=1))
        run(wait_for_workers(live.settings, {"worker-1", "worker-2"}, deadline_s=60))
        log = (live.home / "worker-2.log").read_text()
        assert "test hook: SyncGroup refused" in log and "SyncGroup refused with INVALID_REQUEST; rejoining" in log
        # At least the one refused by the hook (the embedded broker's race may add its own).
        assert metric(live.metrics("worker-2"), 'emgas_group_rejoins_total{reason="sync_refused"}') >= 1
        assert sorted(owners(live, ("worker-1", "worker-2"))["worker-1"] + owners(live, ("worker-2",))["worker-2"]) \
            == [0, 1, 2]


def test_three_workers_joined_one_by_one_while_turns_and_queries_flow(tmp_path):
    """worker-2, then worker-3 join while turns are published and every graph
    is asked continuously: each partition ends owned exactly once, every turn
    is applied once, queries never outlive their deadline, and the live
    graphs equal a replay of the log."""
    turns = graphs_turns("join")
    expected = turns_per_graph(turns)
    with live_pipeline(tmp_path, partitions=3) as live:
        run(publish_and_wait(live.settings, turns[:30], 30, turns_per_graph(turns[:30])))

        async def scenario() -> None:
            async with MemoryClient(live.settings) as client, Availability(live.settings, sorted(expected), pause_s=0.1) as probe:
                publishing = asyncio.create_task(client.publish(turns[30:], chunk=5))
                live.start("worker-2")
                await wait_for_workers(live.settings, {"worker-1", "worker-2"}, deadline_s=90)
                live.start("worker-3")
                await wait_for_workers(live.settings, set(WORKERS), deadline_s=90)
                await publishing
                await wait_for_turns(client, expected, deadline_s=120)
                await probe.until_all_answer(time.monotonic(), deadline_s=30)
            assert not probe.hung, f"a query waited {probe.longest_wait_s:.1f} s (deadline {probe.timeout_s} s)"
            assert not probe.errors, probe.errors[:3]

        run(scenario())
        assert_each_partition_owned_once(live)
        result = run(replay(live.settings, tmp_path / "replayed", None, Selection(), verify=True))
        assert result.differences == []
        assert {d.graph_id: d.sections["passages"].count for d in result.digests} == expected


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_a_worker_leaving_while_queries_flow_pauses_its_graphs_for_a_bounded_time(tmp_path, how):
    """Two workers; one is stopped (or killed) while every graph is asked
    continuously. The longest pause of any graph is measured and printed;
    no query outlives its deadline, and every graph answers again."""
    turns = graphs_turns("leave")
    expected = turns_per_graph(turns)
    with live_pipeline(tmp_path, partitions=3) as live:
        live.start("worker-2")
        run(wait_for_workers(live.settings, {"worker-1", "worker-2"}, deadline_s=90))
        run(publish_and_wait(live.settings, turns, len(turns), expected))

        async def scenario() -> float:
            async with Availability(live.settings, sorted(expected)) as probe:
                await probe.until_all_answer(time.monotonic(), deadline_s=30)
                left = time.monotonic()
                leaving = live.workers.pop("worker-2")
                leaving.send_signal(how)
                await asyncio.to_thread(leaving.wait, 30)
                await probe.until_all_answer(time.monotonic(), deadline_s=60)
                await asyncio.sleep(0.5)
                gap = probe.longest_gap(left, time.monotonic())
            assert not probe.hung, f"a query waited {probe.longest_wait_s:.1f} s (deadline {probe.timeout_s} s)"
            print(f"\n{how.name}: the longest any graph could not answer: {gap.seconds:.2f} s ({gap.graph})")
            return gap.seconds

        pause = run(scenario())
        # SIGTERM leaves the group at once; SIGKILL waits out the session timeout.
        assert pause < (20 if how == signal.SIGTERM else 20 + live.settings.session_timeout_s)
        assert owners(live, ("worker-1",))["worker-1"] == [0, 1, 2]


def test_a_worker_taking_over_does_not_answer_again_what_the_stopped_one_answered(tmp_path):
    """worker-1 answers queries, then stops (SIGTERM; alone, it stops at once)
    and says up to which query it answered; worker-2, started after it with
    no state, reads the queries of the last query timeout and answers its
    own query only."""
    from emgas.processors.events import ActivationReply

    turns = graphs_turns("again", copies=1)
    expected = turns_per_graph(turns)
    graph = sorted(expected)[0]
    with live_pipeline(tmp_path, partitions=1) as live:
        run(publish_and_wait(live.settings, turns, len(turns), expected))
        # Queries of the last minute are read again by the next owner (slow machines included).
        live.settings = live.settings.model_copy(update={"query_timeout_s": 60})

        async def ask(times: int) -> None:
            async with MemoryClient(live.settings) as client:
                for _ in range(times):
                    assert isinstance(await client.ask(graph, "coffee"), ActivationReply)

        run(ask(3))
        stopped = live.workers.pop("worker-1")
        stopped.terminate()
        stopped.wait(30)
        assert stopped.returncode == 0
        live.start("worker-2")
        run(ask(1))  # held by worker-2 until it has caught up
        text = live.metrics("worker-2")
        assert metric(text, "emgas_queries_answered_before_total") >= 3, live.logs()
        assert metric(text, 'emgas_queries_total{result="ok",type="activation_query"}') == 1
