"""What a run of turns makes of its graph version (`state.turn_run` folds it; the view takes it in one call)."""

from __future__ import annotations

from dataclasses import dataclass

from emgas.processors.events import Consolidate, Decay, TurnIngested
from emgas.processors.fold_codec import ConsolidateRow, DecayRow, TurnRow
from emgas.processors.graph import GraphMeta
from emgas.processors.writes import SetTopics
from emgas.state.mention_columns import FoldedMentions
from emgas.state.repository import PendingPassage


@dataclass(frozen=True)
class FoldedRun:
    """What a run of turns makes of its graph version: the turns applied
    (the others were duplicates or forgotten), their passages, the concepts
    as the run leaves them, the meta after it."""

    applied: list[tuple[TurnIngested | TurnRow, int, bytes]]
    ticks: list[tuple[Decay | DecayRow | Consolidate | ConsolidateRow, int, bytes]]  # the decay ticks and consolidations applied
    passages: list[PendingPassage]
    mentions: FoldedMentions  # the concepts it mentions, as it leaves them
    meta: GraphMeta
    topics: SetTopics | None = None  # the last consolidation's topics (None: the run has none)
