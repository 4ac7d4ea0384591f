"""The graph state and the fold: how a graph event changes it.

`apply_turn` is pure: given the event and the current records of the
concepts it mentions, it returns the delta to write. It depends on nothing
else (no clock: times come from the event), so replaying the same log
gives the same graph. The idempotency check (has this turn been applied?)
belongs to the caller, which knows what is stored.
"""

from __future__ import annotations

from datetime import datetime
from itertools import combinations
from typing import Mapping, NamedTuple

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from processors.events import MetadataValue, TurnIngested


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


class ConceptState(BaseModel):
    """A concept node. `count` = turns mentioning it; activation is unitless."""

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    count: int
    base_activation: float
    created_at: AwareDatetime
    last_accessed: AwareDatetime


class Passage(BaseModel):
    """A source passage (one turn) and the concepts it mentioned."""

    model_config = ConfigDict(frozen=True)

    turn_id: str
    speaker: str
    text: str
    timestamp: AwareDatetime
    session_id: str | None = None
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    concept_ids: tuple[str, ...]


class TurnDelta(BaseModel):
    """What one applied turn changes: replaced concept records, +1 on each
    listed pair count, +1 on the graph's observation count, a new passage."""

    model_config = ConfigDict(frozen=True)

    graph_id: str
    version: int
    passage: Passage
    concepts: tuple[ConceptState, ...]
    pairs: tuple[tuple[str, str], ...]

    @property
    def ref(self) -> GraphRef:
        return GraphRef(self.graph_id, self.version)


def concept_after_mention(
    old: ConceptState | None,
    cid: str,
    text: str,
    importance: float,
    at: datetime,
    params: GraphParams,
) -> ConceptState:
    """New node: A = importance. Repeated mention: A = A_old + boost · importance
    (each term on ACTIVATION_GRID, so the sum does not depend on the order of turns),
    count + 1, created_at = min(created_at, at), last_accessed = max(last_accessed, at)
    (event time, not wall clock); the surface text is that of the earliest mention
    (ties: the smallest text). Every field is thus independent of the order of turns."""
    if old is None:
        return ConceptState(
            id=cid, text=text, count=1, base_activation=on_grid(importance),
            created_at=at, last_accessed=at,
        )
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


def apply_turn(
    event: TurnIngested, version: int, existing: Mapping[str, ConceptState], params: GraphParams
) -> TurnDelta:
    """The delta of a not-yet-applied turn to graph version `version` (the
    event's, or the active one: the caller resolves it). `existing` holds the
    stored records of the event's concepts (absent = new concept)."""
    concepts = tuple(
        concept_after_mention(
            existing.get(c.id), c.id, c.text, c.importance, event.timestamp, params
        )
        for c in event.concepts
    )
    ids = sorted(c.id for c in event.concepts)
    passage = Passage(
        turn_id=event.turn_id, speaker=event.speaker, text=event.text,
        timestamp=event.timestamp, session_id=event.session_id,
        metadata=event.metadata, concept_ids=tuple(ids),
    )
    return TurnDelta(
        graph_id=event.graph_id, version=version, passage=passage, concepts=concepts,
        pairs=tuple(combinations(ids, 2)),
    )
