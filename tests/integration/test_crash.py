"""A worker SIGKILLed in the middle of a stream (of turns, and of turns and
queries) loses nothing, applies nothing twice and never leaves a query hanging."""

import asyncio
import itertools
import time
from collections import Counter

import pytest

from emgas.replay.fold import Selection
from emgas.streams.interfaces.admin import replay
from emgas.streams.interfaces.client import MemoryClient
from emgas.testing import turns_per_graph, wait_for_turns
from emgas.streams.errors import QueryTimeout
from tests.support import hooked_worker
from tests.support.live import live_pipeline, publish_and_wait, run
from tests.support.turns import GRAPHS, stream_of_turns

pytestmark = pytest.mark.integration
ASKERS = 4  # concurrent query loops, each about 20 queries/s while answered


async def applied_turns(client: MemoryClient) -> int:
    return sum(d.sections["passages"].count for r in await client.digests() for d in r.graphs)


# The worker that is killed applies 5 events a batch, each held 50 ms before its
# commit, so the kill finds applied events that are not committed yet.
# Small batches, each held 0.05 s before its commit: the kill falls mid-stream.
MID_STREAM = {"EMGAS_APPLY_BATCH": "5"}
HELD = hooked_worker.command(commit_hold_s=0.05)


def test_sigkill_mid_ingest_then_restart_gives_the_replayed_graph(tmp_path):
    turns = stream_of_turns()
    first, rest = turns[: len(turns) // 2], turns[len(turns) // 2 :]
    with live_pipeline(tmp_path / "home", partitions=3, workers=0) as live:
        live.start("worker-1", env=MID_STREAM, command=HELD)

        async def ingest_until_mid_stream() -> int:
            # In chunks, so the kill falls mid-stream whatever the worker's speed:
            # as soon as 20 turns are applied, with the last chunk still in flight.
            async with MemoryClient(live.settings) as client:
                for start in range(0, len(first), 10):
                    await client.publish(first[start : start + 10])
                    await asyncio.sleep(0.2)
                    if (applied := await applied_turns(client)) >= 20:
                        break
                live.kill("worker-1")
                return applied

        applied_at_kill = run(ingest_until_mid_stream())
        assert applied_at_kill < len(first), "the worker finished before it was killed"
        live.start("worker-1")  # same name: same state directory, as after a real crash
        # While it restarts: the second half, and every turn of the first half again.
        everything = first + rest + first
        run(publish_and_wait(live.settings, rest + first, len(everything), turns_per_graph(everything)))

        async def check() -> None:
            async with MemoryClient(live.settings) as client:
                assert await applied_turns(client) == len({(t.graph_id, t.turn_id) for t in turns})
            result = await replay(live.settings, tmp_path / "rebuilt", None, Selection(), verify=True)
            assert result.differences == []
            assert sum(d.sections["passages"].count for d in result.digests) == len(turns)

        run(check())


def test_sigkill_under_turns_and_queries_then_restart(tmp_path):
    """Queries at a steady rate throughout: while the worker is dead they time
    out at their deadline (never hang), after the restart they are answered
    again; every turn is applied once and the graphs equal a replay."""
    turns = stream_of_turns()
    deadline_s = 3.0
    with live_pipeline(tmp_path / "home", partitions=3) as live:

        async def scenario() -> tuple[Counter, list[float], int]:
            outcomes: Counter = Counter()
            waits: list[float] = []
            done = asyncio.Event()
            async with MemoryClient(live.settings) as client:
                await client.publish(turns[:100])
                await wait_for_turns(client, turns_per_graph(turns[:100]), deadline_s=120)

                async def ask_steadily(start: int) -> None:
                    for i in itertools.count(start):
                        if done.is_set():
                            return
                        started = time.monotonic()
                        try:
                            reply = await client.ask(f"crash-{i % GRAPHS}", "training for the marathon",
                                                     reinforce=False, timeout_s=deadline_s)
                            outcomes[getattr(reply, "code", reply.type)] += 1
                        except QueryTimeout:
                            outcomes["timeout"] += 1
                        waits.append(time.monotonic() - started)
                        await asyncio.sleep(0.05)

                askers = [asyncio.create_task(ask_steadily(k)) for k in range(ASKERS)]
                await client.publish(turns[100:200])
                while outcomes["activation_reply"] < 2 * ASKERS:  # queries answered and in flight at the kill
                    await asyncio.sleep(0.02)
                live.kill("worker-1")
                await client.publish(turns[200:])
                killed_at = len(waits)
                live.start("worker-1")
                await wait_for_turns(client, turns_per_graph(turns), deadline_s=120)
                answered = outcomes["activation_reply"]
                while outcomes["activation_reply"] < answered + 5:  # the loop is answered again
                    await asyncio.sleep(0.05)
                done.set()
                await asyncio.wait_for(asyncio.gather(*askers), deadline_s + 2)
                return outcomes, waits, killed_at

        outcomes, waits, killed_at = run(scenario())
        print(f"queries: {dict(outcomes)}; longest wait {max(waits):.2f} s")
        assert set(outcomes) <= {"activation_reply", "timeout", "partition_moved"}, outcomes
        assert outcomes["timeout"] >= 1 and killed_at > 0  # the worker was really down for a while
        assert max(waits) < deadline_s + 1.5  # a clear timeout at the deadline, not a hang

        async def check() -> None:
            async with MemoryClient(live.settings) as client:
                assert await applied_turns(client) == len({(t.graph_id, t.turn_id) for t in turns})
            result = await replay(live.settings, tmp_path / "rebuilt", None, Selection(), verify=True)
            assert result.differences == []

        run(check())
