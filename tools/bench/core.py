"""In-process figures: extraction, the fold, queries (no broker, no worker)."""

from __future__ import annotations

import gc
import heapq
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from emgas.processors.activation import ActivationParams, concept_scores, spread, top_concepts
from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.events import GraphEvent, Turn
from emgas.streams.c_heap import return_freed_memory
from emgas.processors.extract import ExtractionParams, detect_language, encode_all, extractor_id, ingest
from emgas.processors.fold_codec import decode_for_fold
from emgas.tools.graph_arrays import degrees, edge_arrays
from emgas.tools.walks import personalised_pagerank
from emgas.replay.reader import LogRecord
from emgas.testing import LocalLog
from emgas.state.projector import PartitionState
from emgas.state.rocks import RocksStore
from emgas.state.transaction import COMMIT_EVERY
from emgas.state.view import GraphView
from emgas.processors.graph import GraphParams, GraphRef
from emgas.processors.dynamics import DecayParams
from emgas.tools.harness import demo_turns, percentile, resident_bytes
from emgas.tools.synthetic import CHINESE, Shape, conversations
from emgas.tools.figures import figure


def _rate(count: int, run: Callable[[], Any], repeats: int) -> list[float]:
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        rates.append(count / (time.perf_counter() - started))
    return rates


def extraction_figures(turns: int, repeats: int) -> dict[str, Any]:
    import yake

    params = ExtractionParams()
    english = [t for t in demo_turns() if detect_language(t.text, params) == "en"]
    turn_objects = [english[i % len(english)].model_copy(update={"turn_id": f"t{i}"}) for i in range(turns)]
    corpus = [t.text for t in turn_objects]
    tag = extractor_id(params)
    reference = yake.KeywordExtractor(lan="en", n=3, top=10)
    for t in english:  # warm up: stopword lists, caches
        ingest(t, params, tag)
        reference.extract_keywords(t.text)
    return {
        "extract_turns_per_s": figure(_rate(turns, lambda: [ingest(t, params, tag) for t in turn_objects], repeats), 1),
        "yake_reference_turns_per_s": figure(_rate(turns, lambda: [reference.extract_keywords(x) for x in corpus], repeats), 1),
    }


def synthetic_log(turns: list[Turn], params: GraphParams) -> list[GraphEvent]:
    """The graph events of `turns`: each graph's turns extracted and put
    through `LocalLog`, which appends the decay ticks and consolidations as
    they become due; the graphs' logs merged by event time (each graph's
    order kept), as one partition would hold them."""
    extraction = ExtractionParams()
    tag = extractor_id(extraction)
    logs: dict[str, LocalLog] = {}
    for turn in turns:
        logs.setdefault(turn.graph_id, LocalLog(params)).extend([ingest(turn, extraction, tag)])
    return list(heapq.merge(*(log.log for log in logs.values()), key=lambda e: e.timestamp))


def decoded_records(events: list[GraphEvent]) -> list[tuple[GraphEvent, LogRecord]]:
    """`events` written as log records of one partition (`log_records`),
    each with its event decoded back from the record: what a reader hands
    to the fold."""
    return [(decode_graph_event(r.value), r) for r in log_records(events)]


def log_records(events: list[GraphEvent]) -> list[LogRecord]:
    """`events` written as log records of one partition, offsets from 0.
    Keyed by graph (a checkpoint, about the partition, has no key)."""
    return [
        LogRecord(0, offset, int(e.timestamp.timestamp() * 1000), _key(e), encode(e))
        for offset, e in enumerate(events)
    ]


def _key(event: GraphEvent) -> bytes | None:
    graph_id = getattr(event, "graph_id", None)
    return None if graph_id is None else graph_id.encode()


def _fold_s(events: list[tuple[GraphEvent, LogRecord]], state_dir: Path, params: GraphParams) -> float:
    """Seconds to fold `events` into a fresh RocksDB state, applied and
    committed as `replay.fold.fold_records` does (every COMMIT_EVERY events
    and after the last), without its decoding."""
    state = PartitionState(RocksStore(state_dir), params)
    started = time.perf_counter()
    fold_into(state, events)
    elapsed = time.perf_counter() - started
    state.close()
    return elapsed


def fold_into(state: PartitionState, events: list[tuple[GraphEvent, LogRecord]]) -> None:
    """Apply `events` to `state` in batches of COMMIT_EVERY events
    (`PartitionState.apply_batch`), committing after each, as
    `replay.fold.fold_records` does."""
    for start in range(0, len(events), COMMIT_EVERY):
        state.apply_batch([(event, record.offset, record.value) for event, record in events[start:start + COMMIT_EVERY]])
        state.commit()
    state.commit()


def fold_figures(turns: int, repeats: int) -> dict[str, Any]:
    """The fold alone, and extraction on the same synthetic turns."""
    synthetic = conversations(turns)
    params = GraphParams()
    events = decoded_records(synthetic_log(synthetic, params))
    with tempfile.TemporaryDirectory(prefix="emgas-bench-fold-") as tmp:
        folds = [len(events) / _fold_s(events, Path(tmp) / f"state-{i}", params) for i in range(repeats)]
    extraction = ExtractionParams()
    tag = extractor_id(extraction)
    return {
        "fold_turns": turns,
        "fold_events": len(events),
        "fold_events_per_s": figure(folds, 1),
        "fold_extract_turns_per_s": figure(_rate(turns, lambda: [ingest(t, extraction, tag) for t in synthetic], repeats), 1),
    }


