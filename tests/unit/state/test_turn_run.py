"""Runs of turns with the decay ticks and the consolidations inside them
(a pruning tick applied ahead of the turns before it where none touches
what it lists): the batch fold gives the outcomes and the state of folding
one event at a time."""

import dataclasses
from datetime import timedelta

import pytest

from emgas.processors.dynamics import DAY_S, DecayParams
from emgas.processors.events import Consolidate, Decay, GraphEvent, PrunedConcept, PrunedEdge, TopicNode
from emgas.processors.graph import GraphParams, GraphRef
from emgas.state import projector, rules, tick_group, turn_run
from emgas.state.digest import partition_digests
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from tests.support.factories import T0, ingested

PARAMS = GraphParams(decay=DecayParams(model="exponential", half_life_s=DAY_S))
DECAY = PARAMS.decay
# A tick's own parameters, under which a concept unmentioned for a few days and an edge for two go.
PRUNING = DecayParams(model="exponential", half_life_s=DAY_S, concept_threshold=0.2, edge_stability_s=DAY_S)


def tick(graph: str, hours: float, version: int = 1, **lists) -> Decay:
    return Decay(graph_id=graph, graph_version=version, timestamp=T0 + timedelta(hours=hours), trigger="window",
                 params=DECAY, **lists)


def pruning(graph: str, hours: float, concepts: tuple[str, ...] = (), edges: tuple[tuple[str, str], ...] = (),
            isolated: tuple[str, ...] = ()) -> Decay:
    """A tick that lists `concepts` (for their activation), `isolated` and `edges` to prune."""
    return Decay(
        graph_id="g", graph_version=1, timestamp=T0 + timedelta(hours=hours), trigger="window", params=PRUNING,
        concepts=tuple(PrunedConcept(id=c, reason="activation", value=0.0) for c in concepts)
        + tuple(PrunedConcept(id=c, reason="isolated", value=0.0) for c in isolated),
        edges=tuple(PrunedEdge(a=a, b=b, value=0.0) for a, b in edges),
    )


def consolidation(graph: str, hours: float, *topics: tuple[str, ...], version: int = 1) -> Consolidate:
    return Consolidate(graph_id=graph, graph_version=version, timestamp=T0 + timedelta(hours=hours), topics=tuple(
        TopicNode(id=f"topic:{members[0]}", label=" ".join(members), members=members) for members in topics
    ))


def turn(graph: str, turn_id: str, hours: float, concepts: dict[str, float]) -> GraphEvent:
    return ingested(graph, turn_id, concepts, minute=int(hours * 60))


def fold(events: list[GraphEvent], batched: bool, cuts: tuple[int, ...] = ()) -> tuple[list[Outcome], PartitionState]:
    """`events` folded one at a time, or in batches (cut before each offset in `cuts`)."""
    state = PartitionState(MemoryStore(), PARAMS)
    if batched:
        outcomes = []
        for start, end in zip((0, *cuts), (*cuts, len(events))):
            outcomes += state.apply_batch([(events[offset], offset, None) for offset in range(start, end)])
    else:
        outcomes = [state.apply(event, offset) for offset, event in enumerate(events)]
    state.commit()
    return outcomes, state


