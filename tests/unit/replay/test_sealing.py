"""Sealing a turn's words in the log (`processors.sealing`), opening them
with the keys of the key topic (`replay.keyring`), and folding a log whose
forgotten turns' keys are gone."""

import asyncio
import base64
import os
import stat
from datetime import timedelta

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pydantic import SecretStr

from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.events import Forget, Sealed, TurnIngested
from emgas.processors.sealing import (
    Envelope, KeyEncryptionKey, SealError, envelope_of, is_sealed, key_record_key, key_set_of, open_sealed, seal,
    snapshot_of_key_id, turn_key_id, turn_of_key_id,
)
from emgas.replay.fold import FoldCounts, Selection, fold_records
from emgas.replay.errors import LogUnavailable
from emgas.replay.keyring import KeyRing, KeysUnavailable
from emgas.replay.reader import LogRecord
from emgas.state.digest import partition_digests
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from emgas.streams.errors import ConfigError
from emgas.streams.kek import load_kek
from emgas.testing import LocalLog
from tests.support.factories import FAST, T0, VOCAB, ingested
from tests.support.key_topic import TOPIC, KeyTopic

KEK = KeyEncryptionKey(bytes(range(32)))
ASKED = T0 + timedelta(days=400)


def envelope(event: TurnIngested, n: int = 0) -> Envelope:
    return Envelope(event.graph_id, turn_key_id(event.turn_id, "a1", n), "turn_ingested", event.timestamp.isoformat())


def sealed_turn(event: TurnIngested, data_key: bytes, n: int = 0) -> bytes:
    return seal(encode(event), envelope(event, n), data_key, os.urandom(12))


def key_set(keys: dict[str, bytes], kek: KeyEncryptionKey = KEK, graph: str = "g") -> tuple[bytes, bytes]:
    """A key set's record (key, value) holding `keys` (key id -> data key) of the batch "a1"."""
    record_key = key_record_key(graph, "turn/a1")
    return record_key, kek.seal_keys(record_key, keys, os.urandom(12))


# -- sealing and opening ---------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(body=st.binary(max_size=3000), graph=st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1),
       turn=st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1))
def test_what_is_sealed_opens_to_the_same_bytes_under_its_key_and_envelope(body, graph, turn):
    key = os.urandom(32)
    raw = seal(body, Envelope(graph, turn_key_id(turn, "t0", 3), "turn_ingested", "2026-01-01T00:00:00+00:00"), key,
               os.urandom(12))
    assert is_sealed(raw)
    envelope, data = envelope_of(raw)
    assert (envelope.graph_id, turn_of_key_id(envelope.key_id)) == (graph, turn)
    assert open_sealed(envelope, data, key) == body


def test_a_sealed_turn_shows_only_its_envelope():
    event = ingested("g", "t1", {"secret": 0.9}, text="my secret locker code")
    raw = sealed_turn(event, os.urandom(32))
    assert b"secret" not in raw and b"locker" not in raw
    model = decode_graph_event(raw)  # a reader without its key sees a valid event, with nothing in clear
    assert isinstance(model, Sealed) and model.graph_id == "g" and turn_of_key_id(model.key_id) == "t1"
    assert model.timestamp == event.timestamp


@pytest.mark.parametrize("change, flip", [
    ({"graph_id": "other"}, None),  # moved to another graph
    ({"key_id": "turn/a1.0/t2"}, None),  # or to another turn
    ({"sealed_type": "snapshot"}, None),  # or passed off as another kind of record
    ({}, 20),  # or its sealed bytes tampered with
    ({}, -1),  # (its tag)
])
def test_a_sealed_record_moved_or_tampered_with_does_not_open(change, flip):
    key = os.urandom(32)
    header, _, sealed = sealed_turn(ingested("g", "t1", {"kafka": 0.5}), key).partition(b"\n")
    if flip is not None:
        sealed = bytearray(sealed)
        sealed[flip] ^= 1
    envelope, data = envelope_of(orjson.dumps({**orjson.loads(header), **change}) + b"\n" + bytes(sealed))
    with pytest.raises(SealError):
        open_sealed(envelope, data, key)


