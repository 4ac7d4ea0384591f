"""docker-compose.yml cannot run here (no Docker engine): check its structure."""

from pathlib import Path

import tomllib

import yaml

from emgas.streams.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_kafka_runs_in_kraft_mode_without_zookeeper():
    services = COMPOSE["services"]
    assert "zookeeper" not in services
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = kafka["environment"]
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f'{env["KAFKA_NODE_ID"]}@kafka:')
    assert all(p.startswith("127.0.0.1:") for p in kafka["ports"])  # loopback only
    assert "healthcheck" in kafka


def test_worker_scales_and_points_at_kafka():
    worker = COMPOSE["services"]["worker"]
    assert "container_name" not in worker and "ports" not in worker  # --scale worker=N works
    assert worker["build"] == "."
    assert worker["depends_on"]["kafka"]["condition"] == "service_healthy"
    env = worker["environment"]
    listeners = COMPOSE["services"]["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert f"//{env['EMGAS_BROKER']}" in listeners
    assert int(env["EMGAS_PARTITIONS"]) >= 1


def test_worker_environment_names_real_settings():
    fields = set(Settings.model_fields)
    for name in COMPOSE["services"]["worker"]["environment"]:
        assert name.startswith("EMGAS_")
        assert name.removeprefix("EMGAS_").lower() in fields, name
    Settings(**{k.removeprefix("EMGAS_").lower(): v for k, v in COMPOSE["services"]["worker"]["environment"].items()})


def dockerfile_copies() -> dict[str, str]:
    """source -> destination of every `COPY` line of the Dockerfile (one source each)."""
    copies = {}
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--") for w in words):
            *sources, destination = words[1:]
            copies.update({source: destination for source in sources})
    return copies


def test_dockerfile_copies_every_folder_pyproject_installs_and_no_tools():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {setuptools["package-dir"].get(p, p.replace(".", "/")) for p in setuptools["packages"]}
    tops = {folder.split("/")[0] for folder in folders}
    assert tops == {"emgas", "processors", "state", "replay", "streams"}
    copies = dockerfile_copies()
    for top in tops:
        assert copies.get(top) == f"./{top}", f"the Dockerfile does not copy {top}"
    assert "tools" not in copies  # the image holds the product only
    assert copies.get("pyproject.toml") == "./"
    assert "pip install" in (ROOT / "Dockerfile").read_text()


def test_worker_health_is_checked_and_replicas_are_named_apart():
    worker = COMPOSE["services"]["worker"]
    assert "/health" in " ".join(worker["healthcheck"]["test"])
    assert "EMGAS_WORKER_NAME=$$HOSTNAME" in " ".join(worker["command"])
    assert worker["environment"]["EMGAS_WEB_HOST"] == "0.0.0.0" and "ports" not in worker


def test_no_broker_wide_infinite_retention_emgas_sets_it_on_graph_events():
    env = COMPOSE["services"]["kafka"]["environment"]
    retention = {k: v for k, v in env.items() if k.startswith("KAFKA_LOG_RETENTION")}
    assert all(str(v) != "-1" for v in retention.values()), retention  # not infinite broker-wide
    text = (ROOT / "docker-compose.yml").read_text()
    assert "retention.ms=-1" in text and "emgas.graph-events" in text  # the comment says who sets it


def test_compose_runs_the_kafka_version_emgas_broker_runs():
    from emgas.streams.kafka.node import kafka_version

    assert COMPOSE["services"]["kafka"]["image"] == f"apache/kafka:{kafka_version()}"
