"""A real Apache Kafka on this machine: KRaft nodes run from Maven Central's jars.

The broker is `org.apache.kafka:kafka_2.13` with its dependencies and a
log4j2 binding (`streams/kafka/broker/pom.xml`, the version pinned there), run
as plain JVMs: `kafka.tools.StorageTool format`, then `kafka.Kafka`. The
jars are resolved once (`install`, i.e. `emgas broker --install` or
`make kafka`) into a cache outside the checkout, or taken from a Kafka
distribution the user has (`EMGAS_KAFKA_HOME`, its `libs/*.jar`).

A node is ready when it logged "Kafka Server started" (it is unfenced) and
an admin metadata request lists every broker of its cluster. Each node
keeps its log under its own directory, so stopping and starting it again
keeps every record; SIGTERM stops it cleanly, SIGKILL is a crash.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from emgas.streams.errors import BrokerError
from emgas.streams.settings import DEFAULT_HEAP

HERE = Path(__file__).parent / "broker"
POM = HERE / "pom.xml"
LOG_CONFIG = HERE / "log4j2.properties"
STARTED = "Kafka Server started"
# Heap of one node: enough for tests and a laptop's memory, bounded.
_JVM_FLAGS = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true"]


def kafka_version() -> str:
    """The Kafka version `streams/kafka/broker/pom.xml` pins."""
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    assert found, "streams/kafka/broker/pom.xml names no kafka.version"
    return found.group(1)


@dataclass(frozen=True)
class KafkaJars:
    """A broker classpath: a directory of jars, the Kafka version in it and where it came from."""

    libs: Path
    version: str
    source: str  # "cache" or "EMGAS_KAFKA_HOME"

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")  # the JVM expands the wildcard


def find_java() -> str | None:
    """The `java` of $JAVA_HOME, else the one on PATH; None without one."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def find_jars(kafka_home: Path | None, cache: Path) -> KafkaJars | None:
    """The user's distribution (`kafka_home`/libs) if given, else the cache's copy of the pinned version."""
    if kafka_home is not None:
        libs = kafka_home / "libs"
        jars = sorted(libs.glob("kafka_2.13-*.jar"))
        if not jars:
            raise BrokerError(f"EMGAS_KAFKA_HOME={kafka_home} has no libs/kafka_2.13-*.jar (a Kafka distribution's layout)")
        version = jars[0].name.removeprefix("kafka_2.13-").removesuffix(".jar")
        return KafkaJars(libs, version, "EMGAS_KAFKA_HOME")
    version = kafka_version()
    libs = cache / f"kafka-{version}" / "libs"
    return KafkaJars(libs, version, "cache") if (libs.parent / "complete").exists() else None


