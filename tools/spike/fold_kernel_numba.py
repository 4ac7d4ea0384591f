"""The batch fold's hot part compiled with numba (a spike: see `fold_kernel`).

The same algorithm as the Rust kernel (tools/spike/fold_kernel_rs/src/lib.rs),
operation by operation: activation per mention in log order on the concept
columns (in place), then every touched row merged once with the run's pair
counts. Importing this module needs numba (`pip install numba`); nothing
compiles until the first call.
"""

from __future__ import annotations

import math

import numba
import numpy as np

NONE = np.iinfo(np.int64).min
GRID = 2.0**-32
FORWARD_WINDOWS = 2


@numba.njit(cache=False, inline="always")
def _on_grid(x: float) -> float:
    return np.rint(x / GRID) * GRID


@numba.njit(cache=False, inline="always")
def _decay_factor(elapsed_s, reinforcements, model, rate, tau, beta, hybrid_after):  # noqa: ANN001, ANN202
    if elapsed_s <= 0.0:
        return 1.0
    if model == 2:
        power = reinforcements >= hybrid_after
    else:
        power = model == 1
    if power:
        return (1.0 + elapsed_s / tau) ** -beta
    return math.exp(-rate * elapsed_s)


@numba.njit(cache=False, inline="always")
def _window_index(t_us, window_s):  # noqa: ANN001, ANN202
    return np.int64(math.floor((t_us / 1e6) / window_s))


@numba.njit(cache=False)
def _activations(offsets, cids, importance, at_us, activation, decayed_to, created_at, last_accessed, count,  # noqa: ANN001, ANN202
                 retrievals, exists, tick, model, rate, tau, beta, hybrid_after, window_s, window_us, boost):
    for t in range(at_us.shape[0]):
        at = at_us[t]
        for m in range(offsets[t], offsets[t + 1]):
            i = cids[m]
            if exists[i] == 0:
                exists[i] = 1
                activation[i] = _on_grid(importance[m])
                decayed_to[i] = NONE
                created_at[i] = at
                last_accessed[i] = at
                count[i] = 1
                continue
            amount = boost * importance[m]
            a = activation[i]
            dec = decayed_to[i]
            ref = dec if dec != NONE else created_at[i]
            reinforcements = count[i] + retrievals[i]
            if tick != NONE and ref < tick:
                a = _on_grid(a * _decay_factor((tick - ref) / 1e6, reinforcements, model, rate, tau, beta, hybrid_after))
                dec = tick
                ref = tick
            at_window = np.int64(0)
            ref_window = np.int64(0)
            if window_s > 0.0:
                at_window = _window_index(at, window_s)
                ref_window = _window_index(ref, window_s)
                older = at_window < ref_window
            else:
                older = at < ref
            if older:
                factor = _decay_factor((ref - at) / 1e6, reinforcements, model, rate, tau, beta, hybrid_after)
                a = a + _on_grid(amount * factor)
                dec = ref
            else:
                if window_s > 0.0 and at_window - ref_window >= FORWARD_WINDOWS:
                    target = at_window * window_us
                    elapsed = (target - ref) / 1e6
                    if elapsed > FORWARD_WINDOWS * window_s:
                        a = _on_grid(a * _decay_factor(elapsed, reinforcements, model, rate, tau, beta, hybrid_after))
                        dec = target
                a = a + _on_grid(amount)
            activation[i] = a
            decayed_to[i] = dec
            count[i] += 1
            if at < created_at[i]:
                created_at[i] = at
            if at > last_accessed[i]:
                last_accessed[i] = at


