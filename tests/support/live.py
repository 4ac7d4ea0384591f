"""Running whole pipelines (a broker + worker processes) inside a test.

The broker is a real Kafka, one per pipeline (`tests.support.brokers`);
the mock only where a test asks for it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from emgas.processors.events import DigestReply, Turn
from emgas.processors.extract import extractor_id, ingest
from emgas.processors.graph import GraphParams
from emgas.state.digest import partition_digests
from emgas.state.memory import MemoryStore
from emgas.state.projector import PartitionState
from emgas.streams.interfaces.client import MemoryClient
from emgas.testing import free_port, health, start_worker, stop_worker, turns_per_graph, wait_for_turns
from emgas.streams.settings import Settings
from tests.support.brokers import TestBroker, start_test_broker


@dataclass
class Live:
    settings: Settings
    cluster: TestBroker
    home: Path
    workers: dict[str, object] = field(default_factory=dict)
    web_ports: dict[str, int] = field(default_factory=dict)

    def start(self, name: str, env: dict[str, str] | None = None, command: list[str] | None = None) -> None:
        """A worker named `name` (its web server on a port of its own, `web_ports[name]`);
        `command`: a worker with test-only faults (`tests.support.hooked_worker.command`)."""
        self.web_ports[name] = free_port()
        self.workers[name] = start_worker(self.settings, self.home / f"{name}.log", name=name,
                                          web_port=self.web_ports[name], env=env, command=command)

    def health(self, name: str) -> dict:
        """The worker's `/health` (200 or 503 alike)."""
        return health(self.web_ports[name])

    def metrics(self, name: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_ports[name]}/metrics", timeout=10) as response:
            return response.read().decode()

    def kill(self, name: str) -> None:
        """SIGKILL: no shutdown, no commit, no flush."""
        worker = self.workers.pop(name)
        worker.send_signal(signal.SIGKILL)
        worker.wait()

    def emgas(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        """`emgas ARGS` as a subprocess against this pipeline's broker, home and graph parameters."""
        env = {**os.environ, "EMGAS_BROKER": self.settings.bootstrap_servers(), "EMGAS_HOME": str(self.home),
               "EMGAS_PARTITIONS": str(self.settings.partitions), "EMGAS_GRAPH": self.settings.graph.model_dump_json()}
        return subprocess.run([sys.executable, "-m", "emgas", *args], env=env, capture_output=True, text=True,
                              timeout=timeout_s)

    def logs(self) -> str:
        return "\n".join(p.read_text()[-3000:] for p in sorted(self.home.glob("*.log")))


# No decay windows, consolidation or reinforcement: the graph is a function
# of its turns alone, so a graph built in-process (`offline_digests`) equals it.
STATIC = GraphParams(window_s=0, consolidate_every_s=0, retrieval_boost=0, idle_check_s=0)


@contextlib.contextmanager
def live_pipeline(
    home: Path, partitions: int, workers: int = 1, graph: GraphParams = STATIC, broker: str = "kafka", nodes: int = 1,
    topics: dict[str, int] | None = None, broker_properties: dict[str, str] | None = None,
) -> Iterator[Live]:
    """A broker (`nodes` Kafka nodes, every topic replicated on each) whose
    graph topics have `partitions` partitions, with workers; `topics`: more
    settings of the topics' configs (e.g. `turns_retention_ms`; the workers
    need them in their environment too, for the few that read them);
    `broker_properties`: more server properties of a Kafka."""
    home.mkdir(parents=True, exist_ok=True)
    base = Settings(home=home, partitions=partitions, turn_partitions=partitions, query_timeout_s=20, graph=graph,
                    replication_factor=nodes, **(topics or {}))
    cluster = start_test_broker(base, home / "kafka", broker, nodes=nodes,  # type: ignore[arg-type]
                                properties=broker_properties)
    live = Live(base.model_copy(update={"broker": cluster.bootstrap_servers}), cluster, home)
    try:
        for i in range(workers):
            live.start(f"worker-{i + 1}")
        yield live
    finally:
        for worker in live.workers.values():
            stop_worker(worker)
        cluster.close()


@contextlib.contextmanager
def serving(home: Path, partitions: int, turns: list[Turn]) -> Iterator[tuple[Live, int]]:
    """A pipeline with one worker whose web server is on a known port,
    `turns` published and applied: (the pipeline, that port)."""
    port = free_port()
    with live_pipeline(home, partitions=partitions, workers=0) as live:
        live.workers["w"] = start_worker(live.settings, home / "w.log", name="w", web_port=port)
        run(publish_and_wait(live.settings, turns, batch=50, expected=turns_per_graph(turns)))
        yield live, port


async def publish_and_wait(settings: Settings, turns: list[Turn], batch: int, expected: dict[str, int]) -> None:
    """Publish `turns` in batches of `batch` (each batch acked before the next),
    then wait until every graph has applied its expected number of turns."""
    async with MemoryClient(settings) as client:
        await wait_for_turns(client, {g: 0 for g in expected}, deadline_s=120)
        await client.publish(turns, chunk=batch)
        await wait_for_turns(client, expected, deadline_s=120)


async def live_digests(settings: Settings) -> list[DigestReply]:
    async with MemoryClient(settings) as client:
        return await client.digests()  # type: ignore[return-value]


def offline_digests(turns: list[Turn], settings: Settings) -> dict[str, str]:
    """graph_id -> digest of the graph built in-process from `turns`: the
    same extraction and fold as a worker, with no broker."""
    state = PartitionState(MemoryStore(), settings.graph)
    extractor = extractor_id(settings.extraction)
    for offset, turn in enumerate(turns):
        state.apply(ingest(turn, settings.extraction, extractor), offset)
    return {d.graph_id: d.digest for d in partition_digests(state.repo)}


def digests_by_graph(replies: list[DigestReply]) -> dict[str, str]:
    """graph_id -> digest of its active version."""
    return {d.graph_id: d.digest for r in replies for d in r.graphs if d.active}


def mismatch_report(live: Live, turns_of: dict[str, list[Turn]]) -> str:
    """Why live digests that should be equal are not, for an assertion's
    message: each graph's live digest and size beside the digest of its
    turns folded offline (which side left the truth), and the workers' logs."""
    replies = run(live_digests(live.settings))
    live_now = digests_by_graph(replies)
    lines = []
    for graph_id, turns in turns_of.items():
        offline = offline_digests([t.model_copy(update={"graph_id": graph_id}) for t in turns], live.settings)
        stats = run(_stats(live.settings, graph_id))
        lines.append(f"{graph_id}: live {live_now.get(graph_id)} offline {offline.get(graph_id)} {stats}")
    offsets = [(r.partition, r.applied_offset) for r in replies]
    return "\n".join([*lines, f"applied offsets {offsets}", live.logs()])


async def _stats(settings: Settings, graph_id: str) -> object:
    async with MemoryClient(settings) as client:
        return await client.stats(graph_id, top=3)


def run(coro):  # noqa: ANN001, ANN201 - a test helper
    return asyncio.run(coro)