def install(cache: Path) -> KafkaJars:
    """Resolve the pinned broker's jars from Maven Central into `cache` (once;
    a second call finds them). Needs Maven (`mvn`)."""
    found = find_jars(None, cache)
    if found is not None:
        return found
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError("installing the Kafka jars needs Maven (`mvn`): install it, or set EMGAS_KAFKA_HOME")
    version = kafka_version()
    target = cache / f"kafka-{version}"
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"kafka-{version}-", dir=cache))
    command = [mvn, "-B", "-q", "-f", str(POM), "dependency:copy-dependencies", f"-DoutputDirectory={staging / 'libs'}"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = " ".join((done.stdout + done.stderr).split()[-40:])
        raise BrokerError(f"Maven could not resolve Kafka {version}: {tail}")
    (staging / "complete").write_text(version + "\n")
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return KafkaJars(target / "libs", version, "cache")


def why_not_kafka(java: str | None, jars: KafkaJars | None) -> str | None:
    """Why a real Kafka cannot run here (None: it can)."""
    if java is None:
        return "no Java found (install OpenJDK 17 or newer, or set JAVA_HOME)"
    if jars is None:
        return f"the Kafka {kafka_version()} jars are not installed (run `emgas broker --install`, or set EMGAS_KAFKA_HOME)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, base64url without padding (not starting with '-')."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


@dataclass(frozen=True)
class NodeSpec:
    """One KRaft node (broker and controller) on 127.0.0.1."""

    node_id: int
    port: int
    controller_port: int
    directory: Path  # its log (the records), its config and its output
    voters: str  # every controller of the cluster: "1@127.0.0.1:p1,2@127.0.0.1:p2"
    replication: int = 1  # the cluster's size, for its internal topics
    properties: dict[str, str] = field(default_factory=dict)  # more (or overriding) server properties
    listeners: dict[str, int] = field(default_factory=dict)  # more listeners: name -> port
    scram_users: dict[str, str] = field(default_factory=dict)  # SCRAM-SHA-256 users made when formatting

    @property
    def log_dir(self) -> Path:
        return self.directory / "log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def server_properties(self) -> str:
        listeners = {"PLAINTEXT": self.port, **self.listeners}
        protocols = {name: name if name in {"PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT"} else "PLAINTEXT"
                     for name in listeners}
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": ",".join([*(f"{n}://127.0.0.1:{p}" for n, p in listeners.items()),
                                   f"CONTROLLER://127.0.0.1:{self.controller_port}"]),
            "advertised.listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in listeners.items()),
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": ",".join(
                [*(f"{n}:{p}" for n, p in protocols.items()), "CONTROLLER:PLAINTEXT"]
            ),
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "default.replication.factor": str(self.replication),
            "min.insync.replicas": str(min(2, self.replication)),
            "offsets.topic.replication.factor": str(self.replication),
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": str(self.replication),
            "transaction.state.log.min.isr": str(min(2, self.replication)),
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": str(self.replication),
            "share.coordinator.state.topic.min.isr": str(min(2, self.replication)),
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "auto.create.topics.enable": "false",
            **self.properties,
        }
        return "".join(f"{k}={v}\n" for k, v in props.items())


