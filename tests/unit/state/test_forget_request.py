"""Forgetting on request: the graph equals one whose log never held the turn."""

import json
import struct
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from emgas.processors.activation import ActivationParams
from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.errors import DecodeError
from emgas.processors.events import ActivationQuery, Forget, GraphEvent, SnapshotStarted, TurnIngested
from emgas.processors.extract import ExtractionParams
from emgas.processors.graph import GraphParams, GraphRef
from emgas.replay.explain import explain
from emgas.replay.reader import LogRecord
from emgas.state import fold_points, keys
from emgas.state.digest import partition_digests
from emgas.testing import LocalLog
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from emgas.state.repository import GraphRepository
from emgas.state.rocks import RocksStore
from emgas.state.snapshots import pack, stored_content
from emgas.state.view import load_view
from emgas.tools.simulation import GRAPH, ONCE, Stream, turns
from tests.support.factories import FAST, T0, VOCAB, ingested

ASKED = T0 + timedelta(days=400)
G = GraphRef("g", 1)
STATIC = GraphParams(window_s=0, consolidate_every_s=0)


def forget(graph: str, *turn_ids: str, request: str = "f1", whole: bool = False) -> Forget:
    return Forget(graph_id=graph, request_id=request, timestamp=ASKED, turn_ids=turn_ids, whole_graph=whole)


def folded(events: list[tuple[int, GraphEvent]], params: GraphParams, store=None) -> PartitionState:
    state = PartitionState(store or MemoryStore(), params)
    for offset, event in events:
        state.apply(event, offset)
    return state


def digests(state: PartitionState, graph: str | None = None) -> dict:
    return {(d.graph_id, d.version): d.digest for d in partition_digests(state.repo, graph)}


def journals(state: PartitionState) -> dict:
    """Each version's journal (log offsets and bytes): a re-fold keeps what it applied again, and only that."""
    return {ref: [tuple(entry) for entry in state.repo.journal(ref)] for ref in state.repo.graph_refs()}


def never_saw(log: list[GraphEvent], forgotten: set[str]) -> list[tuple[int, GraphEvent]]:
    """The log as it would be without the forgotten turns and the forget requests (same offsets)."""
    return [
        (offset, event)
        for offset, event in enumerate(log)
        if not isinstance(event, Forget) and not (isinstance(event, TurnIngested) and event.turn_id in forgotten)
    ]


def test_forgetting_a_turn_removes_its_passage_counts_and_unsupported_concepts():
    events = [
        ingested("g", "t1", {"kafka": 0.8, "lag": 0.4}),
        ingested("g", "t2", {"kafka": 0.6, "rust": 0.5}, minute=1),
        ingested("g", "t3", {"kafka": 0.7, "lag": 0.3, "secret": 0.9}, minute=2),
    ]
    state = folded(list(enumerate(events)), STATIC)
    assert state.apply(forget("g", "t3"), 3) == Outcome.APPLIED
    ref = GraphRef("g", 1)
    assert state.repo.passages(ref, ["t1", "t2", "t3"]).keys() == {"t1", "t2"}
    assert "secret" not in state.repo.concepts(ref, ["secret"])  # no other support
    kafka = state.repo.concepts(ref, ["kafka"])["kafka"]
    assert (kafka.count, kafka.base_activation) == (2, pytest.approx(0.8 + 0.6))
    assert state.repo.pairs(ref, [("kafka", "lag")])[("kafka", "lag")].count == 1
    assert state.repo.meta(ref).turns == 2
    assert state.view("g").turns == 2 and "secret" not in state.view("g").index  # the view follows
    assert digests(state) == digests(folded(list(enumerate(events[:2])), STATIC))


def test_a_forgotten_turn_sent_again_or_sent_late_is_never_applied():
    state = folded([(0, ingested("g", "t1", {"kafka": 0.8}))], STATIC)
    state.apply(forget("g", "t1", "t9"), 1)  # t9 is still on its way
    assert state.apply(ingested("g", "t1", {"kafka": 0.8}), 2) == Outcome.FORGOTTEN_TURN
    assert state.apply(ingested("g", "t9", {"lag": 0.5}), 3) == Outcome.FORGOTTEN_TURN
    assert digests(state) == {}
    assert state.apply(ingested("g", "t10", {"lag": 0.5}), 4) == Outcome.APPLIED  # a new turn is welcome


