"""What a worker's queries need, loaded on a thread while the worker starts.

The lemmatiser's dictionary, YAKE's stopwords, WordNet's file and
CC-CEDICT take about 0.2 s of a start. A partition taken over is ready
when they are (`Recovery`), so they load beside the rest of the start
(`build_worker` starts them): the group's join, the checkpoints' reads.
The encoder's files are checked here, but its session is built after a
first partition serves (`Recovery`, `retrieval.build_encoder_ahead`):
its answers need only the word vectors on disk. Started before the runtime's
imports instead, they made those slower by about as much as they gained
(takeovers of the bench's history: no difference beyond the noise, 27 Nov).
Not the fold's compiled loops: loading them (numba, 0.4 s)
beside a partition that had just caught up delayed its first answers by
about as long; the apply agent loads them on a thread before its first
batch (`Agents.apply`), and a catch-up's first fold where it comes first.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Callable

from emgas.processors import extract
from emgas.service import chinese_lexicon, lemma_cache
from emgas.service.retrieval import warm_up
from emgas.streams.settings import Settings

log = logging.getLogger(__name__)


class Warming:
    """`load` run once on a thread of its own, started now. A load that
    fails costs the queries their expansion (said in the log), not the worker."""

    def __init__(self, load: Callable[[], None]) -> None:
        self._done = threading.Event()
        threading.Thread(target=self._run, args=(load,), name="emgas-warm-up", daemon=True).start()

    def _run(self, load: Callable[[], None]) -> None:
        try:
            load()
        except Exception:  # noqa: BLE001 - queries load what they need themselves then
            log.exception("warming up at start (the lemmatiser, WordNet, CC-CEDICT, the encoder's files) failed")
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        """Whether the load has ended (loaded or failed)."""
        return self._done.is_set()

    async def wait(self) -> None:
        while not self._done.is_set():  # polled: a thread of the default pool per waiting partition would starve it
            await asyncio.sleep(0.02)


def warm_for_queries(settings: Settings) -> None:
    """Load the lemmatiser and YAKE's stopwords, then query expansion's
    lexicons and the encoder (`retrieval.warm_up`)."""
    extract.warm()
    warm_up(settings.activation, settings.word_vectors_cache)


def start_warming(settings: Settings) -> Warming:
    """The lexicons' disk caches installed in this process (before anything
    lemmatises or reads jieba's lexicon: the warm-up, a fold, a query;
    the lemmatiser's by whichever loads its first dictionary, which imports
    it), then `warm_for_queries` started on its thread."""
    folder = settings.word_vectors_cache
    extract.before_first_load(lambda: _install_lemma_cache(folder))
    chinese_lexicon.install(folder)
    return Warming(lambda: warm_for_queries(settings))


def _install_lemma_cache(folder: Path) -> None:
    """The lemmatiser's disk cache (`lemma_cache.install`), run by its first
    load: one that fails leaves the dictionaries decoded in memory (said
    once), not the lemma that is being asked for failing."""
    try:
        lemma_cache.install(folder)
    except Exception:  # noqa: BLE001 - simplemma's internals changed, say: the lemmatiser still works
        log.warning("the lemmatiser's dictionaries are not cached in %s: decoded in memory", folder, exc_info=True)
