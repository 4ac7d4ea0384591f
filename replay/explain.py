"""`emgas explain`: the history of one concept, by replaying its graph's log.

The graph's events are folded into a scratch in-memory state with the one
fold (`state.projector`), and after each event the concept's record is
compared with what it was: so the story told is exactly what happened to
the live graph, including decay ticks that removed it and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable

from emgas.processors.codec import decode_graph_event
from emgas.processors.errors import DecodeError
from emgas.processors.events import Checkpoint, Consolidate, Decay, Forget, GraphEvent, LogStarted, Retrieved, Sealed, TurnIngested
from emgas.processors.graph import ConceptState, GraphParams, GraphRef, activation_at
from emgas.replay.reader import LogRecord
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState


@dataclass(frozen=True)
class Step:
    """One event that changed (or examined) the concept."""

    offset: int
    kind: str  # created | mentioned | retrieved | decayed | kept | pruned | topic | forgotten | restored
    at: datetime
    activation: float | None  # after the event (at the tick, for decay ticks)
    detail: str
    before: float | None = None  # before the event


def explain(
    records: Iterable[LogRecord], graph_id: str, concept_ids: list[str], params: GraphParams, version: int | None = None
) -> list[Step]:
    """The steps of the first of `concept_ids` the graph ever held (ids to try, in order)."""
    state = PartitionState(MemoryStore(), params)
    steps: dict[str, list[Step]] = {cid: [] for cid in concept_ids}
    for record in records:
        try:
            event = decode_graph_event(record.value)
        except DecodeError:
            continue
        if isinstance(event, (LogStarted, Checkpoint, Sealed)) or event.graph_id != graph_id:
            continue  # the log's own (its identity, checkpoints, a record whose key is gone), or another graph's
        ref = state.ref_of(event)
        if version is not None and ref.version != version:
            state.apply(event, record.offset)
            continue
        before = {cid: _record(state, ref, cid) for cid in concept_ids}
        outcome = state.apply(event, record.offset)
        for cid in concept_ids:
            step = _step(event, record.offset, outcome, before[cid], _record(state, ref, cid), cid)
            if step is not None:
                steps[cid].append(step)
    return next((s for s in steps.values() if s), [])


def _record(state: PartitionState, ref: GraphRef, cid: str) -> ConceptState | None:
    return state.repo.concepts(ref, [cid]).get(cid)


def _step(
    event: GraphEvent, offset: int, outcome: Outcome, old: ConceptState | None, new: ConceptState | None, cid: str
) -> Step | None:
    if outcome == Outcome.SNAPSHOT_COMPLETED and new != old:
        return Step(offset, "restored", event.timestamp, new.base_activation if new else None,
                    "the graph was restored from a base snapshot (its state re-based onto this log)",
                    old.base_activation if old else None)
    if outcome != Outcome.APPLIED:
        return None
    a = new.base_activation if new else None
    if isinstance(event, TurnIngested) and new is not None and new != old:
        kind = "created" if old is None else "mentioned"
        return Step(offset, kind, event.timestamp, a, f"turn {event.turn_id} ({event.speaker}); mentions: {new.count}")
    if isinstance(event, Retrieved) and new != old and new is not None:
        boost = next(b.amount for b in event.boosts if b.id == cid)
        f = new.retrieval_frequency()
        rate = f"; f = n/T = {f:.3g} per day" if f is not None else ""
        return Step(offset, "retrieved", event.timestamp, a, f"request {event.request_id}: +{boost:.4f}; retrievals: {new.retrievals}{rate}")
    if isinstance(event, Decay) and old is not None:
        return _decay_step(event, offset, old, new, cid)
    if isinstance(event, Forget) and new != old:
        asked = "the whole graph" if event.whole_graph else "turns " + ", ".join(event.turn_ids)
        left = "removed: no remaining turn supports it" if new is None else f"mentions: {new.count}"
        before = old.base_activation if old else None
        return Step(offset, "forgotten", event.timestamp, a, f"request {event.request_id} forgot {asked}; {left}", before)
    if isinstance(event, Consolidate) and new is not None:
        topics = [t for t in event.topics if cid in t.members]
        if topics:
            return Step(offset, "topic", event.timestamp, a, f"member of {topics[0].id} ({topics[0].label})")
    return None


def _decay_step(event: Decay, offset: int, old: ConceptState, new: ConceptState | None, cid: str) -> Step | None:
    value = activation_at(old, event.timestamp, event.params)
    listed = next((c for c in event.concepts if c.id == cid), None)
    before = old.base_activation
    if new is None:
        if listed is not None and listed.reason == "isolated":
            why = "its last edge was pruned (no association left)"
        else:
            why = f"base activation {value:.4g} < threshold {event.params.concept_threshold:g}"
        return Step(offset, "pruned", event.timestamp, value, f"{event.trigger} decay tick: {why}", before)
    if listed is not None:
        return Step(offset, "kept", event.timestamp, value, "listed for pruning but reinforced before the tick applied", before)
    if value == before:  # a tick not after the concept's last change
        return None
    return Step(offset, "decayed", event.timestamp, value, f"{event.trigger} decay tick ({event.params.model})", before)


def format_steps(steps: list[Step]) -> str:
    """One line per step; runs of plain decay ticks are folded into one line."""
    lines: list[str] = []
    run: list[Step] = []

    def flush() -> None:
        if run:
            first, last = run[0], run[-1]
            span = f"{first.at:%Y-%m-%d %H:%M} .. {last.at:%Y-%m-%d %H:%M}" if len(run) > 1 else f"{first.at:%Y-%m-%d %H:%M}"
            ticks = f"{len(run)} tick" + ("s" if len(run) > 1 else "")
            lines.append(f"@{first.offset:<7} decayed    {span}  activation {first.before:.4g} -> {last.activation:.4g} ({ticks})")
            run.clear()

    for step in steps:
        if step.kind == "decayed":
            run.append(step)
            continue
        flush()
        value = "" if step.activation is None else f"  activation {step.activation:.4g}"
        lines.append(f"@{step.offset:<7} {step.kind:<10} {step.at:%Y-%m-%d %H:%M}{value}  {step.detail}")
    flush()
    return "\n".join(lines)
