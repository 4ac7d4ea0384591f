"""Spike: the batch fold's hot part timed four ways (plain Python, numpy, numba, Rust).

    python -m emgas.tools.spike.fold_kernel [--turns 200,1000,5000] [--repeats 9] [--json PATH]

The hot part of folding a run of consecutive turns of one graph, on plain
values (no events, no records, no store):

(a) pair counts: every ordered pair (a, b) of a turn's distinct concepts adds
    1 to c(a, b) and keeps last = max(last, at µs); each touched concept's row
    (neighbours sorted, count and last µs as int64) is merged ONCE for the run;
(b) activation per mention, in log order: `processors.graph._contributed` and
    `concept_after_mention` on the concept's values, the graph meta's last tick
    and decay parameters fixed for the run (a tick splits runs).

Input: graph synthetic-0 of the bench's synthetic log (`tools.bench.core.
synthetic_log`): its first `--skip` turns folded by the plain-Python reference
into the state before the run, then `--turns` turns. Concept ids are mapped to
int indices in id order (so index order is the rows' id order) outside the
timed part. Timed: the conversion of the run's Python lists (concept indices,
importances, µs) into the kernel's arrays, the kernel, and its result as arrays
(the new rows as CSR of the touched concepts, the concept columns in place);
"kernel" is the kernel call alone. Every variant's every output is checked
bit for bit against the reference, and the reference against the project's own
`concept_after_mention` and `changed_row` on the same turns.

numba and the Rust module are optional: a missing one is reported with how to
install it (neither is a dependency of emgas).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import platform
import random
import statistics
import time
from dataclasses import dataclass, replace
from functools import partial
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable

import numpy as np

from emgas.processors.dynamics import EPOCH, DecayParams, decay_factor
from emgas.processors.events import Decay, TurnIngested
from emgas.processors.graph import ConceptState, GraphMeta, GraphParams, concept_after_mention, on_grid
from emgas.state.rows import changed_row
from emgas.tools.bench.core import synthetic_log
from emgas.tools.synthetic import Shape, conversations

NONE = np.iinfo(np.int64).min  # "no time" in an int64 µs column
GRAPH = "synthetic-0"
MODELS = {"exponential": 0, "power": 1, "hybrid": 2}
FORWARD_WINDOWS = 2
INSTALL_NUMBA = "pip install numba  (into .venv; not a dependency of emgas)"
INSTALL_RUST = ("pip install maturin && (cd tools/spike/fold_kernel_rs && "
                "VIRTUAL_ENV=$PWD/../../../.venv maturin develop --release)  (needs cargo, Rust >= 1.85)")


def _us(t: datetime) -> int:
    return (t - EPOCH) // timedelta(microseconds=1)


# ---------------------------------------------------------------- the inputs

@dataclass(frozen=True)
class Knobs:
    """The fixed values of a run: the meta's last tick and decay parameters
    (no tick inside a run), the window and the mention boost."""

    tick_us: int | None
    decay: DecayParams
    window_s: float
    mention_boost: float

    @property
    def window_us(self) -> int:
        us = self.window_s * 1e6
        assert us == int(us), "window_start is taken as k · window_us: a whole number of µs"
        return int(us)

    def kernel_args(self) -> tuple:
        d = self.decay
        return (NONE if self.tick_us is None else self.tick_us, MODELS[d.model], d.rate, d.power_tau_s,
                d.power_beta, d.hybrid_after, float(self.window_s), self.window_us, float(self.mention_boost))


@dataclass
class Columns:
    """Concept state by index: what the fold holds for the run's concepts."""

    activation: np.ndarray  # float64
    decayed_to: np.ndarray  # int64 µs, NONE: none
    created_at: np.ndarray
    last_accessed: np.ndarray
    count: np.ndarray
    retrievals: np.ndarray
    exists: np.ndarray  # uint8

    def copy(self) -> Columns:
        return Columns(*(a.copy() for a in self.arrays()))

    def arrays(self) -> tuple[np.ndarray, ...]:
        return (self.activation, self.decayed_to, self.created_at, self.last_accessed, self.count,
                self.retrievals, self.exists)


@dataclass(frozen=True)
class Csr:
    """Rows of concepts `keys` (CSR): row r is [indptr[r], indptr[r+1])."""

    keys: np.ndarray
    indptr: np.ndarray
    neighbours: np.ndarray
    counts: np.ndarray
    lasts: np.ndarray


