"""Compiled loops over the adjacency's rows (numba), where numpy has no
one operation for the work: the pairs of a run's cliques counted, and
every touched row merged with its pairs, in one pass each.

A row is (neighbour indices int32 sorted, pair counts int32, last
co-occurrence int64 µs). Every kernel returns new arrays and never writes
to its inputs (a row handed to a reader stays valid). They use integer
arithmetic, comparisons and min/max only, so their results are the numpy
code's bit for bit (`tests/unit/test_kernels.py` compares them).

Each is written here as plain Python over arrays and compiled by numba on
the first call of any of them (numba is imported then, not with this
module: a worker's start does not wait for it), the compiled code cached
on disk (`cache=True`: beside this file, or in the user's cache directory
where that is read-only; about 7 s to compile, 0.3 s to load). `warm`
compiles or loads them, for a worker to call beside its start rather than
inside its first fold.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

_INT64_MIN = np.iinfo(np.int64).min
_compiling = threading.Lock()


def _compiled_on_first_call(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """`kernel`, which on its first call compiles every kernel of the module
    and rebinds each name to its compiled form (later calls go straight there)."""
    name = kernel.__name__

    def first_call(*args: Any) -> Any:
        _compile()
        return globals()[name](*args)

    first_call.__name__ = first_call.__qualname__ = name
    first_call.__doc__ = kernel.__doc__
    _SOURCES[name] = kernel
    return first_call


_SOURCES: dict[str, Callable[..., Any]] = {}


def _compile() -> None:
    with _compiling:
        if all(hasattr(globals()[name], "signatures") for name in _SOURCES):
            return
        from numba import njit  # noqa: PLC0415 - imported on first use: see the module's docstring

        for name, kernel in _SOURCES.items():
            globals()[name] = njit(cache=True, nogil=True)(kernel)


@_compiled_on_first_call
def merge_into_rows(
    old_ptr: np.ndarray, old_idx: np.ndarray, old_cnt: np.ndarray, old_last: np.ndarray, touched: np.ndarray,
    pairs: np.ndarray, counts: np.ndarray, latest: np.ndarray, n: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Rows with pairs merged in: row r is `touched[r]` (rows ascending), its
    entries old_*[old_ptr[r]:old_ptr[r + 1]]; the pairs are keys row·n +
    neighbour (sorted, distinct, each of a touched row) with their counts
    and latest µs: count += count, last = max(last, latest), a pair not in
    its row yet created with its count and latest. Returns the merged rows
    (row r at out[ptr[r]:ptr[r + 1]]) and, per pair, whether it was created."""
    rows, m = len(touched), len(pairs)
    total = len(old_idx) + m
    out_ptr = np.zeros(rows + 1, dtype=np.int64)
    out_idx = np.empty(total, dtype=np.int32)
    out_cnt = np.empty(total, dtype=np.int32)
    out_last = np.empty(total, dtype=np.int64)
    created = np.zeros(m, dtype=np.bool_)
    k = o = 0
    for r in range(rows):
        row = touched[r]
        i, end = old_ptr[r], old_ptr[r + 1]
        stop = k
        while stop < m and pairs[stop] // n == row:
            stop += 1
        while i < end or k < stop:
            if k < stop:
                other = pairs[k] - row * n
            if k >= stop or (i < end and old_idx[i] < other):
                out_idx[o], out_cnt[o], out_last[o] = old_idx[i], old_cnt[i], old_last[i]
                i += 1
            elif i >= end or other < old_idx[i]:
                out_idx[o], out_cnt[o], out_last[o] = other, counts[k], latest[k]
                created[k] = True
                k += 1
            else:
                out_idx[o], out_cnt[o] = other, old_cnt[i] + counts[k]
                out_last[o] = max(old_last[i], latest[k])
                i += 1
                k += 1
            o += 1
        out_ptr[r + 1] = o
    return out_ptr, out_idx[:o], out_cnt[:o], out_last[:o], created


@_compiled_on_first_call
def queued_pairs(
    members: np.ndarray, sizes: np.ndarray, at_s: np.ndarray, at_us: np.ndarray, n: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Every ordered pair (a, b), a != b, of each clique's members (`members`
    one clique after another, `sizes` their counts, `at_s` / `at_us` their
    event times), as keys a·n + b sorted and distinct, with the number of
    cliques holding each, the earliest of their times in s and the latest in µs."""
    total = 0
    for size in sizes:
        total += size * (size - 1)
    keys = np.empty(total, dtype=np.int64)
    when_s = np.empty(total, dtype=np.float64)
    when_us = np.empty(total, dtype=np.int64)
    o = start = 0
    for c in range(len(sizes)):
        size = sizes[c]
        for x in range(start, start + size):
            for y in range(start, start + size):
                a, b = members[x], members[y]
                if a != b:
                    keys[o] = np.int64(a) * n + b
                    when_s[o], when_us[o] = at_s[c], at_us[c]
                    o += 1
        start += size
    keys, when_s, when_us = keys[:o], when_s[:o], when_us[:o]
    order = np.argsort(keys, kind="mergesort")
    distinct = 0
    for k in range(o):
        if k == 0 or keys[order[k]] != keys[order[k - 1]]:
            distinct += 1
    pairs = np.empty(distinct, dtype=np.int64)
    counts = np.zeros(distinct, dtype=np.int64)
    earliest = np.full(distinct, np.inf)
    latest = np.full(distinct, _INT64_MIN, dtype=np.int64)
    d = -1
    for k in range(o):
        j = order[k]
        if k == 0 or keys[j] != keys[order[k - 1]]:
            d += 1
            pairs[d] = keys[j]
        counts[d] += 1
        earliest[d] = min(earliest[d], when_s[j])
        latest[d] = max(latest[d], when_us[j])
    return pairs, counts, earliest, latest


def warm() -> None:
    """Compile (or load from the cache) every kernel for the types the adjacency passes."""
    _compile()
    idx, cnt, last = np.array([1, 3], dtype=np.int32), np.array([1, 1], dtype=np.int32), np.zeros(2, dtype=np.int64)
    others = np.array([2, 3], dtype=np.int32)
    queued_pairs(others, np.array([2], dtype=np.int64), np.zeros(1), np.zeros(1, dtype=np.int64), 4)
    merge_into_rows(
        np.array([0, 2], dtype=np.int64), idx, cnt, last, np.array([0], dtype=np.int64),
        np.array([2], dtype=np.int64), np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.int64), 4,
    )