@numba.njit(cache=False)
def _merged_rows(offsets, cids, at_us, n, row_ptr, row_nbr, row_count, row_last):  # noqa: ANN001, ANN202
    turns = at_us.shape[0]
    fill = np.zeros(n + 1, dtype=np.int64)
    for t in range(turns):
        lo, hi = offsets[t], offsets[t + 1]
        if hi - lo < 2:
            continue
        for x in range(lo, hi):
            fill[cids[x] + 1] += hi - lo - 1
    touched_mask = fill[1:] > 0
    touched = np.nonzero(touched_mask)[0].astype(np.int64)
    for a in range(n):
        fill[a + 1] += fill[a]
    pos = fill.copy()
    total = fill[n]
    other = np.empty(total, dtype=np.int64)
    when = np.empty(total, dtype=np.int64)
    for t in range(turns):
        lo, hi = offsets[t], offsets[t + 1]
        if hi - lo < 2:
            continue
        for x in range(lo, hi):
            a = cids[x]
            for y in range(lo, hi):
                if x != y:
                    k = pos[a]
                    other[k] = cids[y]
                    when[k] = at_us[t]
                    pos[a] += 1
    add_count = np.zeros(n, dtype=np.int64)
    add_last = np.zeros(n, dtype=np.int64)
    seen = np.empty(n, dtype=np.int64)
    capacity = total
    for a in touched:
        capacity += row_ptr[a + 1] - row_ptr[a]
    indptr = np.empty(touched.shape[0] + 1, dtype=np.int64)
    out_nbr = np.empty(capacity, dtype=np.int64)
    out_count = np.empty(capacity, dtype=np.int64)
    out_last = np.empty(capacity, dtype=np.int64)
    indptr[0] = 0
    o = 0
    for r in range(touched.shape[0]):
        a = touched[r]
        distinct = 0
        for k in range(fill[a], fill[a + 1]):
            b = other[k]
            if add_count[b] == 0:
                seen[distinct] = b
                distinct += 1
                add_last[b] = when[k]
            elif when[k] > add_last[b]:
                add_last[b] = when[k]
            add_count[b] += 1
        new = np.sort(seen[:distinct])
        i, end, j = row_ptr[a], row_ptr[a + 1], 0
        while i < end or j < distinct:
            if j == distinct or (i < end and row_nbr[i] < new[j]):
                out_nbr[o] = row_nbr[i]
                out_count[o] = row_count[i]
                out_last[o] = row_last[i]
                i += 1
                o += 1
                continue
            b = new[j]
            if i < end and row_nbr[i] == b:
                out_nbr[o] = b
                out_count[o] = row_count[i] + add_count[b]
                out_last[o] = row_last[i] if row_last[i] > add_last[b] else add_last[b]
                i += 1
            else:
                out_nbr[o] = b
                out_count[o] = add_count[b]
                out_last[o] = add_last[b]
            add_count[b] = 0
            o += 1
            j += 1
        indptr[r + 1] = o
    return touched, indptr, out_nbr[:o], out_count[:o], out_last[:o]


@numba.njit(cache=False)
def fold_run(offsets, cids, importance, at_us, activation, decayed_to, created_at, last_accessed, count,  # noqa: ANN001, ANN201
             retrievals, exists, row_ptr, row_nbr, row_count, row_last,
             tick, model, rate, tau, beta, hybrid_after, window_s, window_us, boost):
    """Activation columns changed in place; returns the touched concepts'
    new rows as (touched, indptr, neighbours, counts, lasts)."""
    _activations(offsets, cids, importance, at_us, activation, decayed_to, created_at, last_accessed, count,
                 retrievals, exists, tick, model, rate, tau, beta, hybrid_after, window_s, window_us, boost)
    return _merged_rows(offsets, cids, at_us, activation.shape[0], row_ptr, row_nbr, row_count, row_last)


@numba.njit(cache=False)
def decay_factors(elapsed_s, reinforcements, model, rate, tau, beta, hybrid_after):  # noqa: ANN001, ANN201
    """`processors.dynamics.decay_factor` elementwise (to check libm against Python's)."""
    out = np.empty_like(elapsed_s)
    for k in range(elapsed_s.shape[0]):
        out[k] = _decay_factor(elapsed_s[k], reinforcements[k], model, rate, tau, beta, hybrid_after)
    return out
