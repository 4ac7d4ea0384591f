"""Creating the topics on a real Kafka cluster with the admin API."""

from __future__ import annotations

import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, UnsupportedVersionError

from streams.errors import BrokerError
from streams.settings import Settings

log = logging.getLogger(__name__)


async def ensure_topics(settings: Settings) -> None:
    """Create missing topics with the configured partitions and replication.

    The embedded mock cluster has no CreateTopics API: there `emgas broker`
    created them already, so an unsupported-API answer is fine as long as
    the topics exist.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers(), **settings.kafka_options())
    try:
        await admin.start()
    except KafkaError as exc:
        raise BrokerError(f"cannot reach Kafka at {settings.bootstrap_servers()}: {exc}") from None
    try:
        existing = set(await admin.list_topics())
        missing = [t for t in settings.topics() if t.name not in existing]
        if missing:
            await _create(admin, settings, missing)
    finally:
        await admin.close()


async def _create(admin: AIOKafkaAdminClient, settings: Settings, missing: list) -> None:
    topics = [
        NewTopic(t.name, num_partitions=t.partitions, replication_factor=settings.replication_factor)
        for t in missing
    ]
    try:
        await admin.create_topics(topics)
        log.info("created topics %s", [t.name for t in missing])
    except TopicAlreadyExistsError:
        pass  # another worker won the race
    except UnsupportedVersionError:
        raise BrokerError(
            f"topics {[t.name for t in missing]} are missing and this broker cannot "
            "create them; for the embedded broker, start it with `emgas broker`"
        ) from None
