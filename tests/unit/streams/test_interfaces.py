"""Shapes the agent interfaces share: the MCP stats result from a StatsReply, one loop thread for blocking calls."""

import asyncio
import threading

from emgas.processors.events import StatsReply, TopConcept
from emgas.streams.interfaces.mcp_server import GraphStats
from emgas.streams.interfaces.memory import LoopThread


def test_the_mcp_stats_take_every_size_of_the_reply_by_name():
    reply = StatsReply(request_id="r", graph_id="g", version=3, turns=4, concepts=5, edges=6, passages=7, topics=8,
                       top_concepts=(TopConcept(id="c1", text="pretzel", count=2, base_activation=0.5),))
    stats = GraphStats.of("g", reply)
    assert stats.model_dump() == {
        "graph": "g", "version": 3, "turns": 4, "concepts": 5, "edges": 6, "passages": 7, "topics": 8,
        "top_concepts": [{"concept": "pretzel", "mentions": 2, "activation": 0.5}],
    }
    sizes = set(GraphStats.model_fields) - {"graph", "top_concepts"}
    assert all(GraphStats.model_fields[n].annotation is StatsReply.model_fields[n].annotation for n in sizes)


def test_a_loop_thread_runs_coroutines_from_plain_code_and_stops():
    background = LoopThread("emgas-test")

    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert background.run(where()) == "emgas-test"
    background.stop()
    assert background.loop.is_closed()
