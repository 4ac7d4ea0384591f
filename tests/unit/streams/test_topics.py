"""Consolidation into topic nodes: deterministic, and it finds a planted cluster.
Also (at the end) the Kafka topics emgas creates: their configs (`streams.kafka.topics`)."""

import logging
import random
from types import SimpleNamespace

import pytest
from aiokafka.errors import IncompatibleBrokerVersion

from emgas.processors.events import Consolidate
from emgas.processors.graph import GraphParams
from emgas.processors.topics import TopicParams, propagate_labels, topics_of
from emgas.testing import LocalLog
from emgas.streams.kafka import topics as kafka_topics
from emgas.streams.errors import BrokerError, ConfigError
from emgas.streams.settings import Settings
from tests.support.factories import ingested

FRAMEWORKS = ["angular", "react", "svelte", "vue"]


def planted_counts(seed: int = 3):
    """Turns mixing 2–3 front-end frameworks with noise words from a large vocabulary."""
    rng = random.Random(seed)
    turns = []
    for i in range(300):
        words = set(rng.sample(FRAMEWORKS, rng.choice([2, 3]))) if i % 3 == 0 else set()
        words |= {f"noise{rng.randrange(400)}" for _ in range(3)}
        turns.append(sorted(words))
    counts, pairs = {}, {}
    for words in turns:
        for w in words:
            counts[w] = counts.get(w, 0) + 1
        for i, a in enumerate(words):
            for b in words[i + 1:]:
                pairs[(a, b)] = pairs.get((a, b), 0) + 1
    return turns, counts, pairs


def test_a_planted_cluster_becomes_one_topic():
    turns, counts, pairs = planted_counts()
    topics = topics_of(pairs, counts, {w: w.title() for w in counts}, len(turns), TopicParams())
    assert [t.members for t in topics] == [tuple(FRAMEWORKS)]
    assert topics[0].id.startswith("topic:") and topics[0].id.removeprefix("topic:") in FRAMEWORKS
    assert len(topics[0].label.split(" · ")) == 3


def test_same_counts_same_topics_whatever_the_input_order():
    turns, counts, pairs = planted_counts()
    texts = {w: w for w in counts}
    shuffled = dict(sorted(pairs.items(), key=lambda kv: random.Random(1).random()))
    assert topics_of(pairs, counts, texts, len(turns), TopicParams()) == topics_of(
        shuffled, dict(reversed(counts.items())), texts, len(turns), TopicParams()
    )


def test_label_propagation_splits_two_cliques_joined_by_one_weak_edge():
    def clique(names: list[str]) -> dict[tuple[str, str], float]:
        return {(a, b): 1.0 for i, a in enumerate(names) for b in names[i + 1:]}

    edges = {**clique(["a", "b", "c", "d"]), **clique(["w", "x", "y", "z"]), ("d", "w"): 0.1}
    labels = propagate_labels(edges, max_rounds=20)
    assert len({labels[n] for n in "abcd"}) == 1 and len({labels[n] for n in "wxyz"}) == 1
    assert labels["a"] != labels["w"]


def test_consolidation_is_a_daily_event_and_its_topics_are_stored():
    turns, _, _ = planted_counts()
    log = LocalLog(GraphParams(window_s=0))
    for i, words in enumerate(turns):
        log.append(ingested("g", f"t{i}", {w: 0.5 for w in words}, minute=i * 10))
    consolidations = [e for e in log.log if isinstance(e, Consolidate)]
    assert len(consolidations) == 2  # 300 turns, 10 minutes apart: two day boundaries crossed
    assert [t.members for t in log.state.view("g").topics] == [tuple(FRAMEWORKS)]
    assert [t.members for t in log.state.repo.topics(log.state.view("g").ref)] == [tuple(FRAMEWORKS)]


# --- Kafka topics (streams.kafka.topics) ---------------------------------------------

SETTINGS = Settings(broker="kafka:9092", replies_retention_ms=60_000, dlq_retention_ms=86_400_000)


