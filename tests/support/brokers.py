"""The broker an integration test runs against: Apache Kafka, one per pipeline.

Integration and end-to-end tests run on a real Kafka (one KRaft node, a
fresh log directory, free loopback ports, topics created as a worker would
create them), started for each pipeline: no test sees another's topics,
groups or offsets. It costs one JVM start (about 3-8 s on the 2-core
machine) per pipeline; a module-scoped fixture shares it among its tests.

Where Java or the jars are absent the test is skipped with the reason
(never silently green); in CI that is an error, since `.ci/run` installs
them. Tests about the mock cluster itself ask for it (`kind="mock"`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from emgas.streams.kafka.embedded import MockCluster
from emgas.streams.kafka.node import KafkaCluster, find_jars, find_java, why_not_kafka
from emgas.streams.settings import default_cache
from emgas.streams.kafka.local import start_embedded, start_with_topics
from emgas.streams.settings import Settings

TEST_HEAP = "-Xms128m -Xmx384m"


def kafka_here() -> tuple[str, object] | str:
    """(java, jars) of a real Kafka, or why there is none."""
    java, jars = find_java(), find_jars(None, default_cache())
    reason = why_not_kafka(java, jars)
    return reason if reason else (java, jars)


def require_kafka() -> tuple[str, object]:
    found = kafka_here()
    if isinstance(found, str):
        if os.environ.get("CI"):
            raise RuntimeError(f"CI needs a real Kafka for the integration tests: {found}")
        pytest.skip(f"no real Kafka here: {found}")
    return found


@dataclass
class TestBroker:
    """A running broker for a test: Kafka (`kafka`) or the mock (`mock`)."""

    kind: Literal["kafka", "mock"]
    bootstrap_servers: str
    kafka: KafkaCluster | None = None
    mock: MockCluster | None = None

    def set_broker_down(self, node_id: int) -> None:
        """The broker goes away: a SIGKILL of its JVM (Kafka), or the mock's switch."""
        if self.kafka is not None:
            self.kafka.nodes[node_id - 1].kill()
        else:
            assert self.mock is not None
            self.mock.set_broker_down(node_id)

    def set_broker_up(self, node_id: int) -> None:
        """It comes back on the same log (Kafka: started again, waited for)."""
        if self.kafka is not None:
            node = self.kafka.nodes[node_id - 1]
            node.start()
            self.kafka.wait_ready(nodes=[node])
        else:
            assert self.mock is not None
            self.mock.set_broker_up(node_id)

    def close(self) -> None:
        if self.kafka is not None:
            self.kafka.stop()
        if self.mock is not None:
            self.mock.close()


def start_test_broker(settings: Settings, directory: Path, kind: Literal["kafka", "mock"] = "kafka",
                      nodes: int = 1, properties: dict[str, str] | None = None) -> TestBroker:
    """A broker with every topic of `settings` created (its partitions, its
    configs); `properties`: more server properties of a Kafka."""
    if kind == "mock":
        cluster = start_embedded(settings, brokers=nodes)
        return TestBroker("mock", cluster.bootstrap_servers, mock=cluster)
    java, jars = require_kafka()
    kafka = KafkaCluster.create(directory, jars, java, size=nodes, heap=TEST_HEAP, properties=properties)  # type: ignore[arg-type]
    start_with_topics(kafka, settings.model_copy(update={"replication_factor": nodes}))
    return TestBroker("kafka", kafka.bootstrap_servers, kafka=kafka)


def broker_ready(process, lines: int = 5) -> bool:  # noqa: ANN001 - a Popen with text stdout
    """Whether `emgas broker` (a child process) says, within its first
    `lines` lines, that it wrote its bootstrap servers: it is ready."""
    for _ in range(lines):
        line = process.stdout.readline()
        if "bootstrap servers written" in line:
            return True
        if not line:
            return False
    return False


@dataclass
class SecuredKafka:
    """One Kafka node whose clients' listener is SASL_SSL (SCRAM-SHA-256 users, a
    test CA's certificate); the brokers' own listener stays on another port."""

    cluster: KafkaCluster
    secured: str  # bootstrap servers of the SASL_SSL listener

    def close(self) -> None:
        self.cluster.stop()


def start_secured_kafka(directory: Path, keystore: Path, users: dict[str, str]) -> SecuredKafka:
    from emgas.streams.kafka.node import KafkaNode, NodeSpec, free_port, new_cluster_id

    java, jars = require_kafka()
    port, controller, secured = free_port(), free_port(), free_port()
    spec = NodeSpec(
        1, port, controller, directory / "node-1", f"1@127.0.0.1:{controller}",
        listeners={"SASL_SSL": secured}, scram_users=users,
        properties={
            # SCRAM for our clients; PLAIN (over TLS) too, for kcat: Debian's librdkafka 2.0.2
            # fails SCRAM against Kafka 4.1 with the right password.
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                + " ".join(f'user_{name}="{password}"' for name, password in users.items()) + ";",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
        },
    )
    cluster = KafkaCluster([KafkaNode(spec, jars, java, TEST_HEAP)], new_cluster_id())  # type: ignore[arg-type]
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return SecuredKafka(cluster, f"127.0.0.1:{secured}")
