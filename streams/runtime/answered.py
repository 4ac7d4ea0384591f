"""Which queries a worker answered as their partition's owner, so that the next owner does not answer them again.

A worker that takes a partition over reads its queries from one query
timeout ago (`streams.runtime.serving`): a client may still wait for one
its predecessor never answered. Those its predecessor did answer are
among them too, and answering them again delayed the takeover's own first
answer by a cold answer each (about 20-35 ms on the bench's graph of 3,000
turns) and re-sent digests. So a worker that stops cleanly says, per
partition it answered, the offset before which it answered every query it
read (`AnsweredQueries.through`), on the owners topic under the key
`<partition>/answered`; the next owner skips the queries before it. A
worker that crashed says nothing: its successor answers every query still
waited for, as before (a retrieval is recorded once per request id, so a
query answered twice reinforces once).

"Answered as owner" is what the next owner would have done with the
query: answered with reinforcement, or left because its client had given
up. A query answered read-only (covering), one held and never answered
(the partition revoked, the worker stopped), one of a partition this
worker did not serve: each stops the offset there, for good.
"""

from __future__ import annotations

import math

ANSWERED_SUFFIX = b"/answered"  # the owners topic's key for a partition's answered offset: b"<p>/answered"


def answered_key(partition: int) -> bytes:
    return str(partition).encode() + ANSWERED_SUFFIX


class AnsweredQueries:
    """Per queries partition: the offsets read, the first one not answered
    as owner, and those whose answer is still to come (held through a
    catch-up, or digests hashed on a thread)."""

    def __init__(self) -> None:
        self._next: dict[int, int] = {}  # partition -> the offset after the last query read
        self._missed: dict[int, int] = {}  # partition -> the first query read and not answered as owner
        # partition -> offset -> answers still to come (a query held through a catch-up
        # may hash its digests on a thread when it wakes: two, one inside the other)
        self._pending: dict[int, dict[int, int]] = {}

    def read(self, partition: int, offset: int) -> None:
        """A query was read (whatever becomes of it: say so with the methods below)."""
        self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def missed(self, partition: int, offset: int) -> None:
        """The query will not be answered as owner here: the offset stops there."""
        self._missed[partition] = min(self._missed.get(partition, offset), offset)

    def later(self, partition: int, offset: int) -> None:
        """The query will be answered later (`done` says how it went)."""
        pending = self._pending.setdefault(partition, {})
        pending[offset] = pending.get(offset, 0) + 1

    def done(self, partition: int, offset: int, answered: bool) -> None:
        """A query answered later was answered as owner (or left, its client
        gone), or, if not `answered`, was not."""
        pending = self._pending.get(partition, {})
        if pending.get(offset, 0) > 1:
            pending[offset] -= 1
        else:
            pending.pop(offset, None)
        if not answered:
            self.missed(partition, offset)

    def through(self, partition: int) -> int | None:
        """The offset before which every query of `partition` read here was
        answered as owner; None if none was read."""
        if partition not in self._next:
            return None
        pending = self._pending.get(partition)
        return int(min(self._next[partition], self._missed.get(partition, math.inf), min(pending or (math.inf,))))
