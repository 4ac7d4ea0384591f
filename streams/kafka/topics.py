"""Creating the topics on a real Kafka cluster with the admin API."""

from __future__ import annotations

import asyncio
import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    IncompatibleBrokerVersion,
    KafkaError,
    TopicAlreadyExistsError,
    UnsupportedVersionError,
    for_code,
)

from emgas.streams.errors import BrokerError, ConfigError
from emgas.streams.kafka.security import connection_reasons, unreachable
from emgas.streams.settings import Settings, TopicSpec

log = logging.getLogger(__name__)

# What a broker without the admin APIs answers: aiokafka raises
# IncompatibleBrokerVersion when the broker does not list the API at all
# (the embedded mock cluster), UnsupportedVersionError when it refuses it.
_UNSUPPORTED = (IncompatibleBrokerVersion, UnsupportedVersionError)
# What each retention setting drops, for the warning.
_DROPS = {
    "retention.ms": "records older than {} ms",
    "retention.bytes": "the oldest records once a partition holds more than {} bytes",
}
_RETENTION_KEYS = tuple(_DROPS)


def topic_configs(settings: Settings) -> dict[str, dict[str, str]]:
    """Per-topic configs set when emgas creates its topics (values are strings,
    as Kafka takes them).

    emgas.graph-events is the source of truth: any retention would drop
    events that a rebuild or replay needs, so it is kept forever whatever the
    broker default. Replies only matter while a client waits for them, and
    the DLQ keeps refused messages for inspection, so both are bounded.
    emgas.turns keeps turns `turns_retention_ms`: they are only re-read by
    `replay --from-turns` (the words are sealed in graph-events), and their
    text is there as published, so this bounds how long a forgotten turn's
    words stay there. The key topic is compacted, and its segments roll and
    get compacted within `key_erasure_ms`, so an erased key (a tombstone)
    removes the key it erases within that bound; the tombstone itself
    holds no key and goes a day later.
    """
    erasure = str(settings.key_erasure_ms)
    return {
        settings.graph_events_topic: {"retention.ms": "-1", "retention.bytes": "-1"},
        settings.turns_topic: _deleted_after(settings.turns_retention_ms),
        settings.keys_topic: {
            "cleanup.policy": "compact", "segment.ms": erasure, "max.compaction.lag.ms": erasure,
            "min.compaction.lag.ms": "0", "delete.retention.ms": "86400000",
        },
        settings.replies_topic: _deleted_after(settings.replies_retention_ms),
        # Queries are answered within their timeout or never: kept as long as replies.
        settings.queries_topic: _deleted_after(settings.replies_retention_ms),
        settings.dlq_topic: _deleted_after(settings.dlq_retention_ms),
        settings.owners_topic: {"cleanup.policy": "compact"},  # the latest owner of each partition
    }


def _deleted_after(retention_ms: int) -> dict[str, str]:
    """A topic whose records go `retention_ms` after they came. Kafka deletes
    whole segments, and only those it has rolled (on a record that comes
    after the segment's `segment.ms`, default a week): so segments roll
    within the retention too (a day at most), or a record would stay up to
    a week longer than the retention says."""
    return {"retention.ms": str(retention_ms), "segment.ms": str(min(retention_ms, 86_400_000))}


def finite_retention(configs: dict[str, str | None]) -> dict[str, str]:
    """The retention settings among `configs` that drop records (-1: never)."""
    return {
        key: value
        for key in _RETENTION_KEYS
        if (value := configs.get(key)) is not None and value.strip() != "-1"
    }