CASES = {
    "a tick between two turns moves the mentions after it": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), tick("g", 30), turn("g", "t2", 31, {"kafka": 0.6}),
    ],
    "a tick of a graph no turn has made yet": [tick("g", 1), turn("g", "t1", 2, {"kafka": 0.8})],
    "a tick not later than the last one": [
        turn("g", "t1", 0, {"kafka": 0.8}), tick("g", 5), tick("g", 5), tick("g", 3), turn("g", "t2", 6, {"kafka": 0.4}),
    ],
    "a run of ticks only": [turn("g", "t1", 0, {"kafka": 0.8}), tick("h", 1), tick("g", 2), tick("g", 30)],
    "a duplicate turn after a tick": [
        turn("g", "t1", 0, {"kafka": 0.8}), tick("g", 30), turn("g", "t1", 31, {"kafka": 0.8}),
    ],
    "a tick of a version that does not exist": [turn("g", "t1", 0, {"kafka": 0.8}), tick("g", 30, version=2)],
    "a consolidation keeps the members held before the run or made before it": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), tick("g", 20, edges=(PrunedEdge(a="kafka", b="lag", value=0.0),)),
        turn("g", "t2", 21, {"broker": 0.6}), consolidation("g", 22, ("kafka", "lag", "broker", "cat"), ("cat", "dog")),
        turn("g", "t3", 23, {"cat": 0.6, "dog": 0.3}),
    ],
    "two consolidations in a run: the last one's topics stay": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), consolidation("g", 24, ("kafka", "lag")),
        turn("g", "t2", 25, {"broker": 0.6, "cat": 0.1}), consolidation("g", 48, ("broker", "cat"), ("kafka", "dog")),
        turn("g", "t3", 49, {"dog": 0.6}),
    ],
    "a consolidation's topics replace those of one before the run": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), consolidation("g", 24, ("kafka", "lag")),
        tick("g", 30, edges=(PrunedEdge(a="kafka", b="lag", value=0.0),)),
        turn("g", "t2", 31, {"broker": 0.6, "kafka": 0.1}), consolidation("g", 48, ("broker", "kafka")),
    ],
    "a consolidation not later than the last one, and one of a version not known": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), consolidation("g", 24, ("kafka", "lag")),
        consolidation("g", 24, ("kafka", "broker")), consolidation("g", 12, ("kafka", "lag")),
        consolidation("g", 30, ("kafka", "lag"), version=2), consolidation("h", 30, ("kafka", "lag")),
    ],
    "a tick that lists an edge ends the run": [
        turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), tick("g", 30, edges=(PrunedEdge(a="kafka", b="lag", value=0.0),)),
        turn("g", "t2", 31, {"kafka": 0.6, "lag": 0.2}),
    ],
}


# Each: (events, the offsets a new batch starts at). The first batch holds the
# turns that make the graph; the tick's concepts and edges are days old by then.
HISTORY = [turn("g", "t1", 0, {"kafka": 0.8, "lag": 0.5}), turn("g", "t2", 1, {"cat": 0.6, "dog": 0.3})]
PRUNING_CASES = {
    "a tick ahead of a turn before it that touches nothing it lists": (
        [*HISTORY, turn("g", "t3", 90, {"broker": 0.7, "cat": 0.2}), pruning("g", 91, ("kafka",), (("kafka", "lag"),)),
         turn("g", "t4", 92, {"broker": 0.5, "dog": 0.4})], (2,),
    ),
    "a consolidation before the tick keeps a member the tick removes after it": (
        [*HISTORY, consolidation("g", 90, ("kafka", "lag"), ("cat", "dog")), turn("g", "t3", 91, {"broker": 0.7}),
         pruning("g", 92, ("kafka", "lag"), (("kafka", "lag"),)), turn("g", "t4", 93, {"broker": 0.5, "dog": 0.4})],
        (2,),
    ),
    "a consolidation after the tick loses the members it removed": (
        [*HISTORY, turn("g", "t3", 91, {"broker": 0.7}), pruning("g", 92, ("kafka", "lag"), (("kafka", "lag"),)),
         consolidation("g", 93, ("kafka", "lag", "broker"), ("cat", "dog"))], (2,),
    ),
    "a turn after the tick makes again a concept it removed": (
        [*HISTORY, turn("g", "t3", 91, {"broker": 0.7}), pruning("g", 92, ("kafka",), (("kafka", "lag"),)),
         turn("g", "t4", 93, {"kafka": 0.5, "lag": 0.4}), consolidation("g", 94, ("kafka", "lag"))], (2,),
    ),
    "a turn before the tick mentions a concept it lists: the run is cut there": (
        [*HISTORY, turn("g", "t3", 91, {"kafka": 0.7}), pruning("g", 92, ("kafka", "lag"), (("kafka", "lag"),)),
         turn("g", "t4", 93, {"lag": 0.4})], (2,),
    ),
    "a turn before the tick holds both ends of an edge it lists": (
        [*HISTORY, turn("g", "t3", 91, {"cat": 0.7}), turn("g", "t4", 91.5, {"dog": 0.1}),
         pruning("g", 92, (), (("cat", "dog"),)), turn("g", "t5", 93, {"broker": 0.4})], (2,),
    ),
    "two ticks in a run, the second listing what a turn between them mentions": (
        [*HISTORY, pruning("g", 60, ("kafka",)), turn("g", "t3", 61, {"cat": 0.7, "broker": 0.2}),
         pruning("g", 90, ("lag", "cat"), (("cat", "dog"),)), turn("g", "t4", 93, {"dog": 0.4})], (2,),
    ),
    "a tick that prunes an isolated concept and its passage": (
        [*HISTORY, turn("g", "t3", 91, {"broker": 0.7}), pruning("g", 92, (), (("cat", "dog"),), ("cat", "dog")),
         turn("g", "t4", 93, {"broker": 0.3, "jvm": 0.2})], (2,),
    ),
    "a duplicate tick in the run after a pruning one": (
        [*HISTORY, turn("g", "t3", 91, {"broker": 0.7}), pruning("g", 92, ("kafka",)), tick("g", 92),
         pruning("g", 91, ("lag",)), turn("g", "t4", 93, {"broker": 0.3})], (2,),
    ),
    # Ticks ahead of a part's turns are decided together (`state.tick_group`):
    # each sees what the ticks before it removed.
    "the second tick of a group loses the edge the first removed": (
        [*HISTORY, turn("g", "t3", 91, {"broker": 0.7}), pruning("g", 92, ("kafka",), (("kafka", "lag"),)),
         pruning("g", 93, (), (("kafka", "lag"),), ("lag",)), turn("g", "t4", 94, {"broker": 0.3, "jvm": 0.2})], (2,),
    ),
    "the second tick of a group orphans a passage the first unlinked": (
        [*HISTORY, turn("g", "t3", 91, {"broker": 0.7}), pruning("g", 92, ("cat",)), pruning("g", 93, ("dog",)),
         turn("g", "t4", 94, {"broker": 0.3})], (2,),
    ),
    "a tick of a group lists what the one before it removed": (
        [*HISTORY, turn("g", "t3", 91, {"broker": 0.7}), pruning("g", 92, ("kafka", "cat"), (("kafka", "lag"),)),
         pruning("g", 93, ("kafka", "lag", "dog"), (("kafka", "lag"), ("cat", "dog"))),
         pruning("g", 94, ("lag",), isolated=("dog",)), turn("g", "t4", 95, {"broker": 0.3})], (2,),
    ),
    "the second tick of a group isolates a concept whose other edge the first removed": (
        [*HISTORY, turn("g", "t2b", 2, {"lag": 0.4, "cat": 0.3}), turn("g", "t3", 91, {"broker": 0.7}),
         pruning("g", 92, (), (("cat", "lag"),)), pruning("g", 93, ("kafka",), (("kafka", "lag"),), ("lag",)),
         turn("g", "t4", 94, {"broker": 0.3})], (3,),
    ),
    "ticks of a group listing an edge either way round": (
        [*HISTORY, turn("g", "t2b", 2, {"lag": 0.4, "cat": 0.3}), turn("g", "t3", 91, {"broker": 0.7}),
         pruning("g", 92, (), (("lag", "cat"),)), pruning("g", 93, (), (("kafka", "lag"),), ("lag",)),
         turn("g", "t4", 94, {"broker": 0.3})], (3,),
    ),
    "a pruning tick of a graph the batch makes": (
        [*HISTORY, pruning("g", 92, ("kafka",), (("kafka", "lag"),)), turn("g", "t3", 93, {"broker": 0.3})], (),
    ),
}


