"""Retrieval by spreading activation, the cognitive model of associative
recall (Collins and Loftus; the spreading of ACT-R): energy flows from the
query's concepts along the graph's associations.

Seeds start at activation 1.0, every other node at 0. Each iteration,
every node whose activation exceeds the firing threshold F fires, and each
neighbour j of a firing node i receives A[i] · W[i,j] · D. With `spend`,
the firing node keeps A[i] · (1 − D) of its own activation (plus whatever
it receives), which keeps energy from circulating forever. W is the edge
weight (normalised PPMI by default) and, with `fan` on (ACT-R's fan effect,
see `processors.association.outgoing_weights`), divided by the sum of the
firing node's weights, so a node sends out exactly A·D. The update is
synchronous (all reads from the previous iteration), so the result does not
depend on the order nodes fire in. Spreading stops after `max_iterations`,
when nothing fires, or when the total change Σ|A_new − A| < ε.

Ranking: score = activation · (h + (1 − h) · specificity), where
specificity = log(N / c(x)) / log(N) and h = `hub_floor`. Hubs mentioned
in nearly every turn (speaker names, "today") carry little information, so
they rank low, yet a query about a hub alone still finds its passages.
A passage's score is the sum of the scores of the top-N concepts it
mentions, a concept the query did not start from (reached by spreading
only) counting `association_weight` of its score (`seeded_scores`); then
its place in the conversation adjusts it: neighbouring
turns share its score, a passage said by a person the query names is
boosted, and a session shares its summed score with all its turns
(`rank_passages`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from emgas.processors.association import WeightKind
from emgas.processors.events import QueryParams
from emgas.processors.events.queries import ContextWindow, Iterations, Ranked, Share, TopicShare

# (indices of neighbours of i, weights W[i, ·] of those edges)
Neighbours = Callable[[int], tuple[np.ndarray, np.ndarray]]


class ActivationParams(BaseModel):
    """Defaults of spreading activation; a query may override those in `QueryParams`."""

    model_config = ConfigDict(frozen=True)  # field docstrings: the settings reference (tools.reference reads them)

    firing_threshold: Share = 0.01
    """F: a node fires when its activation exceeds this."""
    propagation_decay: Share = 0.3
    """D: the share of a firing node's activation it passes on."""
    max_iterations: Iterations = 5
    """Spreading stops after this many iterations at most."""
    epsilon: Share = 1e-4
    """ε: spreading stops when the total change Σ|A_new − A| falls below this."""
    top_concepts: Ranked = 50
    """Concepts ranked in a reply."""
    top_passages: Ranked = 5
    """Passages returned in a reply."""
    spend: bool = True
    """A firing node keeps only A·(1 − D) of its own activation, so energy does not circulate forever."""
    fan: bool = True
    """ACT-R's fan effect: a node's outgoing weights are divided by their sum, so it sends out exactly A·D."""
    weight: WeightKind = "ppmi_norm"
    """Edge weight W: PPMI, or PPMI normalised to [0, 1] (ppmi_norm)."""
    hub_floor: float = Field(default=0.3, ge=0.0, le=1.0)
    """h in score = activation · (h + (1 − h) · specificity): how much of its score a hub keeps."""
    association_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    """Share of its score a concept the query did not start from (reached by spreading only) adds to the passages
    that mention it; the query's seeds add all of theirs (1: every concept alike)."""
    context_window: ContextWindow = 2
    """Passages pass context_weight × their score to the turns within context_window places of them in the same
    session (0: off)."""
    context_weight: Share = 0.3
    """See context_window."""
    speaker_boost: float = Field(default=1.0, ge=0.0, le=10.0)
    """A passage said by a person the query names scores (1 + speaker_boost) ×."""
    session_weight: float = Field(default=0.3, ge=0.0, le=1.0)
    """Each turn of a session gets session_weight × the session's summed passage scores / its number of turns (0:
    off)."""
    date_boost: float = Field(default=1.0, ge=0.0, le=10.0)
    """A passage said within the time a question names ("in July 2023", "on 7 July, 2023": `processors.dates`)
    scores (1 + date_boost) × (0: off)."""
    topic_weight: TopicShare = 0.0
    """Share of a concept's outgoing weight that flows up to its topic nodes (see
    `state.view.GraphView.neighbours`); 0: topics take no part."""
    expansion: bool = True
    """A query word that is no concept of the graph seeds the concepts a lexicon relates it to
    (`processors.expansion`); False: it seeds nothing."""
    semantic: bool = True
    """With emgas[dense] installed, each query word also seeds the concepts whose word vectors are nearest
    (`processors.expansion.similar_seeds`)."""

    def overridden_by(self, query: QueryParams) -> "ActivationParams":
        given = query.model_dump(exclude_none=True)
        return self.model_copy(update=given)