class KafkaNode:
    """One broker JVM: formats its directory once, starts, stops, crashes."""

    def __init__(self, spec: NodeSpec, jars: KafkaJars, java: str, heap: str = DEFAULT_HEAP) -> None:
        self.spec = spec
        self.jars = jars
        self.java = java
        self.heap = heap
        self.process: subprocess.Popen[bytes] | None = None
        self._output_at = 0  # where this run's output starts in the output file

    @property
    def config(self) -> Path:
        return self.spec.directory / "server.properties"

    @property
    def output(self) -> Path:
        return self.spec.directory / "broker.out"

    def _jvm(self, main: str, *args: str) -> list[str]:
        return [self.java, *self.heap.split(), *_JVM_FLAGS, f"-Dlog4j2.configurationFile={LOG_CONFIG}",
                "-cp", self.jars.classpath, main, *args]

    def format(self, cluster_id: str) -> None:
        """Write the config and format the log directory, unless it holds a formatted log already."""
        self.spec.directory.mkdir(parents=True, exist_ok=True)
        self.config.write_text(self.spec.server_properties())
        if (self.spec.log_dir / "meta.properties").exists():
            return
        users = [arg for name, password in self.spec.scram_users.items()
                 for arg in ("--add-scram", f"SCRAM-SHA-256=[name={name},password={password}]")]
        done = subprocess.run(
            self._jvm("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.config), *users),
            capture_output=True, text=True,
        )
        if done.returncode != 0:
            raise BrokerError(f"formatting Kafka node {self.spec.node_id} failed: {(done.stdout + done.stderr).strip()[-500:]}")

    def start(self) -> None:
        """Start the JVM (not waiting for it: see `wait_started`)."""
        self.config.write_text(self.spec.server_properties())
        self._output_at = self.output.stat().st_size if self.output.exists() else 0
        with open(self.output, "ab") as out:
            self.process = subprocess.Popen(self._jvm("kafka.Kafka", str(self.config)), stdout=out, stderr=subprocess.STDOUT)

    def started(self) -> bool:
        """Whether this run logged that the broker started; BrokerError if the JVM ended."""
        text = self.run_output()
        if STARTED in text:
            return True
        if self.process is not None and self.process.poll() is not None:
            raise BrokerError(
                f"Kafka node {self.spec.node_id} exited with status {self.process.returncode}: {_last_lines(text)}"
            )
        return False

    def run_output(self) -> str:
        if not self.output.exists():
            return ""
        with open(self.output, "rb") as out:
            out.seek(self._output_at)
            return out.read().decode(errors="replace")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL if it has not ended in `timeout_s`."""
        if not self.running():
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.running():
            assert self.process is not None
            self.process.kill()
            self.process.wait(10)


def _last_lines(text: str, n: int = 5) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:]) or "(no output)"


class KafkaCluster:
    """`size` KRaft nodes on loopback that start together (a quorum needs a
    majority of them to elect a leader) and are ready together."""

    def __init__(self, nodes: list[KafkaNode], cluster_id: str) -> None:
        self.nodes = nodes
        self.cluster_id = cluster_id

    @classmethod
    def create(
        cls, directory: Path, jars: KafkaJars, java: str, size: int = 1, heap: str = DEFAULT_HEAP,
        properties: dict[str, str] | None = None, cluster_id: str | None = None,
        ports: list[tuple[int, int]] | None = None,
    ) -> "KafkaCluster":
        """A new cluster under `directory` (node n in `directory/node-n`), on
        `ports` ((client, controller) per node; default: free ports)."""
        ports = ports or [(free_port(), free_port()) for _ in range(size)]
        voters = ",".join(f"{n + 1}@127.0.0.1:{controller}" for n, (_, controller) in enumerate(ports))
        nodes = [
            KafkaNode(NodeSpec(n + 1, port, controller, directory / f"node-{n + 1}", voters, size, dict(properties or {})),
                      jars, java, heap)
            for n, (port, controller) in enumerate(ports)
        ]
        return cls(nodes, cluster_id or new_cluster_id())

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.spec.bootstrap for node in self.nodes)

    def start(self, timeout_s: float = 120.0) -> None:
        """Format what is not formatted, start every node, and wait until each
        logged that it started and an admin request lists all of them."""
        for node in self.nodes:
            node.format(self.cluster_id)
        for node in self.nodes:
            if not node.running():
                node.start()
        self.wait_ready(timeout_s)

    def wait_ready(self, timeout_s: float = 120.0, nodes: list[KafkaNode] | None = None) -> None:
        deadline = time.monotonic() + timeout_s
        waiting = [n for n in (nodes or self.nodes)]
        while waiting:
            waiting = [n for n in waiting if not n.started()]
            if waiting and time.monotonic() > deadline:
                raise BrokerError(f"Kafka node(s) {[n.spec.node_id for n in waiting]} did not start within {timeout_s:g} s")
            time.sleep(0.1)
        running = [n for n in self.nodes if n.running()]
        wait_for_metadata(",".join(n.spec.bootstrap for n in running), len(running), deadline)

    def stop(self) -> None:
        for node in self.nodes:
            if node.running():
                assert node.process is not None
                node.process.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> "KafkaCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for_metadata(bootstrap: str, brokers: int, deadline: float, options: dict | None = None) -> None:
    """Until a metadata request to `bootstrap` lists `brokers` brokers (BrokerError at `deadline`)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, **(options or {})})
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=2)
            if len(metadata.brokers) >= brokers:
                return
            last = f"{len(metadata.brokers)} of {brokers} brokers listed"
        except Exception as exc:  # noqa: BLE001 - KafkaException while the broker comes up
            last = str(exc)
        time.sleep(0.2)
    raise BrokerError(f"Kafka at {bootstrap} did not answer a metadata request in time: {last}")
