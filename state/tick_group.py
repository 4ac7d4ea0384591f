"""Pruning ticks applied ahead of their part's turns, read, decided and
applied together.

A part of a run (`state.turn_run`) applies its pruning ticks first, one
after another, with no turn between them. Each tick reads a slice (see
`state.rules._decay_slice`): its listed concepts' records, neighbours,
passages and links, its listed edges, the edges of the concepts it lists
as isolated. Reading those for each tick alone costs more than deciding
it, so a group of ticks reads them once, for all of its ticks, before the
first (`read_group`), and each tick is decided on that, less what the
ticks before it removed (`processors.pruning_group`): ticks only remove,
so that is the slice the tick would read once the ticks before it were
applied.

What the group decided is then applied at once (`apply_group`): each
tick's journal entry and removals staged in log order, as its rule's
writes would stage them, and the view changed as they would change it:
the kept edges' due times noted, every removed edge dropped at once (each
end of each is live before the first tick), then the concepts and the
pruned passages.
"""

from __future__ import annotations

from typing import Sequence

from emgas.processors.graph import GraphRef, concept_record
from emgas.processors.pruning_group import GroupReads, PruningTick, TickDecision
from emgas.state.repository import Entry, GraphRepository
from emgas.state.view import GraphView


def read_group(repo: GraphRepository, view: GraphView, ref: GraphRef, ticks: Sequence[PruningTick]) -> GroupReads:
    """What the ticks read, as it is before the group's first tick: the
    concepts and their links from the view (its columns hold every live
    concept's values, its sources every link: what the store holds, as
    `load_view` would read it), the concepts each passage names from the store."""
    listed = sorted({c.id for tick in ticks for c in tick.concepts})
    index, columns = view.index, view.columns
    slots = {cid: index[cid] for cid in listed if cid in index}
    sources = {cid: tuple(view.passage_ids[slot]) for cid, slot in slots.items()}
    passages = repo.passage_concepts(ref, sorted({t for turns in sources.values() for t in turns}))
    isolated = {slots[c.id] for tick in ticks for c in tick.concepts if c.reason == "isolated" and c.id in slots}
    rows = dict(zip(slots.values(), view.slot_rows(list(slots.values()))))
    return GroupReads(
        concepts={cid: concept_record(cid, columns.values(slot)) for cid, slot in slots.items()},
        slots=slots, ids=view.ids, size=len(view.ids), edges=view.listed_edges([tick.edges for tick in ticks]),
        neighbours={slot: tuple(row[0]) for slot, row in rows.items()},
        sources=sources, passages=passages, linked=_linked(view, passages),
        isolated_edges={
            slot: dict(zip(neighbours, zip(counts, lasts)))
            for slot, (neighbours, counts, lasts) in sorted(rows.items()) if slot in isolated
        },
    )


def _linked(view: GraphView, passages: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    """Per passage of `passages` (turn id -> the concepts it names), the
    concepts that link to it: the turn is among the concept's sources."""
    index, sources = view.index, view.passage_ids
    turns_of: dict[str, Sequence[str] | set[str]] = {}
    linked = {}
    for turn_id, named in passages.items():
        found = []
        for cid in named:
            turns = turns_of.get(cid)
            if turns is None:
                i = index.get(cid)
                turns = turns_of[cid] = () if i is None else _members(sources[i])
            if turn_id in turns:
                found.append(cid)
        linked[turn_id] = found
    return linked


def _members(turns: Sequence[str]) -> Sequence[str] | set[str]:
    """`turns` to look turn ids up in: as it is when short (most concepts
    have a few passages: a scan of them beats making a set), else a set."""
    return turns if len(turns) <= 8 else set(turns)


def apply_group(
    repo: GraphRepository, view: GraphView, ref: GraphRef, reads: GroupReads,
    decided: Sequence[tuple[int, bytes, TickDecision]],
) -> list[frozenset[str]]:
    """Stage each decided tick (its log offset, its bytes, its decision) and
    change the view as its writes but its meta's would (`evolve_decay`:
    KeepEdges, RemovePairs, RemoveConcept, RemoveLink, PrunePassage): the
    concepts each removed that the view held."""
    index = view.index
    gone = [frozenset(cid for cid in decision.concepts if cid in index) for _, _, decision in decided]
    passages = reads.passages
    repo.stage_prunings(ref, [
        (Entry(offset, raw), decision.concepts, decision.links, {turn_id: passages[turn_id] for turn_id in decision.orphaned})
        for offset, raw, decision in decided
    ])
    edges = reads.edges
    for _, _, decision in decided:
        if decision.kept:
            kept = list(decision.kept)
            view.note_slot_pairs([edges.a[j] for j in kept], [edges.b[j] for j in kept], edges.counts[kept],
                                 edges.last_us[kept])
    view.remove_slot_edges({key for _, _, decision in decided for key in decision.edges}, reads.size)
    for _, _, decision in decided:
        for cid in decision.concepts:
            view.remove_concept(cid)
        # A removed concept's links went with it (`remove_concept`): its RemoveLinks change no view.
        for turn_id in decision.orphaned:
            view.forget_passage(turn_id)
    return gone
