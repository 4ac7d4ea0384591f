"""The compact adjacency against a dict-of-dicts reference, on random operations."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.state.adjacency import Adjacency

N = 12
op = st.one_of(
    st.tuples(st.just("clique"), st.lists(st.integers(0, N - 1), min_size=0, max_size=6), st.integers(1, 3)),
    st.tuples(st.just("add"), st.integers(0, N - 1), st.integers(0, N - 1), st.integers(1, 5)),
    st.tuples(st.just("remove"), st.integers(0, N - 1), st.integers(0, N - 1)),
    st.tuples(st.just("clear"), st.integers(0, N - 1)),
    st.tuples(st.just("remove_many"), st.sets(st.tuples(st.integers(0, N - 1), st.integers(0, N - 1)), max_size=6)),
    st.tuples(st.just("read"), st.integers(0, N - 1)),  # merges the queued cliques
    st.tuples(st.just("find"), st.sets(st.tuples(st.integers(0, N - 1), st.integers(0, N - 1)), max_size=6)),
    st.tuples(st.just("compact")),  # folds changed rows back into one CSR
)


def apply_reference(ref: dict[int, dict[int, int]], operation: tuple) -> None:
    kind = operation[0]
    if kind == "clique":
        members = sorted(set(operation[1]))
        for a in members:
            for b in members:
                if a != b:
                    ref[a][b] = ref[a].get(b, 0) + operation[2]
    elif kind == "add" and operation[1] != operation[2]:
        _, a, b, c = operation
        ref[a][b] = ref[a].get(b, 0) + c
        ref[b][a] = ref[b].get(a, 0) + c
    elif kind == "remove":
        ref[operation[1]].pop(operation[2], None)
        ref[operation[2]].pop(operation[1], None)
    elif kind == "remove_many":
        for a, b in _distinct_pairs(operation[1]):
            ref[a].pop(b, None)
            ref[b].pop(a, None)
    elif kind == "clear":
        for j in ref[operation[1]]:
            ref[j].pop(operation[1], None)
        ref[operation[1]] = {}


def _distinct_pairs(pairs: set) -> list[tuple[int, int]]:
    """Each unordered pair once, ends distinct (what a tick's removals are)."""
    return sorted({(min(a, b), max(a, b)) for a, b in pairs if a != b})


def new_edges(ref: dict[int, dict[int, int]], members: list[int]) -> int:
    """Pairs of `members` that are not edges of `ref` yet (what the fold knows)."""
    distinct = sorted(set(members))
    return sum(1 for k, a in enumerate(distinct) for b in distinct[k + 1:] if b not in ref[a])


def apply_compact(adj: Adjacency, operation: tuple, known: int | None = None) -> None:
    kind = operation[0]
    if kind == "clique":
        adj.add_clique(operation[1], operation[2], new_edges=known if operation[2] == 1 else None)
    elif kind == "add" and operation[1] != operation[2]:
        adj.add(operation[1], operation[2], operation[3])
    elif kind == "remove":
        adj.remove(operation[1], operation[2])
    elif kind == "remove_many":
        pairs = _distinct_pairs(operation[1])
        adj.remove_many(np.array([a for a, _ in pairs], dtype=np.int32), np.array([b for _, b in pairs], dtype=np.int32))
    elif kind == "clear":
        adj.clear(operation[1])
    elif kind == "read":
        adj.row(operation[1])
    elif kind == "compact":
        adj.compact()


@settings(max_examples=200, deadline=None)
@given(st.lists(op, max_size=40))
def test_compact_rows_equal_the_reference(operations):
    check_against_reference(operations)


def check_against_reference(operations: list) -> None:
    ref: dict[int, dict[int, int]] = {i: {} for i in range(N)}
    adj = Adjacency()
    reported, created = [], []  # edges a merge said it created; edges a queued turn created
    adj.on_new_edges = lambda a, b, at: reported.extend(zip(a.tolist(), b.tolist()))
    for _ in range(N):
        adj.add_node()
    for k, operation in enumerate(operations):
        known = new_edges(ref, operation[1]) if operation[0] == "clique" and k % 2 else None
        if operation[0] == "clique" and operation[2] == 1:
            members = sorted(set(operation[1]))
            created += [(a, b) for i, a in enumerate(members) for b in members[i + 1:] if b not in ref[a]]
        apply_reference(ref, operation)
        apply_compact(adj, operation, known)
        if operation[0] == "read":  # exact, with cliques queued or not
            idx, cnt = adj.row(operation[1])
            assert dict(zip(idx.tolist(), cnt.tolist())) == ref[operation[1]]
        elif operation[0] == "find":
            pairs = sorted(operation[1])
            found, counts, _ = adj.find(np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]))
            assert [(bool(f), int(c)) for f, c in zip(found, counts)] == [
                (b in ref[a], ref[a].get(b, 0)) for a, b in pairs
            ]
    _ = adj.edges  # reading them merges what is still queued
    for minimum in (1, 2, 3):
        rows, others, counts = adj.entries_at_least(minimum)
        entries = sorted(zip(rows.tolist(), others.tolist(), counts.tolist()))
        assert entries == sorted((i, j, c) for i in ref for j, c in ref[i].items() if c >= minimum)
    for i in range(N):
        idx, cnt = adj.row(i)
        assert dict(zip(idx.tolist(), cnt.tolist())) == ref[i]
        assert list(idx) == sorted(idx)
        assert all(adj.count(i, j) == c for j, c in ref[i].items())
    assert adj.edges == sum(len(r) for r in ref.values()) // 2
    assert sorted(reported) == sorted(created)  # each new edge once, from its lower end


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.tuples(st.integers(0, N - 1), st.integers(0, N - 1)), st.integers(1, 9), max_size=30))
def test_bulk_load_equals_pair_by_pair(pairs):
    pairs = {(min(a, b), max(a, b)): c for (a, b), c in pairs.items() if a != b}
    bulk, one_by_one = Adjacency(), Adjacency()
    for _ in range(N):
        bulk.add_node()
        one_by_one.add_node()
    import numpy as np

    edges = sorted(pairs)
    bulk.load(np.array([a for a, _ in edges], dtype=np.int64), np.array([b for _, b in edges], dtype=np.int64),
              np.array([pairs[e] for e in edges], dtype=np.int64))
    for (a, b), c in pairs.items():
        one_by_one.add(a, b, c)
    for i in range(N):
        assert [x.tolist() for x in bulk.row(i)] == [x.tolist() for x in one_by_one.row(i)]
    assert bulk.edges == one_by_one.edges == len(pairs)