@pytest.mark.parametrize(
    "topic, expected",
    [
        ("emgas.graph-events", {"retention.ms": "-1", "retention.bytes": "-1"}),  # source of truth
        ("emgas.replies", {"retention.ms": "60000", "segment.ms": "60000"}),  # segments roll within it
        ("emgas.dlq", {"retention.ms": "86400000", "segment.ms": "86400000"}),
        ("emgas.turns", {"retention.ms": str(7 * 86_400_000), "segment.ms": "86400000"}),  # a forgotten turn's text
        ("emgas.queries", {"retention.ms": "60000", "segment.ms": "60000"}),  # answered in time or never: as replies
        ("emgas.owners", {"cleanup.policy": "compact"}),  # the latest announcement per partition
        ("emgas.keys", {"cleanup.policy": "compact", "segment.ms": "3600000", "max.compaction.lag.ms": "3600000",
                        "min.compaction.lag.ms": "0", "delete.retention.ms": "86400000"}),  # erased within the hour
    ],
)
def test_topic_configs(topic, expected):
    configs = kafka_topics.topic_configs(SETTINGS)
    assert configs.get(topic) == expected
    assert all(isinstance(v, str) for c in configs.values() for v in c.values())


def test_topic_configs_follow_renamed_topics_and_default_retentions():
    configs = kafka_topics.topic_configs(Settings(broker="k:1", graph_events_topic="t.events"))
    assert configs["t.events"]["retention.ms"] == "-1"
    assert configs["emgas.replies"] == {"retention.ms": str(3_600_000), "segment.ms": str(3_600_000)}
    assert configs["emgas.dlq"] == {"retention.ms": str(30 * 86_400_000), "segment.ms": str(86_400_000)}


@pytest.mark.parametrize(
    "configs, finite",
    [
        ({"retention.ms": "-1", "retention.bytes": "-1"}, {}),
        ({"retention.ms": "604800000", "retention.bytes": "-1"}, {"retention.ms": "604800000"}),
        ({"retention.ms": "-1", "retention.bytes": "1073741824"}, {"retention.bytes": "1073741824"}),
        ({"retention.ms": None}, {}),  # not reported
        ({}, {}),
    ],
)
def test_finite_retention(configs, finite):
    assert kafka_topics.finite_retention(configs) == finite


class FakeAdmin:
    """What ensure_topics asks of aiokafka's admin client, answered like a
    real Kafka (or like the mock cluster, with `mock=True`)."""

    def __init__(self, existing=(), retention_ms="-1", mock=False, refuse=None, unknown_for=0, error=3, partitions=None,
                 turns_retention_ms=str(SETTINGS.turns_retention_ms)):
        self.existing, self.retention_ms, self.mock, self.refuse = list(existing), retention_ms, mock, refuse
        self.turns_retention_ms = turns_retention_ms  # what the turns topic answers
        # topic -> partition count of the existing topics (default: as SETTINGS would create them)
        self.partitions = {t.name: t.partitions for t in SETTINGS.topics()} | (partitions or {})
        self.created = []
        # The first `unknown_for` DescribeConfigs answer `error` (3: unknown
        # topic, as a broker whose metadata has not caught up yet answers).
        self.unknown_for, self.error, self.described = unknown_for, error, 0

    def __call__(self, **_):
        return self

    async def start(self):
        pass

    async def close(self):
        pass

    async def list_topics(self):
        return self.existing

    async def describe_cluster(self):
        return {"brokers": [{"node_id": 1}], "controller_id": 0 if self.mock else 1,
                "cluster_id": "mockCluster1a2b3c" if self.mock else "q1Sh-9_ISia_zwGINzRvyQ"}

    async def describe_topics(self, topics):
        return [{"error_code": 0, "topic": name, "is_internal": False,
                 "partitions": [{"partition": p} for p in range(self.partitions[name])]} for name in topics]

    async def create_topics(self, new_topics):
        self.created += new_topics
        return SimpleNamespace(topic_errors=[(t.name, 40 if t.name == self.refuse else 0, "bad") for t in new_topics])

    async def describe_configs(self, resources):
        if self.mock:
            raise IncompatibleBrokerVersion("DescribeConfigsRequest cannot be used")
        if [r.name for r in resources] == [SETTINGS.turns_topic]:
            entries = [("retention.ms", self.turns_retention_ms, False, 5, False)]
            return [SimpleNamespace(resources=[(0, None, 2, r.name, entries) for r in resources])]
        self.described += 1
        if self.described <= self.unknown_for:
            return [SimpleNamespace(resources=[(self.error, "not yet", 2, r.name, []) for r in resources])]
        entries = [("retention.ms", self.retention_ms, False, 5, False), ("retention.bytes", "-1", False, 5, False)]
        return [SimpleNamespace(resources=[(0, None, 2, r.name, entries) for r in resources])]


