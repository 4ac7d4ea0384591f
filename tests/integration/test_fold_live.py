"""The partition transaction and errors as data, on a live worker: a SIGKILL
between applying and committing loses nothing and applies nothing twice; a
poison graph event is rejected, the next ones applied, and replay agrees."""

import asyncio
from datetime import timedelta

import pytest

from emgas.processors.events import Boost, Retrieved
from emgas.replay.fold import Selection
from emgas.streams.interfaces.admin import replay
from emgas.streams.interfaces.client import MemoryClient
from emgas.tools.harness import demo_turns
from emgas.testing import free_port, start_worker, turns_per_graph, wait_for_turns
from tests.support import hooked_worker
from tests.support.live import live_pipeline, run
from tests.support.metrics import scrape, value
from tests.support.rule_bug import POISON, environment as rule_bug_environment, install

pytestmark = pytest.mark.integration
GRAPHS = 4


def turns(rounds: int, tag: str) -> list:
    return [
        t.model_copy(update={"graph_id": f"fold-{(i + r) % GRAPHS}", "turn_id": f"{t.turn_id}-{tag}{r}"})
        for r in range(rounds)
        for i, t in enumerate(demo_turns())
    ]


def offsets(port: int) -> tuple[float, float]:
    """(applied, committed) offsets summed over the worker's partitions."""
    _, text = scrape(port, "/metrics")
    return value(text, "emgas_applied_offset"), value(text, "emgas_committed_offset")


def test_sigkill_between_two_commits_under_ingest_ends_equal_to_replay(tmp_path):
    # Each batch waits 0.4 s between applying and committing, and commits its
    # states (no pacing): the kill falls in that window, with applied events
    # the store does not hold yet. (Paced commits: test_crash's kills.)
    everything = turns(8, "k")
    first, rest = everything[: len(everything) // 4], everything[len(everything) // 4:]
    port = free_port()
    with live_pipeline(tmp_path / "home", partitions=2, workers=0) as live:
        live.workers["w"] = start_worker(live.settings, tmp_path / "home" / "w.log", name="w", web_port=port,
                                         env={**rule_bug_environment(), "EMGAS_STATE_COMMIT_INTERVAL_S": "0"},
                                         command=hooked_worker.command(commit_hold_s=0.4))

        async def ingest_and_kill() -> tuple[float, float]:
            async with MemoryClient(live.settings) as client:
                # A first part applied and committed: the kill then falls after a commit,
                # whatever size of batch the broker hands the worker (Kafka: a few large ones).
                await client.publish(first)
                await wait_for_turns(client, turns_per_graph(first), deadline_s=120)
                publishing = asyncio.create_task(client.publish(rest))
                deadline = asyncio.get_running_loop().time() + 60
                while True:  # until the worker holds applied but uncommitted events
                    applied, committed = await asyncio.to_thread(offsets, port)
                    if applied > committed > 0:
                        break
                    assert asyncio.get_running_loop().time() < deadline, f"no uncommitted batch seen: {applied=}, {committed=}"
                    await asyncio.sleep(0.02)
                live.kill("w")
                await publishing
                return applied, committed

        applied, committed = run(ingest_and_kill())
        assert applied > committed
        live.workers["w"] = start_worker(live.settings, tmp_path / "home" / "w2.log", name="w", web_port=free_port())

        async def check() -> None:
            async with MemoryClient(live.settings) as client:
                await wait_for_turns(client, turns_per_graph(everything), deadline_s=120)
                replies = await client.digests()
            held = sum(d.sections["passages"].count for r in replies for d in r.graphs)
            assert held == len(everything)  # every turn applied, none twice
            result = await replay(live.settings, tmp_path / "rebuilt", None, Selection(), verify=True)
            assert result.differences == []
            assert result.report.counts.outcomes.get("applied") == len(everything)

        run(check())


def test_a_poison_event_is_rejected_live_and_replay_rejects_it_the_same_way(tmp_path):
    before, after = turns(1, "a"), turns(1, "b")
    port = free_port()
    with live_pipeline(tmp_path / "home", partitions=2, workers=0) as live:
        # The worker's retrieval rule has a bug for requests named poison*: what the fold rejects.
        live.workers["w"] = start_worker(live.settings, tmp_path / "home" / "w.log", name="w", web_port=port,
                                         env=rule_bug_environment())

        async def scenario() -> None:
            async with MemoryClient(live.settings) as client:
                await wait_for_turns(client, {g: 0 for g in turns_per_graph(before)}, deadline_s=120)
                await client.publish(before)
                await wait_for_turns(client, turns_per_graph(before), deadline_s=120)
                at = before[0].timestamp + timedelta(minutes=1)
                await client.emit([Retrieved(graph_id="fold-0", graph_version=1, request_id=f"{POISON}-live",
                                             timestamp=at, boosts=(Boost(id="biscuit", amount=0.5),))])
                await client.publish(after)
                await wait_for_turns(client, turns_per_graph(before + after), deadline_s=120)

        run(scenario())
        _, text = scrape(port, "/metrics")
        assert value(text, "emgas_graph_events_total", type="retrieved", outcome="rejected") == 1
        assert "rejected" in (tmp_path / "home" / "w.log").read_text()

        async def check() -> None:
            result = await replay(live.settings, tmp_path / "rebuilt", None, Selection(), verify=True)
            assert result.differences == []
            assert result.report.counts.outcomes.get("rejected") == 1

        uninstall = install()
        try:
            run(check())
        finally:
            uninstall()