def test_forgetting_a_whole_graph_leaves_the_other_graphs_of_the_partition_alone():
    events = [
        ingested("alice", "t1", {"kafka": 0.8, "lag": 0.4}),
        ingested("bob", "t1", {"kafka": 0.5, "flink": 0.4}),
        ingested("alice", "t2", {"rust": 0.8}, minute=1),
    ]
    state = folded(list(enumerate(events)), FAST)
    bob = digests(state, "bob")
    assert state.apply(forget("alice", whole=True), 3) == Outcome.APPLIED
    assert digests(state, "alice") == {} and state.view("alice") is None
    assert digests(state, "bob") == bob
    assert state.apply(ingested("alice", "t2", {"rust": 0.8}), 4) == Outcome.FORGOTTEN_TURN
    assert state.apply(ingested("alice", "t3", {"go": 0.8}), 5) == Outcome.APPLIED
    assert state.view("alice").turns == 1


def test_a_forget_request_applies_once():
    state = folded([(0, ingested("g", "t1", {"kafka": 0.8}))], STATIC)
    state.apply(forget("g", whole=True, request="r1"), 1)
    state.apply(ingested("g", "t2", {"lag": 0.5}), 2)
    # The same request published twice must not erase what came after the first.
    assert state.apply(forget("g", whole=True, request="r1"), 3) == Outcome.DUPLICATE_FORGET
    assert state.view("g").turns == 1


def test_every_version_holding_the_turn_forgets_it():
    first = ingested("g", "t1", {"kafka": 0.8, "secret": 0.5})
    second = ingested("g", "t2", {"kafka": 0.6})
    v2 = [e.model_copy(update={"graph_version": 2}) for e in (first, second)]
    state = folded(list(enumerate([first, second, *v2])), STATIC)
    state.apply(forget("g", "t1"), 4)
    for version in (1, 2):
        assert "secret" not in state.view("g", version).index
        assert state.repo.meta(GraphRef("g", version)).turns == 1


def test_forgetting_the_only_turn_leaves_no_graph_behind():
    state = folded([(0, ingested("g", "t1", {"kafka": 0.8}))], FAST)
    state.apply(forget("g", "t1"), 1)
    assert state.repo.graph_refs() == [] and state.view("g") is None


def test_the_forget_request_is_strict():
    with pytest.raises(ValueError):
        Forget(graph_id="g", request_id="r", timestamp=ASKED)  # neither turns nor the whole graph
    with pytest.raises(ValueError):
        Forget(graph_id="g", request_id="r", timestamp=ASKED, turn_ids=("t1",), whole_graph=True)
    with pytest.raises(DecodeError):
        decode_graph_event(b'{"type": "forget", "schema_version": 1, "graph_id": "g", "request_id": "r",'
                           b' "timestamp": "2026-01-01T00:00:00Z", "turn_ids": ["bad\\u0000id"]}')


@pytest.fixture(scope="module")
def lived():
    """Six simulated weeks on a fast clock: ticks that prune, daily consolidations,
    and queries that reinforce, then a forget in the middle of it all."""
    log = LocalLog(FAST)
    stream = list(turns(Stream(days=42, turns_per_day=6)))
    for i, turn in enumerate(stream):
        log.append(turn)
        if i % 10 == 9:
            words = " ".join(c.id for c in turn.concepts[:2])
            log.ask(ActivationQuery(request_id=f"q{i}", graph_id=GRAPH, text=words, reply_to="r"),
                    ActivationParams(), ExtractionParams())
        if i == 30:  # day 5: after ticks and retrievals, before t0 fades
            log.append(forget(GRAPH, "t0", "t100", request="mid"))
    log.append(forget(GRAPH, "t200", request="late"))
    return log


def test_the_lived_log_has_everything_a_forget_must_undo(lived):
    kinds = {event.type for event in lived.log}
    assert kinds == {"turn_ingested", "decay", "consolidate", "retrieved", "forget"}
    assert any(e.type == "decay" and e.concepts for e in lived.log)  # ticks that prune


def test_a_fold_points_turns_are_read_from_its_records_as_from_the_store(lived):
    """`turn_ids_in` (what a snapshot round's fold point keeps) equals
    `turn_ids`, held passages and pruned ones alike."""
    repo = lived.state.repo
    for ref in repo.graph_refs():
        pruned = list(lived.state.txn.scan(keys.section(ref, b"f")))
        assert pruned, "the lived log prunes passages"
        assert repo.turn_ids_in(ref, repo.records_but_journal(ref)) == repo.turn_ids(ref)


