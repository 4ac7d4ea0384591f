"""The broker `emgas broker` and `emgas demo` run on this machine.

A real Apache Kafka (one KRaft node, `streams.kafka.node`) wherever Java
and the jars are present, its records under its directory so a restart
keeps them; otherwise librdkafka's mock cluster, which keeps about 5 MiB
per partition and nothing once it stops (said in one line). `broker_kind`
(`--kafka`, `--mock`) chooses explicitly; asking for Kafka where it cannot
run is an error, not a fallback.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Literal

from emgas.streams.kafka.embedded import MockCluster, TopicSpec
from emgas.streams.errors import BrokerError
from emgas.streams.kafka.node import KafkaCluster, KafkaJars, find_jars, find_java, why_not_kafka
from emgas.streams.settings import Settings

MOCK_KEEPS = "the mock cluster keeps at most ~5 MiB per partition and nothing once it stops"


def start_embedded(settings: Settings, brokers: int = 1) -> MockCluster:
    """Start the mock cluster with every topic created (it has no admin API)."""
    cluster = MockCluster(brokers=brokers)
    cluster.create_topics(settings.topics())
    return cluster


@dataclass
class LocalBroker:
    """A broker this process runs: what it is, where, and how to stop it."""

    kind: Literal["kafka", "mock"]
    bootstrap_servers: str
    description: str
    close: Callable[[], None]
    details: dict = field(default_factory=dict)  # for broker.json
    note: str | None = None  # why the mock runs where Kafka was wanted


def kafka_jars(settings: Settings) -> KafkaJars | None:
    return find_jars(settings.kafka_home, settings.kafka_cache)


def choose(settings: Settings, kind: str | None = None) -> tuple[str, str | None]:
    """("kafka" or "mock", why not Kafka) for `kind` (default: the setting)."""
    kind = kind or settings.broker_kind
    if kind == "mock":
        return "mock", None
    reason = why_not_kafka(find_java(), kafka_jars(settings))
    if reason is None:
        return "kafka", None
    if kind == "kafka":
        raise BrokerError(f"cannot run Kafka: {reason}")
    return "mock", reason


def start_local_broker(
    settings: Settings, directory: Path, kind: str | None = None, mock_brokers: int = 1
) -> LocalBroker:
    """Start the chosen broker with every topic created; a real one keeps its
    records in `directory` (and its ports in `directory/node.json`)."""
    chosen, reason = choose(settings, kind)
    if chosen == "mock":
        cluster = start_embedded(settings, brokers=mock_brokers)
        note = f"no real Kafka here ({reason}): running librdkafka's mock cluster; {MOCK_KEEPS}" if reason else None
        return LocalBroker("mock", cluster.bootstrap_servers, "embedded broker (librdkafka mock cluster)",
                           cluster.close, {"kind": "mock"}, note)
    return _start_kafka(settings, directory)


def _start_kafka(settings: Settings, directory: Path) -> LocalBroker:
    java, jars = find_java(), kafka_jars(settings)
    assert java is not None and jars is not None
    saved = directory / "node.json"
    if saved.exists():
        node = json.loads(saved.read_text())
        for port in (node["port"], node["controller_port"]):
            _check_free(port, saved)
        cluster = KafkaCluster.create(directory, jars, java, heap=settings.kafka_heap, cluster_id=node["cluster_id"],
                                      ports=[(node["port"], node["controller_port"])])
    else:
        cluster = KafkaCluster.create(directory, jars, java, heap=settings.kafka_heap)
        directory.mkdir(parents=True, exist_ok=True)
        spec = cluster.nodes[0].spec
        saved.write_text(json.dumps({"cluster_id": cluster.cluster_id, "port": spec.port,
                                     "controller_port": spec.controller_port}))
    start_with_topics(cluster, settings)
    node = cluster.nodes[0]
    details = {"kind": "kafka", "version": jars.version, "jars": str(jars.libs), "jvm_pid": node.pid,
               "log_dir": str(node.spec.log_dir)}
    return LocalBroker("kafka", cluster.bootstrap_servers, f"Apache Kafka {jars.version} (one KRaft node, log in {node.spec.log_dir})",
                       cluster.stop, details)


def start_scratch_broker(
    settings: Settings, directory: Path, kind: str | None = None, extra_topics: Iterable[TopicSpec] = ()
) -> LocalBroker:
    """A fresh broker for a measurement or a harness: the chosen kind (see
    `choose`), new free ports, a new log under `directory`, every topic of
    `settings` and `extra_topics` created."""
    extra = list(extra_topics)
    chosen, reason = choose(settings, kind)
    if chosen == "mock":
        cluster = start_embedded(settings)
        cluster.create_topics(extra)
        return LocalBroker("mock", cluster.bootstrap_servers, "librdkafka mock cluster", cluster.close,
                           {"kind": "mock"}, reason)
    java, jars = find_java(), kafka_jars(settings)
    assert java is not None and jars is not None
    kafka = KafkaCluster.create(directory, jars, java, heap=settings.kafka_heap)
    start_with_topics(kafka, settings, extra)
    return LocalBroker("kafka", kafka.bootstrap_servers, f"Apache Kafka {jars.version}", kafka.stop,
                       {"kind": "kafka", "version": jars.version, "jvm_pid": kafka.nodes[0].pid})


def start_with_topics(cluster: KafkaCluster, settings: Settings, extra: Iterable[TopicSpec] = ()) -> None:
    """Start `cluster` and create every topic of `settings` (and `extra`) on
    it, as a worker would; stop it again if either fails."""
    try:
        cluster.start()
        asyncio.run(_create_topics(settings.model_copy(update={"broker": cluster.bootstrap_servers}), list(extra)))
    except BaseException:
        cluster.stop()
        raise


async def _create_topics(settings: Settings, extra: list[TopicSpec]) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    from emgas.streams.kafka.topics import ensure_topics

    await ensure_topics(settings)
    if not extra:
        return
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers(), **settings.kafka_options())
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t.name, t.partitions, settings.replication_factor) for t in extra])
    finally:
        await admin.close()


def _check_free(port: int, saved: Path) -> None:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise BrokerError(
                f"port {port} of the Kafka kept in {saved.parent} is taken (is another `emgas broker` running on "
                f"this EMGAS_HOME?)"
            ) from None


def write_broker_file(settings: Settings, broker: LocalBroker | MockCluster) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    details = broker.details if isinstance(broker, LocalBroker) else {"kind": "mock"}
    settings.broker_file.write_text(
        json.dumps({"bootstrap_servers": broker.bootstrap_servers, "pid": os.getpid(), **details})
    )


def remove_broker_file(settings: Settings, broker: LocalBroker | MockCluster) -> None:
    """Remove the broker file if it still names this broker."""
    try:
        if json.loads(settings.broker_file.read_text())["bootstrap_servers"] == broker.bootstrap_servers:
            settings.broker_file.unlink()
    except (OSError, ValueError, KeyError):
        pass