@dataclass(frozen=True)
class Run:
    ids: list[str]  # index -> concept id, sorted
    turns: list[list[int]]  # the run's turns: concept indices
    importances: list[list[float]]
    at_us: list[int]
    columns: Columns  # the state before the run
    rows: Csr  # every concept's row before the run (keys = all indices)
    knobs: Knobs
    events: list[TurnIngested]  # the run's events (for the check against the project's code)


def graph_events(skip: int, turns: int) -> tuple[list[TurnIngested], list[Decay]]:
    """Graph synthetic-0's events in the bench's synthetic log, long enough
    for `skip + turns` turns. `conversations` makes graph after graph from one
    random stream, so graph 0 of a longer log starts with the same turns as
    in the bench's `conversations(8000)`."""
    shape = Shape()
    wanted = skip + turns
    made = [t for t in conversations(max(8000, wanted * shape.graphs + shape.graphs), shape) if t.graph_id == GRAPH]
    events = synthetic_log(made[:wanted], GraphParams())
    return [e for e in events if isinstance(e, TurnIngested)], [e for e in events if isinstance(e, Decay)]


def build_run(events: list[TurnIngested], decays: list[Decay], skip: int, turns: int) -> Run:
    params = GraphParams()
    before, run = events[:skip], events[skip:skip + turns]
    assert len(run) == turns, f"the log has {len(events)} turns of {GRAPH}, not {skip + turns}"
    ids = sorted({c.id for e in events[:skip + turns] for c in e.concepts})
    index = {cid: i for i, cid in enumerate(ids)}
    first_at = run[0].timestamp
    ticks = [d for d in decays if d.timestamp <= first_at]
    knobs = Knobs(
        tick_us=_us(ticks[-1].timestamp) if ticks else None,
        decay=ticks[-1].params if ticks else params.decay,
        window_s=params.window_s,
        mention_boost=params.mention_boost,
    )
    # The state before: the earlier turns folded by the reference (no tick:
    # the run's first mentions of old concepts then cross the last tick).
    earlier = Knobs(None, params.decay, params.window_s, params.mention_boost)
    state: dict[int, list] = {}
    pending: dict[int, list] = {}
    for e in before:
        _reference_turn(state, pending, [index[c.id] for c in e.concepts], [c.importance for c in e.concepts],
                        _us(e.timestamp), earlier)
    rows = _reference_rows(pending, {}, len(ids))
    return Run(
        ids=ids,
        turns=[[index[c.id] for c in e.concepts] for e in run],
        importances=[[c.importance for c in e.concepts] for e in run],
        at_us=[_us(e.timestamp) for e in run],
        columns=_columns(state, len(ids)),
        rows=_full_csr(rows, len(ids)),
        knobs=knobs,
        events=run,
    )


def _columns(state: dict[int, list], n: int) -> Columns:
    c = Columns(np.zeros(n), *(np.zeros(n, dtype=np.int64) for _ in range(5)), np.zeros(n, dtype=np.uint8))
    for i, (activation, decayed_to, created, last, count, retrievals) in state.items():
        c.activation[i] = activation
        c.decayed_to[i] = NONE if decayed_to is None else decayed_to
        c.created_at[i], c.last_accessed[i], c.count[i], c.retrievals[i] = created, last, count, retrievals
        c.exists[i] = 1
    return c