def test_a_fold_points_records_are_taken_from_its_graphs_content_as_from_the_store(lived):
    """`version_records` (a point made from a snapshot's records) equals
    `records_but_journal`, for each of two versions of a graph."""
    first = ingested("g", "t1", {"kafka": 0.8, "lag": 0.5})
    state = folded(list(enumerate([first, first.model_copy(update={"graph_version": 2, "turn_id": "t2"})])), STATIC)
    for partition in (lived.state, state):
        for ref in partition.repo.graph_refs():
            content = stored_content(partition.txn, ref.graph_id)
            assert fold_points.version_records(content, ref) == partition.repo.records_but_journal(ref)
    assert len(state.repo.graph_refs()) == 2


def test_a_worker_makes_the_fold_points_of_a_snapshot_request_with_its_parts(monkeypatch):
    """A worker (`LocalLog`) makes a request's points from the records it
    serialises (it reads no version's records again); folding the same
    log keeps the same points, byte for byte."""
    events = [ingested("g", f"t{i}", {"kafka": 0.5, f"w{i % 3}": 0.5}, minute=10 * i) for i in range(12)]
    log = LocalLog(FAST)
    with monkeypatch.context() as patched:
        patched.setattr(GraphRepository, "records_but_journal", lambda *args: pytest.fail("read again"))
        for at in (0, 4, 8):
            log.extend(events[at:at + 4])
            log.append(snapshot_started("g"))
    served = [(p.as_of, p.turn_ids, p.blob) for p in fold_points.points(log.state.txn, G)]
    assert len(served) == 3 and log.worker.snapshots.points_made == []
    replayed = folded(list(enumerate(log.log)), FAST)
    assert served == [(p.as_of, p.turn_ids, p.blob) for p in fold_points.points(replayed.txn, G)]


def test_after_forgetting_the_graph_is_the_one_that_never_saw_the_turns(lived):
    never = folded(never_saw(lived.log, {"t0", "t100", "t200"}), FAST)
    assert digests(lived.state) == digests(never)
    assert ONCE not in lived.state.view(GRAPH).index  # only t0 mentioned it


def test_the_view_a_forget_leaves_is_the_re_folds_and_equals_the_one_loaded_from_the_store(monkeypatch):
    log = LocalLog(FAST)
    log.extend(list(turns(Stream(days=14, turns_per_day=6))))
    loads = []
    monkeypatch.setattr("emgas.state.projector.load_view", lambda *args: loads.append(args[1]) or load_view(*args))
    log.append(forget(GRAPH, "t20"))
    ref = GraphRef(GRAPH, 1)
    assert ref not in loads, "re-folded from the start: nothing loads the version, the re-fold's view serves"
    view, loaded = log.state.views[ref], load_view(log.state.repo, ref, FAST.decay)
    assert view.snapshot() == loaded.snapshot()
    assert {c: sorted(view.passage_ids[i]) for c, i in view.index.items()} == \
        {c: sorted(loaded.passage_ids[i]) for c, i in loaded.index.items()}
    assert (view.edges, view.turns) == (loaded.edges, loaded.turns)


def test_replaying_a_log_with_forgets_gives_the_live_graph(lived, tmp_path):
    replayed = folded(list(enumerate(decode_graph_event(encode(e)) for e in lived.log)), FAST, RocksStore(tmp_path))
    assert digests(replayed) == digests(lived.state)
    replayed.close()


def test_explain_tells_when_a_concept_went_with_a_forgotten_turn(lived):
    records = [LogRecord(0, offset, 0, None, encode(event)) for offset, event in enumerate(lived.log)]
    steps = explain(records, GRAPH, [ONCE], FAST)
    kinds = [s.kind for s in steps]
    assert (kinds[0], kinds[-1]) == ("created", "forgotten") and "pruned" not in kinds
    assert "request mid forgot turns t0, t100; removed" in steps[-1].detail