def test_a_record_that_is_not_a_sealed_one_is_refused_as_such():
    for raw in (b'{"type":"sealed"}', b'{"type":"sealed","graph_id":"g","key_id":"k","sealed_type":"turn_ingested",'
                b'"timestamp":"t"}', b'{"type":"sealed",\n'):
        with pytest.raises(SealError, match="not a sealed event"):
            envelope_of(raw)


def test_another_data_key_does_not_open_it():
    raw = sealed_turn(ingested("g", "t1", {"kafka": 0.5}), os.urandom(32))
    with pytest.raises(SealError):
        open_sealed(*envelope_of(raw), os.urandom(32))


@pytest.mark.parametrize("key_id, turn, key_set", [
    ("turn/ab12.0/t1", "t1", "turn/ab12"), ("turn/ab12.7/a/b/c", "a/b/c", "turn/ab12"),
    ("snapshot/120", None, "snapshot/120"), ("turn/ab12.1/", "", "turn/ab12"),
])
def test_a_turns_key_id_names_its_turn_and_its_batchs_key_set(key_id, turn, key_set):
    assert (turn_of_key_id(key_id), key_set_of(key_id)) == (turn, key_set)


@pytest.mark.parametrize("key_id, as_of", [
    ("snapshot/120/ab12", 120), ("snapshot/0/x", 0), ("turn/ab12.0/120", None), ("snapshot/x/y", None),
])
def test_a_snapshots_key_id_names_its_offset(key_id, as_of):
    assert snapshot_of_key_id(key_id) == as_of


def test_a_key_set_opens_under_its_key_encryption_key_and_record_key_only():
    keys = {turn_key_id("t1", "a1", 0): os.urandom(32), turn_key_id("t/2", "a1", 1): os.urandom(32)}
    record_key, value = key_set(keys)
    assert KEK.open_keys(record_key, value) == keys and not any(k in value for k in keys.values())
    with pytest.raises(SealError, match=f"key-encryption key {KEK.fingerprint}, not this one"):
        KeyEncryptionKey(bytes(32)).open_keys(record_key, value)
    with pytest.raises(SealError, match="do not open"):
        KEK.open_keys(key_record_key("h", "turn/a1"), value)  # moved to another graph's set
    with pytest.raises(SealError, match="not a key record"):
        KEK.open_keys(record_key, b"{}")
    assert KEK.open_keys(*key_set({})) == {}
    assert KEK.secret.hex() not in repr(KEK)


# -- the key-encryption key ------------------------------------------------------------


def test_the_default_key_encryption_key_is_made_once_readable_by_its_owner_only(tmp_path):
    assert load_kek(None, None, tmp_path, create=False) is None
    made = load_kek(None, None, tmp_path, create=True)
    assert made is not None and load_kek(None, None, tmp_path, create=True) == made
    assert stat.S_IMODE((tmp_path / "key-encryption-key").stat().st_mode) == 0o600


def test_a_configured_key_encryption_key_comes_from_the_setting_or_its_file(tmp_path):
    text = base64.b64encode(bytes(range(32))).decode()
    (tmp_path / "kek").write_text(text + "\n")
    assert load_kek(SecretStr(text), None, tmp_path, create=True) == KEK
    assert load_kek(None, tmp_path / "kek", tmp_path, create=True) == KEK
    assert not (tmp_path / "key-encryption-key").exists()  # none made beside a configured one


@pytest.mark.parametrize("secret, file, message", [
    ("c2hvcnQ=", None, "base64 of 32 bytes"),
    ("not base64!", None, "base64 of 32 bytes"),
    (base64.b64encode(bytes(32)).decode(), "kek", "not both"),
    (None, "missing", "does not exist"),
])
def test_an_unusable_key_encryption_key_is_a_config_error(tmp_path, secret, file, message):
    (tmp_path / "kek").write_text(base64.b64encode(bytes(32)).decode())
    with pytest.raises(ConfigError, match=message):
        load_kek(SecretStr(secret) if secret else None, tmp_path / file if file else None, tmp_path, create=True)


# -- the key ring ----------------------------------------------------------------------


def records_of(values: list[bytes]) -> list[LogRecord]:
    return [LogRecord(0, k, 0, b"g", value) for k, value in enumerate(values)]