async def ensure_topics(settings: Settings) -> bool:
    """Create missing topics with the configured partitions, replication and
    configs; warn if the existing graph-events topic has a finite retention.
    Whether the broker is librdkafka's mock cluster (its cluster id says so).

    The embedded mock cluster has no CreateTopics/DescribeConfigs API: there
    `emgas broker` created the topics already, so an unsupported-API answer
    is fine as long as the topics exist.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers(), **settings.kafka_options())
    try:
        with connection_reasons() as reasons:
            await admin.start()
    except KafkaError as exc:
        raise BrokerError(unreachable(settings.bootstrap_servers(), exc, reasons, settings.kafka)) from None
    try:
        existing = set(await admin.list_topics())
        missing = [t for t in settings.topics() if t.name not in existing]
        await _check_partitions(admin, settings, [t for t in settings.topics() if t.name in existing])
        if missing:
            await _create(admin, settings, missing)
        # Checked even when it was just created: another worker or tool may have
        # made it first (then Kafka answered "already exists" to us).
        await _check_retention(admin, settings.graph_events_topic)
        await _check_turns_retention(admin, settings)
        return is_mock(await admin.describe_cluster())
    finally:
        await admin.close()


def is_mock(cluster: dict) -> bool:
    """Whether a described cluster is librdkafka's mock: it names itself
    "mockCluster<hex>" (rd_kafka_mock_cluster_new)."""
    return str(cluster.get("cluster_id") or "").startswith("mockCluster")


async def _check_partitions(admin: AIOKafkaAdminClient, settings: Settings, existing: list[TopicSpec]) -> None:
    """ConfigError if an existing graph-events or queries topic has another
    partition count than `settings.partitions`: a worker then would answer
    the queries of only some partitions (a topic's count is fixed when it
    is created, by whoever creates it first)."""
    same = (settings.graph_events_topic, settings.queries_topic, settings.keys_topic)
    wanted = {t.name: t.partitions for t in existing if t.name in same}
    if not wanted:
        return
    for topic in await admin.describe_topics(list(wanted)):
        name, count = topic["topic"], len(topic["partitions"])
        if not topic["error_code"] and count and count != wanted[name]:
            raise ConfigError(
                f"topic {name} has {count} partitions, not the {wanted[name]} of EMGAS_PARTITIONS: "
                f"set EMGAS_PARTITIONS={count} for every worker and client of this broker"
            )


async def _create(admin: AIOKafkaAdminClient, settings: Settings, missing: list) -> None:
    """Create `missing`; a topic another worker created meanwhile is fine.

    aiokafka returns per-topic errors in the response instead of raising
    them, so they are checked here: otherwise a refused config would leave
    the topic missing without a word.
    """
    names = [t.name for t in missing]
    configs = topic_configs(settings)
    topics = [
        NewTopic(
            t.name,
            num_partitions=t.partitions,
            replication_factor=settings.replication_factor,
            topic_configs=configs.get(t.name, {}),
        )
        for t in missing
    ]
    unsupported = BrokerError(
        f"topics {names} are missing and this broker cannot create them; "
        "for the embedded broker, start it with `emgas broker`"
    )
    if not await _has_controller(admin):
        raise unsupported  # aiokafka 0.14 would fail on the missing controller
    try:
        response = await admin.create_topics(topics)
    except _UNSUPPORTED:
        raise unsupported from None
    _raise_topic_errors(response)
    log.info("created topics %s", names)


async def _has_controller(admin: AIOKafkaAdminClient) -> bool:
    """Whether the cluster names a controller among its brokers: CreateTopics
    goes to it. The mock cluster names none (controller 0, brokers from 1)."""
    cluster = await admin.describe_cluster()
    return cluster.get("controller_id") in {b["node_id"] for b in cluster["brokers"]}


def _raise_topic_errors(response) -> None:
    """BrokerError for the first topic Kafka refused, other than one that
    exists already (another worker won the race)."""
    for topic, code, *message in response.topic_errors:
        error = for_code(code)
        if code and error is not TopicAlreadyExistsError:
            detail = message[0] if message and message[0] else error.description
            raise BrokerError(f"Kafka refused to create topic {topic}: {error.__name__}: {detail}")


async def _check_retention(admin: AIOKafkaAdminClient, topic: str) -> None:
    """Warn (never fail) if an existing `topic` drops records by retention:
    it may predate emgas creating it with infinite retention, or a broker
    default may have applied. Silent where the broker cannot describe configs."""
    configs = await _retention_configs(admin, topic)
    for key, value in finite_retention(configs).items():
        log.warning(
            "topic %s has %s=%s: Kafka drops %s, so a rebuild or replay that needs dropped "
            "events can only start from a snapshot/checkpoint written after them (not from "
            "the beginning of the log); set %s=-1 on the topic to keep its whole history",
            topic, key, value, _DROPS[key].format(value), key,
        )


async def _check_turns_retention(admin: AIOKafkaAdminClient, settings: Settings) -> None:
    """Warn (never fail) if the turns topic keeps turns longer than
    `turns_retention_ms`: their text is there as published, so a forgotten
    turn's words stay readable there that long."""
    configs = await _retention_configs(admin, settings.turns_topic)
    value = configs.get("retention.ms")
    if value is None:
        return
    kept = int(value) if value.strip().lstrip("-").isdigit() else -1
    if kept < 0 or kept > settings.turns_retention_ms:
        log.warning(
            "topic %s keeps turns %s: their text is there as published, so a forgotten turn's words stay "
            "readable there that long (set retention.ms=%d on it, EMGAS_TURNS_RETENTION_MS)",
            settings.turns_topic, "forever" if kept < 0 else f"{kept} ms", settings.turns_retention_ms,
        )


async def _retention_configs(admin: AIOKafkaAdminClient, topic: str) -> dict[str, str | None]:
    """The retention configs of `topic`, empty where they cannot be read.

    A topic created a moment ago may not be known yet to the broker that
    answers (its metadata follows the controller's): a retriable error such
    as UnknownTopicOrPartition is asked again, for at most about 3 s.
    """
    resource = ConfigResource(ConfigResourceType.TOPIC, topic, dict.fromkeys(_RETENTION_KEYS))
    for pause in _RETRY_PAUSES_S:
        try:
            responses = await admin.describe_configs([resource])
        except _UNSUPPORTED:
            return {}
        except KafkaError as exc:
            log.info("could not read the configs of %s to check its retention: %r", topic, exc)
            return {}
        code, message, entries = _resource_of(responses, topic)
        if not code:
            return {entry[0]: entry[1] for entry in entries}
        if not for_code(code).retriable or pause is None:
            log.info("could not read the configs of %s: %s %s", topic, for_code(code).__name__, message or "")
            return {}
        await asyncio.sleep(pause)
    return {}


# Pauses between tries of a retriable DescribeConfigs answer (None: last try).
_RETRY_PAUSES_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, None)


def _resource_of(responses: list, topic: str) -> tuple[int, str | None, list]:
    """`(error code, message, config entries)` for `topic` out of
    DescribeConfigs responses; no entries if it is not among them."""
    for response in responses:
        for code, message, _type, name, entries, *_ in response.resources:
            if name == topic:
                return code, message, entries
    return 0, None, []