turn_specs = st.lists(
    st.tuples(
        st.dictionaries(st.sampled_from(VOCAB), st.floats(0.05, 1.0), min_size=1, max_size=4),
        st.integers(0, 60 * 24 * 20),  # minute of event time: up to 20 days, so ticks prune
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=turn_specs, data=st.data())
def test_any_forget_anywhere_equals_never_having_seen_the_turns(specs, data):
    events = [ingested("g", f"t{i}", concepts, minute) for i, (concepts, minute) in enumerate(specs)]
    ids = [e.turn_id for e in events]
    forgotten = data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True), label="forgotten")
    at = data.draw(st.integers(0, len(events)), label="forget after this many turns")
    log = LocalLog(FAST)
    log.extend(events[:at])
    log.append(forget("g", *forgotten))
    log.extend(events[at:])
    never = folded(never_saw(log.log, set(forgotten)), FAST)
    assert digests(log.state) == digests(never)
    assert journals(log.state) == journals(never)


def test_a_graph_forgotten_whole_and_started_again_gets_its_ticks():
    log = LocalLog(FAST)
    log.extend([ingested("g", "t1", {"kafka": 0.8}), ingested("g", "t2", {"lag": 0.5}, minute=24 * 60)])
    log.append(forget("g", whole=True))
    log.extend([ingested("g", "t3", {"rust": 0.8}, minute=1), ingested("g", "t4", {"go": 0.5}, minute=3 * 60)])
    ticks = [e.timestamp for e in log.log[log.log.index(forget("g", whole=True)):] if e.type == "decay"]
    assert ticks and min(ticks) < T0 + timedelta(days=1)  # not held back by the ticks of the forgotten graph


def snapshot_started(graph: str) -> SnapshotStarted:
    return SnapshotStarted(graph_id=graph, reason="policy", timestamp=ASKED)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=turn_specs, data=st.data())
def test_a_forget_from_the_latest_snapshot_equals_never_having_seen_the_turns(specs, data):
    """Turns are re-folded from the latest snapshot before them, or from the
    whole journal when there is none: either way, as if never seen."""
    events = [ingested("g", f"t{i}", concepts, minute) for i, (concepts, minute) in enumerate(specs)]
    ids = [e.turn_id for e in events]
    snapshots = data.draw(st.lists(st.integers(0, len(events)), max_size=4), label="snapshots after these many turns")
    forgotten = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=2, unique=True), label="forgotten")
    second = data.draw(st.sampled_from(ids), label="then forgotten")
    log = LocalLog(FAST)
    for i, event in enumerate(events):
        log.extend([snapshot_started("g")] * snapshots.count(i))
        log.append(event)
    log.extend([snapshot_started("g")] * snapshots.count(len(events)))
    log.append(forget("g", *forgotten))
    never = folded(never_saw(log.log, set(forgotten)), FAST)
    assert digests(log.state) == digests(never) and journals(log.state) == journals(never)
    log.append(forget("g", second, request="f2"))  # its fold point, if any, never holds a forgotten turn
    never = folded(never_saw(log.log, {*forgotten, second}), FAST)
    assert digests(log.state) == digests(never) and journals(log.state) == journals(never)


def test_a_turn_after_the_latest_snapshot_is_re_folded_from_it_and_one_before_from_the_start(monkeypatch):
    events = [ingested("g", f"t{i}", {"kafka": 0.5, f"w{i % 3}": 0.5}, minute=10 * i) for i in range(12)]
    log = LocalLog(FAST)
    log.extend(events[:6])
    log.append(snapshot_started("g"))
    log.extend(events[6:])
    starts = []
    real = PartitionState._scratch_from
    monkeypatch.setattr(PartitionState, "_scratch_from", lambda self, ref, point: starts.append(point.as_of) or
                        real(self, ref, point))
    log.append(forget("g", "t9", request="after"))
    assert starts == [6] and fold_points.points(log.state.txn, G) != []  # the point stays: t9 is not in it
    log.append(forget("g", "t2", request="before"))
    assert starts == [6] and fold_points.points(log.state.txn, G) == []  # t2 is in it: re-folded whole, point gone
    assert digests(log.state) == digests(folded(never_saw(log.log, {"t9", "t2"}), FAST))