def opened(ring: KeyRing, values: list[bytes]) -> list[bytes]:
    """What `ring` opens of one partition's record values (written long ago)."""
    return asyncio.run(ring.open(0, values, lambda k: 0))


def test_the_ring_opens_sealed_records_with_the_keys_it_reads_and_leaves_the_rest():
    event, data_key = ingested("g", "t1", {"kafka": 0.5}), os.urandom(32)
    sealed = sealed_turn(event, data_key)
    plain = encode(ingested("g", "t2", {"lag": 0.5}))
    topic = KeyTopic([key_set({envelope(event).key_id: data_key})])
    ring = KeyRing(KEK, TOPIC, topic)
    assert opened(ring, [sealed, plain]) == [encode(event), plain]
    assert opened(ring, [sealed]) == [encode(event)]
    assert topic.reads == 1  # the key was held after the first read


def test_a_record_whose_key_was_erased_stays_sealed_and_folds_to_nothing():
    event, data_key = ingested("g", "t1", {"kafka": 0.5}), os.urandom(32)
    other = ingested("g", "t2", {"lag": 0.5})
    written = key_set({envelope(event).key_id: data_key, envelope(other, 1).key_id: os.urandom(32)})
    rewritten = key_set({envelope(other, 1).key_id: os.urandom(32)})  # t1 forgotten: its set again without its key
    ring = KeyRing(KEK, TOPIC, KeyTopic([written, rewritten]))
    [value] = opened(ring, [sealed_turn(event, data_key)])
    assert is_sealed(value) and ring.erased == 1
    state = PartitionState(MemoryStore(), FAST)
    assert state.apply(decode_graph_event(value), 0) is Outcome.ERASED
    assert not list(partition_digests(state.repo))


def test_sealed_records_without_a_key_encryption_key_are_refused_not_skipped():
    ring = KeyRing(None, TOPIC, KeyTopic([]))
    plain = [encode(ingested("g", "t2", {"lag": 0.5}))]
    assert opened(ring, plain) == plain
    with pytest.raises(KeysUnavailable, match="no key-encryption key"):
        opened(ring, [sealed_turn(ingested("g", "t1", {"k": 0.5}), os.urandom(32))])


def test_keys_wrapped_by_another_key_encryption_key_are_refused():
    data_key = os.urandom(32)
    topic = KeyTopic([key_set({turn_key_id("t1", "a1", 0): data_key}, KeyEncryptionKey(bytes(32)))])
    with pytest.raises(KeysUnavailable, match="not this one"):
        opened(KeyRing(KEK, TOPIC, topic), [sealed_turn(ingested("g", "t1", {"k": 0.5}), data_key)])


def test_keys_read_ahead_open_the_records_without_another_read():
    event, data_key = ingested("g", "t1", {"kafka": 0.5}), os.urandom(32)
    topic = KeyTopic([key_set({envelope(event).key_id: data_key})])
    ring = KeyRing(KEK, TOPIC, topic)
    asyncio.run(ring.prefetch(0))
    assert topic.reads == 1
    assert opened(ring, [sealed_turn(event, data_key)]) == [encode(event)]
    assert topic.reads == 1  # the partition's end was read ahead: nothing after it to read


class _Unreachable(KeyTopic):
    async def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        raise LogUnavailable("the broker is away")


def test_a_read_ahead_that_fails_is_left_to_the_read_that_needs_the_keys():
    ring = KeyRing(KEK, TOPIC, _Unreachable([]))
    asyncio.run(ring.prefetch(0))  # nothing raised: the first sealed record's own read says why
    with pytest.raises(LogUnavailable, match="away"):
        opened(ring, [sealed_turn(ingested("g", "t1", {"k": 0.5}), os.urandom(32))])


def test_no_keys_are_read_ahead_without_a_key_encryption_key():
    topic = KeyTopic([key_set({turn_key_id("t1", "a1", 0): os.urandom(32)})])
    asyncio.run(KeyRing(None, TOPIC, topic).prefetch(0))
    assert topic.reads == 0


def test_keys_written_here_open_without_reading_the_topic():
    event, data_key = ingested("g", "t1", {"kafka": 0.5}), os.urandom(32)
    topic = KeyTopic([])
    ring = KeyRing(KEK, TOPIC, topic)
    ring.add(0, *key_set({envelope(event).key_id: data_key}))
    assert opened(ring, [sealed_turn(event, data_key)]) == [encode(event)]
    assert topic.reads == 0


