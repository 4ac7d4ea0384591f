"""Snapshots in the log: folding one, starting from one, re-basing onto a new log."""

import base64
import hashlib
import zlib
from datetime import timedelta

import orjson
import pytest

from hypothesis import HealthCheck, given, settings, strategies as st

from emgas.processors.activation import ActivationParams
from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.events import (
    ActivationQuery, Checkpoint, Forget, GraphEvent, LogStarted, Snapshot, SnapshotStarted, TurnIngested,
)
from emgas.processors.extract import ExtractionParams
from emgas.state.digest import partition_digests
from emgas.testing import LocalLog
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from emgas.service.snapshot_writer import SnapshotPolicy
from emgas.state.ledger import LogIdentity
from emgas.state.snapshots import (
    SnapshotMismatch, assemble, graph_content, length_prefixed, pack, snapshot_parts, stored_content, unpack,
)
from emgas.service.steps import PartitionSteps
from tests.support.factories import T0, ingested
from tests.support.factories import FAST, VOCAB

AT = T0 + timedelta(days=500)


def digests(state: PartitionState) -> dict:
    return {(d.graph_id, d.version): d.digest for d in partition_digests(state.repo)}


def folded(log: list[GraphEvent], start: int = 0, state: PartitionState | None = None) -> PartitionState:
    state = state or PartitionState(MemoryStore(), FAST)
    for offset in range(start, len(log)):
        state.apply(decode_graph_event(encode(log[offset])), offset)
    return state


def marker(graph: str, base: bool = False) -> SnapshotStarted:
    return SnapshotStarted(graph_id=graph, reason="rebase" if base else "request", base=base, timestamp=AT)


def parts_of(log: list[GraphEvent], graph: str, as_of: int) -> list[Snapshot]:
    return [e for e in log if isinstance(e, Snapshot) and e.graph_id == graph and e.as_of == as_of]


def zlib_parts(graph: str, as_of: int, records, layout: str, part_bytes: int = 200) -> list[Snapshot]:
    """`records`' parts as `snapshot_parts` wrote them before schema version 3 of
    `Snapshot`: compressed by zlib (at level 1), no digests."""
    body = length_prefixed(records)
    blob = zlib.compress(body, 1)
    chunks = [blob[i : i + part_bytes] for i in range(0, len(blob), part_bytes)]
    return [
        Snapshot(graph_id=graph, as_of=as_of, part=i, parts=len(chunks), data=base64.b64encode(chunk).decode(),
                 layout=layout, compression="zlib", timestamp=AT,
                 content_sha256=hashlib.sha256(body).hexdigest() if i == len(chunks) - 1 else "")
        for i, chunk in enumerate(chunks)
    ]


def as_version(part: Snapshot, version: int) -> Snapshot:
    """`part` as a writer of schema `version` (1 or 2) wrote it, decoded (upcast) again."""
    raw = part.model_dump(mode="json")
    del raw["compression"]
    if version == 1:
        del raw["layout"]
    return decode_graph_event(orjson.dumps({**raw, "schema_version": version}))


def lived(specs, asks, forgets, graphs=("g", "h")) -> LocalLog:
    """A log of turns over two graphs, with retrievals, forgets, ticks and consolidations."""
    log = LocalLog(FAST)
    for i, (concepts, minute) in enumerate(specs):
        graph = graphs[i % len(graphs)]
        log.append(ingested(graph, f"t{i}", concepts, minute))
        if i in asks:
            log.ask(ActivationQuery(request_id=f"q{i}", graph_id=graph, seeds=tuple(concepts)[:1], reply_to="r"),
                    ActivationParams(), ExtractionParams())
        if i in forgets:
            log.append(Forget(graph_id=graph, request_id=f"f{i}", timestamp=AT, turn_ids=(f"t{i}",)))
    return log