def test_a_turn_between_two_snapshots_is_re_folded_from_the_earlier_one(monkeypatch):
    events = [ingested("g", f"t{i}", {"kafka": 0.5, f"w{i % 3}": 0.5}, minute=10 * i) for i in range(12)]
    log = LocalLog(FAST)
    for at in (0, 4, 8):
        log.extend(events[at:at + 4])
        log.append(snapshot_started("g"))
    starts = []
    real = PartitionState._scratch_from
    monkeypatch.setattr(PartitionState, "_scratch_from", lambda self, ref, point: starts.append(point.as_of) or
                        real(self, ref, point))
    points_before = [p.as_of for p in fold_points.points(log.state.txn, G)]
    assert len(points_before) == 3
    log.append(forget("g", "t5", request="between"))  # after the first point, before the second
    assert starts == [points_before[0]]
    assert [p.as_of for p in fold_points.points(log.state.txn, G)] == points_before[:1]  # the two holding t5 go
    assert digests(log.state) == digests(folded(never_saw(log.log, {"t5"}), FAST))


@pytest.mark.parametrize("offsets, keep, kept", [
    ([], 3, []),
    ([5], 1, [5]),
    ([10, 20, 30], 3, [10, 20, 30]),
    ([10, 20, 30, 40], 3, [20, 30, 40]),  # equal gaps: the oldest goes
    ([10, 50, 52, 90], 3, [10, 52, 90]),  # the point nearest its newer neighbour goes
    ([10, 50, 90, 91], 3, [10, 50, 91]),  # the newest always stays
    ([0, 1, 2, 3, 100], 2, [3, 100]),
])
def test_fold_points_are_thinned_to_a_spread(offsets, keep, kept):
    assert fold_points.thinned(offsets, keep) == kept


def test_a_version_keeps_at_most_max_points_and_always_its_newest():
    log = LocalLog(FAST)
    for i in range(fold_points.MAX_POINTS + 3):
        log.append(ingested("g", f"t{i}", {"kafka": 0.5}, minute=10 * i))
        log.append(snapshot_started("g"))
    offsets = [p.as_of for p in fold_points.points(log.state.txn, G)]
    started = [offset for offset, event in enumerate(log.log) if isinstance(event, SnapshotStarted)]
    assert len(offsets) == fold_points.MAX_POINTS and offsets[-1] == started[-1] and set(offsets) <= set(started)


def test_a_point_kept_by_an_earlier_version_of_emgas_is_read_and_thinned_away():
    """States written when a version kept one point hold it under the version's key."""
    log = LocalLog(FAST)
    log.extend([ingested("g", f"t{i}", {"kafka": 0.5}, minute=10 * i) for i in range(3)])
    log.append(snapshot_started("g"))
    (point,) = fold_points.points(log.state.txn, G)
    log.state.txn.put(point.key, None)
    log.state.txn.put(fold_points.version_key(G), fold_points.encode_point(point.as_of, set(point.turn_ids),
                                                                          point.records()))
    log.state.txn.put(fold_points.version_key(GraphRef("g", 12)), b"not version 1's")
    assert [(p.as_of, p.key) for p in fold_points.points(log.state.txn, G)] == [(point.as_of, fold_points.version_key(G))]
    log.append(forget("g", "t2", request="old-format"))  # re-folded from the old point (it lacks t2)
    assert digests(log.state) == digests(folded(never_saw(log.log, {"t2"}), FAST))


def test_a_point_packed_by_zlib_before_is_read_and_re_folded_from(monkeypatch):
    """Points were packed by zlib until 29 November, by zstd since: a state
    keeps those it holds, and a forget starts from them as from the new ones."""
    events = [ingested("g", f"t{i}", {"kafka": 0.5, f"w{i % 3}": 0.5}, minute=10 * i) for i in range(8)]
    log = LocalLog(FAST)
    log.extend(events[:4])
    log.append(snapshot_started("g"))
    log.extend(events[4:])
    (point,) = fold_points.points(log.state.txn, G)
    assert point.blob.startswith(b"\x28\xb5\x2f\xfd")  # a zstd frame
    ids = json.dumps(sorted(point.turn_ids), ensure_ascii=False).encode()
    zlib_packed = struct.pack(">qI", point.as_of, len(ids)) + ids + pack(point.records(), 1)
    log.state.txn.put(point.key, zlib_packed)
    (old,) = fold_points.points(log.state.txn, G)
    assert old.records() == point.records() and old.turn_ids == point.turn_ids
    starts = []
    real = PartitionState._scratch_from
    monkeypatch.setattr(PartitionState, "_scratch_from", lambda self, ref, p: starts.append(p.as_of) or
                        real(self, ref, p))
    log.append(forget("g", "t6", request="zlib"))
    assert starts == [point.as_of]
    assert digests(log.state) == digests(folded(never_saw(log.log, {"t6"}), FAST))


