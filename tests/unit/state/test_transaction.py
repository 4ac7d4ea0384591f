"""The partition transaction: reads see pending writes, a commit is one batch,
and a crash between commits loses nothing and applies nothing twice."""

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emgas.processors.codec import encode
from emgas.processors.dynamics import DAY_S, DecayParams
from emgas.processors.events import Boost, Retrieved
from emgas.processors.graph import ConceptState, GraphParams, concept_record, concept_values
from emgas.state.digest import partition_digests
from emgas.testing import LocalLog
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from emgas.state.repository import PendingConcept
from emgas.state.store import PartitionStore
from emgas.state import keys
from emgas.state.transaction import Transaction
from tests.support.factories import T0, ingested

ALL_KEYS = [b"a", b"a\x00x", b"a\x00y", b"b", b"b\x00z", b"c"]
KEYS = st.sampled_from(ALL_KEYS)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.dictionaries(KEYS, st.one_of(st.none(), st.binary(max_size=3)), max_size=4)),
        st.tuples(st.just("commit"), st.none()),
        st.tuples(st.just("rollback"), st.none()),
    ),
    max_size=30,
)


class CountingStore(MemoryStore):
    """A memory store that counts the batches written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.batches = 0

    def write(self, batch) -> None:  # noqa: ANN001
        self.batches += 1
        super().write(batch)


@given(OPS)
def test_reads_see_pending_writes_merged_with_the_store(ops):
    store = MemoryStore()
    txn = Transaction(store)
    committed: dict[bytes, bytes] = {}
    seen: dict[bytes, bytes] = {}
    for op, batch in ops:
        if op == "write":
            txn.write(batch)
            for key, value in batch.items():
                seen.pop(key, None) if value is None else seen.__setitem__(key, value)
        elif op == "commit":
            txn.commit()
            committed = dict(seen)
        else:
            txn.rollback()
            seen = dict(committed)
        for prefix in (b"", b"a", b"a\x00", b"b", b"zz"):
            assert list(txn.scan(prefix)) == sorted((k, v) for k, v in seen.items() if k.startswith(prefix))
            assert txn.items(prefix) == {k: v for k, v in seen.items() if k.startswith(prefix)}
            for start in ALL_KEYS:
                assert list(txn.scan(prefix, start)) == sorted(
                    (k, v) for k, v in seen.items() if k.startswith(prefix) and k >= start
                )
        assert txn.multi_get(ALL_KEYS) == [seen.get(k) for k in ALL_KEYS]
        assert dict(store.scan(b"")) == committed


def test_a_commit_is_one_batch_with_the_offset():
    store = CountingStore()
    state = PartitionState(store, GraphParams(window_s=0, consolidate_every_s=0))
    for offset in range(5):
        state.apply(ingested("g", f"t{offset}", {"kafka": 0.5, f"c{offset}": 0.5}, minute=offset), offset)
    assert store.batches == 0 and state.applied_offset == 4 and state.committed_offset == -1
    state.commit()
    assert store.batches == 1 and PartitionState(store, state.params).applied_offset == 4


# A lived log: turns over weeks (so decay ticks prune and consolidations
# run), a retrieval, and a duplicate publish.
PARAMS = GraphParams(
    window_s=DAY_S, consolidate_every_s=3 * DAY_S,
    decay=DecayParams(model="exponential", half_life_s=DAY_S, concept_threshold=0.1, edge_stability_s=DAY_S),
)


def lived_log() -> list[bytes]:
    log = LocalLog(PARAMS)
    words = ["kafka", "lag", "broker", "topic", "offset", "replica", "leader", "consumer"]
    for i in range(60):
        chosen = {words[(i * 3 + k) % len(words)]: 0.3 + 0.1 * k for k in range(3)} | {f"once{i}": 0.3}
        log.append(ingested("g", f"t{i}", chosen, minute=i * 600))
        if i == 30:
            log.append(Retrieved(graph_id="g", graph_version=1, request_id="q1", timestamp=T0 + timedelta(days=8),
                                 boosts=(Boost(id="kafka", amount=0.5),)))
    log.append(ingested("g", "t3", {"kafka": 0.5}, minute=1))  # published twice
    return [encode(event) for event in log.log]


LOG = lived_log()


def fold(store: PartitionStore, start: int, stop: int, commits: set[int]) -> PartitionState:
    from emgas.processors.codec import decode_graph_event

    state = PartitionState(store, PARAMS)
    for offset in range(start, stop):
        state.apply(decode_graph_event(LOG[offset]), offset, raw=LOG[offset])
        if offset in commits:
            state.commit()
    return state


def digests(state: PartitionState) -> list:
    return [d.model_dump() for d in partition_digests(state.repo)]


EXPECTED = digests(fold(MemoryStore(), 0, len(LOG), set()))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    commits=st.sets(st.integers(0, len(LOG) - 1), max_size=8),
    crash=st.integers(0, len(LOG)),
)
def test_any_commits_and_a_crash_then_reapplying_gives_the_digest_of_applying_once(commits, crash):
    store = MemoryStore()
    fold(store, 0, crash, commits)  # abandoned: its pending writes are lost
    resumed = PartitionState(store, PARAMS)
    restart = resumed.committed_offset + 1
    assert restart <= crash and restart - 1 in commits | {-1}
    state = fold(store, restart, len(LOG), set())
    state.commit()
    assert digests(state) == EXPECTED
    assert digests(PartitionState(store, PARAMS)) == EXPECTED  # and so does the store alone


def test_redelivered_events_after_a_restart_are_skipped():
    store = MemoryStore()
    fold(store, 0, 20, {9})
    state = PartitionState(store, PARAMS)
    from emgas.processors.codec import decode_graph_event

    assert state.apply(decode_graph_event(LOG[5]), 5) == Outcome.ALREADY_APPLIED
    assert state.apply(decode_graph_event(LOG[10]), 10) != Outcome.ALREADY_APPLIED


def test_a_record_pending_as_values_reads_and_commits_as_its_model():
    """A concept a run of turns left waits as values (`PendingConcept`): read
    as a model, as bytes, scanned or committed, it is the record itself."""
    store = MemoryStore()
    txn = Transaction(store)
    values = ["Pretzel", 3, 0.75, T0, T0 + timedelta(hours=2), T0 + timedelta(hours=1), 1, T0, T0]
    record = concept_record("pretzel", values)
    key = b"c\x00pretzel"
    txn.put(key, PendingConcept("pretzel", values))

    [model] = txn.get_models([key], ConceptState)
    [kept] = txn.get_records([key], ConceptState)
    assert model == record and model == ConceptState.model_validate_json(record.model_dump_json())
    assert isinstance(kept, PendingConcept) and kept.values is values  # the values, not a copy
    assert txn.multi_get([key]) == [record.model_dump_json().encode()] == [txn.get(key)]
    assert list(txn.scan(b"c")) == [(key, record.model_dump_json().encode())]
    txn.commit()
    assert store.get(key) == record.model_dump_json().encode()
    assert concept_values(ConceptState.model_validate_json(store.get(key))) == values


def test_a_read_copy_reads_what_was_pending_when_it_was_made_and_nothing_staged_after():
    store = MemoryStore()
    txn = Transaction(store)
    txn.write({b"a": b"1", b"b": b"2"})
    txn.commit()
    txn.write({b"a": None, b"c": b"3"})
    copy = txn.read_copy()
    txn.write({b"c": b"4", b"d": b"5"})  # staged after the copy: not in it
    assert list(copy.scan(b"")) == [(b"b", b"2"), (b"c", b"3")]
    assert copy.multi_get([b"a", b"c", b"d"]) == [None, b"3", None]
    assert list(txn.scan(b"")) == [(b"b", b"2"), (b"c", b"4"), (b"d", b"5")]


class CountingDeferred:
    """A deferred writer that stages one graph record when settled."""

    def __init__(self, txn: Transaction) -> None:
        self.txn, self.settled = txn, 0

    def settle(self) -> None:
        self.settled += 1
        self.txn.put(b"g\x00g\x001\x00r\x00a", b"row")

    def settle_under(self, prefix: bytes) -> None:
        self.settle()

    def take(self) -> dict[bytes, bytes | None]:
        self.settled += 1
        return {b"g\x00g\x001\x00r\x00a": b"row"}

    def settle_concepts(self, ref, ids) -> None: ...

    def drop(self) -> None: ...


@pytest.mark.parametrize(("prefix", "settles"), [
    (b"g\x00", True), (b"g\x00g\x001\x00", True), (b"", True), (b"g", True),
    (b"d\x00", False), (b"u\x00g\x00", False), (b"x\x00g", False),
])
@pytest.mark.parametrize("read", ["scan", "items"])
def test_only_a_scan_that_can_meet_graph_records_settles_what_was_kept_aside(prefix, settles, read):
    txn = Transaction(MemoryStore())
    deferred = CountingDeferred(txn)
    txn.defer(deferred)
    found = list(txn.scan(prefix)) if read == "scan" else list(txn.items(prefix).items())
    assert deferred.settled == int(settles)
    assert ((b"g\x00g\x001\x00r\x00a", b"row") in found) == settles


def test_a_staged_commit_written_later_keeps_what_was_staged_meanwhile():
    store = CountingStore()
    txn = Transaction(store)
    txn.write({b"a": b"1", b"b": b"2", b"c": None})
    staged = txn.stage_commit({b"offset": b"7"})
    txn.write({b"b": b"3", b"d": b"4"})  # staged while the commit is written elsewhere
    assert store.batches == 0  # staging writes nothing
    staged.write()
    assert dict(store.scan(b"")) == {b"a": b"1", b"b": b"2", b"offset": b"7"} and store.batches == 1
    assert txn.multi_get([b"a", b"b", b"d"]) == [b"1", b"3", b"4"]  # read through the commit
    txn.written(staged)
    assert len(txn) == 2  # b and d: staged again since
    assert list(txn.scan(b"")) == [(b"a", b"1"), (b"b", b"3"), (b"d", b"4"), (b"offset", b"7")]
    txn.commit()
    assert dict(store.scan(b"")) == {b"a": b"1", b"b": b"3", b"d": b"4", b"offset": b"7"} and len(txn) == 0


def test_a_state_committed_in_parts_is_the_state_committed_at_once():
    def folded() -> PartitionState:
        state = PartitionState(MemoryStore(), GraphParams())
        turns = [ingested(f"g{k % 2}", f"t{k}", {"alpha": 0.9, "beta": 0.8, f"c{k % 3}": 0.5}, minute=k) for k in range(6)]
        state.apply_batch([(turn, k, None) for k, turn in enumerate(turns)])
        return state

    at_once, in_parts = folded(), folded()
    at_once.commit()
    assert list(in_parts.settle_steps()) == list(in_parts.views.loaded())
    staged = in_parts.stage_commit()
    assert staged is not None
    staged[0].write()
    in_parts.committed(staged)
    assert not in_parts.uncommitted and in_parts.committed_offset == 5
    assert dict(in_parts.txn.store.scan(b"")) == dict(at_once.txn.store.scan(b""))
    assert in_parts.stage_commit() is None  # nothing left to commit


def test_a_commit_writes_what_was_kept_aside_over_a_pending_write_of_the_same_key():
    """A commit takes what the deferred writers keep aside straight into its
    batch (`Deferred.take`), newer than what was staged before: as settling
    it into the pending writes would."""
    store = CountingStore()
    txn = Transaction(store)
    deferred = CountingDeferred(txn)
    txn.defer(deferred)
    txn.write({b"g\x00g\x001\x00r\x00a": b"staged before", b"b": b"2"})
    txn.commit({b"offset": b"7"})
    assert dict(store.scan(b"")) == {b"g\x00g\x001\x00r\x00a": b"row", b"b": b"2", b"offset": b"7"}
    assert store.batches == 1 and deferred.settled == 1 and len(txn) == 0


def test_a_read_of_one_graph_version_settles_only_what_it_can_meet():
    """A scan settles the views whose concepts and rows it can meet, no
    other: a snapshot marker's read of one graph staged every graph's
    changed records (written again at the commit when they changed meanwhile)."""
    state = PartitionState(MemoryStore(), GraphParams())
    turns = [ingested(f"g{k % 2}", f"t{k}", {"alpha": 0.9, "beta": 0.8, f"c{k % 3}": 0.5}, minute=k) for k in range(6)]
    state.apply_batch([(turn, k, None) for k, turn in enumerate(turns)])
    g0, g1 = sorted(state.views.loaded())
    pending = state.txn._pending

    def staged(ref) -> bool:
        return any(key.startswith(keys.graph_prefix(ref)) and key[len(keys.graph_prefix(ref)):][:1] in b"cr"
                   for key in pending)

    list(state.txn.scan(keys.section(g0, b"j")))  # a journal: no view's records
    assert not staged(g0) and not staged(g1)
    list(state.txn.scan(keys.graph_prefix(g0)))
    assert staged(g0) and not staged(g1)
    list(state.txn.scan(b"g\x00"))  # every graph
    assert staged(g1)
    at_once = PartitionState(MemoryStore(), GraphParams())
    at_once.apply_batch([(turn, k, None) for k, turn in enumerate(turns)])
    state.commit(), at_once.commit()
    assert dict(state.txn.store.scan(b"")) == dict(at_once.txn.store.scan(b""))
