"""Pair rows (`state.rows`): records against the dict reference, and the
per-pair layout of snapshots converted both ways."""

from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.evolve import pair_after
from emgas.processors.graph import GraphRef
from emgas.processors.pruning import PairState
from emgas.processors.dynamics import EPOCH
from emgas.state import keys
from emgas.state.repository import from_us, to_us
from emgas.state.rows import RowLookup, changed_record, changed_row, decode_row, encode_row, upper_pairs
from emgas.state.snapshots import as_pairs, as_rows

IDS = st.sampled_from(["a", "b", "bb", "b\u00e9", "c", "\u732b", "z"])
CO_OCCURRENCE = st.tuples(st.lists(IDS, min_size=1, max_size=4, unique=True).map(lambda ids: tuple(sorted(ids))),
                          st.integers(0, 50))
REMOVAL = st.tuples(IDS, st.none())
ROW = st.dictionaries(IDS, st.tuples(st.integers(1, 9), st.integers(0, 50)), max_size=6)
LONG_IDS = st.sampled_from([f"n{i:03d}" for i in range(80)] + ["a", "b", "\u732b"])


@settings(max_examples=300, deadline=None)
@given(ROW, st.lists(st.one_of(CO_OCCURRENCE, REMOVAL), max_size=8))
def test_a_changed_record_equals_the_changed_dict(row, changes):
    row = {o: v for o, v in row.items() if o != "a"}  # the row of "a" holds no edge with itself
    raw = encode_row(row) if row else None
    expected = changed_row("a", dict(row), changes)
    record = changed_record("a", raw, changes)
    assert (decode_row(record) if record else {}) == expected
    assert record is None or record == encode_row(expected)  # one encoding for one row
    lookup = RowLookup(record)
    assert all(lookup.get(o) == v for o, v in expected.items()) and lookup.get("nope") is None


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=5))
def test_a_co_occurrence_in_a_row_is_pair_after(times):
    """Rows count as the core's rule: c + 1 and the later last time."""
    row, pair = {}, None
    for t in times:
        row = changed_row("a", row, [(("a", "b"), t)])
        pair = pair_after(pair, from_us(t))
    assert PairState(row["b"][0], from_us(row["b"][1])) == pair


def test_snapshots_carry_one_record_per_pair_and_restore_rows():
    ref = GraphRef("g", 1)
    rows = [(keys.row(ref, "a"), encode_row({"b": (2, 5), "c": (1, 7)})),
            (keys.row(ref, "b"), encode_row({"a": (2, 5)})),
            (keys.row(ref, "c"), encode_row({"a": (1, 7)}))]
    other = [(keys.concept(ref, "a"), b"{}"), (keys.passage(ref, "t1"), b"{}")]
    records = sorted(other + rows)
    pairs = as_pairs(records)
    assert pairs == sorted(other + [(keys.pair(ref, "a", "b"), keys.encode_pair(2, 5)),
                                    (keys.pair(ref, "a", "c"), keys.encode_pair(1, 7))])
    assert sorted(as_rows(pairs)) == records
    assert list(upper_pairs([("a", rows[0][1]), ("b", rows[1][1])])) == [("a", "b", 2, 5), ("a", "c", 1, 7)]
    assert to_us(EPOCH) == 0


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(LONG_IDS, st.tuples(st.integers(1, 9), st.integers(0, 50)), min_size=48, max_size=80),
       st.lists(st.one_of(st.tuples(st.lists(LONG_IDS, min_size=1, max_size=4, unique=True)
                                    .map(lambda ids: tuple(sorted(ids))), st.integers(0, 50)),
                          st.tuples(LONG_IDS, st.none())), max_size=12))
def test_a_long_row_changed_in_place_equals_the_changed_dict(row, changes):
    row = {o: v for o, v in row.items() if o != "a"}
    expected = changed_row("a", dict(row), changes)
    record = changed_record("a", encode_row(row), changes)
    assert record == (encode_row(expected) if expected else None)


def test_a_state_of_the_per_pair_format_is_rebuilt_from_the_log_with_one_line(tmp_path, caplog):
    """A partition stored by an older version (format 3: one record per pair)
    is dropped when opened, with one warning, so recovery rebuilds it."""
    import json
    import logging

    from emgas.processors.graph import GraphParams
    from emgas.state.rocks import RocksStore
    from emgas.streams.runtime.partitions import PartitionStates

    old = RocksStore(tmp_path / "partition-0")
    old.write({keys.FORMAT: json.dumps({"format": 3}).encode(), keys.OFFSET: json.dumps({"offset": 41}).encode(),
               keys.pair(GraphRef("g", 1), "a", "b"): keys.encode_pair(2, 5)})
    old.close()
    with caplog.at_level(logging.WARNING, logger="emgas.streams.runtime.partitions"):
        state = PartitionStates(tmp_path, GraphParams()).get(0)
    [line] = [r.getMessage() for r in caplog.records]
    assert line == "state of partition 0 is in format 3, not 4: rebuilding it from the log"
    assert state.applied_offset == -1 and state.repo.graph_refs() == []
    state.close()