def test_a_point_left_holding_a_turn_forgotten_before_is_not_re_folded_from(monkeypatch):
    """A state whose fold point still holds an earlier forgotten turn (kept by
    a version of emgas that knew only one point per version) re-folds from an
    earlier point, so the turn stays forgotten."""
    events = [ingested("g", f"t{i}", {"kafka": 0.5, f"w{i % 3}": 0.5}, minute=10 * i) for i in range(16)]
    log = LocalLog(FAST)
    for at in (0, 4, 8):
        log.extend(events[at:at + 4])
        log.append(snapshot_started("g"))
    log.extend(events[12:])
    stale = fold_points.points(log.state.txn, G)[-1]
    log.append(forget("g", "t6", request="first"))  # drops the points holding t6 (the last two)
    log.state.txn.put(stale.key, fold_points.encode_point(stale.as_of, set(stale.turn_ids), stale.records()))
    starts = []
    real = PartitionState._scratch_from
    monkeypatch.setattr(PartitionState, "_scratch_from", lambda self, ref, point: starts.append(point.as_of) or
                        real(self, ref, point))
    log.append(forget("g", "t13", request="second"))  # after every point: the stale one would be the latest
    assert starts and starts[0] < stale.as_of
    assert digests(log.state) == digests(folded(never_saw(log.log, {"t6", "t13"}), FAST))


def test_a_fold_point_leaves_the_journal_to_its_version_and_one_holding_it_still_serves():
    """A point copies a version's records but its journal (the version's own
    up to the point is taken at the forget); a point written when points held
    the journal too gives the same forget."""
    events = [ingested("g", f"t{i}", {"kafka": 0.5, f"w{i % 3}": 0.5}, minute=10 * i) for i in range(12)]
    ref = GraphRef("g", 1)

    def lived(old_layout: bool) -> LocalLog:
        log = LocalLog(FAST)
        log.extend(events[:6])
        log.append(snapshot_started("g"))
        [point] = fold_points.points(log.state.txn, ref)
        assert not [key for key, _ in point.records() if key.startswith(keys.section(ref, b"j"))]
        if old_layout:  # the layout before: the journal up to the point inside it
            journal = [(keys.journal_entry(ref, e.offset), e.event) for e in log.state.repo.journal_to(ref, point.as_of)]
            log.state.txn.put(point.key, fold_points.encode_point(point.as_of, set(point.turn_ids),
                                                                   sorted(point.records() + journal)))
        log.extend(events[6:])
        log.append(forget("g", "t8"))
        return log

    new, old = lived(False), lived(True)
    assert digests(new.state) == digests(old.state) == digests(folded(never_saw(new.log, {"t8"}), FAST))
    journal = [(e.offset, e.event) for e in new.state.repo.journal(ref)]
    assert journal == [(e.offset, e.event) for e in old.state.repo.journal(ref)]
    turn_at = {e.turn_id: offset for offset, e in enumerate(new.log) if isinstance(e, TurnIngested)}
    kept = {offset for offset, _ in journal}
    assert {turn_at[f"t{i}"] for i in range(12) if i != 8} <= kept and turn_at["t8"] not in kept


def test_a_forget_writes_only_the_records_its_re_fold_changed(monkeypatch):
    """The journal before the turn, and rows and concepts the re-fold never
    reached, are not written again; what it changed or dropped is, and the
    graph is the one that never saw the turn."""
    events = [ingested("g", f"t{i}", {"kafka": 0.5, f"w{i % 3}": 0.5, f"only{i}": 0.4}, minute=10 * i) for i in range(12)]
    log = LocalLog(FAST)
    log.extend(events[:8])
    log.append(snapshot_started("g"))
    log.extend(events[8:])
    log.state.commit()
    before = dict(log.state.repo.records(G))
    written: dict[bytes, bytes | None] = {}
    real = log.state.txn.put
    monkeypatch.setattr(log.state.txn, "put", lambda key, value: written.__setitem__(key, value) or real(key, value))
    log.append(forget("g", "t10"))
    after = dict(log.state.repo.records(G))
    changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    assert changed and {key for key in written if key.startswith(keys.graph_prefix(G))} == changed
    assert keys.passage(G, "t10") in changed and keys.journal_entry(G, 0) not in written
    assert digests(log.state) == digests(folded(never_saw(log.log, {"t10"}), FAST))