async def test_missing_topics_are_created_with_their_configs(monkeypatch):
    admin = FakeAdmin()
    monkeypatch.setattr(kafka_topics, "AIOKafkaAdminClient", admin)
    await kafka_topics.ensure_topics(SETTINGS)
    configs = {t.name: t.topic_configs for t in admin.created}
    assert configs == {t.name: kafka_topics.topic_configs(SETTINGS).get(t.name, {}) for t in SETTINGS.topics()}


async def test_a_refused_topic_is_an_error(monkeypatch):
    monkeypatch.setattr(kafka_topics, "AIOKafkaAdminClient", FakeAdmin(refuse="emgas.dlq"))
    with pytest.raises(BrokerError, match="emgas.dlq"):
        await kafka_topics.ensure_topics(SETTINGS)


@pytest.mark.parametrize("retention_ms, warned", [("604800000", True), ("-1", False)])
async def test_existing_graph_events_with_finite_retention_is_a_warning(monkeypatch, caplog, retention_ms, warned):
    names = [t.name for t in SETTINGS.topics()]
    monkeypatch.setattr(kafka_topics, "AIOKafkaAdminClient", FakeAdmin(names, retention_ms))
    with caplog.at_level(logging.WARNING, logger="emgas.streams.kafka.topics"):
        await kafka_topics.ensure_topics(SETTINGS)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert bool(warnings) == warned
    if warned:
        assert "emgas.graph-events" in warnings[0] and "retention.ms=604800000" in warnings[0]
        assert "snapshot" in warnings[0]


@pytest.mark.parametrize("unknown_for, error, warned, asked", [
    (2, 3, True, 3),    # a topic just created elsewhere: asked again until the broker knows it
    (99, 3, False, 7),  # never known: given up after a bounded number of tries, no warning
    (1, 29, False, 1),  # not authorised: not retriable, asked once
])
async def test_a_retriable_describe_error_is_asked_again(monkeypatch, caplog, unknown_for, error, warned, asked):
    names = [t.name for t in SETTINGS.topics()]
    admin = FakeAdmin(names, "604800000", unknown_for=unknown_for, error=error)
    monkeypatch.setattr(kafka_topics, "AIOKafkaAdminClient", admin)
    monkeypatch.setattr(kafka_topics, "_RETRY_PAUSES_S", (0, 0, 0, 0, 0, 0, None))
    with caplog.at_level(logging.INFO, logger="emgas.streams.kafka.topics"):
        await kafka_topics.ensure_topics(SETTINGS)
    assert any(r.levelno == logging.WARNING for r in caplog.records) == warned
    assert admin.described == asked


async def test_the_embedded_broker_without_admin_apis_is_fine_when_topics_exist(monkeypatch, caplog):
    names = [t.name for t in SETTINGS.topics()]
    monkeypatch.setattr(kafka_topics, "AIOKafkaAdminClient", FakeAdmin(names, mock=True))
    with caplog.at_level(logging.INFO, logger="emgas.streams.kafka.topics"):
        await kafka_topics.ensure_topics(SETTINGS)
    assert not caplog.records


