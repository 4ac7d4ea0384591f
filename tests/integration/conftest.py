"""A live pipeline for integration tests: a Kafka broker + one worker process."""

import pytest

from emgas.testing import start_worker, stop_worker
from emgas.streams.settings import Settings
from tests.support.brokers import start_test_broker


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """Settings pointing at a running broker with a worker attached."""
    home = tmp_path_factory.mktemp("emgas-home")
    base = Settings(home=home)
    cluster = start_test_broker(base, home / "kafka")
    settings = base.model_copy(update={"broker": cluster.bootstrap_servers})
    worker = start_worker(settings, home / "worker.log")
    yield settings
    stop_worker(worker)
    cluster.close()
    if worker.returncode not in (0, -15):
        print((home / "worker.log").read_text()[-5000:])
