"""A run's mentions folded on the concept columns (compiled) against
`Mentions` (one Python step per mention): the same values, bit for bit,
and the same datetime objects (offsets included); and written back to the
columns, the values a record of them would hold."""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.dynamics import DecayParams
from emgas.processors.events import Concept
from emgas.processors.graph import GraphMeta, GraphParams, Mentions, concept_record
from emgas.state import mention_columns
from emgas.state.concept_columns import ConceptColumns
from emgas.state.mention_columns import MentionColumns, columns_apply

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
OFFSETS = [timezone.utc, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5, minutes=-30))]
IDS = ["a", "b", "c", "d"]

times = st.builds(
    lambda hours, offset: (T0 + timedelta(hours=hours)).astimezone(offset),
    st.sampled_from([0, 0.5, 1, 3, 5, 30, 200, 2000]), st.sampled_from(OFFSETS),
)
decays = st.builds(
    DecayParams, model=st.sampled_from(["exponential", "power", "hybrid"]),
    half_life_s=st.sampled_from([3600.0, 86400.0 * 9]), hybrid_after=st.integers(1, 4),
)
held_values = st.builds(
    lambda text, count, activation, created, last, decayed, retrievals: [
        text, count, activation, created, max(created, last), decayed, retrievals, None, None,
    ],
    st.sampled_from(["x", "y"]), st.integers(1, 5), st.floats(0.0, 3.0), times, times, st.none() | times,
    st.integers(0, 3),
)
mention = st.tuples(st.sampled_from(IDS), st.sampled_from(["x", "y", "z"]), st.floats(0.001, 1.0))
step = st.one_of(
    st.tuples(st.just("turn"), times, st.lists(mention, min_size=1, max_size=4, unique_by=lambda m: m[0])),
    st.tuples(st.just("tick"), times, decays),
)


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(st.sampled_from(IDS), held_values, max_size=4), st.none() | times, st.none() | decays,
    st.lists(step, min_size=1, max_size=8), st.sampled_from([0.0, 3600.0, 7200.0]), st.sampled_from([1.0, 0.5]),
)
def test_columns_leave_the_values_mentions_leaves(held, tick_at, tick_params, steps, window_s, boost):
    few = mention_columns._FEW_MENTIONS
    try:
        for mention_columns._FEW_MENTIONS in (few, 0):  # tied texts found a mention at a time, then with arrays
            check(held, GraphMeta(decayed_to=tick_at, decay=tick_params), steps,
                  GraphParams(window_s=window_s, mention_boost=boost))
    finally:
        mention_columns._FEW_MENTIONS = few


def at(hours: float, offset: timezone = timezone.utc) -> datetime:
    return (T0 + timedelta(hours=hours)).astimezone(offset)


def held_at(hours: float, decayed: float | None = None, count: int = 1) -> dict:
    return {"a": ["x", count, 1.0, at(hours), at(hours), None if decayed is None else at(decayed), 0, None, None]}


HOURLY = GraphParams(window_s=3600.0)
CASES = {
    # (held, meta, steps, params)
    "carried forward to its window, 2.5 windows on": (held_at(0.5), GraphMeta(), [("turn", at(3), [("a", "x", 0.5)])], HOURLY),
    "older than its reference": (held_at(5, decayed=5), GraphMeta(), [("turn", at(1), [("a", "x", 0.5)])], HOURLY),
    "brought to the last tick first": (
        held_at(0.5), GraphMeta(decayed_to=at(2), decay=DecayParams()), [("turn", at(2.5), [("a", "x", 0.5)])], HOURLY,
    ),
    "a tick inside the run": (
        held_at(0.5), GraphMeta(), [("tick", at(30), DecayParams(model="power")), ("turn", at(31), [("a", "x", 0.5)])],
        HOURLY,
    ),
    "the same instant at another offset, a smaller text": (
        held_at(1), GraphMeta(), [("turn", at(1, OFFSETS[1]), [("a", "w", 0.5)])], HOURLY,
    ),
    "created by the run, then an earlier mention": (
        {}, GraphMeta(), [("turn", at(3), [("a", "x", 0.5)]), ("turn", at(1, OFFSETS[2]), [("a", "y", 0.2)])], HOURLY,
    ),
    "hybrid past its reinforcements, no window": (
        held_at(0, count=4), GraphMeta(), [("turn", at(200), [("a", "x", 0.9)])], GraphParams(window_s=0.0),
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_each_branch_of_a_contribution_on_columns(case):
    check(*CASES[case])


def held_columns(held: dict) -> tuple[ConceptColumns, dict[str, int]]:
    """Columns holding `held` (id -> values), a dead slot before each, and the index of the live slots."""
    columns, index = ConceptColumns(), {}
    for cid, values in held.items():
        columns.add("dead")
        index[cid] = columns.add(values[0])
        columns.put(index[cid], concept_record(cid, values))
    return columns, index


def check(held: dict, meta: GraphMeta, steps: list, params: GraphParams) -> None:
    store, index = held_columns(held)
    expected, columns = Mentions(held, meta, params), MentionColumns(store, index, meta, params)
    for kind, when, what in steps:
        if kind == "tick":
            meta = meta.model_copy(update={"decayed_to": when, "decay": what})
            expected.ticked(meta)
            columns.ticked(meta)
            continue
        concepts = [Concept(id=cid, text=text, importance=importance) for cid, text, importance in what]
        expected.turn(concepts, when)
        columns.turn(concepts, when)
    got, want = columns.values(), expected.values()
    assert list(got) == list(want)
    for cid in want:
        assert got[cid] == want[cid], cid
        for mine, theirs in zip(got[cid], want[cid]):
            if isinstance(theirs, datetime):
                assert mine.utcoffset() == theirs.utcoffset(), f"{cid}: the same object's offset"
            if isinstance(theirs, float):
                assert mine.hex() == theirs.hex(), f"{cid}: bit for bit"
    written_back(store, index, columns, want)


def written_back(store: ConceptColumns, index: dict, columns: MentionColumns, want: dict) -> None:
    """`apply` leaves in the columns the values `Mentions` gives (new concepts in new slots)."""
    folded = columns.fold()
    slots = folded.slots.copy()
    for k in range(len(slots)):
        if slots[k] < 0:
            slots[k] = store.add(folded.texts[k])
    mention_columns.apply(store, folded, slots)
    for cid, slot in zip(folded.ids, slots.tolist()):
        got = store.values(slot)
        assert got == want[cid], cid
        assert [v.utcoffset() for v in got if isinstance(v, datetime)] == \
            [v.utcoffset() for v in want[cid] if isinstance(v, datetime)]
    assert sorted(store.take_unwritten()) == sorted(slots.tolist())


def test_a_window_of_a_fraction_of_a_second_is_left_to_mentions():
    assert not columns_apply(GraphParams(window_s=0.5))
    assert columns_apply(GraphParams(window_s=0.0))


@pytest.mark.parametrize("case", CASES)
def test_each_branch_folded_by_mentions_where_the_kernel_cannot(case, monkeypatch):
    """The same cases through `Mentions` on values read from the columns (a window of a fraction of a second)."""
    monkeypatch.setattr(mention_columns, "columns_apply", lambda params: False)
    check(*CASES[case])
