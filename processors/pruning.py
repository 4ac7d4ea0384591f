"""Which concepts and edges a decay tick removes (forgetting by pruning: what
decay left too weak is deleted, so the graph stays the size of what is
still remembered).

At tick time t (event time):
- a concept whose base activation at t is below the concept threshold θ
  goes, with its edges (reason `activation`);
- an edge whose retention R at t is below the edge threshold θ_e goes;
- a concept left with no edges by those removals goes too (reason
  `isolated`), unless every edge it loses would have gone before its
  newest mention (`outlived_its_edges`: an old turn that linked a recent
  concept to old ones must not take it along); one that never had an edge
  is not "left" without them.

The same function decides both sides of a tick: the emitter runs it over
the candidates it finds due, the fold runs it over the entries the event
lists (so a concept reinforced in between is kept). Pure: state comes in
as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple, TypeVar

import numpy as np

from emgas.processors.dynamics import (
    EPOCH, DecayParams, edge_lifetime, edge_retention, microseconds, seconds, time_to_threshold,
)
from emgas.processors.events import PrunedConcept, PrunedEdge
from emgas.processors.graph import ConceptState, activation_at


class PairState(NamedTuple):
    """A co-occurrence count c(x, y) and the event time of its last co-occurrence."""

    count: int  # type: ignore[assignment]  # the pair's count, shadowing tuple.count on purpose
    last: datetime


Edge = tuple[str, str]  # (a, b) with a < b
Node = TypeVar("Node", str, int)  # a concept, by id or by its slot in a graph's view


def edge_key(edge: tuple[str, str]) -> Edge:
    """`edge` as (a, b) with a < b: a tick may list it either way round."""
    a, b = edge
    return (a, b) if a < b else (b, a)


def pair_state(count: int, last: datetime) -> PairState:
    """`PairState(count, last)` without the named tuple's Python-level
    constructor (a fold makes one per pair of every turn)."""
    return _new_tuple(PairState, (count, last))


_new_tuple = tuple.__new__


def expired_concepts(
    candidates: Iterable[ConceptState], at: datetime, params: DecayParams
) -> list[PrunedConcept]:
    """Candidates whose base activation at `at` is below θ, in id order."""
    pruned = []
    for concept in sorted(candidates, key=lambda c: c.id):
        value = activation_at(concept, at, params)
        if value < params.concept_threshold:
            pruned.append(PrunedConcept(id=concept.id, reason="activation", value=value))
    return pruned


def expired_edges(
    candidates: Mapping[Edge, PairState] | PairTable, at: datetime, params: DecayParams
) -> list[PrunedEdge]:
    """Candidate edges whose retention at `at` is below θ_e, in key order, with it."""
    table = candidates if isinstance(candidates, PairTable) else PairTable.of(candidates)
    gone = table.where(expired_mask(table, at, params))
    return [PrunedEdge(a=a, b=b, value=value) for (a, b), value in zip(gone.edges, edge_retentions(gone, at, params))]


_NO_US = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class PairTable:
    """Edges (a, b), a < b, in key order, with their pair counts c(a, b) and
    last co-occurrences (µs since 1970) as arrays: a tick's listed edges,
    read and decided a table at a time instead of a `PairState` each."""

    edges: tuple[Edge, ...] = ()
    counts: np.ndarray = field(default_factory=lambda: _NO_US)
    last_us: np.ndarray = field(default_factory=lambda: _NO_US)

    @classmethod
    def of(cls, pairs: Mapping[Edge, PairState]) -> PairTable:
        """The table of `pairs` (edge -> its count and last time)."""
        edges = tuple(sorted(pairs))
        return cls(edges, np.array([pairs[e].count for e in edges], dtype=np.int64),
                   np.array([microseconds(pairs[e].last) for e in edges], dtype=np.int64))

    def __len__(self) -> int:
        return len(self.edges)

    def items(self) -> Iterator[tuple[Edge, PairState]]:
        """Each edge with its `PairState` (its last time as a datetime, in UTC)."""
        for edge, count, us in zip(self.edges, self.counts.tolist(), self.last_us.tolist()):
            yield edge, PairState(count, EPOCH + timedelta(microseconds=us))

    def where(self, mask: np.ndarray) -> PairTable:
        """The rows where `mask` holds."""
        return PairTable(tuple(e for e, keep in zip(self.edges, mask.tolist()) if keep), self.counts[mask],
                         self.last_us[mask])


def expired_mask(table: PairTable, at: datetime, params: DecayParams) -> np.ndarray:
    """Per edge of `table`, whether its retention at `at` is below θ_e
    (`expired_at`, every edge at the same time)."""
    return expired_at(table.counts, table.last_us, np.full(len(table), microseconds(at), dtype=np.int64), params)


def expired_at(counts: np.ndarray, last_us: np.ndarray, at_us: np.ndarray, params: DecayParams) -> np.ndarray:
    """Per edge k, whether its retention at `at_us[k]` is below θ_e:
    `edge_retention(Δt, c) < edge_threshold`, Δt the µs from its last
    co-occurrence over 10^6 (as `total_seconds`), all at once. numpy's exp
    may differ from `math.exp` in the last bit, so a retention that close
    to θ_e is computed again with `math.exp`."""
    if not len(counts):
        return np.zeros(0, dtype=np.bool_)
    if len(counts) <= _FEW_EDGES:
        return _expired_one_by_one(counts, last_us, at_us, params)
    elapsed = (at_us - last_us) / 1e6
    stability = params.edge_stability_s * np.maximum(counts, 1)
    aged = elapsed > 0  # a last co-occurrence at or after `at` keeps R = 1
    retention = np.exp(np.where(aged, -elapsed, 0.0) / stability)
    threshold = params.edge_threshold
    close = np.flatnonzero(np.abs(retention - threshold) <= abs(threshold) * 2.0**-40)
    for k in close.tolist():
        retention[k] = edge_retention(float(elapsed[k]), int(counts[k]), params)
    return retention < threshold


# Below this many edges, numpy's per-call cost exceeds `math.exp`'s per edge
# (a pruning tick lists a dozen or so).
_FEW_EDGES = 32


def _expired_one_by_one(counts: np.ndarray, last_us: np.ndarray, at_us: np.ndarray, params: DecayParams) -> np.ndarray:
    """`expired_at` with `edge_retention` (`math.exp`) for every edge. The
    same decisions: numpy's exp differs from `math.exp` by an ulp or so, so
    only a retention within 2^-40 of θ_e could fall on the other side, and
    `expired_at` computes those with `math.exp` too."""
    return np.array(
        [edge_expired(count, us, at, params) for count, us, at in zip(counts.tolist(), last_us.tolist(), at_us.tolist())],
        dtype=np.bool_,
    )


def edge_expired(count: int, last_us: int, at_us: int, params: DecayParams) -> bool:
    """Whether an edge of count c(a, b) last co-occurring at `last_us` has a
    retention at `at_us` below θ_e: `edge_retention(Δt, c) < edge_threshold`,
    Δt the µs between over 10^6 (as `total_seconds`), with `math.exp`."""
    return edge_retention((at_us - last_us) / 1e6, count, params) < params.edge_threshold


def edge_retentions(table: PairTable, at: datetime, params: DecayParams) -> list[float]:
    """`edge_retention` of each edge of `table` at `at` (`math.exp`, one by one)."""
    at_us = microseconds(at)
    return [edge_retention((at_us - us) / 1e6, count, params) for count, us in zip(table.counts.tolist(), table.last_us.tolist())]


def isolated_by(
    pruned_concepts: Iterable[str],
    pruned_edges: Iterable[Edge],
    neighbours: Callable[[str], Iterable[str]],
    allowed: Callable[[str], bool] = lambda cid: True,
) -> list[PrunedConcept]:
    """Concepts (other than the pruned ones) whose every edge the removals take away.

    `neighbours(c)`: c's neighbours before the tick. `allowed` limits the
    answer (the fold passes "listed as isolated in the event").
    """
    return [PrunedConcept(id=cid, reason="isolated", value=0.0)
            for cid in isolated_ids(pruned_concepts, pruned_edges, neighbours, allowed)]


def isolated_ids(
    pruned_concepts: Iterable[Node],
    pruned_edges: Iterable[tuple[Node, Node]],
    neighbours: Callable[[Node], Iterable[Node]],
    allowed: Callable[[Node], bool] = lambda cid: True,
) -> list[Node]:
    """The ids `isolated_by` returns, in id order, without a model each (or
    the same of nodes named by ints: in their order)."""
    gone = set(pruned_concepts)
    lost: dict[Node, set[Node]] = {}  # only for the concepts `allowed` (a tick's fold lists a few among many ends)
    for a, b in pruned_edges:
        if allowed(a):
            lost.setdefault(a, set()).add(b)
        if allowed(b):
            lost.setdefault(b, set()).add(a)
    for cid in gone:
        for other in neighbours(cid):
            if allowed(other):
                lost.setdefault(other, set()).add(cid)
    return [cid for cid in sorted(lost) if cid not in gone and set(neighbours(cid)) <= lost[cid] | gone]


def last_mentioned(concept: ConceptState) -> datetime | None:
    """The event time of the concept's newest mention, where its record
    tells it: `last_accessed`, unless a retrieval may account for that (None)."""
    if concept.last_retrieved is not None and concept.last_retrieved >= concept.last_accessed:
        return None
    return concept.last_accessed


def edge_end_s(pair: PairState, partner: ConceptState | None, params: DecayParams) -> float:
    """Event time (s since 1970) by which an edge would have gone on its own:
    its retention reaching θ_e (last + S·ln(1/θ_e)), or before that its
    partner's activation reaching θ (`partner`: the other end, when this
    tick prunes it for its activation). inf: never."""
    return _edge_end(seconds(pair.last), pair.count, partner, params)


def edge_end_at_us(count: int, last_us: int, partner: ConceptState | None, params: DecayParams) -> float:
    """`edge_end_s` of a pair given as its count and its last co-occurrence
    in µs since 1970 (over 10^6, as `total_seconds` divides)."""
    return _edge_end(last_us / 1e6, count, partner, params)


def _edge_end(last_s: float, count: int, partner: ConceptState | None, params: DecayParams) -> float:
    end = last_s + edge_lifetime(count, params)
    if partner is not None:
        remaining = time_to_threshold(partner.base_activation, partner.reinforcements, params)
        end = min(end, seconds(partner.decay_reference) + remaining)
    return end


def lost_edges(
    edges: Mapping[str, PairState], pruned: Mapping[str, ConceptState],
) -> list[tuple[PairState, ConceptState | None]]:
    """Each of a concept's lost edges (neighbour id -> pair), in neighbour id
    order, with its partner when the tick prunes the partner for its
    activation (`pruned`): what `outlived_its_edges` reads."""
    return [(pair, pruned.get(other)) for other, pair in sorted(edges.items())]


def outlived_its_edges(
    concept: ConceptState | None, lost: Iterable[tuple[PairState, ConceptState | None]], params: DecayParams
) -> bool:
    """Whether every edge a tick takes from `concept` (each with its partner,
    see `edge_end_s`) would have gone before the concept's newest mention.

    Then, in event-time order, the concept was left without edges before
    that mention, and the mention made it anew, alone: an old turn that
    linked a recent concept to old ones arrived late, and losing those
    edges now must not take the recent concept along."""
    return outlived(concept, (edge_end_s(pair, partner, params) for pair, partner in lost))


def outlived(concept: ConceptState | None, ends: Iterable[float]) -> bool:
    """`outlived_its_edges` given the event times (s since 1970) by which
    each lost edge would have gone (`edge_end_s`, taken only where the
    concept has a newest mention to compare them with): some, and all
    before that mention."""
    if concept is None:
        return False
    mentioned = last_mentioned(concept)
    if mentioned is None:
        return False
    latest = max(ends, default=None)
    return latest is not None and latest < seconds(mentioned)
