"""A run of turns of one graph version, folded at once.

Between two events that must see the state one at a time (a retrieval, a
forget, a version switch, the log's own records), the turns of a graph
version only add: mentions to concepts, passages, co-occurrences. So the
batch fold (`PartitionState.apply_batch`) folds such a run as a whole, with
the operations the per-event rules (`processors.evolve.evolve_turn`,
`evolve_decay`, `evolve_consolidate`) would apply, in the same order:

- the run's events are checked as their rules' guards check each (a turn
  stored already, or earlier in the run, is a duplicate; a forgotten one is
  skipped; a tick of a version not known yet, or not later than the last
  tick, is skipped);
- a decay tick moves the graph's last tick (the meta's `decayed_to` and
  `decay`), which the mentions after it read: it takes its place in the
  run instead of ending it (in a quiet graph's log most ticks list
  nothing, and each would otherwise cut the runs to single turns);
- a tick that prunes (it lists concepts or edges) also removes what still
  qualifies of them, with their edges, links and orphaned passages. It
  reads and writes only what it lists and what hangs on it, so where no
  turn of the run before it mentions a concept it lists, nor both ends of
  an edge it lists, it gives the same state applied before those turns
  as after them (the turns after it come after it either way): the fold
  applies it ahead of them, one event at a time
  (`PartitionState._fold_run`), and only its meta move stays in the run.
  Where a turn before it does touch it, the run is cut there
  (`part_end`). So the ticks of a graph that forgets as it goes no longer
  cut its runs into single days;
- a consolidation only replaces the version's topics (`evolve_consolidate`:
  each topic keeps the members present at its time) and moves the meta's
  `consolidated_to`; nothing in a run reads topics, and each consolidation
  replaces all of them, so the run stages the last one's topics, with the
  members present at its time: the concepts held before the run and those
  the run's turns before it created, less those the ticks before it
  pruned, plus those the ticks after it pruned (`_topics`);
- the concepts the run mentions are read from the graph's concept columns
  (`state.concept_columns`) a set at a time, each mention applied in log
  order in one compiled loop (`state.mention_columns`: what
  `processors.graph.Mentions` does one mention at a time), and the values
  the last mention of each leaves written back to the columns, whose
  changed concepts become records when the transaction settles;
- each turn's passage, links and journal entry are staged as the rule's
  writes would stage them, the graph's meta once, as the last turn leaves it;
- the view takes the run in one call (`GraphView.add_turns`): its nodes in
  the order the turns created them, the mentions' values, every clique
  queued at once.

So a graph folded in runs of any length equals the one folded one event at
a time, bit for bit (`tests/unit/state/test_fold_property.py`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Mapping, cast

from emgas.processors.events import Consolidate, Decay, TurnIngested
from emgas.processors.evolve import Slice, after_tick, evolve_consolidate
from emgas.processors.fold_codec import (
    ConsolidateRow, DecayRow, TurnRow, concept_ids, is_consolidation, is_decay, is_turn,
)
from emgas.processors.graph import GraphParams, GraphRef, replaced
from emgas.processors.writes import SetTopics
from emgas.state import keys
from emgas.state.mention_columns import MentionColumns
from emgas.state.repository import GraphRepository, PendingPassage
from emgas.state.rules import Outcome
from emgas.state.transaction import Pending
from emgas.state.folded_run import FoldedRun
from emgas.state.view import GraphView

# A run's event as the fold hands it over: the event, its log offset, its bytes.
RunEvent = tuple[TurnIngested | TurnRow | Decay | DecayRow | Consolidate | ConsolidateRow, int, bytes]


def joins_run(event: object) -> bool:
    """Whether `event` can be folded inside a run of turns: a turn, a decay
    tick (the meta's last tick; what it prunes is applied ahead of the
    run's turns, or the run is cut there: `part_end`), or a consolidation
    (it writes the meta and the topics, which no turn reads)."""
    return is_turn(event) or is_consolidation(event) or is_decay(event)


def prunes(event: object) -> bool:
    """Whether `event` is a decay tick that lists concepts or edges to prune."""
    return is_decay(event) and bool(event.concepts or event.edges)


def skipped(repo: GraphRepository, ref: GraphRef, run: list[RunEvent], known: bool) -> list[Outcome | None]:
    """Per event of the run, why its rule's guard skips it as the events
    before it leave the state (None: it applies). A turn: stored in `ref`
    already, or earlier in the run (DUPLICATE_TURN), forgotten on request
    (FORGOTTEN_TURN). A tick or a consolidation: of a version not known
    (`known`: before the run; a turn applied makes it so) (UNKNOWN_GRAPH),
    not later than the last of its kind (DUPLICATE_TICK)."""
    turns = [event for event, _, _ in run if is_turn(event)]
    stored = repo.store.multi_get(
        [key for event in turns for key in (keys.passage(ref, event.turn_id), keys.forgotten_turn(ref, event.turn_id))]
    )
    tombstones = repo.store.multi_get([keys.tombstone(ref.graph_id, event.turn_id) for event in turns])
    seen: set[str] = set()  # turns applied earlier in the run
    meta = repo.meta(ref)
    last: dict[str, datetime | None] = {"decay": meta.decayed_to, "consolidate": meta.consolidated_to}  # per kind of tick
    outcomes: list[Outcome | None] = []
    k = 0
    for event, _, _ in run:
        if is_turn(event):
            if stored[2 * k] is not None or stored[2 * k + 1] is not None:
                outcomes.append(Outcome.DUPLICATE_TURN)
            elif tombstones[k] is not None:
                outcomes.append(Outcome.FORGOTTEN_TURN)
            elif event.turn_id in seen:
                outcomes.append(Outcome.DUPLICATE_TURN)
            else:
                outcomes.append(None)
                seen.add(event.turn_id)
                known = True
            k += 1
        elif not known:
            outcomes.append(Outcome.UNKNOWN_GRAPH)
        elif (before := last[event.type]) is not None and event.timestamp <= before:
            outcomes.append(Outcome.DUPLICATE_TICK)
        else:
            outcomes.append(None)
            last[event.type] = event.timestamp
    return outcomes


def part_end(run: list[RunEvent], outcomes: list[Outcome | None], start: int, known: bool) -> int:
    """The end (exclusive) of the part of `run` from `start` in which every
    pruning tick that applies (`outcomes`: see `skipped`) can be applied
    ahead of the part's turns before it: none of them mentions a concept it
    lists, or both ends of an edge it lists (maybe in different turns: a cut
    too many is only slower), so its slice and its writes are disjoint from
    theirs; and the version exists at the part's start (`known`). The
    turns after it come after it either way, and events that do not apply
    touch nothing."""
    ticks = (k for k in range(start, len(run)) if outcomes[k] is None and prunes(run[k][0]))  # read up to the cut only
    mentioned: set[str] = set()  # by the part's turns before the tick
    seen = start
    for k in ticks:
        for event, _, _ in run[seen:k]:
            if is_turn(event):  # one that does not apply mentions nothing either: a cut too many at worst
                mentioned.update(concept_ids(event))
        seen = k
        tick = cast(Decay, run[k][0])
        touched = any(c.id in mentioned for c in tick.concepts) or any(
            e.a in mentioned and e.b in mentioned for e in tick.edges
        )
        if touched or not known:
            return max(k, start + 1)  # at the part's start (not known: never met), alone
    return len(run)


def fold_run(
    repo: GraphRepository, view: GraphView, applied: list[RunEvent], params: GraphParams,
    ahead: Mapping[int, frozenset[str]] | None = None,
) -> FoldedRun:
    """The events `applied` (all past their guards: see `skipped`), folded
    in order onto `view`'s graph version as it is. Reads only: `stage_run`
    writes the result to the store, `GraphView.add_turns` to the view.
    `ahead`: the pruning ticks among them already applied but for their
    meta (their offset -> the concepts each removed; `part_end`).

    Per turn (`evolve_turn`): each concept mentioned (`Mentions`), its
    passage at place seq = N (0-based, log order), N + 1, clock = max,
    first_seen = min. Per tick (`evolve_decay`'s meta): decayed_to = its
    time, decay = its parameters. Per consolidation: consolidated_to = its
    time; the last one's topics (`_topics`)."""
    ahead = ahead or {}
    meta = repo.meta(view.ref)
    mentions = MentionColumns(view.columns, view.index, meta, params)
    turns, clock, first_seen = meta.turns, meta.clock, meta.first_seen
    passages: list[PendingPassage] = []
    applied_turns: list[tuple[TurnIngested | TurnRow, int, bytes]] = []
    ticks: list[tuple[Decay | DecayRow | Consolidate | ConsolidateRow, int, bytes]] = []
    consolidation: tuple[Consolidate | ConsolidateRow, int] | None = None  # the last one, and the concepts mentioned before it
    pruned_since: set[str] = set()  # the concepts ticks applied ahead removed after the last consolidation
    for event, offset, raw in applied:
        at = event.timestamp
        if isinstance(event, (Decay, DecayRow)):
            meta = after_tick(meta, cast(Decay, event))  # a row has the fields it reads
            mentions.ticked(meta)
            if offset in ahead:
                pruned_since |= ahead[offset]  # its journal entry is staged already
            else:
                ticks.append((event, offset, raw))
            continue
        if isinstance(event, (Consolidate, ConsolidateRow)):
            meta = replaced(meta, {"consolidated_to": at})
            consolidation = (event, mentions.concepts_seen)
            pruned_since = set()
            ticks.append((event, offset, raw))
            continue
        applied_turns.append((event, offset, raw))
        mentions.turn(event.concepts, at)
        passages.append(PendingPassage(
            event.turn_id, event.speaker, event.text, at, event.session_id, event.metadata,
            concept_ids(event), turns,
        ))
        turns += 1
        if clock is None or at > clock:
            clock = at
        if first_seen is None or at < first_seen:
            first_seen = at
    meta = replaced(meta, {"turns": turns, "clock": clock, "first_seen": first_seen})
    topics = None if consolidation is None else _topics(view, params, mentions, *consolidation, pruned_since)
    return FoldedRun(applied_turns, ticks, passages, mentions.fold(), meta, topics)


def _topics(
    view: GraphView, params: GraphParams, mentions: MentionColumns, event: Consolidate | ConsolidateRow, seen: int,
    pruned_after: set[str],
) -> SetTopics:
    """The topics the run's last consolidation leaves (`evolve_consolidate`),
    in place of those the version had before the run: each keeps its members
    present at the consolidation's time: held now (the ticks applied ahead
    of the run's turns have removed theirs) or removed by a tick after it
    (`pruned_after`: each was held then, as no turn of the run before the
    tick mentions it), or among the `seen` concepts the run's turns before
    it mentioned (and so created, or made again after a tick)."""
    named = {m for topic in event.topics for m in topic.members}
    present = {m for m in named if m in view.index or m in pruned_after}
    if len(present) < len(named):
        present |= mentions.seen_among(named - present, seen)
    before = Slice(ref=view.ref, present=frozenset(present), topic_ids=tuple(t.id for t in view.topics))
    model = event.model() if isinstance(event, ConsolidateRow) else event  # the one consolidation of the run made a model
    (write,) = [w for w in evolve_consolidate(model, before, params) if isinstance(w, SetTopics)]  # the run stages its meta
    return write


def stage_run(repo: GraphRepository, ref: GraphRef, run: FoldedRun) -> None:
    """Stage what the run writes: what the writes of each of its events
    stage, each record once (the journal entries per event, the passages
    per turn, the meta as the run leaves it, the topics as its last
    consolidation leaves them; the concepts' records are written from the
    view's columns when the transaction settles)."""
    staged: dict[bytes, Pending] = {
        keys.journal_entry(ref, offset): raw for _, offset, raw in (*run.applied, *run.ticks)
    }
    if run.applied:
        staged[keys.registry(ref)] = b""
    staged[keys.graph_meta(ref)] = run.meta
    for passage in run.passages:
        staged[keys.passage(ref, passage.turn_id)] = passage  # it links its concepts (`keys`)
    repo.store.stage(staged)
    if run.topics is not None:
        repo.apply(ref, (run.topics,), None)
