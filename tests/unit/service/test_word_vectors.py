"""Concept vectors off the query path: words kept on disk, new concepts encoded in the background."""

import threading
import time

import numpy as np

from emgas.processors.dynamics import DecayParams
from emgas.processors.graph import GraphRef
from emgas.service.semantic import DIMENSIONS, VectorCache, WordVectors
from emgas.state.view import GraphView
from emgas.service.word_store import WordStore


class CountingEncoder:
    """A stand-in model: a word's vector from its hash; records every word encoded and on which thread."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.threads: set[str] = set()

    def __call__(self, words: list[str]) -> np.ndarray:
        self.words += words
        self.threads.add(threading.current_thread().name)
        rng = [np.random.default_rng(abs(hash(w)) % 2**32).standard_normal(DIMENSIONS) for w in words]
        return np.array([v / np.linalg.norm(v) for v in rng], dtype=np.float32)


def view_of(*ids: str) -> GraphView:
    view = GraphView(GraphRef("g", 1), DecayParams())
    for cid in ids:
        view.node(cid, cid)
    return view


def until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_word_encoded_once_is_read_back_from_disk_by_another_process(tmp_path):
    path = tmp_path / "vectors.sqlite3"
    encode = CountingEncoder()
    first = WordVectors(store=WordStore(path))
    vectors = first.of(["cat", "sofa"], encode)
    again = WordVectors(store=WordStore(path))  # a new process: an empty memory, the same file
    assert again.known(["cat", "sofa", "dog"]).keys() == {"cat", "sofa"}
    assert np.array_equal(again.of(["sofa", "cat"], encode), vectors[::-1])
    assert encode.words == ["cat", "sofa"]  # encoded once, by the first


def test_an_unusable_file_leaves_the_vectors_in_memory_with_a_warning(tmp_path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    words = WordVectors(store=WordStore(blocker / "vectors.sqlite3"))
    assert words.of(["cat"], CountingEncoder()).shape == (1, DIMENSIONS)
    assert "not kept on disk" in caplog.text


def test_in_process_a_query_encodes_the_new_concepts_itself():
    cache, encode = VectorCache(), CountingEncoder()
    ids, vectors = cache.current(view_of("cat", "sofa"), encode)
    assert ids == ["cat", "sofa"] and vectors.shape == (2, DIMENSIONS)


def test_in_a_worker_no_query_waits_for_the_encoder(tmp_path):
    cache, encode = VectorCache(), CountingEncoder()
    cache.serve_from(WordStore(tmp_path / "vectors.sqlite3"), encode)
    cache.warm(view_of("cat"), encode)  # a partition taken over: its graphs before its first query
    view = view_of("cat", "sofa", "miso")
    ids, _ = cache.current(view, encode)
    assert ids == ["cat"]  # the new concepts are not waited for
    assert cache.background is not None
    until(cache.background.idle)
    ids, vectors = cache.current(view, encode)
    assert sorted(ids) == ["cat", "miso", "sofa"] and vectors.shape == (3, DIMENSIONS)
    assert "emgas-word-vectors" in encode.threads and sorted(encode.words) == ["cat", "miso", "sofa"]


def test_a_partition_taken_over_serves_at_once_and_its_vectors_follow(tmp_path):
    path = tmp_path / "vectors.sqlite3"
    WordVectors(store=WordStore(path)).of(["cat"], CountingEncoder())  # known on disk already
    cache, encode = VectorCache(), CountingEncoder()
    cache.serve_from(WordStore(path), encode)
    view = view_of("cat", "sofa", "miso")
    assert cache.prefetch(view) == 3  # handed to the background encoder, none encoded on the caller's thread
    assert cache.prefetch(view) == 0  # handed over once
    assert cache.background is not None
    until(cache.background.idle)
    ids, vectors = cache.current(view, encode)
    assert sorted(ids) == ["cat", "miso", "sofa"] and vectors.shape == (3, DIMENSIONS)
    assert sorted(encode.words) == ["miso", "sofa"] and set(encode.threads) == {"emgas-word-vectors"}  # cat from the disk
    assert VectorCache().prefetch(view) == 0  # in process: queries encode what they need


def test_a_worker_finds_on_disk_what_another_encoded(tmp_path):
    path = tmp_path / "vectors.sqlite3"
    WordVectors(store=WordStore(path)).of(["cat", "sofa"], CountingEncoder())
    cache, encode = VectorCache(), CountingEncoder()
    cache.serve_from(WordStore(path), encode)
    ids, _ = cache.current(view_of("cat", "sofa"), encode)
    assert ids == ["cat", "sofa"] and encode.words == []


def test_a_graph_growing_a_few_concepts_at_a_time_is_copied_log_times_and_keeps_its_rows():
    """Concepts added in small batches: the rows equal stacking every batch,
    rows handed out earlier do not change, and the block is reallocated
    about log2 times, not once per batch."""
    encode, cache = CountingEncoder(), VectorCache()
    view = view_of()
    handed_out, reallocations, capacity = [], 0, 0
    for batch in range(300):
        for k in range(3):
            view.node(f"c{batch}-{k}", f"c{batch}-{k}")
        ids, vectors = cache.current(view, encode)
        handed_out.append((list(ids), vectors.copy(), vectors))
        graph = cache.of(view.ref)
        reallocations += graph.capacity != capacity
        capacity = graph.capacity
    ids, vectors = cache.current(view, encode)
    assert len(ids) == 900 and np.array_equal(vectors, encode(ids))
    assert all(np.array_equal(copy, rows) for _, copy, rows in handed_out)
    assert reallocations <= 6 and capacity < 2 * 900
