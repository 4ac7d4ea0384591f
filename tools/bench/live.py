"""Figures through the broker, on one fresh broker and worker: ingest and its
passthrough limit, replay and log reads, round trips, hops, idle CPU, and
ingest again with a second worker."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from emgas.streams.kafka.local import choose, kafka_jars, start_scratch_broker
from emgas.streams.settings import Settings
from emgas.tools.bench.ingest import ingest_rates, ready
from emgas.tools.bench.kafka_alone import bench_topics, hop_figures, passthrough_rates
from emgas.tools.bench.replay import replay_figures
from emgas.tools.bench.round_trips import round_trip_figures
from emgas.tools.figures import Progress, figure
from emgas.tools.harness import cpu_seconds, ingest_s, synthetic_turns
from emgas.testing import free_port, start_worker, stop_worker, wait_for_workers, wait_until_warm


def broker_in_use(settings: Settings) -> str:
    """Which broker the live figures are measured on ("Apache Kafka 4.1.2", or the mock and why)."""
    kind, reason = choose(settings)
    if kind == "kafka":
        jars = kafka_jars(settings)
        return f"Apache Kafka {jars.version if jars else '?'} (one KRaft node)"
    return "librdkafka mock cluster" + (f" ({reason})" if reason else "")


def idle_cpu_figures(worker_pid: int, broker_pid: int | None, idle_s: float) -> dict[str, Any]:
    """The worker's (and the broker's JVM, when there is one) CPU use over `idle_s` seconds while nobody talks to it."""
    out: dict[str, Any] = {}
    cpu = cpu_seconds(worker_pid)
    broker_cpu = cpu_seconds(broker_pid) if broker_pid else None
    time.sleep(idle_s)
    out["idle_worker_cpu_percent"] = round((cpu_seconds(worker_pid) - cpu) / idle_s * 100, 2)
    if broker_pid:
        out["idle_broker_cpu_percent"] = round((cpu_seconds(broker_pid) - broker_cpu) / idle_s * 100, 2)
    return out


def pipeline_figures(settings: Settings, size: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """On one fresh broker (4 partitions): ingest with one worker, the
    passthrough, replay and log read, round trips, Kafka hops and idle CPU,
    then ingest with a second worker added."""
    home = Path(tempfile.mkdtemp(prefix="emgas-bench-"))
    bench = settings.model_copy(update={"home": home, "partitions": 4, "turn_partitions": 4})
    cluster = start_scratch_broker(bench, home / "kafka", extra_topics=bench_topics(bench))
    live = bench.model_copy(update={"broker": cluster.bootstrap_servers})
    ports = [free_port(), free_port()]
    procs = [start_worker(live, home / "worker-1.log", name="worker-1", web_port=ports[0])]
    repeats = size["repeats"]
    out: dict[str, Any] = {}
    try:
        asyncio.run(ready(live, [f"bench-{i}" for i in range(8)] + ["rr"]))
        wait_until_warm(ports[0])  # its steady state: the encoder's session is built after it serves
        totals: dict[str, int] = {}
        ingest_rates(live, 50, 1, "warm-up", totals, progress)  # first extraction, first writes
        out["ingest_turns_per_s"] = figure(ingest_rates(live, size["ingest"], repeats, "one", totals, progress), 1)
        out["passthrough_turns_per_s"] = figure(passthrough_rates(live, size["ingest"], repeats, progress), 1)
        progress("replay")
        out.update(replay_figures(live, home, repeats))
        progress("round trips")
        graph_turns = [t.model_copy(update={"graph_id": "rr"}) for t in synthetic_turns(size["rr_turns"], graphs=1)]
        asyncio.run(ingest_s(live, graph_turns, totals))
        out["rr_graph_turns"] = size["rr_turns"]
        out.update(round_trip_figures(live, size["rr_queries"], repeats))
        progress("kafka hops")
        out.update(hop_figures(live, size["hops"], repeats))
        time.sleep(1.0)
        broker_pid = cluster.details.get("jvm_pid")  # the mock runs inside this process: not measured
        out.update(idle_cpu_figures(procs[0].pid, broker_pid, size["idle_s"]))
        procs.append(start_worker(live, home / "worker-2.log", name="worker-2", web_port=ports[1]))
        progress("a second worker joins")
        asyncio.run(wait_for_workers(live, {"worker-1", "worker-2"}, 90))
        wait_until_warm(ports[1])
        out["ingest_turns_per_s_2_workers"] = figure(ingest_rates(live, size["ingest"], repeats, "two", totals, progress), 1)
        return out
    finally:
        for proc in procs:
            stop_worker(proc)
        cluster.close()
        shutil.rmtree(home, ignore_errors=True)
