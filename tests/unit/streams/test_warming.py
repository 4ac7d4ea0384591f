"""A worker's warm-up (`streams.runtime.warming`): on a thread, done or failed, never fatal."""

import asyncio
import logging
import subprocess
import sys
import threading

from emgas.processors import extract
from emgas.service import chinese_lexicon, lemma_cache
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


def _no_lemmatiser_loaded(monkeypatch):
    """This process's lemmatiser as before its first load (simplemma's own
    dictionaries, once loaded, stay loaded: only extract's record is reset)."""
    monkeypatch.setattr(extract, "_lemmatize", None)
    monkeypatch.setattr(extract, "_LOADED", set())
    monkeypatch.setattr(extract, "_before_first_load", [])


def test_start_warming_installs_the_disk_caches_before_the_first_load(monkeypatch, tmp_path):
    _no_lemmatiser_loaded(monkeypatch)
    order = []
    monkeypatch.setattr(lemma_cache, "install", lambda folder: order.append(("lemmas", folder)))
    monkeypatch.setattr(chinese_lexicon, "install", lambda folder: order.append(("jieba", folder)))

    def load(settings):
        order.append("loading")
        order.append(extract.lemma("dogs", "en"))

    monkeypatch.setattr(warming, "warm_for_queries", load)
    settings = Settings(word_vectors_cache=tmp_path)
    asyncio.run(asyncio.wait_for(warming.start_warming(settings).wait(), 5))
    assert order == [("jieba", tmp_path), "loading", ("lemmas", tmp_path), "dog"]


def test_the_lemmatisers_cache_is_installed_by_whichever_thread_loads_first(monkeypatch, tmp_path):
    _no_lemmatiser_loaded(monkeypatch)
    installed = []
    extract.before_first_load(lambda: installed.append(threading.current_thread().name))
    assert installed == []  # registered: nothing loaded yet
    assert extract.lemma("Dogs", "en") == "dog" and extract.lemma("cats", "en") == "cat"
    assert installed == [threading.current_thread().name]  # once, by the first load (here a fold's, say)
    extract.before_first_load(lambda: installed.append("late"))
    assert installed[-1] == "late"  # registered after a load: run at once


def test_a_worker_imports_simplemma_only_when_it_first_lemmatises():
    script = (
        "import sys, emgas.streams.cli.main, emgas.streams.runtime.worker; "
        "assert 'simplemma' not in sys.modules, 'imported'; "
        "from emgas.processors.extract import lemma; assert lemma('dogs', 'en') == 'dog'; "
        "assert 'simplemma' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def test_a_lemma_cache_that_cannot_be_installed_leaves_the_lemmatiser_working(monkeypatch, tmp_path, caplog):
    _no_lemmatiser_loaded(monkeypatch)

    def broken(folder):
        raise AttributeError("simplemma has no _load_dictionary_from_disk")

    monkeypatch.setattr(lemma_cache, "install", broken)
    monkeypatch.setattr(warming, "warm_for_queries", lambda settings: None)
    monkeypatch.setattr(warming, "Warming", lambda load: None)  # no thread: the first load is this test's
    warming.start_warming(Settings(word_vectors_cache=tmp_path))
    with caplog.at_level(logging.WARNING):
        assert extract.lemma("dogs", "en") == "dog"
    assert "not cached" in caplog.text
