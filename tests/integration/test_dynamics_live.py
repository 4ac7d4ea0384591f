"""Memory dynamics on Apache Kafka: ticks, pruning, consolidation and
reinforcement are events in the log, and replaying the log gives the live graphs."""

import asyncio
from collections import Counter

import pytest

from emgas.processors.codec import decode_graph_event
from emgas.processors.dynamics import DecayParams
from emgas.processors.events import Decay
from emgas.processors.graph import GraphParams
from emgas.replay.explain import explain
from emgas.replay.fold import Selection
from emgas.streams.interfaces.admin import graph_records, replay
from emgas.streams.interfaces.client import MemoryClient
from emgas.tools.demo import DEMO_QUERIES
from emgas.tools.harness import demo_turns
from emgas.testing import turns_per_graph
from tests.support.live import live_pipeline, publish_and_wait, run

pytestmark = pytest.mark.integration

# The demo conversation spans four hours: forget within the hour so that it
# shows, tick every half hour, consolidate every hour.
FAST = GraphParams(
    window_s=1800, consolidate_every_s=3600, idle_check_s=0,
    decay=DecayParams(half_life_s=1800, edge_stability_s=1800, concept_threshold=0.05),
)


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    turns = demo_turns()
    with live_pipeline(tmp_path_factory.mktemp("dynamics"), partitions=2, graph=FAST) as live:
        run(publish_and_wait(live.settings, turns, batch=500, expected=turns_per_graph(turns)))

        async def ask() -> None:
            async with MemoryClient(live.settings) as client:
                for graph, text in DEMO_QUERIES:
                    await client.ask(graph, text)

        run(ask())
        yield live


def test_the_log_holds_ticks_pruning_consolidation_and_reinforcement(fast):
    events = [decode_graph_event(r.value) for g in ("alice", "bob") for r in run(graph_records(fast.settings, g))]
    kinds = Counter(e.type for e in events)
    assert kinds["turn_ingested"] == len(demo_turns()) and kinds["decay"] >= 4
    assert kinds["consolidate"] >= 2 and kinds["retrieved"] >= 1
    assert any(e.concepts for e in events if isinstance(e, Decay))


def test_replay_of_that_log_equals_the_live_graphs(fast, tmp_path):
    result = run(replay(fast.settings, tmp_path / "replayed", None, Selection(), verify=True))
    assert result.differences == [] and {d.graph_id for d in result.digests} == {"alice", "bob"}


def test_explain_through_the_cli_names_the_pruning_event(fast):
    records = run(graph_records(fast.settings, "alice"))
    listed = [c.id for r in records if isinstance(e := decode_graph_event(r.value), Decay) for c in e.concepts]
    histories = {cid: explain(records, "alice", [cid], FAST) for cid in dict.fromkeys(listed)}
    cid, steps = next((c, s) for c, s in histories.items() if s[-1].kind == "pruned")
    out = fast.emgas("explain", "--graph", "alice", cid, timeout_s=60)
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith(f"@{steps[-1].offset} ") and " pruned " in last and "decay tick" in last


def test_an_idle_graph_is_ticked_by_the_worker_and_still_replays(tmp_path):
    # Two-second windows, checked twice a second: idle within seconds.
    idle = FAST.model_copy(update={"window_s": 2.0, "consolidate_every_s": 0.0, "idle_check_s": 0.5})
    turns = [t for t in demo_turns() if t.graph_id == "bob"][:3]
    with live_pipeline(tmp_path / "idle", partitions=1, graph=idle) as live:
        run(publish_and_wait(live.settings, turns, batch=10, expected={"bob": 3}))

        async def idle_ticks() -> list[Decay]:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while loop.time() < deadline:
                events = [decode_graph_event(r.value) for r in await graph_records(live.settings, "bob")]
                ticks = [e for e in events if isinstance(e, Decay) and e.trigger == "idle"]
                if len(ticks) >= 2:
                    return ticks
                await asyncio.sleep(0.5)
            raise AssertionError("no idle ticks within 60 s")

        ticks = run(idle_ticks())
        last_turn = max(t.timestamp for t in turns)
        assert all(t.timestamp > last_turn for t in ticks) and ticks[0].timestamp < ticks[1].timestamp
        result = run(replay(live.settings, tmp_path / "replayed", None, Selection(), verify=True))
        assert result.differences == []