async def test_the_embedded_broker_cannot_create_missing_topics(monkeypatch):
    monkeypatch.setattr(kafka_topics, "AIOKafkaAdminClient", FakeAdmin(mock=True))
    with pytest.raises(BrokerError, match="emgas broker"):
        await kafka_topics.ensure_topics(SETTINGS)


@pytest.mark.parametrize("mock", [True, False])
async def test_ensure_topics_says_whether_the_broker_is_the_mock(monkeypatch, mock):
    names = [t.name for t in SETTINGS.topics()]
    monkeypatch.setattr(kafka_topics, "AIOKafkaAdminClient", FakeAdmin(names, mock=mock))
    assert await kafka_topics.ensure_topics(SETTINGS) is mock


@pytest.mark.parametrize("cluster, mock", [
    ({"cluster_id": "mockCluster155b05282f2c"}, True),  # what librdkafka's mock answers
    ({"cluster_id": "q1Sh-9_ISia_zwGINzRvyQ"}, False),  # a KRaft cluster id
    ({"cluster_id": None}, False),  # an old Kafka (metadata v0-v1) names none
    ({}, False),
])
def test_the_mock_is_known_by_its_cluster_id(cluster, mock):
    assert kafka_topics.is_mock(cluster) is mock


@pytest.mark.parametrize("setting, on_mock, wait_ms", [
    (None, True, 10),  # the mock holds an idle fetch the whole wait: short
    (None, False, 100),  # Kafka answers as soon as data arrives: longer saves idle CPU
    (50, True, 50),  # a setting wins on either
    (50, False, 50),
])
def test_the_fetch_wait_is_the_setting_else_the_brokers(setting, on_mock, wait_ms):
    assert Settings(fetch_max_wait_ms=setting).fetch_wait_ms(on_mock) == wait_ms
    assert Settings(fetch_max_wait_ms=setting).fetch_wait_ms() == (setting or 10)  # not asked: the mock's


@pytest.mark.parametrize("partitions, refused", [
    ({"emgas.graph-events": 12, "emgas.queries": 12}, True),  # a broker made for 12, a worker set for 8
    ({"emgas.queries": 4}, True),
    ({"emgas.turns": 3, "emgas.replies": 2}, False),  # their counts need not match the setting
    ({}, False),
])
async def test_a_worker_refuses_a_log_of_another_partition_count(monkeypatch, partitions, refused):
    names = [t.name for t in SETTINGS.topics()]
    monkeypatch.setattr(kafka_topics, "AIOKafkaAdminClient", FakeAdmin(names, partitions=partitions))
    if refused:
        with pytest.raises(ConfigError, match=r"partitions, not the 8 of EMGAS_PARTITIONS: set EMGAS_PARTITIONS="):
            await kafka_topics.ensure_topics(SETTINGS)
    else:
        await kafka_topics.ensure_topics(SETTINGS)


@pytest.mark.parametrize("kept, warned", [
    (str(7 * 86_400_000), False), (str(86_400_000), False),  # as configured, or shorter
    (str(8 * 86_400_000), True), ("-1", True),  # longer, or forever: a forgotten turn's text stays
])
async def test_a_turns_topic_that_keeps_turns_longer_than_configured_is_a_warning(monkeypatch, caplog, kept, warned):
    names = [t.name for t in SETTINGS.topics()]
    monkeypatch.setattr(kafka_topics, "AIOKafkaAdminClient", FakeAdmin(names, turns_retention_ms=kept))
    with caplog.at_level(logging.WARNING, logger="emgas.streams.kafka.topics"):
        await kafka_topics.ensure_topics(SETTINGS)
    warnings = [r.getMessage() for r in caplog.records if "emgas.turns" in r.getMessage()]
    assert bool(warnings) == warned
    if warned:
        assert "forgotten turn" in warnings[0] and "retention.ms=604800000" in warnings[0]
