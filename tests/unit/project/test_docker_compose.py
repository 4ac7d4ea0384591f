"""docker-compose.yml cannot run here (no Docker engine): check its structure."""

import re
from pathlib import Path

import tomllib

import yaml

from emgas.streams.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
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


WORKERS = {name: s for name, s in COMPOSE["services"].items() if name.startswith("worker")}


def worker_settings(service: dict) -> Settings:
    env = service["environment"]
    return Settings(**{k.removeprefix("EMGAS_").lower(): v for k, v in env.items() if k != "EMGAS_HTTP_TOKEN"})


def duration_s(text: str) -> float:
    """Seconds of a compose duration such as `1m30s`, `45s` or `500ms`."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|us|m|s)", str(text))
    assert parts and "".join(n + u for n, u in parts) == str(text), f"not a duration: {text!r}"
    return sum(float(n) * units[u] for n, u in parts)


def mounts(service: dict) -> dict[str, str]:
    """Mount point -> named volume, of a service's volumes."""
    found = {}
    for entry in service.get("volumes", []):
        source, target = entry.split(":")[:2]
        found[target] = source
    return found


def on_a_volume(service: dict, path: str) -> str | None:
    """The named volume (declared at the top level) that holds `path`, if any."""
    for target, source in mounts(service).items():
        if (path == target or path.startswith(target.rstrip("/") + "/")) and source in (COMPOSE.get("volumes") or {}):
            return source
    return None


def test_several_workers_point_at_kafka():
    assert len(WORKERS) >= 2
    listeners = COMPOSE["services"]["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    for name, worker in WORKERS.items():
        assert "container_name" not in worker and "ports" not in worker, name
        assert worker["build"] == "."
        assert worker["depends_on"]["kafka"]["condition"] == "service_healthy"
        assert f"//{worker['environment']['EMGAS_BROKER']}" in listeners
        assert worker_settings(worker).partitions >= 1


def test_kafka_log_is_on_the_mounted_volume():
    kafka = COMPOSE["services"]["kafka"]
    log_dirs = kafka["environment"]["KAFKA_LOG_DIRS"].split(",")
    for log_dir in log_dirs:
        assert on_a_volume(kafka, log_dir), f"Kafka's log {log_dir} is not on a volume: lost with the container"


def test_each_worker_keeps_its_state_on_a_volume_of_its_own_under_a_stable_name():
    volumes, names = [], []
    for service, worker in WORKERS.items():
        settings = worker_settings(worker)
        volume = on_a_volume(worker, str(settings.worker_data_dir))
        assert volume, f"{service}: its state {settings.worker_data_dir} is not on a volume"
        volumes.append(volume)
        names.append(settings.worker_name)
        assert "$" not in settings.worker_name  # not the container id: a re-created worker finds its state
    assert len(set(volumes)) == len(volumes), "workers share a state volume"
    assert len(set(names)) == len(names), "workers share a name"


def test_docker_waits_for_the_hand_over_before_killing_a_worker():
    for service, worker in WORKERS.items():
        hand_over = worker_settings(worker).hand_over_s
        assert duration_s(worker.get("stop_grace_period", "10s")) > hand_over + 5, service


def test_worker_settings_are_the_measured_defaults_but_where_the_deployment_needs_its_own():
    needed = {"EMGAS_WORKER_NAME", "EMGAS_BROKER", "EMGAS_PARTITIONS", "EMGAS_TURN_PARTITIONS",
              "EMGAS_REPLICATION_FACTOR", "EMGAS_HOME", "EMGAS_WEB_HOST", "EMGAS_HTTP_TOKEN", "EMGAS_LOG_FORMAT"}
    for service, worker in WORKERS.items():
        assert set(worker["environment"]) <= needed, f"{service} overrides {set(worker['environment']) - needed}"


def test_the_token_is_required():
    for service, worker in WORKERS.items():
        assert worker["environment"]["EMGAS_HTTP_TOKEN"].startswith("${EMGAS_HTTP_TOKEN:?"), service


def test_worker_environment_names_real_settings():
    fields = set(Settings.model_fields)
    for worker in WORKERS.values():
        for name in worker["environment"]:
            assert name.startswith("EMGAS_")
            assert name.removeprefix("EMGAS_").lower() in fields, name
        worker_settings(worker)


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
    assert tops == {"emgas", "processors", "state", "service", "replay", "streams"}
    copies = dockerfile_copies()
    for top in tops:
        assert copies.get(top) == f"./{top}", f"the Dockerfile does not copy {top}"
    assert "tools" not in copies  # the image holds the product only
    assert copies.get("pyproject.toml") == "./"
    assert "pip install" in (ROOT / "Dockerfile").read_text()


def test_worker_health_is_checked():
    for worker in WORKERS.values():
        assert "/health" in " ".join(worker["healthcheck"]["test"])
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
