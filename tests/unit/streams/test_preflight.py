"""A worker's broker and topics, made sure of on a thread beside its imports (streams.runtime.preflight)."""

import threading

import pytest

from emgas.streams.errors import BrokerError
from emgas.streams.runtime import preflight
from emgas.streams.settings import Settings


def test_the_broker_found_and_the_topics_ensured_come_back_from_the_thread(monkeypatch, tmp_path):
    threads = []

    def found(settings):
        threads.append(threading.current_thread().name)
        return settings.model_copy(update={"broker": "127.0.0.1:1"})

    async def ensured(settings):
        threads.append(threading.current_thread().name)
        assert settings.broker == "127.0.0.1:1"  # after the broker was found
        return True

    monkeypatch.setattr(preflight, "wait_for_broker", found)
    monkeypatch.setattr(preflight, "ensure_topics", ensured)
    settings, on_mock = preflight.BrokerReady(Settings(home=tmp_path)).result()
    assert settings.broker == "127.0.0.1:1" and on_mock is True
    assert threads == ["emgas-broker", "emgas-broker"]  # not the caller's


def test_what_the_thread_raised_is_raised_where_the_worker_waits(monkeypatch, tmp_path):
    def unreachable(settings):
        raise BrokerError("no broker answers at 127.0.0.1:1")

    monkeypatch.setattr(preflight, "wait_for_broker", unreachable)
    ready = preflight.BrokerReady(Settings(home=tmp_path))
    with pytest.raises(BrokerError, match="no broker answers"):
        ready.result()


def test_the_machine_is_checked_before_the_broker_is_looked_for(monkeypatch, tmp_path):
    # A worker that cannot start says why in one line, not after "waiting for the broker".
    from emgas.streams.errors import StreamsError

    looked = []
    monkeypatch.setattr(preflight, "wait_for_broker", lambda settings: looked.append(settings))
    with pytest.raises(StreamsError, match="would listen on 0.0.0.0 with no authentication"):
        preflight.start_checks(Settings(home=tmp_path, web_host="0.0.0.0"))
    assert looked == []
