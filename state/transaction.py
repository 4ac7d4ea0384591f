"""A partition transaction: pending writes in front of a store, committed at once.

As quix-streams' state transactions: events are applied to an in-memory
overlay, reads see the overlay first, and `commit` writes all of it, with
the log offset the state then reflects, in one atomic batch of the store
(one RocksDB `WriteBatch`). Abandoning the overlay (a crash, `rollback`)
leaves the store at its last commit; the events after that offset are
read again and applied once (the projector's offset guard).

Pending values are bytes, None (a delete), or a pydantic model kept
decoded, so an event that reads a record an earlier one of the same
transaction wrote does not parse it again; models are encoded at commit.
A record may also wait as a `LazyRecord` (a concept's values, which every
run of turns mentioning it changes): made a model only when it is read
as one, and at commit.

Writes may also be deferred: a `Deferred` (the views' concepts and pair
rows) keeps changes in its own form, settled into the pending writes
before a scan that can meet them, taken straight into the batch of a
commit, and dropped with them on rollback.
"""

from __future__ import annotations

import bisect
from typing import Iterator, Mapping, Protocol, Sequence, TypeVar

from pydantic import BaseModel

from emgas.processors.graph import GraphRef
from emgas.state.store import Batch, LazyRecord, PartitionStore

M = TypeVar("M", bound=BaseModel)

# Events applied between two commits where nothing waits on a commit
# (replay, recovery, the forget re-fold, the in-process log): large enough
# that a commit's cost vanishes per event (a commit rewrites every pair row
# changed since the last one, and hub rows are long: 5 commits instead of
# 1 made the bench's 9,161-event fold 1.5 times slower), small enough that
# one transaction's pending records stay a few tens of MiB (16 MiB more
# peak RSS for those 9,161 events than with 2,000).
COMMIT_EVERY = 10_000

Pending = bytes | BaseModel | LazyRecord | None


def _raw(value: Pending) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, LazyRecord):
        return value.encode()
    return value.model_dump_json().encode()


# The keys deferred writes may stage (`keys.graph_prefix`: a graph version's records).
DEFERRED_PREFIX = b"g\x00"


def overlaps(prefix: bytes, other: bytes) -> bool:
    """Whether some key starts with both prefixes."""
    return prefix.startswith(other) or other.startswith(prefix)


class Deferred(Protocol):
    """Writes kept aside until the transaction needs them: records of graph
    versions (keys under DEFERRED_PREFIX) only."""

    def settle(self) -> None:
        """Stage every change kept aside as pending writes."""

    def settle_under(self, prefix: bytes) -> None:
        """Stage the changes kept aside that a read of the keys under `prefix`
        can meet (those of other graph versions, or of other sections, wait)."""

    def take(self) -> Batch:
        """Every change kept aside, as records (no longer kept aside): what a
        commit writes without staging them first."""

    def settle_concepts(self, ref: GraphRef, ids: Sequence[str]) -> None:
        """Stage the records kept aside of these concepts of `ref` (before they are read)."""

    def drop(self) -> None:
        """Forget every change kept aside (a rollback)."""