def _full_csr(rows: dict[int, tuple[list[int], list[int], list[int]]], n: int) -> Csr:
    lengths = np.array([len(rows[i][0]) if i in rows else 0 for i in range(n)], dtype=np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    parts = [rows[i] for i in range(n) if i in rows]
    flat = [np.array(list(itertools.chain.from_iterable(p[k] for p in parts)), dtype=np.int64) for k in range(3)]
    return Csr(np.arange(n, dtype=np.int64), indptr, *flat)


# ------------------------------------------------------- (0) the reference

def _reference_mention(state: dict[int, list], i: int, importance: float, at: int, knobs: Knobs) -> None:
    """`concept_after_mention` (and its `_contributed`) on plain values:
    [activation, decayed_to µs | None, created_at µs, last_accessed µs, count, retrievals]."""
    old = state.get(i)
    if old is None:
        state[i] = [on_grid(importance), None, at, at, 1, 0]
        return
    activation, decayed_to, created, last, count, retrievals = old
    amount = knobs.mention_boost * importance
    ref = created if decayed_to is None else decayed_to
    reinforcements = count + retrievals
    decay, window_s, tick = knobs.decay, knobs.window_s, knobs.tick_us
    if tick is not None and ref < tick:
        activation = on_grid(activation * decay_factor((tick - ref) / 10**6, reinforcements, decay))
        decayed_to = ref = tick
    if window_s > 0:
        at_window, ref_window = math.floor(at / 10**6 / window_s), math.floor(ref / 10**6 / window_s)
        older = at_window < ref_window
    else:
        older = at < ref
    if older:
        activation = activation + on_grid(amount * decay_factor((ref - at) / 10**6, reinforcements, decay))
        decayed_to = ref
    else:
        if window_s > 0 and at_window - ref_window >= FORWARD_WINDOWS:
            target = at_window * knobs.window_us
            elapsed = (target - ref) / 10**6
            if elapsed > FORWARD_WINDOWS * window_s:
                activation = on_grid(activation * decay_factor(elapsed, reinforcements, decay))
                decayed_to = target
        activation = activation + on_grid(amount)
    state[i] = [activation, decayed_to, min(created, at), max(last, at), count + 1, retrievals]


def _reference_turn(state: dict[int, list], pending: dict[int, list], cids: list[int], importances: list[float],
                    at: int, knobs: Knobs) -> None:
    """One turn as today's fold applies it: each mention, then its
    co-occurrence buffered per concept (`state.rows.RowChanges.co_occur`)."""
    for i, importance in zip(cids, importances):
        _reference_mention(state, i, importance, at, knobs)
    change = (cids, at)
    for i in cids:
        pending.setdefault(i, []).append(change)


def _reference_rows(pending: dict[int, list], old: dict[int, dict], n: int) -> dict[int, tuple[list, list, list]]:
    """Each touched row merged once (`state.rows.changed_row`'s loop), sorted."""
    out = {}
    for i in sorted(pending):
        row = old.get(i, {})
        get = row.get
        for others, at in pending[i]:
            for other in others:
                if other == i:
                    continue
                entry = get(other)
                row[other] = (1, at) if entry is None else (entry[0] + 1, entry[1] if entry[1] > at else at)
        if not row:
            continue
        keys = sorted(row)
        out[i] = (keys, [row[k][0] for k in keys], [row[k][1] for k in keys])
    return out


def reference_state(run: Run) -> dict[int, list]:
    c = run.columns
    return {
        i: [float(c.activation[i]), None if c.decayed_to[i] == NONE else int(c.decayed_to[i]), int(c.created_at[i]),
            int(c.last_accessed[i]), int(c.count[i]), int(c.retrievals[i])]
        for i in np.flatnonzero(c.exists).tolist()
    }


def fold_reference(run: Run, state: dict[int, list]) -> dict[int, tuple[list, list, list]]:
    """Variant 0: per turn on plain values, rows decoded from the held arrays
    (as `decode_row` does from a record) and merged once at the end."""
    pending: dict[int, list] = {}
    knobs = run.knobs
    for cids, importances, at in zip(run.turns, run.importances, run.at_us):
        _reference_turn(state, pending, cids, importances, at, knobs)
    rows, old = run.rows, {}
    for i in pending:
        lo, hi = int(rows.indptr[i]), int(rows.indptr[i + 1])
        old[i] = dict(zip(rows.neighbours[lo:hi].tolist(), zip(rows.counts[lo:hi].tolist(), rows.lasts[lo:hi].tolist())))
    return _reference_rows({i: p for i, p in pending.items() if len(p) and _has_pair(p)}, old, len(run.ids))


def _has_pair(changes: list) -> bool:
    return any(len(cids) > 1 for cids, _ in changes)


# ------------------------------------------------ the arrays every kernel takes

def flat_inputs(run: Run) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The run's Python lists as (offsets, concept indices, importances, µs)."""
    turns = run.turns
    offsets = np.zeros(len(turns) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in turns], out=offsets[1:])
    total = int(offsets[-1])
    cids = np.fromiter(itertools.chain.from_iterable(turns), dtype=np.int64, count=total)
    importance = np.fromiter(itertools.chain.from_iterable(run.importances), dtype=np.float64, count=total)
    return offsets, cids, importance, np.array(run.at_us, dtype=np.int64)


