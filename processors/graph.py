"""The graph state: its records, and how a mention or a retrieval changes a concept.

Pure functions of their arguments (no clock: times come from the events),
used by `processors.evolve`, which applies whole events.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from emgas.processors.dynamics import DAY_S, DecayParams, decay_factor
from emgas.processors.events import MetadataValue
from emgas.processors.topics import TopicParams


# Activation increments are rounded to multiples of 2^-32, so sums of them
# are exact in float64 (below 2^20) and thus independent of the order in
# which turns are applied: the same turns give bit-identical graphs.
ACTIVATION_GRID = 2.0**-32


def on_grid(x: float) -> float:
    """x rounded to the nearest multiple of ACTIVATION_GRID (unitless)."""
    return round(x / ACTIVATION_GRID) * ACTIVATION_GRID


class GraphRef(NamedTuple):
    """One version of a graph. Versions other than 1 come from re-derivation."""

    graph_id: str
    version: int

    def __str__(self) -> str:
        return f"{self.graph_id} v{self.version}"


class GraphParams(BaseModel):
    """Parameters of applying graph events."""

    model_config = ConfigDict(frozen=True)

    # A repeated mention adds mention_boost · importance to base activation.
    mention_boost: float = Field(default=1.0, ge=0.0)
    # A retrieval adds retrieval_boost · min(1, activation) to each concept it returns.
    retrieval_boost: float = Field(default=0.5, ge=0.0)
    # Event-time windows: a decay tick when a graph's clock crosses into a new
    # window (0: no ticks), a consolidation when it crosses into a new
    # consolidation window (0: none). Seconds.
    window_s: float = Field(default=3600.0, ge=0.0)
    consolidate_every_s: float = Field(default=86_400.0, ge=0.0)
    # An idle graph's clock moves on at wall-clock speed from its last event
    # (see `state.scheduler`); checked this often, in wall seconds (0: never).
    idle_check_s: float = Field(default=60.0, ge=0.0)
    decay: DecayParams = DecayParams()
    topics: TopicParams = TopicParams()


class ConceptState(BaseModel):
    """A concept node. `count` = turns mentioning it; activation is unitless.

    `base_activation` is the value as of `decayed_to` (the last decay tick
    brought to it; None: never, the value is as of `created_at`), plus the
    boosts it received since. Retrieval records (seeds/001): how many
    retrievals reinforced it, the first and the last.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    count: int
    base_activation: float
    created_at: AwareDatetime
    last_accessed: AwareDatetime
    decayed_to: AwareDatetime | None = None
    retrievals: int = 0
    first_retrieved: AwareDatetime | None = None
    last_retrieved: AwareDatetime | None = None

    @property
    def reinforcements(self) -> int:
        """Mentions + retrievals: what moves a concept to the slow (power-law) decay."""
        return self.count + self.retrievals

    @property
    def decay_reference(self) -> datetime:
        """The event time `base_activation` is as of."""
        return self.decayed_to or self.created_at

    def retrieval_frequency(self) -> float | None:
        """Extraction frequency f = n / T in retrievals per day (seeds/001), T =
        time from the first to the last retrieval; None before two distinct times."""
        if self.first_retrieved is None or self.last_retrieved is None:
            return None
        span = (self.last_retrieved - self.first_retrieved).total_seconds()
        return self.retrievals / (span / DAY_S) if span > 0 else None


class GraphMeta(BaseModel):
    """Totals and clocks of one graph version.

    `turns` = N, the observations behind PPMI. `first_seen` and `clock`: the
    earliest and the latest event time of its turns. `decayed_to` and `decay`: the last decay tick applied and
    its parameters (mentions bring a concept forward to that tick before
    adding their boost). `consolidated_to`: the last consolidation.
    """

    model_config = ConfigDict(frozen=True)

    turns: int = 0
    first_seen: AwareDatetime | None = None
    clock: AwareDatetime | None = None
    decayed_to: AwareDatetime | None = None
    decay: DecayParams | None = None
    consolidated_to: AwareDatetime | None = None


class Passage(BaseModel):
    """A source passage (one turn), the concepts it mentioned and its place in the conversation."""

    model_config = ConfigDict(frozen=True)

    turn_id: str
    speaker: str
    text: str
    timestamp: AwareDatetime
    session_id: str | None = None
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    concept_ids: tuple[str, ...]
    # Position among the graph version's turns, in log order (0-based): with
    # session_id, what makes turns neighbours in a conversation.
    seq: int = 0


def brought_to_tick(concept: ConceptState, meta: GraphMeta) -> ConceptState:
    """The concept decayed to the graph's last tick, if it is behind it:
    A = on_grid(A · factor(t_tick − t_ref)) with the tick's parameters
    (`processors.dynamics.decay_factor`), decayed_to = t_tick."""
    tick, params = meta.decayed_to, meta.decay
    if tick is None or params is None or concept.decay_reference >= tick:
        return concept
    elapsed = (tick - concept.decay_reference).total_seconds()
    factor = decay_factor(elapsed, concept.reinforcements, params)
    return concept.model_copy(
        update={"base_activation": on_grid(concept.base_activation * factor), "decayed_to": tick}
    )


def activation_at(concept: ConceptState, at: datetime, params: DecayParams) -> float:
    """Base activation at event time `at`: A · factor(at − t_ref) (unitless)."""
    elapsed = (at - concept.decay_reference).total_seconds()
    return concept.base_activation * decay_factor(elapsed, concept.reinforcements, params)


def concept_after_mention(
    old: ConceptState | None,
    cid: str,
    text: str,
    importance: float,
    at: datetime,
    params: GraphParams,
    meta: GraphMeta,
) -> ConceptState:
    """New node: A = importance. Repeated mention: the node is brought to the
    graph's last decay tick, then A = A + boost · importance (each term on
    ACTIVATION_GRID, so sums do not depend on the order of turns between two
    ticks), count + 1, created_at = min(created_at, at), last_accessed =
    max(last_accessed, at) (event time, not wall clock); the surface text is
    that of the earliest mention (ties: the smallest text)."""
    if old is None:
        return ConceptState(
            id=cid, text=text, count=1, base_activation=on_grid(importance),
            created_at=at, last_accessed=at,
        )
    old = brought_to_tick(old, meta)
    earliest = (at, text) < (old.created_at, old.text)
    return old.model_copy(
        update={
            "text": text if earliest else old.text,
            "count": old.count + 1,
            "base_activation": old.base_activation + on_grid(params.mention_boost * importance),
            "created_at": min(old.created_at, at),
            "last_accessed": max(old.last_accessed, at),
        }
    )


def concept_after_retrieval(old: ConceptState, amount: float, at: datetime, meta: GraphMeta) -> ConceptState:
    """Reinforcement by retrieval: brought to the last tick, A = A + on_grid(amount),
    retrievals + 1, first/last retrieval = min/max with `at`, last_accessed = max."""
    old = brought_to_tick(old, meta)
    return old.model_copy(
        update={
            "base_activation": old.base_activation + on_grid(amount),
            "retrievals": old.retrievals + 1,
            "first_retrieved": min(old.first_retrieved or at, at),
            "last_retrieved": max(old.last_retrieved or at, at),
            "last_accessed": max(old.last_accessed, at),
        }
    )
