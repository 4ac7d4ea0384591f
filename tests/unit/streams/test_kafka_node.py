"""The real Kafka's configuration and the choice of broker, without starting one."""

from pathlib import Path

import pytest

from emgas.streams.errors import BrokerError
from emgas.streams.kafka.node import KafkaCluster, KafkaJars, NodeSpec, find_jars, kafka_version, new_cluster_id, why_not_kafka
from emgas.streams.kafka.local import choose
from emgas.streams.settings import Settings


def properties(spec: NodeSpec) -> dict[str, str]:
    return dict(line.split("=", 1) for line in spec.server_properties().splitlines())


def test_a_node_listens_on_loopback_only_and_keeps_its_log_in_its_directory(tmp_path):
    spec = NodeSpec(1, 19092, 19093, tmp_path / "node-1", "1@127.0.0.1:19093")
    props = properties(spec)
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert props["process.roles"] == "broker,controller" and props["log.dirs"] == str(tmp_path / "node-1" / "log")
    assert props["auto.create.topics.enable"] == "false"  # the workers create topics with their configs
    assert props["offsets.topic.replication.factor"] == "1" and props["min.insync.replicas"] == "1"


def test_three_nodes_share_one_quorum_and_replicate_three_times(tmp_path):
    jars = KafkaJars(tmp_path, "4.1.2", "cache")
    cluster = KafkaCluster.create(tmp_path, jars, "java", size=3, ports=[(1, 2), (3, 4), (5, 6)])
    voters = {properties(n.spec)["controller.quorum.voters"] for n in cluster.nodes}
    assert voters == {"1@127.0.0.1:2,2@127.0.0.1:4,3@127.0.0.1:6"}
    first = properties(cluster.nodes[0].spec)
    assert (first["default.replication.factor"], first["min.insync.replicas"], first["transaction.state.log.min.isr"]) == ("3", "2", "2")
    assert cluster.bootstrap_servers == "127.0.0.1:1,127.0.0.1:3,127.0.0.1:5"
    assert len({n.spec.directory for n in cluster.nodes}) == 3


def test_a_cluster_id_is_kafkas_form():
    ids = {new_cluster_id() for _ in range(50)}
    assert len(ids) == 50 and all(len(i) == 22 and not i.startswith("-") for i in ids)


def test_a_kafka_distribution_is_found_by_its_libs(tmp_path):
    (tmp_path / "libs").mkdir()
    (tmp_path / "libs" / "kafka_2.13-4.0.0.jar").write_text("")
    assert find_jars(tmp_path, tmp_path / "cache") == KafkaJars(tmp_path / "libs", "4.0.0", "EMGAS_KAFKA_HOME")
    with pytest.raises(BrokerError, match="has no libs/kafka_2.13"):
        find_jars(tmp_path / "elsewhere", tmp_path / "cache")


def test_the_cache_counts_only_a_complete_install(tmp_path):
    libs = tmp_path / f"kafka-{kafka_version()}" / "libs"
    libs.mkdir(parents=True)
    assert find_jars(None, tmp_path) is None  # an interrupted install
    (libs.parent / "complete").write_text(kafka_version())
    assert find_jars(None, tmp_path).libs == libs


@pytest.mark.parametrize(
    ("java", "jars", "reason"),
    [
        (None, None, "no Java found"),
        ("/usr/bin/java", None, "jars are not installed (run `emgas broker --install`, or set EMGAS_KAFKA_HOME)"),
        ("/usr/bin/java", KafkaJars(Path("/x"), "4.1.2", "cache"), None),
    ],
)
def test_why_kafka_cannot_run(java, jars, reason):
    found = why_not_kafka(java, jars)
    assert (found is None) if reason is None else (reason in found)


def test_the_mock_runs_where_kafka_cannot_and_says_why_but_kafka_asked_for_is_an_error(tmp_path, monkeypatch):
    import emgas.streams.kafka.local as local

    monkeypatch.setattr(local, "find_java", lambda: None)
    settings = Settings(home=tmp_path, kafka_cache=tmp_path / "cache")
    assert choose(settings) == ("mock", "no Java found (install OpenJDK 17 or newer, or set JAVA_HOME)")
    assert choose(settings, "mock") == ("mock", None)
    with pytest.raises(BrokerError, match="^cannot run Kafka: no Java found"):
        choose(settings, "kafka")