pair_table = st.dictionaries(
    st.tuples(st.integers(0, N - 1), st.integers(0, N - 1)), st.tuples(st.integers(1, 9), st.integers(0, 10**6)),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(pair_table, st.lists(st.sets(st.tuples(st.integers(0, N - 1), st.integers(0, N - 1)), max_size=6), max_size=5),
       st.lists(st.tuples(st.integers(0, N - 1), st.integers(0, N - 1)), max_size=20))
def test_rows_read_and_written_a_set_at_a_time_keep_counts_and_last_times(pairs, removals, asked):
    """`remove_many`, `find` and `gather` (numpy over the pool's spans)
    against a dict of (count, last µs), through pool growth and repacks."""
    import numpy as np

    ref = {(min(a, b), max(a, b)): value for (a, b), value in pairs.items() if a != b}
    adj = Adjacency()
    adj.add_nodes(N)
    edges = sorted(ref)
    adj.load(np.array([a for a, _ in edges], dtype=np.int64), np.array([b for _, b in edges], dtype=np.int64),
             np.array([ref[e][0] for e in edges], dtype=np.int64), np.array([ref[e][1] for e in edges], dtype=np.int64))
    for k, removal in enumerate(removals):
        gone = _distinct_pairs(removal)
        adj.remove_many(np.array([a for a, _ in gone], dtype=np.int32), np.array([b for _, b in gone], dtype=np.int32))
        for edge in gone:
            ref.pop(edge, None)
        if k % 2:
            adj.compact()
    found, counts, lasts = adj.find(np.array([a for a, _ in asked], dtype=np.int64),
                                    np.array([b for _, b in asked], dtype=np.int64))
    expected = [ref.get((min(a, b), max(a, b))) if a != b else None for a, b in asked]
    assert found.tolist() == [e is not None for e in expected]
    assert counts.tolist() == [e[0] if e else 0 for e in expected]
    assert lasts.tolist() == [e[1] if e else 0 for e in expected]
    ptr, idx, cnt, last = adj.gather(np.arange(N, dtype=np.int64))
    for i in range(N):
        lo, hi = ptr[i], ptr[i + 1]
        row = {j: (c, t) for j, c, t in zip(idx[lo:hi].tolist(), cnt[lo:hi].tolist(), last[lo:hi].tolist())}
        assert row == {(b if a == i else a): v for (a, b), v in ref.items() if i in (a, b)}
    assert adj.edges == len(ref)