def test_records_pack_and_unpack_unchanged():
    records = [(b"a\x00g", b'{"version":1}'), (b"g\x00g\x001\x00m", b""), (b"k" * 300, bytes(range(256)) * 9)]
    assert unpack(pack(records)) == records
    parts = snapshot_parts("g", 4, records, [], AT, part_bytes=100)
    assert len(parts) > 1 and {p.parts for p in parts} == {len(parts)}
    assert {p.compression for p in parts} == {"zstd"}
    assert base64.b64decode(parts[0].data).startswith(b"\x28\xb5\x2f\xfd")  # a zstd frame
    assert assemble(reversed(parts)) == records


def test_a_snapshot_whose_parts_are_compressed_in_different_ways_is_refused():
    records = [(b"g\x00g\x001\x00c\x00%d" % i, b"x" * 40) for i in range(200)]
    parts = snapshot_parts("g", 4, records, [], AT, part_bytes=100)
    older = zlib_parts("g", 4, records, "rows", part_bytes=100)
    assert assemble(older) == records
    with pytest.raises(SnapshotMismatch, match="compressed in different ways"):
        assemble([older[0], *parts[1:]])
    with pytest.raises(SnapshotMismatch, match="do not decompress"):
        assemble([p.model_copy(update={"compression": "zlib"}) for p in parts])


def test_folding_a_snapshot_gives_the_digests_it_carries():
    log = lived([({"kafka": 0.8, "lag": 0.4}, 0), ({"kafka": 0.5, "rust": 0.9}, 60), ({"lag": 0.7}, 90)], {1}, set())
    log.append(marker("g"))
    as_of = len(log.log) - log.log[::-1].index(marker("g")) - 1
    [*parts] = parts_of(log.log, "g", as_of)
    assert parts and parts[-1].digests
    fresh = PartitionState(MemoryStore(), FAST)
    fresh.restore("g", assemble(parts))
    assert {(d.graph_id, d.version): d.digest for d in parts[-1].digests} == digests(fresh)
    assert graph_content(fresh.txn, "g") == graph_content(log.state.txn, "g")


def test_a_version_1_snapshot_in_the_pairs_layout_restores_the_same_graph():
    """Snapshots written before the `rows` layout (schema version 1: a record
    per pair and per link, no layout field) are upcast and converted."""
    log = lived([({"kafka": 0.8, "lag": 0.4}, 0), ({"kafka": 0.5, "rust": 0.9}, 60), ({"lag": 0.7}, 90)], {1}, set())
    old = [as_version(part, 1) for part in zlib_parts("g", 7, graph_content(log.state.txn, "g"), "pairs")]
    assert len(old) > 1 and {p.layout for p in old} == {"pairs"} and {p.compression for p in old} == {"zlib"}
    fresh = PartitionState(MemoryStore(), FAST)
    fresh.restore("g", assemble(old))
    assert digests(fresh) == {k: v for k, v in digests(log.state).items() if k[0] == "g"}
    assert stored_content(fresh.txn, "g") == stored_content(log.state.txn, "g")


def test_a_version_2_snapshot_compressed_by_zlib_restores_the_same_graph():
    """Snapshots written before schema version 3 (no compression field) are
    compressed by zlib: upcast so, and restored from."""
    log = lived([({"kafka": 0.8, "lag": 0.4}, 0), ({"kafka": 0.5, "rust": 0.9}, 60), ({"lag": 0.7}, 90)], {1}, set())
    old = [as_version(part, 2) for part in zlib_parts("g", 7, stored_content(log.state.txn, "g"), "rows")]
    assert len(old) > 1 and {(p.layout, p.compression) for p in old} == {("rows", "zlib")}
    fresh = PartitionState(MemoryStore(), FAST)
    fresh.restore("g", assemble(old))
    assert digests(fresh) == {k: v for k, v in digests(log.state).items() if k[0] == "g"}
    assert stored_content(fresh.txn, "g") == stored_content(log.state.txn, "g")


