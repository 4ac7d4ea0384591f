"""A worker SIGKILLed in the middle of a stream loses nothing and applies nothing twice."""

import asyncio

import pytest

from processors.events import Turn
from replay.fold import Selection
from replay.run import replay
from streams.client import MemoryClient
from streams.demo import demo_turns, turns_per_graph
from tests.integration.live import live_pipeline, publish_and_wait, run

pytestmark = pytest.mark.integration
GRAPHS = 6
ROUNDS = 10  # 34 demo turns x 10 rounds = 340 turns over 6 graphs


def stream_of_turns() -> list[Turn]:
    turns = []
    for r in range(ROUNDS):
        for i, t in enumerate(demo_turns()):
            turns.append(t.model_copy(update={"graph_id": f"crash-{(i + r) % GRAPHS}", "turn_id": f"{t.turn_id}-r{r}"}))
    return turns


async def applied_turns(client: MemoryClient) -> int:
    return sum(d.sections["passages"].count for r in await client.digests() for d in r.graphs)


def test_sigkill_mid_ingest_then_restart_gives_the_replayed_graph(tmp_path):
    turns = stream_of_turns()
    first, rest = turns[: len(turns) // 2], turns[len(turns) // 2 :]
    with live_pipeline(tmp_path / "home", partitions=3) as live:

        async def ingest_until_mid_stream() -> int:
            async with MemoryClient(live.settings) as client:
                await client.publish(first)
                while (applied := await applied_turns(client)) < 20:
                    await asyncio.sleep(0.01)
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
