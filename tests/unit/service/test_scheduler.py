"""The scheduler's windows: when a batch of turns enters a new decay or consolidation window."""

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.dynamics import window_index, window_start
from emgas.processors.graph import GraphParams
from emgas.service.scheduler import Scheduler

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def entered_by_window_starts(params: GraphParams, before: datetime | None, times: list[datetime]) -> list[datetime]:
    """`windows_entered` as the turns would see it one by one: a clock moved
    forward into another window start, decay's or consolidation's."""

    def starts(clock: datetime) -> tuple[datetime | None, datetime | None]:
        return tuple(window_start(clock, w) if w > 0 else None for w in (params.window_s, params.consolidate_every_s))

    entered, clock = [], before
    for at in times:
        if clock is not None and at <= clock:
            continue
        if clock is None or starts(at) != starts(clock):
            entered.append(at)
        clock = at
    return entered


@settings(max_examples=300, deadline=None)
@given(
    window_s=st.sampled_from([0.0, 1.0, 90.5, 3600.0, 86_400.0]),
    every_s=st.sampled_from([0.0, 7.25, 3600.0, 86_400.0]),
    before_s=st.none() | st.integers(-10**6, 10**6),
    steps_us=st.lists(st.integers(-2 * 10**9, 3 * 10**10), max_size=30),
)
def test_windows_entered_are_the_clocks_that_change_a_window_start(window_s, every_s, before_s, steps_us):
    params = GraphParams(window_s=window_s, consolidate_every_s=every_s)
    before = None if before_s is None else T0 + timedelta(seconds=before_s)
    times, at = [], T0
    for step in steps_us:  # back and forth: a turn earlier than the clock moves nothing
        at += timedelta(microseconds=step)
        times.append(at)
    assert Scheduler(params).windows_entered(before, times) == entered_by_window_starts(params, before, times)


def test_a_window_index_is_the_k_of_its_start():
    for t in (T0, T0 - timedelta(days=400, microseconds=1), T0 + timedelta(hours=5, microseconds=999_999)):
        for w in (1.0, 7.25, 3600.0, 86_400.0):
            k = window_index(t, w)
            assert window_start(t, w) == datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=k * w) <= t
            assert t < datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=(k + 1) * w)