@pytest.mark.parametrize("events, cuts", PRUNING_CASES.values(), ids=PRUNING_CASES.keys())
def test_a_run_with_pruning_ticks_folds_as_its_events_one_at_a_time(events, cuts):
    one_by_one, expected = fold(events, batched=False)
    batched, state = fold(events, batched=True, cuts=cuts)
    assert batched == one_by_one
    assert partition_digests(state.repo) == partition_digests(expected.repo)
    assert [t.members for t in state.view("g").topics] == [t.members for t in expected.view("g").topics]


def test_the_cases_prune_what_they_list():
    """The pruning cases remove things, so they show something."""
    _, state = fold(*PRUNING_CASES["the second tick of a group orphans a passage the first unlinked"][:1],
                    batched=True, cuts=(2,))
    assert not {"cat", "dog"} & set(state.view("g").index)
    assert "t2" not in state.repo.passages(GraphRef("g", 1), ["t1", "t2"]), "its passage goes with its last link"
    for name in ("a tick ahead of a turn before it that touches nothing it lists",
                 "a consolidation before the tick keeps a member the tick removes after it"):
        _, state = fold(*PRUNING_CASES[name][:1], batched=True, cuts=PRUNING_CASES[name][1])
        assert "kafka" not in state.view("g").index
    _, state = fold(*PRUNING_CASES["a consolidation before the tick keeps a member the tick removes after it"][:1],
                    batched=False)
    assert ("kafka", "lag") in [t.members for t in state.repo.topics(GraphRef("g", 1))]