def test_a_rounds_snapshots_carry_no_digests_and_one_asked_for_does():
    log = lived([({"kafka": 0.8, "lag": 0.4}, 0), ({"kafka": 0.5, "rust": 0.9}, 60)], set(), set())
    log.state.ledger.set_identity(LogIdentity("L", -1))
    log.extend(log.worker.snapshots.start_round(log.state, AT))
    rounds = [e for e in log.log if isinstance(e, Snapshot)]
    assert rounds and {e.layout for e in rounds} == {"rows"} and not any(e.digests for e in rounds)
    log.append(marker("g"))
    asked = [e for e in log.log[len(log.log) - log.log[::-1].index(marker("g")):] if isinstance(e, Snapshot)]
    assert asked[-1].digests == tuple(partition_digests(log.state.repo, "g"))


def checkpoint_of(log: LocalLog) -> tuple[int, Checkpoint]:
    offset, checkpoint = max((o, e) for o, e in enumerate(log.log) if isinstance(e, Checkpoint))
    return offset, checkpoint


def recovered(log: list[GraphEvent], checkpoint: Checkpoint) -> PartitionState:
    """A fresh state started from `checkpoint`, then the log after it."""
    state = PartitionState(MemoryStore(), FAST)
    state.restore_checkpoint(checkpoint, {
        loc.graph_id: [log[o] for o in range(loc.first, loc.last + 1)
                       if isinstance(log[o], Snapshot) and log[o].graph_id == loc.graph_id and log[o].as_of == loc.as_of]
        for loc in checkpoint.snapshots
    })
    return folded(log, state.applied_offset + 1, state)


spec = st.tuples(st.dictionaries(st.sampled_from(VOCAB), st.floats(0.05, 1.0), min_size=1, max_size=4),
                 st.integers(0, 60 * 24 * 20))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(spec, min_size=2, max_size=30), data=st.data())
def test_a_checkpoint_and_the_tail_equal_the_whole_fold(specs, data):
    n = len(specs)
    asks = set(data.draw(st.lists(st.integers(0, n - 1), max_size=5), label="asks"))
    forgets = set(data.draw(st.lists(st.integers(0, n - 1), max_size=3), label="forgets"))
    cut = data.draw(st.integers(1, n - 1), label="checkpoint after this many turns")
    log = lived(specs[:cut], asks, forgets)
    log.state.ledger.set_identity(LogIdentity("L", -1))
    log.extend(log.worker.snapshots.start_round(log.state, AT))
    offset, checkpoint = checkpoint_of(log)
    assert {loc.graph_id for loc in checkpoint.snapshots} == {"g", "h"} & {e.graph_id for e in log.log if isinstance(e, TurnIngested)}
    rest = lived(specs[cut:], {a - cut for a in asks}, {f - cut for f in forgets})
    for event in rest.log:  # the same events again, after the checkpoint: new turn ids
        log.append(event.model_copy(update={"turn_id": "late-" + event.turn_id}) if isinstance(event, TurnIngested) else event)
    whole = folded(log.log)
    assert digests(recovered(log.log, checkpoint)) == digests(whole) == digests(log.state)


def test_a_snapshot_cut_short_by_a_crash_is_ignored():
    log = lived([({"kafka": 0.8, "lag": 0.4}, 0), ({"rust": 0.9, "lag": 0.2}, 30)], set(), set(), graphs=("g",))
    records = graph_content(log.state.txn, "g")
    as_of = len(log.log)
    log.append(marker("g"))
    whole = snapshot_parts("g", as_of, records, [], AT, part_bytes=64)
    assert len(whole) >= 3
    # The writer stopped after two parts (LocalLog served the marker: drop those parts).
    del log.log[as_of + 1:]
    state = folded(log.log)
    outcomes = [state.apply(p, as_of + 1 + i) for i, p in enumerate(whole[:2])]
    assert outcomes == [Outcome.SNAPSHOT_PART, Outcome.SNAPSHOT_PART]
    assert state.ledger.location("g") is None  # incomplete: nothing to start from
    # A later snapshot replaces the abandoned one; late parts of the old one change nothing.
    assert state.apply(marker("g"), as_of + 3) == Outcome.SNAPSHOT_STARTED
    assert state.apply(whole[2], as_of + 4) == Outcome.SNAPSHOT_IGNORED
    fresh = snapshot_parts("g", as_of + 3, records, [], AT)
    assert state.apply(fresh[0], as_of + 5) == Outcome.SNAPSHOT_COMPLETED
    assert state.ledger.location("g").as_of == as_of + 3