def spread(
    n_nodes: int,
    seeds: Sequence[int] | Mapping[int, float],
    neighbours: Neighbours,
    params: ActivationParams,
    trace: list[tuple[np.ndarray, np.ndarray]] | None = None,
) -> tuple[np.ndarray, int]:
    """Activations after spreading from `seeds`, and the iterations that ran.

    Seeds start at 1.0, or (a mapping) at their own activation. With
    `trace`, each iteration appends (the nodes that fired, their
    activations when they fired): what the graph viewer animates."""
    activation = np.zeros(n_nodes, dtype=np.float64)
    if isinstance(seeds, Mapping):
        for node, start in seeds.items():
            activation[node] = start
    else:
        activation[list(seeds)] = 1.0
    decay = params.propagation_decay
    iterations = 0
    for _ in range(params.max_iterations):
        firing = np.flatnonzero(activation > params.firing_threshold)
        if firing.size == 0:
            break
        if trace is not None:
            trace.append((firing, activation[firing].copy()))
        iterations += 1
        updated = activation.copy()
        for i in firing:
            idx, weights = neighbours(int(i))
            updated[idx] += activation[i] * weights * decay
            if params.spend:
                updated[i] -= activation[i] * decay
        change = float(np.abs(updated - activation).sum())
        activation = updated
        if change < params.epsilon:
            break
    return activation, iterations


def spread_groups(
    n_nodes: int,
    groups: Sequence[Mapping[int, float]],
    neighbours: Neighbours,
    params: ActivationParams,
    trace: list[tuple[np.ndarray, np.ndarray]] | None = None,
) -> tuple[np.ndarray, int, list[np.ndarray]]:
    """Activations when a query asks several questions: one group of seeds
    (node -> starting activation) each. Returns the combined activation,
    the iterations and each group's own activation (for `fuse_questions`).

    One group: `spread` of it. Several: A = Σ_g spread(g) · m̄ / m_g, where
    m_g is the group's seed mass (the sum of its starting activations) and
    m̄ their mean, so every question carries the same weight whatever its
    number of seeds, and the total seed mass stays Σ m_g. Iterations: the
    most any group ran; `trace` gets the groups' iterations one after
    another."""
    groups = [g for g in groups if g]
    if len(groups) <= 1:
        activation, iterations = spread(n_nodes, groups[0] if groups else [], neighbours, params, trace)
        return activation, iterations, [activation]
    masses = [sum(g.values()) for g in groups]
    mean_mass = sum(masses) / len(groups)
    total = np.zeros(n_nodes, dtype=np.float64)
    each, iterations = [], 0
    for group, mass in zip(groups, masses):
        activation, ran = spread(n_nodes, group, neighbours, params, trace)
        total += activation * (mean_mass / mass)
        each.append(activation)
        iterations = max(iterations, ran)
    return total, iterations, each