@pytest.mark.parametrize("events", CASES.values(), ids=CASES.keys())
def test_a_run_with_ticks_inside_folds_as_its_events_one_at_a_time(events):
    one_by_one, expected = fold(events, batched=False)
    batched, state = fold(events, batched=True)
    assert batched == one_by_one
    assert partition_digests(state.repo) == partition_digests(expected.repo)


def test_turns_ticks_and_consolidations_join_a_run():
    assert turn_run.joins_run(tick("g", 1))
    assert turn_run.joins_run(consolidation("g", 1, ("kafka", "lag")))
    assert turn_run.joins_run(turn("g", "t1", 0, {"kafka": 1.0}))
    assert turn_run.joins_run(pruning("g", 1, ("kafka",)))
    assert turn_run.prunes(pruning("g", 1, edges=(("kafka", "lag"),))) and not turn_run.prunes(tick("g", 1))


PART_CASES = {
    "no tick": ([turn("g", "t1", 0, {"kafka": 1.0}), turn("g", "t2", 1, {"lag": 1.0})], [2]),
    "a tick after a turn mentioning what it lists": (
        [turn("g", "t1", 0, {"kafka": 1.0}), pruning("g", 1, ("kafka",)), turn("g", "t2", 2, {"kafka": 1.0})], [1, 3],
    ),
    "a tick after turns holding both ends of an edge it lists": (
        [turn("g", "t1", 0, {"kafka": 1.0}), turn("g", "t2", 1, {"lag": 1.0}), pruning("g", 2, edges=(("kafka", "lag"),))],
        [2, 3],
    ),
    "a tick after turns holding one end": (
        [turn("g", "t1", 0, {"kafka": 1.0}), pruning("g", 2, ("lag",), (("kafka", "lag"),))], [2],
    ),
    "a turn after a tick mentioning what it lists": (
        [pruning("g", 1, ("kafka",)), turn("g", "t1", 2, {"kafka": 1.0}), pruning("g", 3, ("lag",))], [3],
    ),
}


@pytest.mark.parametrize("events, ends", PART_CASES.values(), ids=PART_CASES.keys())
def test_a_run_is_cut_before_a_pruning_tick_that_a_turn_before_it_touches(events, ends):
    run = [(event, offset, b"") for offset, event in enumerate(events)]
    outcomes = [None] * len(run)
    found, start = [], 0
    while start < len(run):
        start = turn_run.part_end(run, outcomes, start, known=True)
        found.append(start)
    assert found == ends


def test_a_pruning_tick_that_does_not_apply_cuts_nothing():
    run = [(event, offset, b"") for offset, event in enumerate(
        [turn("g", "t1", 0, {"kafka": 1.0}), pruning("g", 1, ("kafka",)), turn("g", "t2", 2, {"lag": 1.0})])]
    assert turn_run.part_end(run, [None, Outcome.DUPLICATE_TICK, None], 0, known=True) == 3
    assert turn_run.part_end(run[1:], [None, None], 0, known=False) == 1, "not known: alone"


def test_a_tick_inside_a_run_brings_a_mentioned_concept_to_it_first():
    events = CASES["a tick between two turns moves the mentions after it"]
    _, state = fold(events, batched=True)
    concept = state.repo.concepts(GraphRef("g", 1), ["kafka"])["kafka"]
    assert state.repo.meta(GraphRef("g", 1)).decayed_to == T0 + timedelta(hours=30)
    assert concept.decayed_to == T0 + timedelta(hours=30), "the second mention decayed the first to the tick"
    assert concept.count == 2


def test_a_consolidation_inside_a_run_keeps_only_the_members_present_at_its_time():
    events = CASES["a consolidation keeps the members held before the run or made before it"]
    _, state = fold(events, batched=True)
    ref = GraphRef("g", 1)
    assert [t.members for t in state.repo.topics(ref)] == [("kafka", "lag", "broker")], "cat came after it"
    assert [t.members for t in state.view("g").topics] == [("kafka", "lag", "broker")]
    assert state.repo.meta(ref).consolidated_to == T0 + timedelta(hours=22)


def _failing_on(hours: float, decide):
    """`decide` (a rule's evolve, or a tick's decision in its group: the
    event first), raising for the event at `hours` (a poison event, as far
    as the fold can tell)."""
    def failing(event, *rest):
        if event.timestamp == T0 + timedelta(hours=hours):
            raise ValueError("poison")
        return decide(event, *rest)
    return failing


