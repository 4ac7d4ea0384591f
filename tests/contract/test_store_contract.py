"""One contract suite, run on both stores, and the projector on top of them."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.graph import GraphParams, GraphRef
from emgas.state.errors import StoreClosed
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from emgas.state.rocks import RocksStore
from emgas.state.view import load_view
from tests.support.factories import ingested

G = GraphRef("g", 1)


@pytest.fixture(params=["memory", "rocksdb"])
def make_store(request, tmp_path):
    made = []

    def make(name="p0"):
        store = MemoryStore() if request.param == "memory" else RocksStore(tmp_path / name)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def test_get_missing_is_none(make_store):
    assert make_store().get(b"nope") is None


def test_write_then_get_and_multi_get(make_store):
    store = make_store()
    store.write({b"a": b"1", b"b": b"2"})
    assert store.get(b"a") == b"1"
    assert store.multi_get([b"b", b"zz", b"a"]) == [b"2", None, b"1"]


def test_none_deletes(make_store):
    store = make_store()
    store.write({b"a": b"1"})
    store.write({b"a": None, b"b": b"2"})
    assert store.get(b"a") is None and store.get(b"b") == b"2"


def test_scan_is_prefix_bounded_and_ordered(make_store):
    store = make_store()
    store.write({b"g\x00b": b"2", b"g\x00a": b"1", b"g": b"x", b"h\x00a": b"3", b"f": b"0"})
    assert list(store.scan(b"g\x00")) == [(b"g\x00a", b"1"), (b"g\x00b", b"2")]
    assert list(store.scan(b"zz")) == []


@pytest.mark.parametrize(("start", "expected"), [
    (None, [b"g\x00a", b"g\x00b", b"g\x00c"]),
    (b"g\x00b", [b"g\x00b", b"g\x00c"]),  # from the first key not below start
    (b"g\x00ba", [b"g\x00c"]),
    (b"g", [b"g\x00a", b"g\x00b", b"g\x00c"]),  # below the prefix: from the prefix
    (b"g\x01", []),
])
def test_scan_from_a_start_key(make_store, start, expected):
    store = make_store()
    store.write({b"g\x00b": b"2", b"g\x00a": b"1", b"g\x00c": b"3", b"g": b"x", b"h\x00a": b"4"})
    assert [key for key, _ in store.scan(b"g\x00", start)] == expected


@pytest.mark.parametrize(("prefix", "expected"), [
    (b"g\x00", [b"g\x00", b"g\x00\xff", b"g\x00\xff\xff"]),
    (b"g\x00\xff", [b"g\x00\xff", b"g\x00\xff\xff"]),  # a prefix ending in 0xff: b"g\x01" is past it
    (b"\xff", [b"\xff", b"\xff\x00"]),  # a prefix of 0xff only: no key is past all of its keys
    (b"", [b"f", b"g", b"g\x00", b"g\x00\xff", b"g\x00\xff\xff", b"g\x01", b"\xff", b"\xff\x00"]),
])
def test_scan_stops_at_the_prefix_whatever_its_last_bytes(make_store, prefix, expected):
    store = make_store()
    keys = [b"f", b"g", b"g\x00", b"g\x00\xff", b"g\x00\xff\xff", b"g\x01", b"\xff", b"\xff\x00"]
    store.write({key: key for key in keys})
    assert [key for key, _ in store.scan(prefix)] == expected


@settings(max_examples=60, deadline=None)
@given(st.sets(st.binary(max_size=4), max_size=20), st.binary(max_size=3), st.one_of(st.none(), st.binary(max_size=4)))
def test_scan_is_every_key_with_the_prefix_from_the_start_in_order(tmp_path_factory, keys, prefix, start):
    expected = sorted(k for k in keys if k.startswith(prefix) and (start is None or k >= start))
    for store in (MemoryStore(), RocksStore(tmp_path_factory.mktemp("scan") / "s")):
        try:
            store.write({key: key[::-1] for key in keys})
            assert list(store.scan(prefix, start)) == [(k, k[::-1]) for k in expected]
        finally:
            store.close()


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.binary(max_size=4), st.binary(max_size=3), max_size=20), st.binary(max_size=3))
def test_items_are_the_scan_by_key(tmp_path_factory, records, prefix):
    for store in (MemoryStore(), RocksStore(tmp_path_factory.mktemp("items") / "s")):
        try:
            store.write(records)
            assert store.items(prefix) == dict(store.scan(prefix)) == {k: v for k, v in records.items() if k.startswith(prefix)}
        finally:
            store.close()


def test_empty_value_is_a_value(make_store):
    store = make_store()
    store.write({b"k": b""})
    assert store.get(b"k") == b"" and list(store.scan(b"k")) == [(b"k", b"")]


def test_closed_store_refuses_use(make_store):
    store = make_store()
    store.close()
    with pytest.raises(StoreClosed):
        store.get(b"a")


def test_projector_applies_once_and_tracks_offset(make_store):
    state = PartitionState(make_store(), GraphParams())
    event = ingested("g", "t1", {"kafka": 0.9, "lag": 0.5})
    assert state.apply(event, 0) is Outcome.APPLIED
    assert state.apply(event, 0) is Outcome.ALREADY_APPLIED  # redelivery
    assert state.apply(event, 1) is Outcome.DUPLICATE_TURN  # published twice
    assert state.applied_offset == 1
    assert state.repo.turns(G) == 1
    assert state.repo.concepts(G, ["kafka"])["kafka"].count == 1


def test_state_survives_reopen_and_view_is_rebuilt_equal(make_store):
    store = make_store()
    state = PartitionState(store, GraphParams())
    events = [
        ingested("g", "t1", {"kafka": 0.9, "lag": 0.5}),
        ingested("g", "t2", {"kafka": 0.4, "postgres": 0.7}, minute=5),
        ingested("h", "t1", {"cat": 0.9}),
    ]
    for offset, e in enumerate(events):
        state.apply(e, offset)
    rebuilt = load_view(state.repo, G, GraphParams().decay)
    live = state.views[G]
    assert rebuilt.turns == live.turns == 2
    assert sorted(rebuilt.ids) == sorted(live.ids)
    for cid in live.ids:
        i, j = live.index[cid], rebuilt.index[cid]
        assert rebuilt.counts[j] == live.counts[i]
        assert sorted(rebuilt.passage_ids[j]) == sorted(live.passage_ids[i])
        got = dict(zip(rebuilt.ids_of(rebuilt.neighbour_counts(j)[0]), rebuilt.neighbour_counts(j)[1]))
        want = dict(zip(live.ids_of(live.neighbour_counts(i)[0]), live.neighbour_counts(i)[1]))
        assert got == want
    assert state.repo.graph_refs() == [G, GraphRef("h", 1)]
    assert "cat" not in live.index  # graphs never share nodes


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["t1", "t2", "t3", "t4"]), st.sets(st.sampled_from("abcde"), min_size=1)),
        min_size=1,
        max_size=12,
    )
)
def test_duplicates_never_change_counts(turns):
    state = PartitionState(MemoryStore(), GraphParams())
    first_seen: dict[str, set] = {}
    for offset, (turn_id, concepts) in enumerate(turns):
        state.apply(ingested("g", turn_id, {c: 0.5 for c in sorted(concepts)}), offset)
        first_seen.setdefault(turn_id, concepts)
    assert state.repo.turns(G) == len(first_seen)
    for c in "abcde":
        expected = sum(1 for cs in first_seen.values() if c in cs)
        got = state.repo.concepts(G, [c]).get(c)
        assert (got.count if got else 0) == expected
