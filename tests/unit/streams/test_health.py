"""A worker's `/health` (`streams.runtime.app.health`): ready once its partitions
have caught up; warm once what it loads once has loaded too."""

from types import SimpleNamespace

import pytest

from emgas.processors.activation import ActivationParams
from emgas.service import encoder
from emgas.streams.runtime import app
from emgas.streams.settings import Settings


def recovery(warmed: bool) -> SimpleNamespace:
    return SimpleNamespace(
        assigned_partitions=lambda: [0], ready_partitions=lambda: [0], assignment_seen=True,
        warming=SimpleNamespace(done=warmed), problems={}, recoveries={},
    )


@pytest.mark.parametrize("semantic, warmed, status, warm, shown", [
    (True, True, "built", True, "built"),
    (True, True, "refused", True, "refused"),
    (True, True, "not built", False, "not built"),  # built a second after it serves: not warm yet
    (True, False, "built", False, "built"),  # its warm-up still loading
    (False, True, "not built", True, "off"),  # no semantic seeds: no encoder to wait for
])
def test_a_worker_is_warm_once_its_warm_up_and_its_encoder_have_loaded(monkeypatch, semantic, warmed, status, warm, shown):
    monkeypatch.setattr(encoder, "status", lambda: status)
    settings = Settings(activation=ActivationParams(semantic=semantic))
    body = app.health(settings, recovery(warmed))
    assert body["ready"] is True and body["warm"] is warm and body["encoder"] == shown