def language_figures(turns: int, repeats: int) -> dict[str, Any]:
    """Ingest in process, English and Chinese: `turns` synthetic turns of
    each language (`synthetic.CHINESE`: as many concepts a turn as real
    Chinese conversations) extracted to their events' bytes, then the
    graph's log decoded and folded into a fresh RocksDB state, as a worker
    does (`extract.encode_all`, `decode_for_fold`, the fold); turns per
    second of the three together, Kafka left out (it costs both languages
    the same). The two languages take turns, repeat by repeat (English
    first in even repeats, Chinese in odd ones), and each repeat's Chinese
    rate over its English one is a ratio of two measurements a second
    apart: their median is the figure the limit reads, which a machine
    whose speed drifts over a minute leaves as it is."""
    params, extraction = GraphParams(), ExtractionParams()
    tag = extractor_id(extraction)
    shapes = {"en": Shape(), "zh": CHINESE}
    turns_of = {language: conversations(turns, shape) for language, shape in shapes.items()}
    logs = {language: log_records(synthetic_log(synthetic, params)) for language, synthetic in turns_of.items()}
    rates: dict[str, list[float]] = {"en": [], "zh": []}
    with tempfile.TemporaryDirectory(prefix="emgas-bench-languages-") as tmp:
        for i in range(repeats):
            for language in ("en", "zh") if i % 2 == 0 else ("zh", "en"):
                started = time.perf_counter()
                encode_all(turns_of[language], extraction, tag)
                events = [(decode_for_fold(record.value), record) for record in logs[language]]
                seconds = time.perf_counter() - started + _fold_s(events, Path(tmp) / f"{language}-{i}", params)
                rates[language].append(turns / seconds)
    return {
        "language_turns": turns,
        **{f"ingest_in_process_turns_per_s_{language}": figure(rates[language], 1) for language in rates},
        "ingest_in_process_zh_vs_en": figure([zh / en for en, zh in zip(rates["en"], rates["zh"])], 3),
    }


def synthetic_view(concepts: int, edges: int, seed: int) -> GraphView:
    """A co-occurrence-shaped graph: node popularity ~ Zipf, pair counts from
    sampling pairs by popularity, c(x) and N consistent with ~5 concepts per turn."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / (np.arange(concepts) + 10.0) ** 0.8
    popularity /= popularity.sum()
    draws = int(edges * 1.25)
    a = rng.choice(concepts, size=draws, p=popularity)
    b = rng.choice(concepts, size=draws, p=popularity)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keep = lo != hi
    pairs, counts = np.unique(lo[keep] * concepts + hi[keep], return_counts=True)
    pairs, counts = pairs[:edges], counts[:edges]
    view = GraphView(GraphRef("bench", 1), DecayParams())
    for i in range(concepts):
        view.node(f"c{i}", f"c{i}")
    incident = np.zeros(concepts)
    np.add.at(incident, pairs // concepts, counts)
    np.add.at(incident, pairs % concepts, counts)
    for i, c in enumerate(incident):
        view.set_count(i, int(c // 4) + 1)
    view.load_pairs(pairs // concepts, pairs % concepts, counts)
    view.turns = int(view.counts.sum() // 5) + 1
    return view


def _rss_bytes() -> int:
    """Resident set size, after handing freed heap back to the system."""
    gc.collect()
    return_freed_memory()
    return resident_bytes()


def query_figures(concepts: int, edges: int, queries: int, repeats: int, seed: int = 11) -> dict[str, Any]:
    before = _rss_bytes()
    view = synthetic_view(concepts, edges, seed)
    params = ActivationParams()
    resident = (_rss_bytes() - before) / max(view.edges, 1)
    degree = degrees(view)
    rng = np.random.default_rng(seed)
    seed_sets = [rng.choice(view.size, size=3, replace=False, p=degree / degree.sum()).tolist() for _ in range(queries)]
    neighbours = view.neighbours(params.weight, params.fan)

    def one(seeds: list[int]) -> float:
        started = time.perf_counter()
        activation, _ = spread(view.size, seeds, neighbours, params)
        scores = concept_scores(activation, view.specificity(), params.hub_floor)
        top_concepts(scores, activation, params.top_concepts, view.ids)
        return (time.perf_counter() - started) * 1000

    rounds = [[one(s) for s in seed_sets] for _ in range(repeats)]
    src, dst, weight = edge_arrays(view, params.weight)
    ppr_rounds = []
    for _ in range(repeats):
        times = []
        for s in seed_sets[: max(5, queries // 10)]:
            started = time.perf_counter()
            personalised_pagerank(view.size, src, dst, weight, s)
            times.append((time.perf_counter() - started) * 1000)
        ppr_rounds.append(statistics.median(times))
    return {
        "query_graph": {"concepts": view.concepts, "edges": view.edges, "queries": queries},
        "query_p50_ms": figure([percentile(r, 0.5) for r in rounds], 3),
        "query_p99_ms": figure([percentile(r, 0.99) for r in rounds], 3),
        "ppr_p50_ms": figure(ppr_rounds, 3),
        "resident_bytes_per_edge": round(resident, 1),
        "adjacency_bytes_per_edge": round(view.resident_bytes() / max(view.edges, 1), 1),
    }
