"""The step functions, driven without a broker: what the agents call."""

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import pytest

from emgas.processors.dynamics import DAY_S
from emgas.processors.events import ActivationQuery, DigestQuery, ErrorReply, Retrieved, StatsQuery
from emgas.processors.graph import GraphParams
from emgas.state.memory import MemoryStore
from emgas.state.rocks import RocksStore
from emgas.state.store import PartitionStore
from emgas.state.projector import Outcome, PartitionState
from emgas.service.steps import PartitionSteps
from tests.support.factories import T0, ingested

WALL = datetime(2026, 6, 1, tzinfo=timezone.utc)


DAILY = GraphParams(window_s=DAY_S, consolidate_every_s=0)


def worker(store: PartitionStore | None = None, params: GraphParams = DAILY) -> PartitionSteps:
    return PartitionSteps(PartitionState(store or MemoryStore(), params), params, name="w", partition=3)


def test_an_event_returns_its_outcome_and_the_ticks_it_made_due():
    w = worker()
    assert w.on_graph_event(ingested("g", "t1", {"kafka": 0.8, "lag": 0.5}), 0, WALL) == (Outcome.APPLIED, [])
    outcome, due = w.on_graph_event(ingested("g", "t2", {"kafka": 0.8}, minute=60 * 25), 1, WALL)
    assert outcome == Outcome.APPLIED
    assert [(e.type, e.timestamp) for e in due] == [("decay", T0 + timedelta(days=1))]
    # Due once: the same clock again emits nothing until the tick is applied.
    assert w.on_graph_event(ingested("g", "t3", {"lag": 0.8}, minute=60 * 25 + 1), 2, WALL)[1] == []


def test_a_query_returns_its_reply_and_its_reinforcement():
    w = worker()
    w.on_graph_event(ingested("g", "t1", {"kafka": 0.8, "lag": 0.5}), 0, WALL)
    reply, events = w.on_request(ActivationQuery(request_id="q1", graph_id="g", seeds=("kafka",)), lambda: 0.0)
    assert reply.type == "activation_reply" and reply.passages[0].turn_id == "t1"
    [retrieved] = events
    assert isinstance(retrieved, Retrieved) and retrieved.request_id == "q1"


@pytest.mark.parametrize(
    "request_, code",
    [
        (ActivationQuery(request_id="q", graph_id="nobody", seeds=("x",)), "graph_not_found"),
        (StatsQuery(request_id="q", graph_id="nobody"), "graph_not_found"),
    ],
)
def test_a_request_the_state_cannot_answer_is_an_error_reply(request_, code):
    reply, events = worker().on_request(request_, lambda: 0.0)
    assert isinstance(reply, ErrorReply) and reply.code == code and events == []


def test_a_digest_names_the_worker_partition_and_offset():
    w = worker()
    w.on_graph_event(ingested("g", "t1", {"kafka": 0.8}), 7, WALL)
    reply, _ = w.on_request(DigestQuery(request_id="d"), lambda: 0.0)
    assert (reply.worker, reply.partition, reply.applied_offset) == ("w", 3, 7)
    assert [d.graph_id for d in reply.graphs] == ["g"]


def test_digests_hashed_later_on_another_thread_are_those_of_the_state_when_asked(tmp_path):
    w = worker(RocksStore(tmp_path / "state"))
    w.on_graph_event(ingested("g", "t1", {"kafka": 0.8}), 7, WALL)
    w.state.commit()
    w.on_graph_event(ingested("g", "t2", {"kafka": 0.5, "lag": 0.4}), 8, WALL)  # pending, not committed
    asked = DigestQuery(request_id="d")
    expected, _ = w.on_request(asked, lambda: 0.0)
    later = w.digests_later(asked)
    w.on_graph_event(ingested("h", "t3", {"flink": 0.6}), 9, WALL)  # after the request: not in its digests
    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(later).result()
    assert reply == expected and reply.applied_offset == 8
    assert [d.graph_id for d in reply.graphs] == ["g"]


