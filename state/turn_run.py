"""A run of turns of one graph version, folded at once.

Between two events that must see the state one at a time (a tick, a
consolidation, a retrieval, a forget, a version switch, the log's own
records), the turns of a graph version only add: mentions to concepts,
passages, co-occurrences. So the batch fold (`PartitionState.apply_batch`)
folds such a run as a whole, with the operations the per-event rule
(`processors.evolve.evolve_turn`) would apply, in the same order:

- the run's turns are checked as the turn rule's guard checks each (a turn
  stored already, or earlier in the run, is a duplicate; a forgotten one is
  skipped);
- every concept the run mentions is read once, each mention applied in log
  order on plain values (`processors.graph.Mentions`), and the concept
  written once, as the values the last mention leaves (a record only when
  read as one, or at commit: `repository.PendingConcept`);
- each turn's passage, links and journal entry are staged as the rule's
  writes would stage them, the graph's meta once, as the last turn leaves it;
- the view takes the run in one call (`GraphView.add_turns`): its nodes in
  the order the turns created them, every clique queued at once.

So a graph folded in runs of any length equals the one folded one event at
a time, bit for bit (`tests/unit/test_fold_property.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from emgas.processors.events import TurnIngested
from emgas.processors.graph import GraphMeta, GraphParams, GraphRef, Mentions, Passage
from emgas.state import keys
from emgas.state.repository import GraphRepository, PendingConcept


@dataclass(frozen=True)
class FoldedRun:
    """What a run of turns makes of its graph version: the turns applied
    (the others were duplicates or forgotten), their passages, the concepts
    as the run leaves them, the meta after it."""

    applied: list[tuple[TurnIngested, int, bytes]]
    passages: list[Passage]
    concepts: dict[str, list]  # concept id -> its values (`Mentions`' order)
    meta: GraphMeta


def new_turns(repo: GraphRepository, ref: GraphRef, turns: list[tuple[TurnIngested, int, bytes]]) -> list[bool]:
    """Per turn, whether the turn rule's guard lets it apply: not stored in
    `ref` already (nor earlier in the run), not forgotten on request."""
    stored = repo.store.multi_get(
        [key for event, _, _ in turns for key in (keys.passage(ref, event.turn_id), keys.forgotten_turn(ref, event.turn_id))]
    )
    forgotten = repo.store.multi_get([keys.tombstone(ref.graph_id, event.turn_id) for event, _, _ in turns])
    seen: set[str] = set()
    fresh = []
    for k, (event, _, _) in enumerate(turns):
        held = stored[2 * k] is not None or stored[2 * k + 1] is not None or event.turn_id in seen
        fresh.append(not held and forgotten[k] is None)
        seen.add(event.turn_id)
    return fresh


def fold_run(
    repo: GraphRepository, ref: GraphRef, applied: list[tuple[TurnIngested, int, bytes]], params: GraphParams
) -> FoldedRun:
    """The turns `applied` (all new: see `new_turns`), folded in order onto
    `ref` as stored. Reads only: `stage_run` writes the result.

    Per turn (`evolve_turn`): each concept mentioned (`Mentions`), its
    passage at place seq = N (0-based, log order), N + 1, clock = max,
    first_seen = min."""
    meta = repo.meta(ref)
    held = repo.concept_values(ref, dict.fromkeys(c.id for event, _, _ in applied for c in event.concepts))
    mentions = Mentions(held, meta, params)
    turns, clock, first_seen = meta.turns, meta.clock, meta.first_seen
    passages = []
    for event, _, _ in applied:
        at = event.timestamp
        for concept in event.concepts:
            mentions.mention(concept.id, concept.text, concept.importance, at)
        passages.append(Passage.model_construct(
            turn_id=event.turn_id, speaker=event.speaker, text=event.text, timestamp=at,
            session_id=event.session_id, metadata=event.metadata,
            concept_ids=tuple(sorted(c.id for c in event.concepts)), seq=turns,
        ))
        turns += 1
        if clock is None or at > clock:
            clock = at
        if first_seen is None or at < first_seen:
            first_seen = at
    meta = meta.model_copy(update={"turns": turns, "clock": clock, "first_seen": first_seen})
    return FoldedRun(applied, passages, mentions.values(), meta)


def stage_run(repo: GraphRepository, ref: GraphRef, run: FoldedRun) -> None:
    """Stage what the run writes: what `evolve_turn`'s writes of each turn
    stage, each record once (the journal entries and passages per turn, the
    concepts and meta as the run leaves them)."""
    put = repo.store.put
    for _, offset, raw in run.applied:
        put(keys.journal_entry(ref, offset), raw)
    put(keys.registry(ref), b"")
    put(keys.graph_meta(ref), run.meta)
    for cid, values in run.concepts.items():
        put(keys.concept(ref, cid), PendingConcept(cid, values))
    for passage in run.passages:
        put(keys.passage(ref, passage.turn_id), passage)
        for cid in passage.concept_ids:
            put(keys.concept_passage(ref, cid, passage.turn_id), b"")
