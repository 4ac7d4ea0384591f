"""A worker started beside a starting `emgas broker` waits for it: bounded, saying so in one line."""

import io
import json

import pytest

from emgas.streams.errors import BrokerError, ConfigError
from emgas.streams.kafka import discovery
from emgas.streams.settings import Settings


class Clock:
    """A fake clock that `sleep` advances; `on_sleep` runs at each pause (the world changing meanwhile)."""

    def __init__(self, on_sleep=lambda now: None):
        self.now, self.on_sleep = 0.0, on_sleep

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.on_sleep(self.now)


def waiting(settings, clock, reachable=lambda servers: True):
    said = io.StringIO()
    try:
        found = discovery.wait_for_broker(settings, said, clock, clock.sleep, reachable)
    except (BrokerError, ConfigError) as exc:
        return exc, said.getvalue()
    return found, said.getvalue()


def test_the_broker_file_written_while_waiting_is_used(tmp_path):
    settings = Settings(home=tmp_path, broker_wait_s=60)

    def broker_comes_up(now):
        if now >= 5:
            settings.broker_file.write_text(json.dumps({"bootstrap_servers": "127.0.0.1:4242"}))

    found, said = waiting(settings, Clock(broker_comes_up))
    assert found.broker == "127.0.0.1:4242"
    assert said.count("\n") == 1 and f"waiting up to 60 s for {settings.broker_file}" in said


def test_no_wait_when_the_broker_is_up(tmp_path):
    found, said = waiting(Settings(home=tmp_path, broker="kafka://h:9092"), Clock())
    assert found.broker == "h:9092" and said == ""


@pytest.mark.parametrize("wait_s, waited", [(0, ""), (3, " (waited 3 s, EMGAS_BROKER_WAIT_S)")])
def test_no_broker_at_all_is_the_one_line_error_after_the_wait(tmp_path, wait_s, waited):
    clock = Clock()
    error, said = waiting(Settings(home=tmp_path, broker_wait_s=wait_s), clock)
    assert isinstance(error, ConfigError) and str(error).endswith(f"broker.json){waited}")
    assert "no broker configured" in str(error) and clock.now == pytest.approx(wait_s, abs=discovery.POLL_S)
    assert said.count("\n") == (1 if wait_s else 0)


def test_a_broker_that_never_answers_is_an_error_after_the_wait(tmp_path):
    clock = Clock()
    error, said = waiting(Settings(home=tmp_path, broker="h:9092", broker_wait_s=10), clock, reachable=lambda s: False)
    assert isinstance(error, BrokerError) and "no broker answers at h:9092 (waited 10 s" in str(error)
    assert "for the broker at h:9092 to answer" in said and clock.now >= 10


def test_answering_tries_each_server():
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert discovery.answering(f"127.0.0.1:1,127.0.0.1:{port}")
    assert not discovery.answering("127.0.0.1:1")
    assert not discovery.answering("no-port-here")
