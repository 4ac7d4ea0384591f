"""Retrievers to compare the product with, over the same graph and passages.

`emgas` (the product: `service.retrieval.answer`), and the baselines:
`ppr` (personalised PageRank over the same concept graph, as HippoRAG),
`maibot` (MaiBot's breadth-first activation), `bm25` (over the passages'
text; Chinese as jieba words), `bm25-chars` (the same, Chinese as
characters and character bigrams), `hybrid` (emgas and PPR fused by weighted reciprocal rank, the
best of the fusions tried on LoCoMo: emgas+PPR, emgas+BM25, all three),
and, with the extra `emgas[dense]`, `dense` (all-MiniLM-L6-v2 vectors of
the passages, cosine: what most memory systems use, see `tools.dense`)
and `emgas+dense` (emgas and dense fused the same way). Each maps a
question to the turn ids it returns, best first. The graph parts read the
same view and seeds as the product; passages are scored the HippoRAG way,
by summing the scores of the concepts that mention them.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Callable

import numpy as np

from emgas.processors.activation import ActivationParams, rank_passages
from emgas.processors.events import ActivationQuery, QueryParams
from emgas.processors.extract import ExtractionParams
from emgas.tools.graph_arrays import edge_arrays, strengths
from emgas.tools.lexical import BM25, top
from emgas.tools.walks import maibot_activation, personalised_pagerank
from emgas.state.projector import PartitionState
from emgas.service.retrieval import answer, seed_ids
from emgas.state.view import GraphView

if TYPE_CHECKING:
    from emgas.tools.dense import DenseIndex

Retriever = Callable[[str], list[str]]
NAMES = ("emgas", "ppr", "maibot", "bm25", "bm25-chars", "hybrid", "dense", "emgas+dense")
DENSE = ("dense", "emgas+dense")  # need the extra emgas[dense]
# Weighted reciprocal rank fusion: score = Σ w / (RRF_K + rank).
RRF_K = 10
HYBRID_WEIGHTS = {"emgas": 2.0, "ppr": 1.0}
DENSE_HYBRID_WEIGHTS = {"emgas": 2.0, "dense": 1.0}
HYBRID_DEPTH = 50  # how deep each list going into the fusion is
MAIBOT_NODES = 10


def _passages_by_score(view: GraphView, node_scores: dict[int, float], k: int) -> list[str]:
    """The k passages with the highest summed score of the nodes mentioning them."""
    return [pid for pid, _ in rank_passages(((s, view.passage_ids[i]) for i, s in node_scores.items()), k)]


def retrievers(
    state: PartitionState, graph_id: str, activation: ActivationParams, extraction: ExtractionParams, k: int
) -> dict[str, Retriever]:
    """Every retriever over `graph_id` in `state`, each returning k turn ids."""
    view = state.view(graph_id)
    assert view is not None
    turn_ids = list(view.place_of)
    texts = state.repo.passages(view.ref, turn_ids)
    documents = [(t, f"{p.speaker}: {p.text}") for t, p in texts.items()]
    bm25, bm25_chars = BM25(documents), BM25(documents, tokens="chars")
    texts_concepts = {t: p.concept_ids for t, p in texts.items()}
    src, dst, weight = edge_arrays(view, activation.weight)
    node_strengths = strengths(view)

    def query(text: str, depth: int = k) -> ActivationQuery:
        return ActivationQuery(
            request_id="eval", graph_id=graph_id, text=text, reinforce=False, params=QueryParams(top_passages=depth)
        )

    def seeds(text: str) -> list[int]:
        return [view.index[s] for s in seed_ids(view, query(text), extraction)]

    def emgas(text: str, depth: int = k) -> list[str]:
        return [p.turn_id for p in answer(state, query(text, depth), activation, extraction, lambda: 0.0).passages]

    def ppr(text: str, depth: int = k) -> list[str]:
        rank = personalised_pagerank(view.size, src, dst, weight, seeds(text))
        return _passages_by_score(view, {int(i): float(rank[i]) for i in np.flatnonzero(rank > 0)}, depth)

    def maibot(text: str) -> list[str]:
        """MaiBot picks its most activated nodes (max_memory_num), then their
        memories most similar to the keywords: here the passages of the 10
        most activated concepts, by how many of the query's seeds they mention."""
        keywords = seeds(text)
        activated = maibot_activation(node_strengths, keywords)
        nodes = sorted(activated, key=lambda i: (-activated[i], view.ids[i]))[:MAIBOT_NODES]
        wanted = {view.ids[i] for i in keywords}
        candidates = {pid for i in nodes for pid in view.passage_ids[i]}
        overlap = {pid: float(len(wanted & set(texts_concepts[pid]))) for pid in candidates}
        return top(overlap, k)

    def lexical(text: str, depth: int = k) -> list[str]:
        return top(bm25.scores(text), depth)

    def lexical_chars(text: str) -> list[str]:
        return top(bm25_chars.scores(text), k)

    def hybrid(text: str) -> list[str]:
        lists = {"emgas": emgas(text, HYBRID_DEPTH), "ppr": ppr(text, HYBRID_DEPTH)}
        return top(fuse(lists, HYBRID_WEIGHTS), k)

    @cache
    def dense_index() -> DenseIndex:
        """Built on first use: embedding every passage takes a while."""
        from emgas.tools.dense import DenseIndex

        return DenseIndex((t, f"{p.speaker}: {p.text}") for t, p in texts.items())

    def dense(text: str, depth: int = k) -> list[str]:
        return top(dense_index().scores(text), depth)

    def emgas_dense(text: str) -> list[str]:
        lists = {"emgas": emgas(text, HYBRID_DEPTH), "dense": dense(text, HYBRID_DEPTH)}
        return top(fuse(lists, DENSE_HYBRID_WEIGHTS), k)

    return {"emgas": emgas, "ppr": ppr, "maibot": maibot, "bm25": lexical, "bm25-chars": lexical_chars, "hybrid": hybrid,
            "dense": dense, "emgas+dense": emgas_dense}


def fuse(rankings: dict[str, list[str]], weights: dict[str, float]) -> dict[str, float]:
    """Weighted reciprocal rank fusion: score(p) = Σ_lists w / (RRF_K + rank of p)."""
    fused: dict[str, float] = {}
    for name, ranking in rankings.items():
        for r, pid in enumerate(ranking):
            fused[pid] = fused.get(pid, 0.0) + weights[name] / (RRF_K + r + 1)
    return fused
