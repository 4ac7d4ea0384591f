"""The compact adjacency against a dict-of-dicts reference, on random operations."""

from hypothesis import given, settings
from hypothesis import strategies as st

from state.adjacency import Adjacency

N = 12
op = st.one_of(
    st.tuples(st.just("clique"), st.lists(st.integers(0, N - 1), min_size=0, max_size=6), st.integers(1, 3)),
    st.tuples(st.just("add"), st.integers(0, N - 1), st.integers(0, N - 1), st.integers(1, 5)),
    st.tuples(st.just("remove"), st.integers(0, N - 1), st.integers(0, N - 1)),
    st.tuples(st.just("clear"), st.integers(0, N - 1)),
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
    elif kind == "clear":
        for j in ref[operation[1]]:
            ref[j].pop(operation[1], None)
        ref[operation[1]] = {}


def apply_compact(adj: Adjacency, operation: tuple) -> None:
    kind = operation[0]
    if kind == "clique":
        adj.add_clique(operation[1], operation[2])
    elif kind == "add" and operation[1] != operation[2]:
        adj.add(operation[1], operation[2], operation[3])
    elif kind == "remove":
        adj.remove(operation[1], operation[2])
    elif kind == "clear":
        adj.clear(operation[1])


@settings(max_examples=200, deadline=None)
@given(st.lists(op, max_size=40))
def test_compact_rows_equal_the_reference(operations):
    ref: dict[int, dict[int, int]] = {i: {} for i in range(N)}
    adj = Adjacency()
    for _ in range(N):
        adj.add_node()
    for operation in operations:
        apply_reference(ref, operation)
        apply_compact(adj, operation)
    for i in range(N):
        idx, cnt = adj.row(i)
        assert dict(zip(idx.tolist(), cnt.tolist())) == ref[i]
        assert list(idx) == sorted(idx)
        assert all(adj.count(i, j) == c for j, c in ref[i].items())
    assert adj.edges == sum(len(r) for r in ref.values()) // 2