def _deciding_with(check):
    """The fold's `decide_ticks` with `check(tick)` first for each tick a
    decision is asked for (`check` may raise: the decision fails), patched
    where the fold calls it: a compiled `pruning_group` calls its own
    `decide_tick` directly (emgas/_compiled.py), so patching that would
    test nothing there."""
    decide = projector.decide_ticks

    def decide_ticks(ticks, reads):
        ticks = list(ticks)
        decisions = decide(ticks, reads)
        for tick in ticks:
            check(tick)
            yield next(decisions)
    return decide_ticks


@pytest.mark.parametrize("poison", [92, 94])
def test_a_pruning_tick_rejected_ahead_leaves_the_ticks_after_it_as_one_at_a_time(monkeypatch, poison):
    events = [*HISTORY, turn("g", "t3", 91, {"broker": 0.7}), pruning("g", 92, ("kafka",), (("kafka", "lag"),)),
              turn("g", "t4", 93, {"broker": 0.5}), pruning("g", 94, ("cat",)), tick("g", 93.5),
              pruning("g", 95, ("dog",)), turn("g", "t5", 96, {"broker": 0.5})]
    rule = rules.RULES[Decay]
    monkeypatch.setitem(rules.RULES, Decay, dataclasses.replace(rule, evolve=_failing_on(poison, rule.evolve)))
    monkeypatch.setattr(projector, "decide_ticks", _deciding_with(_failing_on(poison, lambda tick: None)))
    one_by_one, expected = fold(events, batched=False)
    batched, state = fold(events, batched=True, cuts=(2,))
    assert Outcome.REJECTED in one_by_one
    assert batched == one_by_one
    assert partition_digests(state.repo) == partition_digests(expected.repo)


def test_a_tick_the_group_cannot_decide_is_applied_alone_and_the_group_goes_on(monkeypatch):
    """Deciding it in the group fails for the tick at 94 h (not its rule):
    it is applied alone, from the state, and the ticks after it together again."""
    events = [*HISTORY, turn("g", "t3", 91, {"broker": 0.7}), pruning("g", 92, ("kafka",), (("kafka", "lag"),)),
              pruning("g", 94, ("cat",)), pruning("g", 95, ("dog",)), turn("g", "t5", 96, {"broker": 0.5})]
    groups = []

    def failing(tick):
        groups.append(tick.timestamp)
        if tick.timestamp == T0 + timedelta(hours=94):
            raise ValueError("not decidable in the group")

    monkeypatch.setattr(projector, "decide_ticks", _deciding_with(failing))
    one_by_one, expected = fold(events, batched=False)
    batched, state = fold(events, batched=True, cuts=(2,))
    assert Outcome.REJECTED not in batched and batched == one_by_one
    assert partition_digests(state.repo) == partition_digests(expected.repo)
    assert groups == [T0 + timedelta(hours=h) for h in (92, 94, 95)]
    assert not {"kafka", "cat", "dog"} & set(state.view("g").index)


def test_ticks_whose_reads_fail_together_are_applied_alone(monkeypatch):
    events = PRUNING_CASES["the second tick of a group orphans a passage the first unlinked"][0]

    def unreadable(*args):
        raise OSError("the store, for the group's reads")

    monkeypatch.setattr(tick_group, "read_group", unreadable)
    one_by_one, expected = fold(events, batched=False)
    batched, state = fold(events, batched=True, cuts=(2,))
    assert Outcome.REJECTED not in batched and batched == one_by_one
    assert partition_digests(state.repo) == partition_digests(expected.repo)


def test_a_run_whose_fold_fails_after_its_ticks_went_ahead_is_applied_one_at_a_time(monkeypatch):
    """The turn at 93 h is poison to the run's fold, not to its rule: each event
    is then applied alone, the ticks applied ahead only moving the meta."""
    events = [*HISTORY, turn("g", "t3", 91, {"broker": 0.7}), pruning("g", 92, ("kafka",), (("kafka", "lag"),)),
              turn("g", "t4", 93, {"broker": 0.5}), consolidation("g", 94, ("kafka", "lag"), ("cat", "dog"))]
    fold_run = turn_run.fold_run

    def failing(repo, view, applied, params, ahead=None):
        if len(applied) > 2:
            raise ValueError("poison to the run")
        return fold_run(repo, view, applied, params, ahead)

    monkeypatch.setattr(turn_run, "fold_run", failing)
    one_by_one, expected = fold(events, batched=False)
    batched, state = fold(events, batched=True, cuts=(2,))
    assert batched == one_by_one
    assert partition_digests(state.repo) == partition_digests(expected.repo)
    assert "kafka" not in state.view("g").index