# ------------------------------------------------------------- (1) numpy

def _np_on_grid(x: np.ndarray) -> np.ndarray:
    return np.rint(x / 2.0**-32) * 2.0**-32


def _np_factor(elapsed: np.ndarray, reinforcements: np.ndarray, d: DecayParams, libm: bool = False) -> np.ndarray:
    """`decay_factor` elementwise: exp and pow computed only where each applies.
    numpy's own exp and power (SIMD code on AVX-512) are not libm's, which
    Python's math.exp and `**` call; `libm`: take those, one value at a time."""
    out = np.ones_like(elapsed)
    positive = elapsed > 0
    power = (reinforcements >= d.hybrid_after) if d.model == "hybrid" else np.full(elapsed.shape, d.model == "power")
    p = positive & power
    e = positive & ~power
    base, exponent = 1.0 + elapsed[p] / d.power_tau_s, -d.rate * elapsed[e]
    if libm:
        beta, exp = -d.power_beta, math.exp
        out[p] = [x**beta for x in base.tolist()]
        out[e] = [exp(x) for x in exponent.tolist()]
    else:
        out[p] = base**-d.power_beta
        out[e] = np.exp(exponent)
    return out


def fold_numpy(run: Run, columns: Columns, flat: tuple | None = None, libm: bool = False) -> tuple[np.ndarray, ...]:
    """Variant 1: activation in rounds (the k-th mention of every concept at
    once, rounds in order: each concept's mentions stay in log order), pairs
    as sorted keys a·n + b summed per key and merged with the old rows."""
    offsets, cids, importance, at_turn = flat if flat is not None else flat_inputs(run)
    lengths = np.diff(offsets)
    turn_of = np.repeat(np.arange(len(lengths)), lengths)
    _np_activations(cids, importance, at_turn[turn_of], columns, run.knobs, libm)
    return _np_rows(cids, offsets, lengths, turn_of, at_turn, run.rows, len(run.ids))


def _np_activations(cids: np.ndarray, importance: np.ndarray, at: np.ndarray, c: Columns, k: Knobs, libm: bool) -> None:
    by_concept = np.argsort(cids, kind="stable")
    grouped = cids[by_concept]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    sizes = np.diff(np.r_[starts, len(grouped)])
    rank = np.arange(len(grouped)) - np.repeat(starts, sizes)
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[by_rank], np.arange(int(rank.max()) + 2))
    tick = k.tick_us
    window_s, window_us = k.window_s, k.window_us
    for r in range(len(bounds) - 1):
        m = by_concept[by_rank[bounds[r]:bounds[r + 1]]]
        i, imp, t = cids[m], importance[m], at[m]
        new = c.exists[i] == 0
        if new.any():
            n_i = i[new]
            c.exists[n_i] = 1
            c.activation[n_i] = _np_on_grid(imp[new])
            c.decayed_to[n_i] = NONE
            c.created_at[n_i] = t[new]
            c.last_accessed[n_i] = t[new]
            c.count[n_i] = 1
            old = ~new
            i, imp, t = i[old], imp[old], t[old]
            if not len(i):
                continue
        amount = k.mention_boost * imp
        a = c.activation[i]
        dec = c.decayed_to[i]
        ref = np.where(dec != NONE, dec, c.created_at[i])
        reinforcements = c.count[i] + c.retrievals[i]
        if tick is not None:
            behind = ref < tick
            if behind.any():
                a[behind] = _np_on_grid(a[behind] * _np_factor((tick - ref[behind]) / 1e6, reinforcements[behind], k.decay, libm))
                dec[behind] = tick
                ref[behind] = tick
        if window_s > 0:
            at_window = np.floor(t / 1e6 / window_s).astype(np.int64)
            ref_window = np.floor(ref / 1e6 / window_s).astype(np.int64)
            older = at_window < ref_window
        else:
            older = t < ref
        if older.any():
            o = older
            a[o] = a[o] + _np_on_grid(amount[o] * _np_factor((ref[o] - t[o]) / 1e6, reinforcements[o], k.decay, libm))
            dec[o] = ref[o]
        now = ~older
        if window_s > 0:
            far = now & (at_window - ref_window >= FORWARD_WINDOWS)
            if far.any():
                target = at_window[far] * window_us
                elapsed = (target - ref[far]) / 1e6
                moved = elapsed > FORWARD_WINDOWS * window_s
                f = np.flatnonzero(far)[moved]
                a[f] = _np_on_grid(a[f] * _np_factor(elapsed[moved], reinforcements[f], k.decay, libm))
                dec[f] = target[moved]
        a[now] = a[now] + _np_on_grid(amount[now])
        c.activation[i] = a
        c.decayed_to[i] = dec
        c.count[i] += 1
        c.created_at[i] = np.minimum(c.created_at[i], t)
        c.last_accessed[i] = np.maximum(c.last_accessed[i], t)


