"""A forget waits through a hand-over: digest polls nobody answers are asked again until its deadline."""

from types import SimpleNamespace

import pytest

from emgas.processors.events import DigestReply
from emgas.streams.errors import QueryTimeout
from emgas.streams.interfaces.client import MemoryClient, forget_request
from emgas.streams.settings import Settings

FORGET_OFFSET = 41


class Producer:
    async def send_and_wait(self, topic, value, key=None):
        return SimpleNamespace(partition=0, offset=FORGET_OFFSET)


def client_answering(answers: list[int | None]) -> tuple[MemoryClient, list[float]]:
    """A client whose digest polls get, in turn, `answers` (None: unanswered
    within the poll's timeout; an int: the applied offset); the poll timeouts asked."""
    client = MemoryClient(Settings(broker="kafka:9092", query_timeout_s=0.2))
    client._producer = Producer()  # type: ignore[assignment]
    timeouts: list[float] = []

    async def digests(graph_id=None, timeout_s=None):
        timeouts.append(timeout_s)
        applied = answers.pop(0) if answers else None
        if applied is None:
            raise QueryTimeout("no reply")
        return [DigestReply(request_id="r", worker="w", partition=0, applied_offset=applied, graphs=())]

    client.digests = digests  # type: ignore[method-assign]
    return client, timeouts


@pytest.mark.parametrize("answers, polls", [
    ([FORGET_OFFSET], 1),                      # applied at the first poll
    ([None, None, FORGET_OFFSET], 3),          # no worker answers for two polls: a hand-over
    ([FORGET_OFFSET - 1, None, FORGET_OFFSET + 5], 3),  # behind, unanswered, then past it
])
async def test_a_forget_returns_once_applied_whatever_polls_went_unanswered(answers, polls):
    client, timeouts = client_answering(list(answers))
    assert await client.forget(forget_request("alice", ["t1"]), timeout_s=5.0) == FORGET_OFFSET
    assert len(timeouts) == polls
    assert all(0 < t <= 0.2 for t in timeouts)  # each poll bounded by the query timeout


async def test_a_forget_never_applied_says_so_after_its_own_wait():
    client, timeouts = client_answering([])
    with pytest.raises(QueryTimeout, match=r"offset 41\) is in the log but was not applied within 0.5 s"):
        await client.forget(forget_request("alice", whole_graph=True), timeout_s=0.5)
    assert len(timeouts) >= 2  # the first unanswered poll did not end the wait
