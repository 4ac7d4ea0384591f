"""The soak's processes: a KRaft cluster of three nodes and a group of
workers on 127.0.0.1, each started, crashed, stalled and stopped by its PID.

`close` ends every one of them, a stalled broker included (it is sent
SIGCONT first: a stopped JVM cannot act on SIGTERM)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from emgas.streams.kafka.local import start_with_topics
from emgas.streams.kafka.node import KafkaCluster, find_java
from emgas.streams.kafka.local import kafka_jars
from emgas.streams.errors import BrokerError
from emgas.streams.settings import Settings
from emgas.tools.harness import resident_bytes
from emgas.testing import free_port, health, start_worker, stop_worker

BROKER_HEAP = "-Xms128m -Xmx384m"  # three JVMs beside the workers on a small machine


@dataclass
class Fleet:
    settings: Settings  # pointing at the cluster
    cluster: KafkaCluster
    home: Path
    env: dict[str, str] = field(default_factory=dict)  # more settings for every worker
    command: list[str] | None = None  # another worker command line (`emgas.tools.memtrace`), or `emgas worker`
    loglevel: str = "WARNING"  # the workers' (their output: `<home>/<name>.log`)
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    web_ports: dict[str, int] = field(default_factory=dict)
    stalled: set[int] = field(default_factory=set)  # node ids under SIGSTOP

    @classmethod
    def start(cls, settings: Settings, home: Path, nodes: int = 3, env: dict[str, str] | None = None,
              command: list[str] | None = None, loglevel: str = "WARNING") -> "Fleet":
        """The cluster up with every topic created (replication `nodes`, min.insync.replicas 2); no worker yet."""
        java, jars = find_java(), kafka_jars(settings)
        if java is None or jars is None:
            raise BrokerError("the soak needs a real Kafka: Java and the Kafka jars (`emgas broker --install`)")
        cluster = KafkaCluster.create(home / "kafka", jars, java, size=nodes, heap=BROKER_HEAP)
        replicated = settings.model_copy(update={"replication_factor": nodes, "home": home})
        start_with_topics(cluster, replicated)
        return cls(replicated.model_copy(update={"broker": cluster.bootstrap_servers}), cluster, home, dict(env or {}),
                   command, loglevel)

    # workers

    def start_worker(self, name: str) -> int:
        """Start (or start again) worker `name` on its own state directory; its PID."""
        self.web_ports[name] = free_port()
        self.workers[name] = start_worker(self.settings, self.home / f"{name}.log", name=name,
                                          web_port=self.web_ports[name], env=self.env, command=self.command,
                                          loglevel=self.loglevel)
        return self.workers[name].pid

    def kill_worker(self, name: str) -> None:
        """SIGKILL: no hand-off, no commit, no flush."""
        worker = self.workers.pop(name)
        worker.send_signal(signal.SIGKILL)
        worker.wait()

    def stop_worker(self, name: str) -> int | None:
        """SIGTERM: the worker hands its partitions over, then ends; its exit status."""
        worker = self.workers.pop(name)
        stop_worker(worker, timeout_s=60)
        return worker.returncode

    def wipe_worker(self, name: str) -> None:
        """Remove the (stopped) worker's state directory: it rebuilds from snapshots and the log."""
        shutil.rmtree(self.settings.model_copy(update={"worker_name": name}).worker_data_dir, ignore_errors=True)

    def worker_rss_mib(self, name: str) -> float | None:
        worker = self.workers.get(name)
        if worker is None or worker.poll() is not None:
            return None
        try:
            return resident_bytes(worker.pid) / 2**20
        except OSError:
            return None

    def not_ready(self) -> str:
        """What keeps the workers from serving every partition, from their `/health`:
        a worker not ready (its partitions assigned but not caught up), a worker
        holding no partition, a partition assigned to none; "" when none of these."""
        out, assigned = [], set()
        for name, port in self.web_ports.items():
            if name not in self.workers:
                continue
            try:
                found = health(port)
            except (OSError, ValueError) as err:
                out.append(f"{name}: no /health ({type(err).__name__})")
                continue
            parts = found.get("partitions", {})
            mine = set(parts.get("assigned", []))
            assigned |= mine
            behind = sorted(mine - set(parts.get("ready", [])))
            if not mine:
                out.append(f"{name}: no partition assigned")
            elif behind or not found.get("ready"):
                out.append(f"{name}: not ready (catching up {behind})")
        missing = sorted(set(range(self.settings.partitions)) - assigned)
        if missing and not out:
            out.append(f"partitions {missing} assigned to no worker")
        return "; ".join(out)

    def recoveries(self) -> dict[str, dict]:
        """Each running worker's last catch-up per partition (`/health`: seconds, records read)."""
        out = {}
        for name, port in self.web_ports.items():
            if name in self.workers:
                try:
                    out[name] = health(port).get("recoveries", {})
                except (OSError, ValueError):
                    out[name] = {}
        return out

    def dead_workers(self) -> list[str]:
        """Workers that ended by themselves (a crash the soak did not cause)."""
        return [name for name, worker in self.workers.items() if worker.poll() is not None]

    # brokers

    def kill_node(self, node_id: int) -> None:
        self.cluster.nodes[node_id - 1].kill()

    def restart_node(self, node_id: int, timeout_s: float = 120) -> None:
        """Start the node again on its own log and wait until it is back in the cluster."""
        node = self.cluster.nodes[node_id - 1]
        node.start()
        self.cluster.wait_ready(timeout_s, nodes=[node])

    def stall_node(self, node_id: int) -> None:
        """SIGSTOP: the JVM hangs, its connections stay open."""
        pid = self.cluster.nodes[node_id - 1].pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        self.stalled.add(node_id)

    def resume_node(self, node_id: int) -> None:
        pid = self.cluster.nodes[node_id - 1].pid
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        self.stalled.discard(node_id)

    def close(self) -> None:
        """End every process started here, by PID: workers first, then the brokers."""
        for node_id in list(self.stalled):
            try:
                self.resume_node(node_id)
            except ProcessLookupError:
                self.stalled.discard(node_id)
        for name in list(self.workers):
            worker = self.workers.pop(name)
            stop_worker(worker, timeout_s=20)
        self.cluster.stop()  # SIGTERM, then SIGKILL after 30 s
        for node in self.cluster.nodes:
            node.kill()  # none outlives the soak (a no-op for a node that ended)