def test_a_base_snapshot_makes_a_new_log_fold_to_the_rebased_state():
    """A worker re-bases its state onto a new log that already holds events of
    its graph; every fold of the new log from its beginning gives its state."""
    old = lived([({"kafka": 0.8, "lag": 0.4}, 0), ({"rust": 0.9, "lag": 0.2}, 30)], {1}, set(), graphs=("g",))
    worker = PartitionSteps(old.state, FAST, partition=0, snapshots=SnapshotPolicy(min_bytes=0))
    new_log: list[GraphEvent] = [ingested("g", "n0", {"kafka": 0.3}, 120)]  # published before the re-base
    worker.state.restart_log(LogIdentity("L2", 1))
    new_log += [LogStarted(log_id="L2", partition=0, timestamp=AT), marker("g", base=True),
                ingested("g", "n1", {"go": 0.6}, 150)]
    offset = 0
    while offset < len(new_log):
        _, due = worker.on_graph_event(new_log[offset], offset, AT)
        new_log += due
        offset += 1
    new_log.append(ingested("g", "n2", {"flink": 0.6}, 180))
    worker.on_graph_event(new_log[-1], len(new_log) - 1, AT)
    assert any(isinstance(e, Snapshot) for e in new_log)
    replayed = folded(new_log)
    assert digests(replayed) == digests(worker.state)
    assert replayed.repo.turn_ids(replayed.ref_of(new_log[0])) == {"t0", "t1", "n0", "n1", "n2"}


def test_a_forgotten_turn_is_in_no_snapshot_written_after_the_forget():
    worker_log = LocalLog(FAST)
    worker_log.worker.snapshots.policy = SnapshotPolicy(min_bytes=0)
    worker_log.extend([ingested("g", "t1", {"kafka": 0.8}, text="the secret plan"), ingested("g", "t2", {"lag": 0.5})])
    worker_log.append(marker("g"))
    before = [e for e in worker_log.log if isinstance(e, Snapshot)]
    worker_log.append(Forget(graph_id="g", request_id="f", timestamp=AT, turn_ids=("t1",)))
    forgot_at = max(o for o, e in enumerate(worker_log.log) if isinstance(e, Forget))
    after = [e for e in worker_log.log[forgot_at:] if isinstance(e, Snapshot)]
    assert after, "a forget writes a fresh snapshot"
    assert any(b"the secret plan" in v for _, v in assemble(before))  # the older one still holds it
    for key, value in assemble(after):
        assert b"the secret plan" not in value and (b"t1" not in key or key.startswith(b"x\x00"))


def test_the_owner_snapshots_every_graph_once_enough_history_came_and_then_checkpoints():
    log = LocalLog(FAST)
    log.worker.snapshots.policy = SnapshotPolicy(min_bytes=20_000, ratio=1.0)
    log.state.ledger.set_identity(LogIdentity("L", -1))
    specs = [({VOCAB[i % 6]: 0.8, VOCAB[(i + 1) % 6]: 0.4}, i * 30) for i in range(120)]
    log.extend(lived(specs, set(), set()).log)
    checkpoints = [(o, e) for o, e in enumerate(log.log) if isinstance(e, Checkpoint)]
    assert len(checkpoints) >= 2, "rounds repeat as history grows"
    offset, checkpoint = checkpoints[-1]
    assert {loc.graph_id for loc in checkpoint.snapshots} == {"g", "h"}
    assert all(loc.as_of < offset for loc in checkpoint.snapshots)
    assert digests(recovered(log.log, checkpoint)) == digests(log.state)
    # Every round waits for the history since the last one: not after every event.
    markers = sum(isinstance(e, SnapshotStarted) for e in log.log)
    assert markers <= 2 * len(checkpoints) + 2


