"""A worker's Prometheus metrics and health, scraped over HTTP."""

import asyncio
import json
import os
import subprocess
import sys

import pytest
from aiokafka import AIOKafkaProducer

from emgas.processors.events import ActivationReply
from emgas.streams.interfaces.client import MemoryClient
from emgas.tools.harness import demo_turns
from emgas.testing import wait_until_warm
from tests.support.live import run, serving
from tests.support.metrics import scrape, value

pytestmark = pytest.mark.integration


def test_metrics_reflect_turns_queries_and_dead_letters(tmp_path):
    turns = [t for t in demo_turns() if t.graph_id == "bob"]
    with serving(tmp_path / "metrics", 2, turns) as (live, port):

        async def ask_and_break() -> ActivationReply:
            producer = AIOKafkaProducer(bootstrap_servers=live.settings.bootstrap_servers())
            await producer.start()
            try:
                await producer.send_and_wait(live.settings.turns_topic, b"{not json", key=b"bob")
            finally:
                await producer.stop()
            async with MemoryClient(live.settings) as client:
                replies = [await client.ask("bob", "How is the marathon training going?") for _ in range(3)]
                await client.ask("nobody", seeds=("x",))
                return replies[-1]

        _, before = scrape(port, "/metrics")  # waiting for the turns asked too (graph_not_found at first)
        reply = run(ask_and_break())
        assert isinstance(reply, ActivationReply)

        async def scraped() -> str:
            for _ in range(100):  # the dead letter is written asynchronously
                status, text = scrape(port, "/metrics")
                if status == 200 and value(text, "emgas_dead_letters_total", reason="not_json") >= 1:
                    return text
                await asyncio.sleep(0.1)
            raise AssertionError("the dead letter never showed in /metrics")

        text = run(scraped())
        assert value(text, "emgas_turns_extracted_total") == len(turns)
        assert value(text, "emgas_graph_events_total", type="turn_ingested", outcome="applied") == len(turns)
        assert value(text, "emgas_queries_total", type="activation_query", result="ok") >= 3
        not_found = value(text, "emgas_queries_total", result="graph_not_found")
        assert not_found - value(before, "emgas_queries_total", result="graph_not_found") == 1
        assert value(text, "emgas_query_seconds_count") >= 4
        assert value(text, "emgas_passages") == len(turns) and value(text, "emgas_concepts") > 0
        assert value(text, "emgas_partitions_ready") == 2 and value(text, "emgas_partitions_recovering") == 0
        assert value(text, "emgas_consumer_lag") == 0
        status, body = scrape(port, "/health")
        assert status == 200 and json.loads(body)["ready"] is True
        wait_until_warm(port)  # its one-time loads: the encoder's session is built after it serves
        assert json.loads(scrape(port, "/health")[1])["encoder"] in ("built", "refused")

        # `emgas stats` through the CLI: the same graph's size and top concepts
        env = {**os.environ, "EMGAS_BROKER": live.settings.bootstrap_servers(), "EMGAS_HOME": str(live.home),
               "EMGAS_PARTITIONS": "2"}
        out = subprocess.run([sys.executable, "-m", "emgas", "stats", "--graph", "bob", "--json", "--top", "3"],
                             env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        stats = json.loads(out.stdout)
        assert stats["passages"] == len(turns) and stats["turns"] == len(turns)
        assert stats["concepts"] == value(text, "emgas_concepts") and stats["edges"] == value(text, "emgas_edges")
        assert len(stats["top_concepts"]) == 3
        assert [c["count"] for c in stats["top_concepts"]] == sorted((c["count"] for c in stats["top_concepts"]), reverse=True)
        missing = subprocess.run([sys.executable, "-m", "emgas", "stats", "--graph", "nobody"],
                                 env=env, capture_output=True, text=True, timeout=60)
        assert missing.returncode == 1 and "graph_not_found" in missing.stderr
