"""The worker's extraction runs off the event loop: a query is not held behind a batch of turns."""

import asyncio
import threading
from types import SimpleNamespace

from emgas.processors.extract import ExtractionParams
from emgas.streams.runtime import app


def test_a_batch_is_extracted_while_the_event_loop_goes_on(monkeypatch):
    loop_ran = threading.Event()

    def encode_all(turns, params, extractor):
        # Finishes only once the event loop has run something else meanwhile.
        assert loop_ran.wait(timeout=10), "the event loop was held by the extraction"
        return [f"{extractor}:{turn}" for turn in turns]

    monkeypatch.setattr(app, "encode_all", encode_all)
    extraction = app.Extraction(SimpleNamespace(extraction=ExtractionParams(), extract_processes=0), "x")

    async def scenario() -> list:
        running = asyncio.create_task(extraction.run(["t1", "t2"]))
        await asyncio.sleep(0)
        loop_ran.set()  # a query's turn on the loop, while the batch is extracted
        return await running

    assert asyncio.run(scenario()) == ["x:t1", "x:t2"]
