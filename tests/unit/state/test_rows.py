"""Pair rows (`state.rows`): records against the dict reference, and the
per-pair layout of snapshots converted both ways."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors.evolve import pair_after
from emgas.processors.graph import GraphRef
from emgas.processors.pruning import PairState
from emgas.processors.dynamics import EPOCH
from emgas.state import keys
from emgas.state.repository import STATE_FORMAT
from emgas.state.repository import from_us, to_us
from emgas.processors.writes import CoOccur, RemoveConcept, RemovePairs
from emgas.state.rows import RowLookup, changed_row, encode_row, upper_arrays, upper_pairs
from emgas.state.view import GraphView
from emgas.processors.dynamics import DecayParams
from emgas.state.snapshots import as_pairs, as_rows

IDS = st.sampled_from(["a", "b", "bb", "b\u00e9", "c", "\u732b", "z"])
CO_OCCURRENCE = st.tuples(st.lists(IDS, min_size=1, max_size=4, unique=True).map(lambda ids: tuple(sorted(ids))),
                          st.integers(0, 50))
REMOVAL = st.tuples(IDS, st.none())


ALL_IDS = ["a", "b", "bb", "b\u00e9", "c", "\u732b", "z"]
SETTLE = st.tuples(st.just("settle"), st.none())
GONE = st.tuples(st.just("gone"), IDS)  # a concept removed with its edges (mentioned again: a new slot)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(CO_OCCURRENCE, REMOVAL.map(lambda r: (tuple(sorted({r[0], "a"})), None)), SETTLE, GONE),
                max_size=16))
def test_the_rows_a_view_keeps_are_written_as_the_changed_dicts(operations):
    """Pair rows are kept by the view's adjacency and written when the
    transaction settles (`GraphView.row_records`): whenever that happens,
    each record written is `encode_row` of the reference row (`changed_row`)
    less its entries before its own id (each edge in its lower end's row),
    and a row is deleted only where one was written."""
    view = GraphView(GraphRef("g", 1), DecayParams())
    for cid in ALL_IDS:
        view.node(cid, cid)
    reference: dict[str, dict] = {cid: {} for cid in ALL_IDS}
    stored: dict[str, bytes | None] = {}

    def settle() -> None:
        for cid, record in view.row_records().items():
            assert record is not None or stored.get(cid) is not None, f"{cid}: a row never written deleted"
            stored[cid] = record

    for what, at in operations:
        if what == "settle":
            settle()
        elif what == "gone":
            if at in view.index:
                view.apply(RemoveConcept(at))
            reference = {cid: changed_row(cid, row, [(at, None)]) for cid, row in reference.items()}
            reference[at] = {}
        elif at is None:  # the edge between the two ids goes
            if len(what) == 2:
                view.apply_all([RemovePairs((what,))])
                reference[what[0]] = changed_row(what[0], reference[what[0]], [(what[1], None)])
                reference[what[1]] = changed_row(what[1], reference[what[1]], [(what[0], None)])
        else:
            for cid in what:
                view.node(cid, cid)  # mentioned again after its removal: a new slot
            view.apply(CoOccur(what, from_us(at)))
            for cid in what:
                reference[cid] = changed_row(cid, reference[cid], [(what, at)])
    settle()
    upper = {cid: {o: v for o, v in row.items() if o > cid} for cid, row in reference.items()}
    assert {cid: record for cid, record in stored.items() if record is not None} == \
        {cid: encode_row(row) for cid, row in upper.items() if row}
    lookup = {cid: RowLookup(stored.get(cid)) for cid in ALL_IDS}
    assert all(lookup[cid].get(o) == v for cid, row in upper.items() for o, v in row.items())


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
    upper = [(keys.row(ref, "a"), encode_row({"b": (2, 5), "c": (1, 7)}))]  # each edge in its lower end's row
    rows = upper + [(keys.row(ref, "b"), encode_row({"a": (2, 5)})),  # and in both, as earlier versions wrote them
                    (keys.row(ref, "c"), encode_row({"a": (1, 7)}))]
    other = [(keys.concept(ref, "a"), b"{}"), (keys.passage(ref, "t1"), b"{}")]
    pairs = as_pairs(sorted(other + rows))
    assert pairs == as_pairs(sorted(other + upper)) == sorted(other + [
        (keys.pair(ref, "a", "b"), keys.encode_pair(2, 5)), (keys.pair(ref, "a", "c"), keys.encode_pair(1, 7))])
    assert sorted(as_rows(pairs)) == sorted(other + upper)
    assert list(upper_pairs([("a", rows[0][1]), ("b", rows[1][1])])) == [("a", "b", 2, 5), ("a", "c", 1, 7)]
    assert to_us(EPOCH) == 0


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
    assert line == f"state of partition 0 is in format 3, not {STATE_FORMAT}: rebuilding it from the log"
    assert state.applied_offset == -1 and state.repo.graph_refs() == []
    state.close()


EDGES = st.dictionaries(
    st.tuples(IDS, IDS).filter(lambda e: e[0] < e[1]), st.tuples(st.integers(1, 2**40), st.integers(0, 2**62)),
    max_size=20,
)


@settings(max_examples=200, deadline=None)
@given(EDGES)
def test_upper_arrays_are_upper_pairs_as_arrays(edges):
    rows: dict[str, dict[str, tuple[int, int]]] = {}
    for (a, b), value in edges.items():
        rows.setdefault(a, {})[b] = value
        rows.setdefault(b, {})[a] = value
    records = [(cid, encode_row(rows[cid])) for cid in sorted(rows)]  # each edge in both ends' rows
    uppers = [(cid, encode_row({o: v for o, v in rows[cid].items() if o > cid})) for cid in sorted(rows)]
    index = {cid: k for k, cid in enumerate(reversed(ALL_IDS))}  # numbered in another order than the ids'
    a, b, counts, lasts = upper_arrays(records, index)
    expected = list(upper_pairs(records))
    assert expected == list(upper_pairs(uppers)) == sorted((a, b, *v) for (a, b), v in edges.items())
    assert [(index[x], index[y], c, t) for x, y, c, t in expected] == list(
        zip(a.tolist(), b.tolist(), counts.tolist(), lasts.tolist()))
    assert all(np.array_equal(x, y) for x, y in zip(upper_arrays(uppers, index), (a, b, counts, lasts)))
    assert {a.dtype, b.dtype, counts.dtype, lasts.dtype} == {np.dtype(np.int64)}


def test_a_view_without_concepts_writes_no_record_and_ranks_nothing():
    """A view left without a concept (a forget of every turn), its columns
    still marked changed, encodes no concept and no row (the fold property
    found a commit that failed here: ranking an empty view's ids)."""
    view = GraphView(GraphRef("g", 1), DecayParams())
    view.columns.any_unwritten = True
    assert view.encoded_concepts() == {} and view.row_records() == {}