def test_the_timer_ticks_a_graph_idle_for_a_window():
    w = worker()
    w.on_graph_event(ingested("g", "t1", {"kafka": 0.8}), 0, WALL)
    assert w.on_timer(WALL + timedelta(hours=1)) == []
    [tick] = w.on_timer(WALL + timedelta(days=2))
    assert tick.type == "decay" and tick.trigger == "idle"


def test_an_event_type_with_no_rule_fails_loudly(monkeypatch):
    """A missing rule is a bug to stop on, not a poison event to reject."""
    from emgas.processors.events import TurnIngested
    from emgas.state import rules

    monkeypatch.setattr(rules, "RULES", {k: v for k, v in rules.RULES.items() if k is not TurnIngested})
    with pytest.raises(rules.UnregisteredEvent, match="no rule registered for the graph event type TurnIngested"):
        worker().on_graph_event(ingested("g", "t1", {"kafka": 0.8}), 0, WALL)


def test_passages_by_turn_id_and_the_ids_not_held():
    from emgas.processors.events import PassageQuery

    w = worker()
    w.on_graph_event(ingested("g", "t1", {"kafka": 0.8}, text="kafka lag again"), 0, WALL)
    reply, events = w.on_request(PassageQuery(request_id="p", graph_id="g", turn_ids=("t1", "t9")), lambda: 0.0)
    assert [(p.turn_id, p.text, p.concepts) for p in reply.passages] == [("t1", "kafka lag again", ("kafka",))]
    assert reply.missing == ("t9",) and events == []
    reply, _ = w.on_request(PassageQuery(request_id="p", graph_id="nobody", turn_ids=("t1",)), lambda: 0.0)
    assert isinstance(reply, ErrorReply) and reply.code == "graph_not_found"


def test_passages_by_turn_id_prefix():
    from emgas.processors.events import PassageQuery

    w = worker()
    for offset, turn in enumerate(["note#r1", "note#r2", "notes", "other"]):
        w.on_graph_event(ingested("g", turn, {"kafka": 0.8}), offset, WALL)
    reply, _ = w.on_request(PassageQuery(request_id="p", graph_id="g", turn_id_prefix="note#"), lambda: 0.0)
    assert [p.turn_id for p in reply.passages] == ["note#r1", "note#r2"] and reply.missing == ()
    with pytest.raises(ValueError):
        PassageQuery(request_id="p", graph_id="g")


HOURLY = GraphParams(window_s=3600, consolidate_every_s=DAY_S)


@pytest.mark.parametrize("minutes", [
    [0, 30, 90, 200, 200, 1500, 3000],  # several windows and a day crossed
    [0, 3000, 30, 90],  # an old turn after a newer one: it opens no window
    [10, 20, 40],  # one window: nothing due
])
def test_a_batch_makes_due_the_ticks_of_every_window_its_turns_enter(minutes):
    """A batch of turns applied at once asks for the ticks each window its
    turns enter, as applying them one by one would (their lists are decided
    on the state after the batch)."""
    turns = [ingested("g", f"t{k}", {"kafka": 0.8, "lag": 0.5}, minute=m) for k, m in enumerate(minutes)]
    one_by_one, batched = worker(params=HOURLY), worker(params=HOURLY)
    expected = [e for offset, turn in enumerate(turns) for e in one_by_one.on_graph_event(turn, offset, WALL)[1]]
    outcomes, due = batched.on_graph_events([(turn, offset, None) for offset, turn in enumerate(turns)], WALL)
    assert outcomes == [Outcome.APPLIED] * len(turns)
    assert [(e.type, e.timestamp) for e in due] == [(e.type, e.timestamp) for e in expected]


def test_a_snapshot_request_is_not_taken_in_a_batch():
    from emgas.processors.events import SnapshotStarted

    request = SnapshotStarted(graph_id="g", reason="policy", timestamp=WALL)
    with pytest.raises(ValueError, match="applied alone"):
        worker().on_graph_events([(request, 0, None)], WALL)
