"""The worker's group membership guards (streams.runtime.membership), on stand-ins for aiokafka's objects."""

import asyncio
from types import SimpleNamespace

import pytest
from aiokafka.errors import InvalidRequestError, KafkaError, NoError, RebalanceInProgressError

from emgas.streams.runtime.membership import UNASSIGNED_SESSIONS, GroupWatch
from emgas.streams.runtime.patches import SyncGroupGuard


class Coordinator:
    def __init__(self, answers=(), pending=None):
        self.answers = list(answers)
        self.sent = 0
        self.rejoins = 0
        self._closing = SimpleNamespace(done=lambda: False)  # the consumer is not closing
        self._pending_exception = pending
        self._error_consumed_fut = object() if pending else None

    async def _send_req(self, request):
        self.sent += 1
        return SimpleNamespace(error_code=self.answers.pop(0), member_assignment=b"a")

    def request_rejoin(self):
        self.rejoins += 1

    def check_errors(self):
        exc, self._pending_exception, self._error_consumed_fut = self._pending_exception, None, None
        raise exc


async def original_sync(rebalance, request):
    """aiokafka's handling, reduced: the response's error code, or an exception for unexpected ones."""
    response = await rebalance._coordinator._send_req(request)
    if response.error_code in (NoError.errno, RebalanceInProgressError.errno):
        return response.error_code
    raise KafkaError(f"unexpected {response.error_code}")


@pytest.mark.parametrize("answer, fail_first, returned, sent, counted", [
    (NoError.errno, 0, NoError.errno, 1, []),  # a normal sync passes through
    (RebalanceInProgressError.errno, 0, RebalanceInProgressError.errno, 1, []),  # aiokafka's own rejoin
    (InvalidRequestError.errno, 0, RebalanceInProgressError.errno, 1, ["sync_refused"]),  # the broker's race
    (NoError.errno, 1, RebalanceInProgressError.errno, 0, ["sync_refused"]),  # the test hook: never sent
])
def test_a_sync_group_refused_as_invalid_becomes_a_rejoin(answer, fail_first, returned, sent, counted):
    coordinator, reasons = Coordinator([answer]), []
    guard = SyncGroupGuard()
    guard.count, guard.fail_first = reasons.append, fail_first
    rebalance = SimpleNamespace(_coordinator=coordinator, group_id="g")
    assert asyncio.run(guard.sync(rebalance, "request", original_sync)) == returned
    assert (coordinator.sent, reasons) == (sent, counted)
    assert "_send_req" not in coordinator.__dict__  # the coordinator's own method again


def test_other_sync_group_errors_are_left_to_aiokafka():
    guard = SyncGroupGuard()
    rebalance = SimpleNamespace(_coordinator=Coordinator([25]), group_id="g")  # UNKNOWN_MEMBER_ID
    with pytest.raises(KafkaError):
        asyncio.run(guard.sync(rebalance, "request", original_sync))


def consumer(coordinator, assignment):
    subscription = SimpleNamespace(assignment=assignment)
    return SimpleNamespace(_coordinator=coordinator, _subscription=SimpleNamespace(subscription=subscription))


def test_an_error_the_coordinator_holds_for_the_application_is_taken_and_the_member_rejoins():
    coordinator, reasons = Coordinator(pending=KafkaError("held")), []
    GroupWatch("g", 6.0, reasons.append).check(consumer(coordinator, assignment=None))
    assert coordinator._pending_exception is None and coordinator.rejoins == 1 and reasons == ["held_error"]


@pytest.mark.parametrize("assignment, seconds, rejoins", [
    (None, UNASSIGNED_SESSIONS * 6.0 + 1, 1),  # outside the group too long
    (None, UNASSIGNED_SESSIONS * 6.0 - 1, 0),  # a join still under way
    (SimpleNamespace(partitions=frozenset()), 600.0, 0),  # an empty assignment is membership
])
def test_a_member_without_an_assignment_rejoins_after_three_session_timeouts(assignment, seconds, rejoins):
    now, reasons, coordinator = [0.0], [], Coordinator()
    watch = GroupWatch("g", 6.0, reasons.append, clock=lambda: now[0])
    member = consumer(coordinator, assignment)
    watch.check(member)
    now[0] = seconds
    watch.check(member)
    assert coordinator.rejoins == rejoins and reasons == ["no_assignment"] * rejoins