class Transaction(PartitionStore):
    """A `PartitionStore` whose writes wait in memory until `commit`."""

    def __init__(self, store: PartitionStore) -> None:
        self.store = store
        self._pending: dict[bytes, Pending] = {}
        # Pending keys in order, but for those added since the last scan (`_added`),
        # merged in at the next scan: one sorted run added to another is a
        # linear merge for Python's sort, where sorting every key again was not
        # (a scan after a few writes, as a snapshot marker's, re-sorted them all).
        self._sorted: list[bytes] = []
        self._added: list[bytes] = []
        self._deferred: list[Deferred] = []

    def defer(self, deferred: Deferred) -> None:
        """Settle `deferred` before every scan and commit, drop it on rollback."""
        self._deferred.append(deferred)

    def settle(self) -> None:
        for deferred in self._deferred:
            deferred.settle()

    def settle_concepts(self, ref: GraphRef, ids: Sequence[str]) -> None:
        for deferred in self._deferred:
            deferred.settle_concepts(ref, ids)

    def __len__(self) -> int:
        """Pending keys."""
        return len(self._pending)

    def get(self, key: bytes) -> bytes | None:
        if key in self._pending:
            return _raw(self._pending[key])
        return self.store.get(key)

    def lookup(self, keys: Sequence[bytes]) -> list[Pending]:
        """Each key's pending value, else the store's (one multi-get for those)."""
        pending = self._pending
        missing = [k for k in keys if k not in pending]
        found = dict(zip(missing, self.store.multi_get(missing))) if missing else {}
        return [pending[k] if k in pending else found[k] for k in keys]

    def multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        return [_raw(value) for value in self.lookup(keys)]

    def get_models(self, keys: Sequence[bytes], model: type[M]) -> list[M | None]:
        """The records at `keys` as `model`s (None where absent), parsing only
        what is not pending already decoded."""
        return [
            value.model() if isinstance(value, LazyRecord) else value  # type: ignore[misc]
            for value in self.get_records(keys, model)
        ]

    def get_records(self, keys: Sequence[bytes], model: type[M]) -> list[M | LazyRecord | None]:
        return [
            value if value is None or isinstance(value, (BaseModel, LazyRecord))  # type: ignore[misc]
            else model.model_validate_json(value)
            for value in self.lookup(keys)
        ]

    def read_copy(self) -> Transaction:
        """A transaction that reads what this one reads now: the same store
        under a copy of the pending writes (settled and encoded here, so it
        shares no object with this one), to read on another thread. It stays
        so only while the store is not written: whoever hands it to a thread
        commits nothing to the store until the thread is done (the worker:
        `PartitionStates.reading`)."""
        self.settle()
        copy = Transaction(self.store)
        copy.write({key: _raw(value) for key, value in self._pending.items()})
        return copy

    def scan(self, prefix: bytes, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """The store's items merged with the pending ones, in key order."""
        self._settle_under(prefix)
        start = prefix if start is None else max(prefix, start)
        mine = self._pending_with(prefix, start)
        if not mine:  # the store's own scan: most scans meet nothing pending (after a commit, a scratch state's load)
            return self.store.scan(prefix, start)
        return self._merged(mine, prefix, start)

    def items(self, prefix: bytes) -> dict[bytes, bytes]:
        """`scan`'s items as a dict: the store's section with the pending
        writes laid over it, dict by dict, where `scan` merges two sorted
        runs key by key (a forget reads a re-folded version so: 27,800
        records in 11-14 ms, 28-40 merged)."""
        self._settle_under(prefix)
        found = self.store.items(prefix)
        for key, value in self._pending.items():
            if key.startswith(prefix):
                raw = _raw(value)
                if raw is None:
                    found.pop(key, None)
                else:
                    found[key] = raw
        return found

    def _settle_under(self, prefix: bytes) -> None:
        """Settle what is kept aside before a read of the keys under `prefix`
        that can meet it: it is graph content (`g` keys), so only such a read
        waits for it, and only for what it can meet (a snapshot marker's read
        of one graph version staged every graph's changed rows and concepts,
        rewritten again at the commit when they changed meanwhile)."""
        if overlaps(prefix, DEFERRED_PREFIX):
            for deferred in self._deferred:
                deferred.settle_under(prefix)

    def _merged(self, mine: list[bytes], prefix: bytes, start: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The store's items from `start` merged with the pending ones `mine` (keys, in order)."""
        theirs = self.store.scan(prefix, start)
        i = 0
        for key, value in theirs:
            while i < len(mine) and mine[i] < key:
                raw = _raw(self._pending[mine[i]])
                if raw is not None:
                    yield mine[i], raw
                i += 1
            if i < len(mine) and mine[i] == key:
                raw = _raw(self._pending[key])
                i += 1
                if raw is not None:
                    yield key, raw
                continue
            yield key, value
        for key in mine[i:]:
            raw = _raw(self._pending[key])
            if raw is not None:
                yield key, raw

    def _pending_with(self, prefix: bytes, start: bytes) -> list[bytes]:
        if self._added:
            self._sorted += sorted(self._added)
            self._sorted.sort()
            self._added = []
        first = bisect.bisect_left(self._sorted, start)
        keys = []
        for key in self._sorted[first:]:
            if not key.startswith(prefix):
                break
            keys.append(key)
        return keys

    def write(self, batch: Batch) -> None:
        """Stage a batch (applied to the store at `commit`)."""
        self.stage(batch)

    def stage(self, items: Mapping[bytes, Pending]) -> None:
        """`put` of every item (a run's records, at once)."""
        pending = self._pending
        self._added += [key for key in items if key not in pending]
        pending.update(items)

    def put(self, key: bytes, value: Pending) -> None:
        if key not in self._pending:
            self._added.append(key)
        self._pending[key] = value

    def commit(self, extra: Batch | None = None) -> None:
        """Write every pending change, every change kept aside (newer than a
        pending write of the same key, as `settle` would stage it) and
        `extra` in one atomic batch of the store. What is kept aside goes
        to the batch as it is taken, not through the pending writes: a
        commit of a fold writes tens of thousands of such records."""
        kept: dict[bytes, bytes | None] = {}
        for deferred in self._deferred:
            kept.update(deferred.take())
        kept.update(extra or {})
        StagedCommit(self.store, self._pending, kept).write()  # no copy: nothing stages meanwhile
        self.rollback()

    def stage_commit(self, extra: Batch | None = None) -> StagedCommit:
        """Every pending change as it is now (settled), and `extra`: a commit
        whose `write` may run on another thread while this transaction is
        read (not written: nothing read here changes meanwhile, and what is
        staged meanwhile stays pending). `written` completes it."""
        self.settle()
        return StagedCommit(self.store, dict(self._pending), extra or {})

    def written(self, commit: StagedCommit) -> None:
        """`commit` is in the store: its changes are no longer pending, but
        for those staged again since it was staged."""
        pending = self._pending
        for key, value in commit.pending.items():
            if key in pending and pending[key] is value:
                del pending[key]
        self._sorted = sorted(pending) if pending else []
        self._added = []

    def rollback(self) -> None:
        """Drop every pending change (the store stays at its last commit)."""
        self._pending = {}
        self._sorted = []
        self._added = []
        for deferred in self._deferred:
            deferred.drop()

    def close(self) -> None:
        self.rollback()
        self.store.close()


class StagedCommit:
    """A transaction's pending changes at one moment, to be written to its
    store as one atomic batch (`Transaction.stage_commit`)."""

    def __init__(self, store: PartitionStore, pending: dict[bytes, Pending], extra: Batch) -> None:
        self.store, self.pending, self.extra = store, pending, extra

    def write(self) -> None:
        """Encode the changes (models and lazy records to bytes) and write them with `extra`."""
        batch = {key: _raw(value) for key, value in self.pending.items()}
        batch.update(self.extra)
        if batch:
            self.store.write(batch)
