"""The apply agent loads the fold's compiled loops off the event loop, once
(`streams.runtime.app.Agents.apply`)."""

import asyncio
import threading
from types import SimpleNamespace

from emgas.streams.runtime import app
from emgas.streams.settings import Settings
from tests.support.graph_log import RecordingLog


def test_the_compiled_loops_load_on_a_thread_before_the_first_batch_only(monkeypatch):
    loads = []
    monkeypatch.setattr(app.kernels, "warm", lambda: loads.append(threading.current_thread()))
    states = SimpleNamespace(reading=lambda partition: False, commit=None)
    agents = app.Agents(Settings(), states, recovery=None, metrics=None, log=RecordingLog(),
                        sealer=SimpleNamespace(keys=None), extraction=None)

    async def two_batches():
        await agents.apply([])
        await agents.apply([])
        return threading.current_thread()

    loop_thread = asyncio.run(two_batches())
    assert len(loads) == 1 and loads[0] is not loop_thread
