"""Consolidation: topic nodes from clusters of strongly co-occurring concepts.

Deterministic (same counts, same topics): weighted label propagation over
the "strong" edges: seen in at least `min_pair_count` turns, in at least a
`min_conditional` share of each end's turns, with normalised PPMI ≥
`min_npmi`. Nodes are visited in id order, each takes the
label with the largest summed edge weight among its neighbours (ties: the
smallest label; a node keeps its own label on a tie with it), until no
label changes or `max_rounds`. Clusters of `min_size` or more concepts
become topics. A topic's id comes from its most central member (largest
weighted degree inside the cluster, ties by id), so a topic that keeps its
centre keeps its id as the graph evolves; its label joins the texts of the
`label_terms` most central members.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from emgas.processors.association import ppmi_norm
from emgas.processors.events import TopicNode

Edge = tuple[str, str]


class TopicParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")  # field docstrings: the settings reference (tools.reference reads them)

    min_pair_count: int = Field(default=3, ge=1)
    """A strong edge: seen in at least this many turns."""
    min_npmi: float = Field(default=0.3, ge=0.0, le=1.0)
    """A strong edge: normalised PPMI at least this."""
    min_conditional: float = Field(default=0.2, ge=0.0, le=1.0)
    """Both P(y|x) = c(x,y)/c(x) and P(x|y) at least this: a rare word seen a few times next to a common one is
    associated, but not a topic-mate."""
    min_size: int = Field(default=3, ge=2)
    """Clusters of at least this many concepts become topics."""
    max_size: int = Field(default=50, ge=2)
    """Larger clusters are hubs, not topics."""
    max_rounds: int = Field(default=20, ge=1)
    """Label propagation stops after this many rounds at most."""
    label_terms: int = Field(default=3, ge=1)
    """A topic's label joins the texts of its this many most central members."""


def strong_edges(
    pair_counts: Mapping[Edge, int], counts: Mapping[str, int], n: int, params: TopicParams
) -> dict[Edge, float]:
    """Edges with c(x,y) ≥ min_pair_count, min(P(y|x), P(x|y)) ≥ min_conditional
    and NPMI ≥ min_npmi, weighted by NPMI."""
    candidates = sorted(e for e, c in pair_counts.items() if c >= params.min_pair_count)
    if not candidates:
        return {}
    pair = np.array([pair_counts[e] for e in candidates], dtype=np.float64)
    cx = np.array([counts[a] for a, _ in candidates], dtype=np.float64)
    cy = np.array([counts[b] for _, b in candidates], dtype=np.float64)
    weights = ppmi_norm(pair, cx, cy, float(n))
    mutual = pair / np.maximum(cx, cy) >= params.min_conditional
    return {e: float(w) for e, w, m in zip(candidates, weights, mutual) if m and w >= params.min_npmi}


def propagate_labels(edges: Mapping[Edge, float], max_rounds: int) -> dict[str, str]:
    """Label of each node touched by `edges` after label propagation (see module doc)."""
    adjacency: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for (a, b), w in sorted(edges.items()):
        adjacency[a].append((b, w))
        adjacency[b].append((a, w))
    labels = {node: node for node in adjacency}
    for _ in range(max_rounds):
        changed = False
        for node in sorted(adjacency):
            votes: dict[str, float] = defaultdict(float)
            for other, w in adjacency[node]:
                votes[labels[other]] += w
            best = max(votes.values())
            own = labels[node]
            choice = own if votes.get(own) == best else min(k for k, v in votes.items() if v == best)
            if choice != own:
                labels[node] = choice
                changed = True
        if not changed:
            break
    return labels


def topics_of(
    pair_counts: Mapping[Edge, int],
    counts: Mapping[str, int],
    texts: Mapping[str, str],
    n: int,
    params: TopicParams,
) -> tuple[TopicNode, ...]:
    """The topic nodes of a graph from its counts (c(x), c(x,y), N), ordered by id."""
    edges = strong_edges(pair_counts, counts, n, params)
    labels = propagate_labels(edges, params.max_rounds)
    groups: dict[str, list[str]] = defaultdict(list)
    for node, label in labels.items():
        groups[label].append(node)
    inside: dict[str, float] = defaultdict(float)  # weighted degree within the own cluster
    for (a, b), w in edges.items():
        if labels[a] == labels[b]:
            inside[a] += w
            inside[b] += w
    topics = []
    for members in groups.values():
        if not params.min_size <= len(members) <= params.max_size:
            continue
        central = sorted(members, key=lambda m: (-inside[m], m))
        label = " · ".join(texts[m] for m in central[: params.label_terms])
        topics.append(TopicNode(id=f"topic:{central[0]}", label=label, members=tuple(sorted(members))))
    return tuple(sorted(topics, key=lambda t: t.id))