def test_no_policy_no_snapshot_but_the_ones_asked_for():
    log = lived([({"kafka": 0.8}, 0), ({"lag": 0.5}, 30)], set(), {1})
    assert not any(isinstance(e, (SnapshotStarted, Snapshot, Checkpoint)) for e in log.log)


def test_a_rebuild_of_one_graph_passes_over_the_logs_own_records():
    from emgas.replay.fold import Selection

    one = Selection(graph_id="g")
    assert not one.wants(LogStarted(log_id="L", partition=0, timestamp=AT))
    assert not one.wants(Checkpoint(log_id="L", partition=0, as_of=3, snapshots=(), timestamp=AT))
    assert one.wants(marker("g")) and not one.wants(marker("h"))


def test_parts_that_are_not_what_their_writer_wrote_are_refused():
    log = lived([({"kafka": 0.8, "lag": 0.4}, 0)], set(), set(), graphs=("g",))
    parts = snapshot_parts("g", 1, graph_content(log.state.txn, "g"), [], AT, part_bytes=40)
    flipped = parts[0].model_copy(update={"data": base64.b64encode(b"\x00" * 40).decode()})
    with pytest.raises(SnapshotMismatch):
        assemble([flipped, *parts[1:]])
    # A base snapshot with such a part is rejected; the graph stays as it was.
    state = folded(log.log)
    before = digests(state)
    assert state.apply(marker("g", base=True), 10) == Outcome.SNAPSHOT_STARTED
    for i, part in enumerate([flipped, *parts[1:]]):
        outcome = state.apply(part.model_copy(update={"as_of": 10}), 11 + i)
    assert outcome == Outcome.REJECTED and digests(state) == before
    assert "hash" in state.repo.rejections()[-1][1]["reason"] or "decompress" in state.repo.rejections()[-1][1]["reason"]


@pytest.mark.parametrize("level", [1, 6, 9])
def test_records_packed_at_any_level_unpack_alike(level):
    records = [(b"g\x00c\x00kafka", b'{"count":3}'), (b"g\x00t\x00t1", "é 中文".encode() * 50), (b"g\x00z", b"")]
    assert unpack(pack(records, level)) == unpack(pack(records)) == records


def test_a_base_snapshots_parts_kept_by_an_earlier_version_complete_through_the_upcast():
    from emgas.state import keys

    log = lived([({"kafka": 0.8, "lag": 0.4}, 0), ({"rust": 0.9, "lag": 0.2}, 30)], set(), set(), graphs=("g",))
    state = folded(log.log)
    before = digests(state)
    parts = zlib_parts("g", 10, graph_content(state.txn, "g"), "pairs")
    assert len(parts) > 1 and state.apply(marker("g", base=True), 10) == Outcome.SNAPSHOT_STARTED
    assert state.apply(parts[0], 11) == Outcome.SNAPSHOT_PART
    kept = parts[0].model_dump(mode="json")
    del kept["layout"], kept["compression"]  # as version 1 wrote it into the state
    state.txn.put(keys.offset_key(keys.graph_keyed(keys.PART, "g"), 0), orjson.dumps({**kept, "schema_version": 1}))
    outcomes = [state.apply(part, 12 + i) for i, part in enumerate(parts[1:])]
    assert outcomes[-1] == Outcome.SNAPSHOT_COMPLETED and digests(state) == before