def fuse_questions(rankings: Sequence[Sequence[tuple[str, float]]], k: int) -> list[tuple[str, float]]:
    """Top-k passages of a query that asks several questions, from each
    question's own ranking: score(p) = Σ_q score_q(p) / max score_q, so each
    question's best passage counts 1 whatever how many of its words a
    passage repeats (a question naming a forum by five words and bigrams
    would otherwise bury one asking about "my boss"). Ties by passage id.
    Chinese questions often ask two things at once ("…叫什么？另外，…的地点
    是什么？"); the figures: docs/retrieval.md, "A query that asks several
    questions"."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        best = max((score for _, score in ranking), default=0.0)
        if best <= 0:
            continue
        for pid, score in ranking:
            fused[pid] = fused.get(pid, 0.0) + score / best
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]


def concept_scores(activation: np.ndarray, specificity: np.ndarray, hub_floor: float) -> np.ndarray:
    """score = activation · (h + (1 − h) · specificity); unitless."""
    return activation * (hub_floor + (1.0 - hub_floor) * specificity)


def seeded_scores(
    scores: np.ndarray, top: Iterable[int], seeds: Collection[int], association_weight: float
) -> list[tuple[float, int]]:
    """(what concept i adds to each passage mentioning it, i) for the `top`
    concepts: its score when the query started from it (a seed, weak seeds
    included), else `association_weight` × its score.

    Spreading leaves most of a seed's energy in the concepts of the
    passages that mention it (they co-occur with it there), so without
    this a passage's own words were counted again through its echo: a
    one-sentence memory that shares one word of the query with no other
    memory ("坚持") collected that word's whole energy through its twenty
    concepts and outranked the memory that shares the query's rare word and
    two others (docs/retrieval.md, "Concepts reached by spreading only
    count less")."""
    return [(float(scores[i]) * (1.0 if i in seeds else association_weight), i) for i in top]


def top_concepts(scores: np.ndarray, activation: np.ndarray, n: int, ids: Sequence[str]) -> list[int]:
    """Indices of the n best-scored active nodes; ties by concept id, so the
    answer does not depend on where nodes sit in the arrays."""
    active = np.flatnonzero(activation > 0)
    if active.size > n:
        # Only the nodes scoring at least the n-th best can make the cut.
        cut = np.partition(scores[active], active.size - n)[active.size - n]
        active = active[scores[active] >= cut]
    return sorted((int(i) for i in active), key=lambda i: (-scores[i], ids[i]))[:n]


@dataclass(frozen=True)
class Surroundings:
    """Where passages sit in their conversation, as the ranking reads it
    (the graph's view supplies these)."""

    neighbours: Callable[[str, int], Sequence[tuple[str, int]]]  # (passage, window) -> (turn, distance)
    session_of: Callable[[str], str | None]  # passage -> its session (None: it has none)
    members: Callable[[str], Collection[str]]  # session -> its turns
    speaker_of: Callable[[str], str]  # passage -> its speaker's key


def named_speakers(seeds: Iterable[str], speakers: Iterable[str]) -> frozenset[str]:
    """The speakers a query names: those whose every name word is a seed."""
    found = set(seeds)
    return frozenset(s for s in speakers if s and set(s.split(" ")) <= found)


def rank_passages(
    scored_concepts: Iterable[tuple[float, Sequence[str]]],
    k: int,
    surroundings: Surroundings | None = None,
    params: ActivationParams | None = None,
    named: frozenset[str] = frozenset(),
) -> list[tuple[str, float]]:
    """Top-k passages, best first; ties by passage id, so the order is deterministic.

    `scored_concepts` yields (concept score, its source passage ids). A
    passage's score is the sum of the scores of the concepts pointing at
    it; with `surroundings` and `params`, then (in this order) the context,
    speaker and session steps below adjust it.
    """
    totals: dict[str, float] = {}
    for score, passage_ids in scored_concepts:
        for pid in passage_ids:
            totals[pid] = totals.get(pid, 0.0) + score
    if surroundings is not None and params is not None:
        totals = share_with_neighbours(totals, surroundings, params.context_window, params.context_weight)
        totals = boost_speakers(totals, surroundings, named, params.speaker_boost)
        totals = share_with_sessions(totals, surroundings, params.session_weight)
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:k]


def share_with_neighbours(
    totals: dict[str, float], surroundings: Surroundings, window: int, weight: float
) -> dict[str, float]:
    """Each passage p passes weight × score(p) to every turn within `window`
    places of it in the same session: the turn that answers a question often
    follows (or precedes) the one that names its subject."""
    if window <= 0 or weight <= 0:
        return totals
    out = dict(totals)
    for pid, score in totals.items():
        for other, _ in surroundings.neighbours(pid, window):
            out[other] = out.get(other, 0.0) + weight * score
    return out


def boost_speakers(
    totals: dict[str, float], surroundings: Surroundings, named: frozenset[str], boost: float
) -> dict[str, float]:
    """score × (1 + boost) for the passages a person the query names said:
    "what does Melanie play?" is answered by Melanie's turns, yet her name,
    a hub, cannot tell her turns from her friend's replies to her."""
    if not named or boost <= 0:
        return totals
    return {pid: score * (1.0 + boost) if surroundings.speaker_of(pid) in named else score
            for pid, score in totals.items()}


# A session longer than this is not a conversation's context but a stream
# (a client that sends every turn under one session id): it shares nothing,
# so a query never walks it whole.
SESSION_CONTEXT_MAX = 1000


def share_with_sessions(totals: dict[str, float], surroundings: Surroundings, weight: float) -> dict[str, float]:
    """Each turn of session s gets weight × S(s) / |s|, where S(s) is the sum
    of the scores of s's passages and |s| its number of turns: a session
    that talks about the question's subject lifts its turns that use other
    words for it. Sessions of more than SESSION_CONTEXT_MAX turns share nothing."""
    if weight <= 0:
        return totals
    by_session: dict[str, float] = {}
    for pid, score in totals.items():
        session = surroundings.session_of(pid)
        if session is not None:
            by_session[session] = by_session.get(session, 0.0) + score
    out = dict(totals)
    for session in sorted(by_session):  # a fixed order: float sums do not depend on dict order
        members = surroundings.members(session)
        if len(members) > SESSION_CONTEXT_MAX:
            continue
        share = weight * by_session[session] / len(members)
        for pid in members:
            out[pid] = out.get(pid, 0.0) + share
    return out
