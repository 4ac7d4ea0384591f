"""Answering an activation query from a partition's state (reads only).

Serving a query writes nothing: its reinforcement of the concepts it
activated is a `retrieved` event that the query agent appends to the log,
applied like every other change.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from emgas.processors.activation import (
    ActivationParams,
    concept_scores,
    named_speakers,
    rank_passages,
    spread_groups,
    top_concepts,
)
from emgas.processors.errors import QueryError
from emgas.processors.events import (
    ActivationQuery,
    ActivationReply,
    Boost,
    HeldPassage,
    PassageQuery,
    PassagesReply,
    Retrieved,
    StatsQuery,
    StatsReply,
    TopConcept,
    GraphStats,
    RankedConcept,
    RankedPassage,
    Timings,
)
from emgas.processors.extract import ExtractionParams, normalise, query_parts, query_seeds
from emgas.processors.graph import GraphParams, on_grid
from emgas.state.projector import PartitionState
from emgas.state.view import GraphView

Clock = Callable[[], float]  # seconds, monotonic


def seed_groups(view: GraphView, query: ActivationQuery, extraction: ExtractionParams) -> list[list[str]]:
    """Concept ids of the query's seeds that exist in the graph: one group per
    question of its text (`query_parts`), then one of its explicit seeds;
    empty groups left out; each in query order."""
    groups = [list(query_seeds(part, extraction)) for part in query_parts(query.text)] if query.text else []
    groups.append([form for seed in query.seeds for form in (seed, normalise(seed, "en"))])
    found = [[cid for cid in dict.fromkeys(group) if cid in view.index] for group in groups]
    return [group for group in found if group]


def seed_ids(view: GraphView, query: ActivationQuery, extraction: ExtractionParams) -> list[str]:
    """Every seed of `seed_groups`, once, in query order."""
    return list(dict.fromkeys(cid for group in seed_groups(view, query, extraction) for cid in group))


def answer(
    state: PartitionState,
    query: ActivationQuery,
    defaults: ActivationParams,
    extraction: ExtractionParams,
    clock: Clock,
    trace: list[tuple[np.ndarray, np.ndarray]] | None = None,
) -> ActivationReply:
    """Spread activation from the query's seeds; return ranked concepts and passages
    (`trace`: see `processors.activation.spread`)."""
    started = clock()
    view = state.view(query.graph_id, query.graph_version)
    if view is None:
        which = f"graph {query.graph_id!r}" + (f" version {query.graph_version}" if query.graph_version else "")
        raise QueryError("graph_not_found", f"{which} has no turns on this worker")
    params = defaults.overridden_by(query.params)
    groups = seed_groups(view, query, extraction)
    seeds = list(dict.fromkeys(cid for group in groups for cid in group))
    extracted = clock()
    spreading = view.neighbours(params.weight, params.fan, params.topic_weight)
    activation, iterations = spread_groups(
        view.nodes, [[view.index[s] for s in group] for group in groups], spreading, params, trace
    )
    activation = activation[: view.size]  # topic nodes have no passages
    spread_done = clock()
    scores = concept_scores(activation, view.specificity(), params.hub_floor)
    top = top_concepts(scores, activation, params.top_concepts, view.ids)
    named = named_speakers(seeds, view.speakers())
    ranked = rank_passages(
        ((scores[i], view.passage_ids[i]) for i in top), params.top_passages, view.surroundings(), params, named,
    )
    passages = state.repo.passages(view.ref, [pid for pid, _ in ranked])
    finished = clock()
    return ActivationReply(
        request_id=query.request_id,
        graph_id=query.graph_id,
        seeds=tuple(seeds),
        concepts=tuple(
            RankedConcept(id=view.ids[i], text=view.texts[i], activation=float(activation[i]), score=float(scores[i]))
            for i in top
        ),
        passages=tuple(
            RankedPassage(
                turn_id=pid, speaker=passages[pid].speaker, text=passages[pid].text,
                timestamp=passages[pid].timestamp, score=score,
            )
            for pid, score in ranked
        ),
        iterations=iterations,
        stats=GraphStats(turns=view.turns, concepts=view.concepts),
        timings=Timings(
            extract_ms=_ms(started, extracted), spread_ms=_ms(extracted, spread_done),
            rank_ms=_ms(spread_done, finished), total_ms=_ms(started, finished),
        ),
    )


def _ms(a: float, b: float) -> float:
    return round((b - a) * 1000.0, 3)


def reinforcement(
    state: PartitionState, query: ActivationQuery, reply: ActivationReply, params: GraphParams
) -> Retrieved | None:
    """The `retrieved` event of an answer: each seed (activation 1 when the
    spreading started) and each returned concept gets retrieval_boost ·
    min(1, activation), at the query's `at` or else the graph's latest event
    time. None when the query asks for no reinforcement or nothing was activated."""
    view = state.view(query.graph_id, query.graph_version)
    if not query.reinforce or view is None or params.retrieval_boost == 0:
        return None
    activated = {c.id: min(1.0, c.activation) for c in reply.concepts if c.activation > 0}
    activated.update({seed: 1.0 for seed in reply.seeds})
    boosts = tuple(
        Boost(id=cid, amount=on_grid(params.retrieval_boost * a)) for cid, a in sorted(activated.items())
    )
    at = query.at or state.repo.meta(view.ref).clock
    if not boosts or at is None:
        return None
    return Retrieved(
        graph_id=query.graph_id, graph_version=view.ref.version, request_id=query.request_id,
        timestamp=at, boosts=boosts,
    )


MAX_PASSAGES_FOUND = 1000  # by one turn id prefix


def held_passages(state: PartitionState, query: PassageQuery) -> PassagesReply:
    """The passages of `query.turn_ids` the graph version holds, and the ids it does not."""
    view = state.view(query.graph_id, query.graph_version)
    if view is None:
        raise QueryError("graph_not_found", f"graph {query.graph_id!r} has no turns on this worker")
    found = state.repo.passages(view.ref, list(query.turn_ids))
    if query.turn_id_prefix is not None:
        found |= state.repo.passages_starting(view.ref, query.turn_id_prefix, MAX_PASSAGES_FOUND)
    return PassagesReply(
        request_id=query.request_id, graph_id=query.graph_id, version=view.ref.version,
        passages=tuple(
            HeldPassage(turn_id=p.turn_id, speaker=p.speaker, text=p.text, timestamp=p.timestamp,
                        session_id=p.session_id, metadata=p.metadata, concepts=p.concept_ids)
            for p in found.values()
        ),
        missing=tuple(t for t in query.turn_ids if t not in found),
    )


def graph_stats(state: PartitionState, query: StatsQuery) -> StatsReply:
    """Sizes of a graph version from its view, and its `top` most mentioned concepts."""
    view = state.view(query.graph_id, query.graph_version)
    if view is None:
        raise QueryError("graph_not_found", f"graph {query.graph_id!r} has no turns on this worker")
    ids = [view.ids[i] for i in view.most_mentioned(query.top)]
    records = state.repo.concepts(view.ref, ids)
    return StatsReply(
        request_id=query.request_id, graph_id=query.graph_id, version=view.ref.version, turns=view.turns,
        concepts=view.concepts, edges=view.edges, passages=len(view.place_of), topics=len(view.topics),
        top_concepts=tuple(
            TopConcept(id=c, text=records[c].text, count=records[c].count, base_activation=records[c].base_activation)
            for c in ids
        ),
    )