def _np_rows(cids: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, turn_of: np.ndarray, at_turn: np.ndarray,
             rows: Csr, n: int) -> tuple[np.ndarray, ...]:
    # every (mention x, mention y) of one turn: x repeated k times against the turn's k mentions
    reps = lengths[turn_of]
    x = np.repeat(np.arange(len(cids)), reps)
    block = np.repeat(np.cumsum(reps) - reps, reps)
    y = offsets[turn_of[x]] + (np.arange(len(x)) - block)
    keep = x != y
    x, y = x[keep], y[keep]
    key = cids[x] * n + cids[y]
    order = np.argsort(key, kind="stable")
    key, when = key[order], at_turn[turn_of[x]][order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    add_key = key[starts]
    add_count = np.diff(np.r_[starts, len(key)])
    add_last = np.maximum.reduceat(when, starts)
    touched = np.unique(add_key // n)
    # the touched rows' old entries, gathered from the held rows
    lo, hi = rows.indptr[touched], rows.indptr[touched + 1]
    sizes = hi - lo
    at = np.repeat(lo - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum()))
    old_key = np.repeat(touched, sizes) * n + rows.neighbours[at]
    all_key = np.concatenate([old_key, add_key])
    merged = np.argsort(all_key, kind="stable")
    all_key = all_key[merged]
    firsts = np.flatnonzero(np.r_[True, all_key[1:] != all_key[:-1]])
    counts = np.add.reduceat(np.concatenate([rows.counts[at], add_count])[merged], firsts)
    lasts = np.maximum.reduceat(np.concatenate([rows.lasts[at], add_last])[merged], firsts)
    out_key = all_key[firsts]
    indptr = np.searchsorted(out_key // n, np.r_[touched, n]).astype(np.int64)
    return touched, indptr, out_key % n, counts, lasts


# ---------------------------------------------------------- (2) numba, (3) Rust

def _kernel_call(fn: Callable) -> Callable[[Run, Columns, tuple | None], tuple]:
    def fold(run: Run, columns: Columns, flat: tuple | None = None) -> tuple:
        offsets, cids, importance, at = flat if flat is not None else flat_inputs(run)
        rows = run.rows
        return fn(offsets, cids, importance, at, *columns.arrays(), rows.indptr, rows.neighbours, rows.counts,
                  rows.lasts, *run.knobs.kernel_args())
    return fold


def _numba_fold() -> tuple[Callable | None, str]:
    try:
        from emgas.tools.spike import fold_kernel_numba
    except ImportError as e:
        return None, f"not installed ({e.name}): {INSTALL_NUMBA}"
    return _kernel_call(fold_kernel_numba.fold_run), ""


def _rust_fold() -> tuple[Callable | None, str]:
    try:
        import fold_kernel_rs  # type: ignore[import-not-found]
    except ImportError:
        return None, f"not installed: {INSTALL_RUST}"
    return _kernel_call(fold_kernel_rs.fold_run), ""


def factor_check(count: int, seed: int = 1) -> dict[str, Any]:
    """How many of `count` random decay factors each engine computes unlike
    Python's `decay_factor` (elapsed up to 400 days, 0-5 reinforcements,
    the default hybrid model: both the exp and the pow branch)."""
    d = DecayParams()
    rng = np.random.default_rng(seed)
    elapsed = rng.uniform(0.0, 400 * 86_400.0, count)
    elapsed[::97] = 0.0
    reinforcements = rng.integers(0, 6, count).astype(np.int64)
    want = np.array([decay_factor(e, r, d) for e, r in zip(elapsed.tolist(), reinforcements.tolist())])
    args = (MODELS[d.model], d.rate, d.power_tau_s, d.power_beta, d.hybrid_after)
    engines: dict[str, Callable[[], np.ndarray] | str] = {
        "numpy": lambda: _np_factor(elapsed, reinforcements, d),
        "numpy, libm factors": lambda: _np_factor(elapsed, reinforcements, d, libm=True),
    }
    try:
        from emgas.tools.spike import fold_kernel_numba
        engines["numba"] = lambda: fold_kernel_numba.decay_factors(elapsed, reinforcements, *args)
    except ImportError:
        engines["numba"] = "not installed"
    try:
        import fold_kernel_rs  # type: ignore[import-not-found]
        engines["rust (pyo3)"] = lambda: fold_kernel_rs.decay_factors(elapsed, reinforcements, *args)
    except ImportError:
        engines["rust (pyo3)"] = "not installed"
    out: dict[str, Any] = {"count": count}
    for name, engine in engines.items():
        out[name] = engine if isinstance(engine, str) else int((engine() != want).sum())
    return out


# ------------------------------------------------------------------ checks

def canonical_rows(result: tuple[np.ndarray, ...]) -> dict[int, tuple[list, list, list]]:
    touched, indptr, neighbours, counts, lasts = (np.asarray(a) for a in result)
    out = {}
    for r, i in enumerate(touched.tolist()):
        lo, hi = int(indptr[r]), int(indptr[r + 1])
        out[i] = (neighbours[lo:hi].tolist(), counts[lo:hi].tolist(), lasts[lo:hi].tolist())
    return out


def state_of_columns(c: Columns) -> dict[int, list]:
    return {
        i: [float(c.activation[i]).hex(), None if c.decayed_to[i] == NONE else int(c.decayed_to[i]),
            int(c.created_at[i]), int(c.last_accessed[i]), int(c.count[i]), int(c.retrievals[i])]
        for i in np.flatnonzero(c.exists).tolist()
    }


def hexed(state: dict[int, list]) -> dict[int, list]:
    return {i: [v[0].hex(), *v[1:]] for i, v in state.items()}


def differences(run: Run, ref_state: dict[int, list], ref_rows: dict, columns: Columns, rows: tuple) -> list[str]:
    """What a variant's outputs get wrong against the reference (empty: bit for bit equal)."""
    problems = []
    mine, theirs = state_of_columns(columns), hexed(ref_state)
    bad = [i for i in theirs if mine.get(i) != theirs[i]]
    if bad or len(mine) != len(theirs):
        problems.append(f"{len(bad)} of {len(theirs)} concepts differ (e.g. {run.ids[bad[0]] if bad else '?'}: "
                        f"{mine.get(bad[0]) if bad else None} vs {theirs[bad[0]] if bad else None})")
    got = canonical_rows(rows)
    if got != ref_rows:
        wrong = [i for i in ref_rows if got.get(i) != ref_rows[i]]
        problems.append(f"{len(wrong)} of {len(ref_rows)} rows differ ({len(got)} returned)")
    return problems


def check_reference_against_project(run: Run, ref_state: dict[int, list], ref_rows: dict) -> list[str]:
    """The plain-values reference against the project's `concept_after_mention`
    (on ConceptState, with the meta's tick) and `changed_row`, for the same turns."""
    k = run.knobs
    params = GraphParams(window_s=k.window_s, mention_boost=k.mention_boost)
    meta = GraphMeta(decayed_to=None if k.tick_us is None else EPOCH + timedelta(microseconds=k.tick_us),
                     decay=k.decay if k.tick_us is not None else None)
    at = lambda us: EPOCH + timedelta(microseconds=us)  # noqa: E731
    concepts: dict[int, ConceptState] = {}
    for i, (a, dec, created, last, count, retrievals) in reference_state(run).items():
        concepts[i] = ConceptState(id=run.ids[i], text=run.ids[i], count=count, base_activation=a,
                                   created_at=at(created), last_accessed=at(last),
                                   decayed_to=None if dec is None else at(dec), retrievals=retrievals)
    changes: dict[int, list] = {}
    for e in run.events:
        for c in e.concepts:
            i = _index_of(run, c.id)
            concepts[i] = concept_after_mention(concepts.get(i), c.id, c.text, c.importance, e.timestamp, params, meta)
        ids = tuple(sorted(c.id for c in e.concepts))
        if len(ids) > 1:
            for cid in ids:
                changes.setdefault(_index_of(run, cid), []).append((ids, _us(e.timestamp)))
    problems = []
    for i, c in concepts.items():
        mine = ref_state.get(i)
        want = [c.base_activation, None if c.decayed_to is None else _us(c.decayed_to), _us(c.created_at),
                _us(c.last_accessed), c.count, c.retrievals]
        if mine != want:
            problems.append(f"concept {c.id}: reference {mine} vs project {want}")
            break
    for i, change in changes.items():
        cid = run.ids[i]
        lo, hi = int(run.rows.indptr[i]), int(run.rows.indptr[i + 1])
        old = {run.ids[j]: (int(n), int(t)) for j, n, t in zip(run.rows.neighbours[lo:hi], run.rows.counts[lo:hi],
                                                               run.rows.lasts[lo:hi])}
        row = changed_row(cid, old, change)
        keys = sorted(row)
        mine_row = ref_rows.get(i)
        want_row = ([_index_of(run, o) for o in keys], [row[o][0] for o in keys], [row[o][1] for o in keys])
        if mine_row != want_row:
            problems.append(f"row {cid}: reference and project's changed_row differ")
            break
    return problems


_INDEX_CACHE: dict[int, dict[str, int]] = {}


def _index_of(run: Run, cid: str) -> int:
    table = _INDEX_CACHE.setdefault(id(run.ids), {c: i for i, c in enumerate(run.ids)})
    return table[cid]


# ----------------------------------------------------------------- timing

def _timed(call: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """(ms, result) of call(*args), garbage collection off while it runs."""
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter_ns()
        out = call(*args)
        return (time.perf_counter_ns() - started) / 1e6, out
    finally:
        gc.enable()


def _spread(ms: list[float]) -> dict[str, float]:
    return {"median": statistics.median(ms), "min": min(ms), "max": max(ms)}


def measure_variant(run: Run, fold: Callable, repeats: int) -> dict[str, Any]:
    """Total (lists -> arrays -> kernel -> arrays) and kernel-only ms, and the check."""
    totals, kernels = [], []
    result: tuple = ()
    columns = run.columns.copy()
    for _ in range(repeats):
        columns = run.columns.copy()
        ms, result = _timed(fold, run, columns)
        totals.append(ms)
        cols2 = run.columns.copy()
        flat = flat_inputs(run)
        ms, _ = _timed(fold, run, cols2, flat)
        kernels.append(ms)
    return {"total_ms": _spread(totals), "kernel_ms": _spread(kernels), "columns": columns, "rows": result}


def shuffled_check(run: Run, folds: list[tuple[str, Callable]], seed: int = 35) -> dict[str, Any]:
    """Bit-exactness on the same turns with their times shuffled: turns older
    than their concepts' reference (the `older` branch, which a log in time
    order never takes) among the rest. The reference is checked against the
    project's functions on the shuffled turns too."""
    times = list(run.at_us)
    random.Random(seed).shuffle(times)
    events = [e.model_copy(update={"timestamp": EPOCH + timedelta(microseconds=t)}) for e, t in zip(run.events, times)]
    shuffled = replace(run, at_us=times, events=events)
    ref_state = reference_state(shuffled)
    ref_rows = fold_reference(shuffled, ref_state)
    out: dict[str, Any] = {"python (reference)": check_reference_against_project(shuffled, ref_state, ref_rows) or True}
    for name, fold in folds:
        columns = shuffled.columns.copy()
        rows = fold(shuffled, columns)
        out[name] = differences(shuffled, ref_state, ref_rows, columns, rows) or True
    return out


_COMPILED: list[str] = []  # numba compiles on its first call in a process


def measure(run: Run, repeats: int) -> dict[str, Any]:
    ms = []
    for _ in range(repeats):
        ref_state = reference_state(run)
        t, ref_rows = _timed(fold_reference, run, ref_state)
        ms.append(t)
    project = check_reference_against_project(run, ref_state, ref_rows)
    variants: dict[str, Any] = {
        "python (reference)": {"total_ms": _spread(ms), "kernel_ms": _spread(ms), "exact": not project,
                               "problems": project or []},
    }
    numba_fold, numba_missing = _numba_fold()
    rust_fold, rust_missing = _rust_fold()
    candidates: list[tuple[str, Callable | None, str]] = [
        ("numpy", fold_numpy, ""), ("numpy, libm factors", partial(fold_numpy, libm=True), ""),
        ("numba", numba_fold, numba_missing), ("rust (pyo3)", rust_fold, rust_missing),
    ]
    for name, fold, missing in candidates:
        if fold is None:
            variants[name] = {"missing": missing}
            continue
        entry: dict[str, Any] = {}
        if name == "numba" and not _COMPILED:
            _COMPILED.append(name)
            first, _ = _timed(fold, run, run.columns.copy())
            warm, _ = _timed(fold, run, run.columns.copy())
            entry["compile_ms"] = first - warm
        got = measure_variant(run, fold, repeats)
        problems = differences(run, ref_state, ref_rows, got.pop("columns"), got.pop("rows"))
        entry.update(got, exact=not problems, problems=problems)
        variants[name] = entry
    return {
        "shuffled_times_exact": shuffled_check(run, [(name, fold) for name, fold, _ in candidates if fold is not None]),
        "turns": len(run.turns),
        "mentions": sum(map(len, run.turns)),
        "pair_increments": sum(len(t) * (len(t) - 1) for t in run.turns),
        "concepts": len(run.ids),
        "touched_rows": len(ref_rows),
        "tick_us": run.knobs.tick_us,
        "variants": variants,
    }


# ------------------------------------------------------------------ output

def table(result: dict[str, Any]) -> str:
    ref = result["variants"]["python (reference)"]["total_ms"]["median"]
    lines = [
        f"{result['turns']:,} turns ({result['mentions']:,} mentions, {result['pair_increments']:,} pair increments, "
        f"{result['touched_rows']:,} rows touched, {result['concepts']:,} concepts)",
        "",
        "| variant | ms per run, median (min–max) | µs per turn | speed-up vs reference | kernel only, ms | bit-exact? |",
        "|---|---|---|---|---|---|",
    ]
    for name, v in result["variants"].items():
        if "missing" in v:
            lines.append(f"| {name} | {v['missing']} | | | | |")
            continue
        t, k = v["total_ms"], v["kernel_ms"]
        extra = f" (compile {v['compile_ms'] / 1000:.2f} s, not included)" if "compile_ms" in v else ""
        shuffled = result["shuffled_times_exact"].get(name)
        exact = "yes" if v["exact"] else "NO: " + "; ".join(v["problems"])
        exact += "; times shuffled: " + ("yes" if shuffled is True else f"NO: {shuffled}")
        lines.append(
            f"| {name}{extra} | {t['median']:.2f} ({t['min']:.2f}–{t['max']:.2f}) | "
            f"{t['median'] * 1000 / result['turns']:.1f} | {ref / t['median']:.1f}× | {k['median']:.2f} | "
            f"{exact} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", default="200,1000,5000", help="run lengths, comma-separated")
    parser.add_argument("--skip", type=int, default=500, help="turns of the graph folded before the run")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--factors", type=int, default=1_000_000, help="random decay factors checked per engine")
    parser.add_argument("--json", type=Path, default=Path("bench-results/spike-fold-kernel.json"))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.turns.split(",")]
    started = time.perf_counter()
    events, decays = graph_events(args.skip, max(sizes))
    print(f"log: {len(events):,} turns of {GRAPH} and {len(decays):,} ticks in {time.perf_counter() - started:.1f} s")
    factors = factor_check(args.factors)
    print(f"decay factors unlike Python's (math.exp, **) of {factors['count']:,} random ones: "
          + ", ".join(f"{k} {v}" for k, v in factors.items() if k != "count"))
    results = []
    for size in sizes:
        run = build_run(events, decays, args.skip, size)
        result = measure(run, args.repeats)
        results.append(result)
        print()
        print(table(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "command": "python -m emgas.tools.spike.fold_kernel " + " ".join(argv or []),
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                    "numpy": np.__version__},
        "skip": args.skip,
        "repeats": args.repeats,
        "decay_factors_unlike_python": factors,
        "runs": results,
    }, indent=2))
    print(f"\nwritten: {args.json}")


if __name__ == "__main__":
    main()
