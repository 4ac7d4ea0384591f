"""Running the embedded broker for this machine's other `emgas` commands."""

from __future__ import annotations

import json
import os

from emgas.streams.embedded import MockCluster
from emgas.streams.settings import Settings


def start_embedded(settings: Settings, brokers: int = 1) -> MockCluster:
    """Start the mock cluster with every topic created (it has no admin API)."""
    cluster = MockCluster(brokers=brokers)
    cluster.create_topics(settings.topics())
    return cluster


def write_broker_file(settings: Settings, cluster: MockCluster) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.broker_file.write_text(
        json.dumps({"bootstrap_servers": cluster.bootstrap_servers, "pid": os.getpid()})
    )


def remove_broker_file(settings: Settings, cluster: MockCluster) -> None:
    """Remove the broker file if it still names this cluster."""
    try:
        if json.loads(settings.broker_file.read_text())["bootstrap_servers"] == cluster.bootstrap_servers:
            settings.broker_file.unlink()
    except (OSError, ValueError, KeyError):
        pass
