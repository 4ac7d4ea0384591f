"""Topics on Apache Kafka: a worker creates them with their partitions and
configs (emgas.graph-events kept forever, replies, queries and dead letters
bounded), and warns when an existing emgas.graph-events drops records."""

import logging

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from emgas.streams.kafka.node import KafkaCluster
from emgas.streams.settings import Settings
from emgas.streams.kafka.topics import ensure_topics
from tests.support.live import run
from tests.support.brokers import TEST_HEAP, require_kafka

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    java, jars = require_kafka()
    cluster = KafkaCluster.create(tmp_path_factory.mktemp("topics"), jars, java, heap=TEST_HEAP)
    cluster.start()
    yield cluster
    cluster.stop()


async def described(settings: Settings, topics: list[str]) -> tuple[dict[str, int], dict[str, dict[str, str]]]:
    """Partitions and configs of `topics`, as the broker reports them."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers())
    await admin.start()
    try:
        partitions = {t["topic"]: len(t["partitions"]) for t in await admin.describe_topics(topics)}
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
        configs = {name: {e[0]: e[1] for e in entries}
                   for r in responses for _code, _msg, _type, name, entries, *_ in r.resources}
        return partitions, configs
    finally:
        await admin.close()


def test_a_worker_creates_its_topics_with_their_configs(kafka, tmp_path):
    settings = Settings(home=tmp_path, broker=kafka.bootstrap_servers, partitions=5, turn_partitions=3,
                        replies_retention_ms=60_000, dlq_retention_ms=86_400_000)
    run(ensure_topics(settings))
    run(ensure_topics(settings))  # the second worker finds them: nothing to do, no error
    names = [t.name for t in settings.topics()]
    partitions, configs = run(described(settings, names))
    assert partitions == {t.name: t.partitions for t in settings.topics()}
    assert (configs["emgas.graph-events"]["retention.ms"], configs["emgas.graph-events"]["retention.bytes"]) == ("-1", "-1")
    assert configs["emgas.replies"]["retention.ms"] == "60000" and configs["emgas.queries"]["retention.ms"] == "60000"
    assert configs["emgas.dlq"]["retention.ms"] == "86400000"
    assert configs["emgas.owners"]["cleanup.policy"] == "compact"


def test_an_existing_graph_events_topic_that_drops_records_is_warned_about(kafka, tmp_path, caplog):
    settings = Settings(home=tmp_path, broker=kafka.bootstrap_servers, graph_events_topic="old.graph-events",
                        turns_topic="old.turns", queries_topic="old.queries", replies_topic="old.replies",
                        dlq_topic="old.dlq", owners_topic="old.owners", keys_topic="old.keys")

    async def made_elsewhere() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic("old.graph-events", 8, 1, topic_configs={"retention.ms": "604800000"})])
        finally:
            await admin.close()

    run(made_elsewhere())
    with caplog.at_level(logging.WARNING, logger="emgas.streams.kafka.topics"):
        run(ensure_topics(settings))
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "old.graph-events has retention.ms=604800000" in warning and "set retention.ms=-1" in warning
