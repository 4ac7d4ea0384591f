"""A worker's warm-up (`streams.runtime.warming`): on a thread, done or failed, never fatal."""

import asyncio
import logging
import threading

from emgas.state import chinese_lexicon, lemma_cache
from emgas.streams.runtime import warming
from emgas.streams.settings import Settings


def test_a_warm_up_runs_on_its_own_thread_and_is_awaited():
    ran = []
    warm = warming.Warming(lambda: ran.append(threading.current_thread().name))
    asyncio.run(asyncio.wait_for(warm.wait(), 5))
    assert ran == ["emgas-warm-up"]


def test_a_warm_up_that_fails_is_logged_and_still_ends(caplog):
    def fail() -> None:
        raise OSError("no such file")

    with caplog.at_level(logging.ERROR):
        asyncio.run(asyncio.wait_for(warming.Warming(fail).wait(), 5))
    assert "warming up at start" in caplog.text and "no such file" in caplog.text


def test_start_warming_installs_the_disk_caches_before_its_thread_loads(monkeypatch, tmp_path):
    order = []
    monkeypatch.setattr(lemma_cache, "install", lambda folder: order.append(("lemmas", folder)))
    monkeypatch.setattr(chinese_lexicon, "install", lambda folder: order.append(("jieba", folder)))
    monkeypatch.setattr(warming, "warm_for_queries", lambda settings: order.append("loaded"))
    settings = Settings(word_vectors_cache=tmp_path)
    asyncio.run(asyncio.wait_for(warming.start_warming(settings).wait(), 5))
    assert order == [("lemmas", tmp_path), ("jieba", tmp_path), "loaded"]