# -- a log whose forgotten turns' keys are gone ---------------------------------------------


turn_specs = st.lists(
    st.tuples(st.dictionaries(st.sampled_from(VOCAB), st.floats(0.1, 1.0), min_size=1, max_size=3),
              st.integers(0, 6 * 24 * 60)),
    min_size=2, max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=turn_specs, data=st.data())
def test_a_log_replayed_after_its_forgotten_turns_keys_are_erased_equals_the_live_graph(specs, data):
    """Every turn sealed; some forgotten, at any point, their keys then
    erased: the log folds, from its beginning, to the graph the live fold
    made and to one whose log never held the turns."""
    events = [ingested("g", f"t{i}", concepts, minute) for i, (concepts, minute) in enumerate(specs)]
    forgotten = data.draw(st.lists(st.sampled_from([e.turn_id for e in events]), min_size=1, unique=True))
    at = data.draw(st.integers(0, len(events)))
    log = LocalLog(FAST)
    log.extend(events[:at])
    log.append(forget("g", *forgotten))
    log.extend(events[at:])
    keys, values = {}, []
    for n, event in enumerate(log.log):
        if isinstance(event, TurnIngested):
            keys[envelope(event, n).key_id] = os.urandom(32)
            values.append(sealed_turn(event, keys[envelope(event, n).key_id], n))
        else:
            values.append(encode(event))
    kept = {key_id: data_key for key_id, data_key in keys.items() if turn_of_key_id(key_id) not in forgotten}
    ring = KeyRing(KEK, TOPIC, KeyTopic([key_set(keys), key_set(kept)]))  # the set written, then without them
    replayed = PartitionState(MemoryStore(), FAST)
    fold_records(replayed, records_of(opened(ring, values)), Selection(),
                 FoldCounts())
    never = PartitionState(MemoryStore(), FAST)
    for offset, event in never_saw(log.log, set(forgotten)):
        never.apply(event, offset)
    assert digest_map(replayed) == digest_map(log.state) == digest_map(never)
    assert ring.erased == sum(isinstance(e, TurnIngested) and e.turn_id in forgotten for e in log.log)
    assert any(isinstance(e, Forget) for e in log.log)


def forget(graph: str, *turn_ids: str) -> Forget:
    return Forget(graph_id=graph, request_id="f1", timestamp=ASKED, turn_ids=turn_ids)


def never_saw(log: list, forgotten: set[str]) -> list:
    """The log without the forgotten turns and the forget request, at the same offsets."""
    return [(offset, event) for offset, event in enumerate(log)
            if not isinstance(event, Forget) and not (isinstance(event, TurnIngested) and event.turn_id in forgotten)]


def digest_map(state: PartitionState) -> dict:
    return {(d.graph_id, d.version): d.digest for d in partition_digests(state.repo)}


def test_the_rings_opened_keys_are_a_cache_it_empties_past_its_bound(monkeypatch):
    monkeypatch.setattr("emgas.replay.keyring.OPENED_HELD", 1)
    turns = [ingested(graph, "t1", {"kafka": 0.5}) for graph in ("g", "h", "i")]
    keys = [os.urandom(32) for _ in turns]
    ring = KeyRing(KEK, TOPIC, KeyTopic([key_set({envelope(t).key_id: k}, graph=t.graph_id) for t, k in zip(turns, keys)]))
    for _ in range(2):  # each set opened again once the others' keys pushed it out
        assert opened(ring, [sealed_turn(t, k) for t, k in zip(turns, keys)]) == [encode(t) for t in turns]
        assert len(ring._flat) <= 2  # the bound, and the set opened last


def test_workers_making_the_default_key_at_once_all_read_the_same_whole_one(tmp_path):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    start = threading.Barrier(8)

    def make() -> bytes:
        start.wait()  # all at once, as workers started together on one home
        made = load_kek(None, None, tmp_path, create=True)
        assert made is not None
        return made.secret

    with ThreadPoolExecutor(8) as pool:
        keys = list(pool.map(lambda _: make(), range(8)))
    assert len(set(keys)) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["key-encryption-key"]  # no draft left behind
