"""The adjacency's compiled kernels against plain Python on the same rows."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.state import kernels

INT64_MIN = np.iinfo(np.int64).min

# A row: distinct neighbours -> (count, last µs).
row_strategy = st.dictionaries(
    st.integers(0, 60), st.tuples(st.integers(1, 2**20), st.integers(-(2**40), 2**40)), max_size=25,
)


def as_arrays(row: dict[int, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys = sorted(row)
    return (
        np.array(keys, dtype=np.int32),
        np.array([row[k][0] for k in keys], dtype=np.int32),
        np.array([row[k][1] for k in keys], dtype=np.int64),
    )


def as_dict(idx: np.ndarray, cnt: np.ndarray, last: np.ndarray) -> dict[int, tuple[int, int]]:
    assert list(idx) == sorted(set(idx.tolist())), "a row's neighbours stay sorted and distinct"
    return {int(i): (int(c), int(t)) for i, c, t in zip(idx, cnt, last)}


def merged(row: dict[int, tuple[int, int]], incoming: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """`row` with `incoming` merged in, in plain Python: counts added, the later time kept."""
    expected = dict(row)
    for k, (increment, at) in incoming.items():
        count, was = expected.get(k, (0, INT64_MIN))
        expected[k] = (count + increment, max(was, at))
    return expected


@given(row_strategy, row_strategy)
@settings(max_examples=300, deadline=None)
def test_merge_into_a_row_adds_counts_keeps_the_later_time_and_names_the_new_entries(row, incoming):
    idx, cnt, last = as_arrays(row)
    others, increments, lasts = as_arrays(incoming)
    room = len(idx) + len(others)
    pool = [np.concatenate([part, np.zeros(room, dtype=part.dtype)]) for part in (idx, cnt, last)]
    n, i = 61, 7
    spans = np.zeros(i + 1, dtype=np.int64)
    spans[i] = len(idx)  # row i: the pool's first entries

    written, created = kernels.merge_in_pool(
        spans, *pool, len(idx), np.array([i], dtype=np.int64),
        i * n + others.astype(np.int64), increments.astype(np.int64), lasts, n,
    )

    start, length = int(spans[i]) >> kernels._SPAN_BITS, int(spans[i]) & kernels._LENGTH_MASK
    assert (start, length) == (len(idx), written)
    assert as_dict(*(part[start:start + length] for part in pool)) == merged(row, incoming)
    assert created.tolist() == [k not in row for k in sorted(incoming)]
    for part, kept in zip(pool, (idx, cnt, last)):
        assert np.array_equal(part[:len(idx)], kept), "the row as it was is never written"


cliques = st.lists(
    st.tuples(
        st.sets(st.integers(0, 30), max_size=6),
        st.floats(0, 1e9, allow_nan=False, allow_infinity=False),
        st.integers(0, 2**50),
    ),
    min_size=1, max_size=12,
)


@given(cliques)
@settings(max_examples=300, deadline=None)
def test_queued_pairs_counts_each_ordered_pair_with_its_earliest_and_latest_time(queued):
    members = np.array([m for clique, _, _ in queued for m in sorted(clique)], dtype=np.int32)
    sizes = np.array([len(clique) for clique, _, _ in queued], dtype=np.int64)
    at_s = np.array([s for _, s, _ in queued], dtype=np.float64)
    at_us = np.array([us for _, _, us in queued], dtype=np.int64)
    check_queued_pairs(queued, members, sizes, at_s, at_us, 31)


@pytest.mark.parametrize("seed", range(4))
def test_queued_pairs_sorts_the_ends_of_a_row_with_many_as_one_with_few(seed):
    """Rows with more distinct ends than `kernels._FEW_ENDS` (sorted by numba's
    sort, not by insertion) beside rows with few."""
    rng = np.random.default_rng(seed)
    n = 400
    queued = [(set(rng.choice(n, size=size, replace=False).tolist()), float(rng.uniform(0, 1e9)), int(rng.integers(0, 2**50)))
              for size in (kernels._FEW_ENDS + 30, 3, kernels._FEW_ENDS + 5, 7, 2, kernels._FEW_ENDS // 2)]
    members = np.array([m for clique, _, _ in queued for m in sorted(clique)], dtype=np.int32)
    sizes = np.array([len(clique) for clique, _, _ in queued], dtype=np.int64)
    at_s = np.array([s for _, s, _ in queued], dtype=np.float64)
    at_us = np.array([us for _, _, us in queued], dtype=np.int64)
    check_queued_pairs(queued, members, sizes, at_s, at_us, n)


def check_queued_pairs(
    queued: list, members: np.ndarray, sizes: np.ndarray, at_s: np.ndarray, at_us: np.ndarray, n: int,
) -> None:
    pairs, counts, earliest, latest = kernels.queued_pairs(members, sizes, at_s, at_us, n)

    expected: dict[int, tuple[int, float, int]] = {}
    for clique, s, us in queued:
        for a in clique:
            for b in clique:
                if a != b:
                    count, first, last = expected.get(a * n + b, (0, float("inf"), INT64_MIN))
                    expected[a * n + b] = (count + 1, min(first, s), max(last, us))
    assert pairs.tolist() == sorted(expected)
    assert [(c, f, t) for c, f, t in zip(counts.tolist(), earliest.tolist(), latest.tolist())] == [
        expected[k] for k in sorted(expected)
    ]


@given(st.dictionaries(st.integers(0, 12), st.tuples(row_strategy, row_strategy), min_size=1, max_size=6),
       st.integers(0, 20))
@settings(max_examples=300, deadline=None)
def test_merge_in_pool_merges_each_row_with_its_own_pairs_after_the_pool_and_leaves_the_rest(rows, gap):
    """Rows 0..12 of a pool, each where its span says (`gap` unused entries
    between them); the touched ones merged at `at` with their pairs, one
    after another in row order."""
    n = 61
    touched = sorted(rows)
    old = {r: as_arrays(rows[r][0]) if r in rows else as_arrays({}) for r in range(13)}
    spans, pieces, at = np.zeros(13, dtype=np.int64), [], 0
    for r in range(13):
        spans[r] = (at << kernels._SPAN_BITS) | len(old[r][0])
        pieces.append(old[r])
        pieces.append(tuple(np.full(gap, -7, dtype=a.dtype) for a in old[r]))
        at += len(old[r][0]) + gap
    incoming = [(r, k, v) for r in touched for k, v in sorted(rows[r][1].items())]
    pairs = np.array([r * n + k for r, k, _ in incoming], dtype=np.int64)
    counts = np.array([v[0] for _, _, v in incoming], dtype=np.int64)
    latest = np.array([v[1] for _, _, v in incoming], dtype=np.int64)
    room = sum(len(old[r][0]) for r in touched) + len(pairs)
    pool = [np.concatenate([piece[part] for piece in pieces] + [np.zeros(room, dtype=pieces[0][part].dtype)])
            for part in range(3)]
    before = [array.copy() for array in pool]
    old_spans = spans.copy()

    written, created = kernels.merge_in_pool(
        spans, *pool, at, np.array(touched, dtype=np.int64), pairs, counts, latest, n,
    )

    expected_created = [k not in rows[r][0] for r in touched for k in sorted(rows[r][1])]
    assert created.tolist() == expected_created
    assert written == sum(len(merged(*rows[r])) for r in touched)
    for part, kept in zip(pool, before):
        assert np.array_equal(part[:at], kept[:at]), "nothing below `at` is written"
    next_start = at
    for r in range(13):
        start, length = int(spans[r]) >> kernels._SPAN_BITS, int(spans[r]) & kernels._LENGTH_MASK
        if r not in rows:
            assert spans[r] == old_spans[r]
        else:
            assert start == next_start  # the touched rows one after another, from `at`
            next_start += length
            assert as_dict(*(part[start:start + length] for part in pool)) == merged(rows[r][0], rows[r][1])


def test_warm_compiles_every_kernel():
    kernels.warm()
    for kernel in (kernels.merge_in_pool, kernels.queued_pairs, kernels.mention_all, kernels.gather_rows, kernels.find_pairs, kernels.drop_pairs, kernels.upper_row_payloads):
        assert kernel.signatures, f"{kernel.__name__} compiled"


# Rows of a store: neighbour id -> (count, last µs); ids of one to three letters, some beyond ASCII.
store_rows = st.lists(
    st.dictionaries(
        st.text(st.sampled_from("ab\u00e9\u732b\U0001f600"), min_size=1, max_size=3),
        st.tuples(st.integers(1, 2**40), st.integers(-(2**62), 2**62)), min_size=1, max_size=40,
    ),
    min_size=1, max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(store_rows, st.randoms(use_true_random=False))
def test_upper_row_payloads_are_the_records_encode_row_writes(rows, random):
    """Every row's record, its entries past its own node gathered from a
    pool (in any order there) and sorted by id, is `state.rows.encode_row`'s
    of those entries, byte for byte; a row with none has an empty record.
    Node ranks follow the ids' order, as the view's do."""
    from emgas.state.rows import encode_row

    names = sorted({other for row in rows for other in row} | {f"r{k}" for k in range(len(rows))})
    node = {name: k for k, name in enumerate(names)}
    encoded = [name.encode() for name in names]
    text = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    bounds = np.concatenate(([0], np.cumsum([len(e) for e in encoded]))).astype(np.int64)
    rank = np.arange(len(names), dtype=np.int64)
    spans, pool_idx, pool_cnt, pool_last = np.zeros(len(names), dtype=np.int64), [], [], []
    for k, row in enumerate(rows):
        entries = list(row.items())
        random.shuffle(entries)
        spans[node[f"r{k}"]] = (len(pool_idx) << kernels._SPAN_BITS) | len(entries)
        pool_idx += [node[other] for other, _ in entries]
        pool_cnt += [count for _, (count, _) in entries]
        pool_last += [last for _, (_, last) in entries]
    payload, ptr = kernels.upper_row_payloads(
        spans, np.array(pool_idx, dtype=np.int32), np.array(pool_cnt, dtype=np.int64),
        np.array(pool_last, dtype=np.int64), np.array([node[f"r{k}"] for k in range(len(rows))], dtype=np.int64),
        rank, text, bounds,
    )
    data = payload.tobytes()
    upper = [{o: v for o, v in row.items() if o > f"r{k}"} for k, row in enumerate(rows)]
    assert [data[ptr[k]:ptr[k + 1]] for k in range(len(rows))] == [encode_row(u) if u else b"" for u in upper]
