"""Compiled loops over the adjacency's rows (numba), where numpy has no
one operation for the work: the pairs of a run's cliques counted, and
every touched row merged with its pairs, in one pass each.

A row is (neighbour indices int32 sorted, pair counts int32, last
co-occurrence int64 µs). Every kernel returns new arrays and never writes
to its inputs (a row handed to a reader stays valid). They use integer
arithmetic, comparisons and min/max only, so their results are the numpy
code's bit for bit (`tests/unit/state/test_kernels.py` compares them).

Each is written here as plain Python over arrays and compiled by numba on
the first call of any of them (numba is imported then, not with this
module: a worker's start does not wait for it), the compiled code cached
on disk (`cache=True`: beside this file, or in the user's cache directory
where that is read-only; about 7 s to compile, 0.3 s to load). `warm`
compiles or loads them ahead of a fold (`emgas replay`); a worker lets its
first fold that needs them do it (`streams.runtime.warming`
says why).
"""

from __future__ import annotations

import math
import threading
from typing import Any, Callable

import numpy as np

from emgas.processors.graph import ACTIVATION_GRID

_INT64_MIN = np.iinfo(np.int64).min
_NONE_US = _INT64_MIN  # a time that is not there (None)
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
def merge_in_pool(
    spans: np.ndarray, pool_idx: np.ndarray, pool_cnt: np.ndarray, pool_last: np.ndarray, at: int,
    touched: np.ndarray, pairs: np.ndarray, counts: np.ndarray, latest: np.ndarray, n: int,
) -> tuple[int, np.ndarray]:  # pragma: no cover - compiled
    """Rows with pairs merged in, on the pool itself: each touched row
    (ascending) read where its span says, merged with its pairs (keys
    row·n + neighbour, sorted, distinct, each of a touched row: count +=
    count, last = max(last, latest), a pair not in its row yet created
    with its count and latest) and written from pool position `at` on (the
    caller has made room for every touched row's entries plus every pair),
    its span then pointing there. Nothing below `at` is written, so the
    rows not touched, and the old copies, stay as they are. Returns the
    entries written and, per pair, whether it was created: one copy of
    each row, where gathering it, merging it into new arrays and copying
    those to the pool made three."""
    m = len(pairs)
    created = np.zeros(m, dtype=np.bool_)
    k = 0
    o = at
    for r in range(len(touched)):
        row = touched[r]
        span = spans[row]
        i = span >> _SPAN_BITS
        end = i + (span & _LENGTH_MASK)
        start = o
        stop = k
        while stop < m and pairs[stop] // n == row:
            stop += 1
        while i < end or k < stop:
            if k < stop:
                other = pairs[k] - row * n
            if k >= stop or (i < end and pool_idx[i] < other):
                pool_idx[o], pool_cnt[o], pool_last[o] = pool_idx[i], pool_cnt[i], pool_last[i]
                i += 1
            elif i >= end or other < pool_idx[i]:
                pool_idx[o], pool_cnt[o], pool_last[o] = other, counts[k], latest[k]
                created[k] = True
                k += 1
            else:
                pool_idx[o], pool_cnt[o] = other, pool_cnt[i] + counts[k]
                pool_last[o] = max(pool_last[i], latest[k])
                i += 1
                k += 1
            o += 1
        spans[row] = ((start) << _SPAN_BITS) | (o - start)
    return o - at, created


# A row's distinct second ends in a merge: up to this many sorted by insertion,
# more by numba's sort (which was about half of `queued_pairs` on the bench
# fold's merges; of the limits tried there, 16, 48, 128 and 512, 48 and 128
# did best, 27 Nov).
_FEW_ENDS = 96


@_compiled_on_first_call
def _insertion_sort(values: np.ndarray) -> None:  # pragma: no cover - compiled
    """`values` sorted ascending, in place."""
    for i in range(1, len(values)):
        value = values[i]
        j = i - 1
        while j >= 0 and values[j] > value:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = value


@_compiled_on_first_call
def queued_pairs(
    members: np.ndarray, sizes: np.ndarray, at_s: np.ndarray, at_us: np.ndarray, n: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Every ordered pair (a, b), a != b, of each clique's members (`members`
    one clique after another, distinct within it; `sizes` their counts,
    `at_s` / `at_us` their event times), as keys a·n + b sorted and
    distinct, with the number of cliques holding each, the earliest of
    their times in s and the latest in µs.

    Without sorting the pairs: each clique's entries are placed under
    their first end (a counting sort by row), each row's second ends
    gathered once with their count and times in scratch arrays indexed by
    node, and only a row's distinct second ends sorted, in place (by
    insertion up to `_FEW_ENDS` of them: numba's sort of a few dozen
    integers costs several times as much)."""
    row_ptr = np.zeros(n + 1, dtype=np.int64)
    start = 0
    for c in range(len(sizes)):
        size = sizes[c]
        for x in range(start, start + size):
            row_ptr[members[x] + 1] += size - 1
        start += size
    for a in range(n):
        row_ptr[a + 1] += row_ptr[a]
    total = row_ptr[n]
    other = np.empty(total, dtype=np.int64)
    clique = np.empty(total, dtype=np.int64)
    fill = row_ptr[:n].copy()
    start = 0
    for c in range(len(sizes)):
        size = sizes[c]
        for x in range(start, start + size):
            a = members[x]
            f = fill[a]
            for y in range(start, start + size):
                if y != x:
                    other[f], clique[f] = members[y], c
                    f += 1
            fill[a] = f
        start += size
    pairs = np.empty(total, dtype=np.int64)
    counts = np.zeros(total, dtype=np.int64)
    earliest = np.empty(total, dtype=np.float64)
    latest = np.empty(total, dtype=np.int64)
    seen = np.full(n, -1, dtype=np.int64)  # node -> the row that gathered it last
    count = np.zeros(n, dtype=np.int64)
    first_s = np.empty(n, dtype=np.float64)
    last_us = np.empty(n, dtype=np.int64)
    d = 0
    for a in range(n):
        lo, hi = row_ptr[a], row_ptr[a + 1]
        if lo == hi:
            continue
        distinct = 0
        for e in range(lo, hi):
            b, c = other[e], clique[e]
            if seen[b] != a:
                seen[b] = a
                count[b], first_s[b], last_us[b] = 0, np.inf, _INT64_MIN
                other[lo + distinct] = b  # the row's distinct ends, in place (e >= lo + distinct)
                distinct += 1
            count[b] += 1
            first_s[b] = min(first_s[b], at_s[c])
            last_us[b] = max(last_us[b], at_us[c])
        ends = other[lo:lo + distinct]
        if distinct <= _FEW_ENDS:
            _insertion_sort(ends)
        else:
            ends.sort()
        for b in ends:
            pairs[d], counts[d], earliest[d], latest[d] = np.int64(a) * n + b, count[b], first_s[b], last_us[b]
            d += 1
    return pairs[:d], counts[:d], earliest[:d], latest[:d]


@_compiled_on_first_call
def upper_row_payloads(
    spans: np.ndarray, pool_idx: np.ndarray, pool_cnt: np.ndarray, pool_last: np.ndarray, rows: np.ndarray,
    rank: np.ndarray, text: np.ndarray, bounds: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The records (`state.rows`) of the pool's rows `rows`, one after
    another in one buffer: (buffer, ptr), row k's at buffer[ptr[k]:ptr[k + 1]],
    empty where the row has no entry past its own id. A row's record holds
    the entries whose neighbour ranks after the row's own node (`rank`: each
    node's place in id order; each edge is kept in its lower end's row),
    sorted by rank: n as a big-endian uint32, n × (count, last µs) as
    big-endian int64, the n neighbour ids in UTF-8 (node k's at
    text[bounds[k]:bounds[k + 1]]), NUL-separated. A row of up to 32 such
    entries is sorted by insertion, a longer one by argsort (the ranks in a
    row are distinct: one order either way)."""
    n_rows = len(rows)
    kept = np.zeros(n_rows, dtype=np.int64)
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    widest = 0
    for k in range(n_rows):
        r = rows[k]
        n, size = 0, 0
        if r < len(spans):
            start = spans[r] >> _SPAN_BITS
            own = rank[r]
            for e in range(start, start + (spans[r] & _LENGTH_MASK)):
                other = pool_idx[e]
                if rank[other] > own:
                    n += 1
                    size += bounds[other + 1] - bounds[other]
        kept[k] = n
        ptr[k + 1] = ptr[k] + (4 + 17 * n - 1 + size if n > 0 else 0)
        widest = max(widest, n)
    out = np.empty(ptr[n_rows], dtype=np.uint8)
    at = np.empty(widest, dtype=np.int64)  # a row's kept entries: pool positions, then sorted by rank
    keys = np.empty(widest, dtype=np.int64)
    for k in range(n_rows):
        n = kept[k]
        if n == 0:
            continue
        r = rows[k]
        start = spans[r] >> _SPAN_BITS
        own = rank[r]
        m = 0
        for e in range(start, start + (spans[r] & _LENGTH_MASK)):
            key = rank[pool_idx[e]]
            if key > own:
                if n > 32:
                    at[m], keys[m] = e, key
                else:  # insertion: shift the larger keys up
                    y = m
                    while y > 0 and keys[y - 1] > key:
                        at[y], keys[y] = at[y - 1], keys[y - 1]
                        y -= 1
                    at[y], keys[y] = e, key
                m += 1
        if n > 32:
            order = np.argsort(keys[:n])
            at[:n] = at[:n][order]
        o = ptr[k]
        for b in range(4):
            out[o + b] = (n >> (24 - 8 * b)) & 0xFF
        o += 4
        for x in range(n):
            count, last = np.int64(pool_cnt[at[x]]), np.int64(pool_last[at[x]])
            for b in range(8):
                out[o + b] = (count >> (56 - 8 * b)) & 0xFF
                out[o + 8 + b] = (last >> (56 - 8 * b)) & 0xFF
            o += 16
        for x in range(n):
            if x > 0:
                out[o] = 0
                o += 1
            other = pool_idx[at[x]]
            for j in range(bounds[other], bounds[other + 1]):
                out[o] = text[j]
                o += 1
    return out, ptr


@_compiled_on_first_call
def _utf8_valid(buf: np.ndarray, lo: int, hi: int) -> bool:  # pragma: no cover - compiled
    """Whether buf[lo:hi] is UTF-8 as Python decodes it (no overlong form,
    no surrogate, nothing past U+10FFFF)."""
    i = lo
    while i < hi:
        c = buf[i]
        if c < 0x80:
            i += 1
            continue
        if 0xC2 <= c <= 0xDF:
            size, low, high = 2, 0x80, 0xBF
        elif 0xE0 <= c <= 0xEF:
            size = 3
            low = 0xA0 if c == 0xE0 else 0x80
            high = 0x9F if c == 0xED else 0xBF
        elif 0xF0 <= c <= 0xF4:
            size = 4
            low = 0x90 if c == 0xF0 else 0x80
            high = 0x8F if c == 0xF4 else 0xBF
        else:
            return False
        if i + size > hi or buf[i + 1] < low or buf[i + 1] > high:
            return False
        for j in range(i + 2, i + size):
            if buf[j] < 0x80 or buf[j] > 0xBF:
                return False
        i += size
    return True


@_compiled_on_first_call
def _put_escaped(out: np.ndarray, o: int, buf: np.ndarray, lo: int, hi: int, write: bool) -> int:  # pragma: no cover - compiled
    """UTF-8 text buf[lo:hi] at out[o:] as `json.encoder.encode_basestring`
    writes it (quoted; `"`, the backslash and control characters escaped, the
    rest as it is; with `write` False only measured): the offset after it."""
    if write:
        out[o] = 0x22
    o += 1
    for i in range(lo, hi):
        c = buf[i]
        if c == 0x22 or c == 0x5C:
            if write:
                out[o], out[o + 1] = 0x5C, c
            o += 2
        elif c < 0x20:
            short = 0
            if c == 0x08:
                short = 0x62  # b
            elif c == 0x09:
                short = 0x74  # t
            elif c == 0x0A:
                short = 0x6E  # n
            elif c == 0x0C:
                short = 0x66  # f
            elif c == 0x0D:
                short = 0x72  # r
            if short:
                if write:
                    out[o], out[o + 1] = 0x5C, short
                o += 2
            else:  # \u00XX, its hex digits in lower case
                if write:
                    low = c & 0xF
                    out[o], out[o + 1], out[o + 2], out[o + 3] = 0x5C, 0x75, 0x30, 0x30
                    out[o + 4], out[o + 5] = 0x30 + (c >> 4), (0x30 + low if low < 10 else 0x57 + low)
                o += 6
        else:
            if write:
                out[o] = c
            o += 1
    if write:
        out[o] = 0x22
    return o + 1


@_compiled_on_first_call
def _put_int(out: np.ndarray, o: int, value: np.int64, write: bool) -> int:  # pragma: no cover - compiled
    """`value` in decimal at out[o:] (with `write` False only measured): the offset after it."""
    if value < 0:
        if write:
            out[o] = 0x2D
        o += 1
    magnitude = np.uint64(-(value + 1)) + np.uint64(1) if value < 0 else np.uint64(value)
    digits, rest = 1, magnitude
    while rest >= np.uint64(10):
        rest //= np.uint64(10)
        digits += 1
    if write:
        for at in range(o + digits - 1, o - 1, -1):
            out[at] = 0x30 + np.uint8(magnitude % np.uint64(10))
            magnitude //= np.uint64(10)
    return o + digits


@_compiled_on_first_call
def _row_int(raw: np.ndarray, at: int) -> np.int64:  # pragma: no cover - compiled
    """The big-endian int64 at raw[at:at + 8]."""
    value = np.uint64(0)
    for b in range(8):
        value = (value << np.uint64(8)) | np.uint64(raw[at + b])
    return np.int64(value)


@_compiled_on_first_call
def _id_before(ids: np.ndarray, lo: int, hi: int, rows: np.ndarray, a: int, b: int) -> bool:  # pragma: no cover - compiled
    """Whether ids[lo:hi] < rows[a:b], byte by byte (UTF-8: as their strings compare)."""
    for j in range(min(hi - lo, b - a)):
        if ids[lo + j] != rows[a + j]:
            return ids[lo + j] < rows[a + j]
    return hi - lo < b - a


@_compiled_on_first_call
def _pair_pass(
    ids: np.ndarray, id_at: np.ndarray, rows: np.ndarray, row_at: np.ndarray, starts: np.ndarray, head: np.ndarray,
    out: np.ndarray, write: bool,
) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """`pair_line_bytes`' lines written to `out` (with `write` False only
    measured): (bytes, lines, -1), or (0, 0, k) where row k is not as the
    layout says (its ids not UTF-8, fewer bytes than its n entries)."""
    o, lines = 0, 0
    for k in range(len(id_at) - 1):
        lo, hi, key_lo, key_hi = row_at[k], row_at[k + 1], id_at[k], id_at[k + 1]
        if not write and (0 < hi - lo < 4 or not _utf8_valid(ids, key_lo, key_hi)):
            return 0, 0, k
        if hi - lo < 4:
            continue
        n = (np.int64(rows[lo]) << 24) | (np.int64(rows[lo + 1]) << 16) | (np.int64(rows[lo + 2]) << 8) | rows[lo + 3]
        if n == 0:
            continue
        text = lo + 4 + 16 * n
        if not write and (text > hi or not _utf8_valid(rows, text, hi)):
            return 0, 0, k
        parts = 0
        starts[0] = text
        for i in range(text, hi):
            if rows[i] == 0:
                parts += 1
                starts[parts] = i + 1
        parts += 1
        starts[parts] = hi + 1
        first, stop = 0, parts  # bisect_right of the row's own id among its ids
        while first < stop:
            mid = (first + stop) // 2
            if _id_before(ids, key_lo, key_hi, rows, starts[mid], starts[mid + 1] - 1):
                stop = mid
            else:
                first = mid + 1
        if first >= min(parts, n):
            continue
        head[0], head[1] = 0x5B, 0x5B  # the row's lines start alike: [["a",
        head_size = _put_escaped(head, 2, ids, key_lo, key_hi, True) + 1
        head[head_size - 1] = 0x2C
        for x in range(first, min(parts, n)):
            if write:
                out[o:o + head_size] = head[:head_size]
            o = _put_escaped(out, o + head_size, rows, starts[x], starts[x + 1] - 1, write)
            if write:
                out[o], out[o + 1], out[o + 2] = 0x5D, 0x2C, 0x5B
            o = _put_int(out, o + 3, _row_int(rows, lo + 4 + 16 * x), write)
            if write:
                out[o] = 0x2C
            o = _put_int(out, o + 1, _row_int(rows, lo + 12 + 16 * x), write)
            if write:
                out[o], out[o + 1], out[o + 2] = 0x5D, 0x5D, 0x0A
            o += 3
            lines += 1
    return o, lines, -1


@_compiled_on_first_call
def pair_line_bytes(
    ids: np.ndarray, id_at: np.ndarray, rows: np.ndarray, row_at: np.ndarray,
) -> tuple[np.ndarray, int, int]:  # pragma: no cover - compiled
    """The digest's pair lines (`state.digest.pair_line`), each followed by a
    newline, in one buffer: for row k (its concept's id ids[id_at[k]:id_at[k + 1]],
    its record (`state.rows`) rows[row_at[k]:row_at[k + 1]]), in the order
    given, a line per entry whose neighbour id comes after the row's own
    (where `bisect_right` finds the row's id among its neighbours' ids).
    Returns (buffer, lines, -1), or (empty, 0, k) where row k is not as its
    layout says (not UTF-8, or shorter than its entries)."""
    widest, longest = 1, 0
    for k in range(len(id_at) - 1):
        longest = max(longest, id_at[k + 1] - id_at[k])
    for k in range(len(row_at) - 1):
        count = 1
        for i in range(row_at[k], row_at[k + 1]):
            if rows[i] == 0:
                count += 1
        widest = max(widest, count)
    starts = np.empty(widest + 2, dtype=np.int64)  # a row's kth id at rows[starts[k]:starts[k + 1] - 1]
    head = np.empty(6 * longest + 5, dtype=np.uint8)
    size, lines, bad = _pair_pass(ids, id_at, rows, row_at, starts, head, np.empty(0, dtype=np.uint8), False)
    if bad >= 0:
        return np.empty(0, dtype=np.uint8), 0, bad
    out = np.empty(size, dtype=np.uint8)
    _pair_pass(ids, id_at, rows, row_at, starts, head, out, True)
    return out, lines, -1


# Decay models as the mentions kernel takes them (`processors.dynamics.DecayParams.model`).
MODEL_CODES = {"exponential": 0, "power": 1, "hybrid": 2}
# Where a concept's decayed_to comes from, after the mentions kernel.
KEPT, TICK, WINDOW, CREATED = 0, 1, 2, 3


@_compiled_on_first_call
def decay_factor(elapsed_s: float, reinforcements: int, model: int, rate: float, tau_s: float, beta: float,
                 hybrid_after: int) -> float:  # pragma: no cover - compiled
    """`processors.dynamics.decay_factor`, the same operations in the same order."""
    if elapsed_s <= 0:
        return 1.0
    if model == 1 or (model == 2 and reinforcements >= hybrid_after):
        return (1.0 + elapsed_s / tau_s) ** -beta
    return math.exp(-rate * elapsed_s)


@_compiled_on_first_call
def on_grid(x: float) -> float:  # pragma: no cover - compiled
    """`processors.graph.on_grid`: round half to even, as Python's round."""
    return np.rint(x / ACTIVATION_GRID) * ACTIVATION_GRID


@_compiled_on_first_call
def mention_all(
    slot: np.ndarray, at_us: np.ndarray, importance: np.ndarray, meta_of: np.ndarray,
    activation: np.ndarray, decayed_us: np.ndarray, decayed_kind: np.ndarray, decayed_ref: np.ndarray,
    created_us: np.ndarray, created_src: np.ndarray, last_us: np.ndarray, last_src: np.ndarray,
    reinforcements: np.ndarray, fresh: np.ndarray, tie: np.ndarray,
    tick_us: np.ndarray, has_tick: np.ndarray, model: np.ndarray, rate: np.ndarray, tau_s: np.ndarray,
    beta: np.ndarray, hybrid_after: np.ndarray, window_s: float, window_us: int, boost: float,
) -> None:  # pragma: no cover - compiled
    """Every mention m of a run, in order, applied to its concept slot[m]
    as `processors.graph.Mentions.mention` applies it (`contributed`:
    brought to the graph's last tick, then the contribution boost ·
    importance, older than the concept's reference or with it carried
    forward to its window), on the concepts' columns, in place.

    Times are µs since 1970; a duration in s is (µs difference) / 1e6, as
    `timedelta.total_seconds` computes it. The meta a mention reads is
    meta_of[m] (a tick inside the run moves it). decayed_* says where the
    concept's decayed_to is: KEPT (as held; decayed_us < 0 and kind KEPT
    with no decayed_to held: None), TICK (meta decayed_ref), WINDOW (the
    start of window decayed_ref) or CREATED (created_at as it was then:
    decayed_ref -1 the held one, else mention decayed_ref's time).
    created_src / last_src: -1 the held time, else the mention whose time
    it is. fresh: a concept not held (its first mention creates it). tie: a
    mention at the instant of created_at, whose text only Python can compare."""
    for m in range(len(slot)):
        c, at, j = slot[m], at_us[m], meta_of[m]
        if fresh[c]:
            fresh[c] = False
            activation[c] = on_grid(importance[m])
            created_us[c], created_src[c], last_us[c], last_src[c] = at, m, at, m
            reinforcements[c] = 1
            continue
        has_decayed = decayed_us[c] != _NONE_US
        if has_decayed:
            ref, ref_kind, ref_ref = decayed_us[c], decayed_kind[c], decayed_ref[c]
        else:
            ref, ref_kind, ref_ref = created_us[c], CREATED, created_src[c]
        a = activation[c]
        r = reinforcements[c]
        if has_tick[j] and ref < tick_us[j]:
            a = on_grid(a * decay_factor((tick_us[j] - ref) / 1e6, r, model[j], rate[j], tau_s[j], beta[j], hybrid_after[j]))
            ref, ref_kind, ref_ref = tick_us[j], TICK, j
            decayed_us[c], decayed_kind[c], decayed_ref[c] = ref, TICK, j
        amount = boost * importance[m]
        at_window = ref_window = 0
        if window_s > 0:
            at_window = math.floor((at / 1e6) / window_s)
            ref_window = math.floor((ref / 1e6) / window_s)
            older = at_window < ref_window
        else:
            older = at < ref
        if older:
            a = a + on_grid(amount * decay_factor((ref - at) / 1e6, r, model[j], rate[j], tau_s[j], beta[j], hybrid_after[j]))
            decayed_us[c], decayed_kind[c], decayed_ref[c] = ref, ref_kind, ref_ref
        else:
            if window_s > 0 and at_window - ref_window >= 2:  # `graph.FORWARD_WINDOWS`
                target = at_window * window_us
                elapsed = (target - ref) / 1e6
                if elapsed > 2 * window_s:
                    a = on_grid(a * decay_factor(elapsed, r, model[j], rate[j], tau_s[j], beta[j], hybrid_after[j]))
                    decayed_us[c], decayed_kind[c], decayed_ref[c] = target, WINDOW, at_window
            a = a + on_grid(amount)
        activation[c] = a
        reinforcements[c] = r + 1
        if at == created_us[c]:
            tie[c] = True
        if at < created_us[c]:
            created_us[c], created_src[c] = at, m
        if at > last_us[c]:
            last_us[c], last_src[c] = at, m


# A row's span in `state.adjacency`'s pool: its start (high bits) and its length (low bits).
_SPAN_BITS = 32
_LENGTH_MASK = (1 << _SPAN_BITS) - 1


@_compiled_on_first_call
def gather_rows(
    spans: np.ndarray, pool_idx: np.ndarray, pool_cnt: np.ndarray, pool_last: np.ndarray, rows: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The rows `rows` of a pool (each at its span), one after another
    (copies): row k at [ptr[k], ptr[k + 1])."""
    ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    for k in range(len(rows)):
        ptr[k + 1] = ptr[k] + (spans[rows[k]] & _LENGTH_MASK)
    total = ptr[-1]
    idx = np.empty(total, dtype=np.int32)
    cnt = np.empty(total, dtype=np.int32)
    last = np.empty(total, dtype=np.int64)
    for k in range(len(rows)):
        start = spans[rows[k]] >> _SPAN_BITS
        o = ptr[k]
        for e in range(ptr[k + 1] - o):
            idx[o + e], cnt[o + e], last[o + e] = pool_idx[start + e], pool_cnt[start + e], pool_last[start + e]
    return ptr, idx, cnt, last


@_compiled_on_first_call
def find_pairs(
    spans: np.ndarray, pool_idx: np.ndarray, pool_cnt: np.ndarray, pool_last: np.ndarray, rows: np.ndarray,
    others: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Per k: whether row rows[k] holds others[k] (a row < 0, or past the
    spans, holds nothing), and the entry's count and last µs (0 where not)."""
    m = len(rows)
    found = np.zeros(m, dtype=np.bool_)
    counts = np.zeros(m, dtype=np.int64)
    lasts = np.zeros(m, dtype=np.int64)
    for k in range(m):
        r = rows[k]
        if r < 0 or r >= len(spans) or others[k] < 0:
            continue
        lo = spans[r] >> _SPAN_BITS
        end = hi = lo + (spans[r] & _LENGTH_MASK)
        while lo < hi:  # the first entry >= others[k]
            mid = (lo + hi) // 2
            if pool_idx[mid] < others[k]:
                lo = mid + 1
            else:
                hi = mid
        if lo < end and pool_idx[lo] == others[k]:
            found[k] = True
            counts[k] = pool_cnt[lo]
            lasts[k] = pool_last[lo]
    return found, counts, lasts


@_compiled_on_first_call
def drop_pairs(
    spans: np.ndarray, pool_idx: np.ndarray, pool_cnt: np.ndarray, pool_last: np.ndarray, src: np.ndarray,
    dst: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """The rows that lose an entry when each directed entry (src[k], dst[k])
    goes (sorted by (src, dst); ones not held are ignored): those rows,
    their entries left one after another (row k at [ptr[k], ptr[k + 1])),
    and how many entries went."""
    m = len(src)
    changed = np.empty(m, dtype=np.int64)
    ptr = np.zeros(m + 1, dtype=np.int64)
    total = 0
    for k in range(m):  # an upper bound of what the changed rows keep
        if k == 0 or src[k] != src[k - 1]:
            total += spans[src[k]] & _LENGTH_MASK
    idx = np.empty(total, dtype=np.int32)
    cnt = np.empty(total, dtype=np.int32)
    last = np.empty(total, dtype=np.int64)
    rows = o = dropped = 0
    k = 0
    while k < m:
        r = src[k]
        stop = k
        while stop < m and src[stop] == r:
            stop += 1
        start = spans[r] >> _SPAN_BITS
        end = start + (spans[r] & _LENGTH_MASK)
        o0, gone, j = o, 0, k
        for e in range(start, end):
            while j < stop and dst[j] < pool_idx[e]:
                j += 1
            if j < stop and dst[j] == pool_idx[e]:
                gone += 1
                j += 1
                continue
            idx[o], cnt[o], last[o] = pool_idx[e], pool_cnt[e], pool_last[e]
            o += 1
        if gone:
            changed[rows] = r
            rows += 1
            ptr[rows] = o
            dropped += gone
        else:
            o = o0  # the row is unchanged: not written again
        k = stop
    return changed[:rows], ptr[: rows + 1], idx[:o], cnt[:o], last[:o], dropped


def loaded() -> bool:
    """Whether this process has compiled or loaded the kernels already (a
    caller with a Python way of its own may take it rather than wait for
    them: a fresh machine compiles them in about 7 s)."""
    return all(hasattr(globals()[name], "signatures") for name in _SOURCES)


def warm() -> None:
    """Compile (or load from the cache) every kernel for the types the adjacency passes."""
    _compile()
    idx, cnt, last = np.array([1, 3], dtype=np.int32), np.array([1, 1], dtype=np.int32), np.zeros(2, dtype=np.int64)
    others = np.array([2, 3], dtype=np.int32)
    queued_pairs(others, np.array([2], dtype=np.int64), np.zeros(1), np.zeros(1, dtype=np.int64), 4)
    spans = np.array([2], dtype=np.int64)  # row 0: entries 0 and 1
    upper_row_payloads(
        spans, idx, cnt, last, np.zeros(1, dtype=np.int64), np.arange(4, dtype=np.int64), np.ones(4, dtype=np.uint8),
        np.arange(5, dtype=np.int64),
    )
    gather_rows(spans, idx, cnt, last, np.zeros(1, dtype=np.int64))
    pool_idx, pool_cnt, pool_last = np.zeros(6, dtype=np.int32), np.ones(6, dtype=np.int32), np.zeros(6, dtype=np.int64)
    pool_idx[:2] = idx
    merge_in_pool(
        spans.copy(), pool_idx, pool_cnt, pool_last, 2, np.zeros(1, dtype=np.int64), np.array([2], dtype=np.int64),
        np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.int64), 4,
    )
    find_pairs(spans, idx, cnt, last, np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64))
    text = np.frombuffer(b"ab", dtype=np.uint8)
    pair_line_bytes(text, np.array([0, 1], dtype=np.int64), text, np.array([0, 2], dtype=np.int64))
    drop_pairs(spans, idx, cnt, last, np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64))
    one_i, one_f, one_b = np.zeros(1, dtype=np.int64), np.zeros(1), np.zeros(1, dtype=np.bool_)
    mention_all(
        one_i, one_i.copy(), np.ones(1), one_i.copy(), one_f.copy(), np.full(1, _NONE_US, dtype=np.int64),
        one_i.copy(), one_i.copy(), one_i.copy(), one_i.copy(), one_i.copy(), one_i.copy(), one_i.copy(),
        np.ones(1, dtype=np.bool_), one_b.copy(), one_i.copy(), one_b.copy(), one_i.copy(), one_f.copy(),
        np.ones(1), np.ones(1), one_i.copy(), 3600.0, 3_600_000_000, 1.0,
    )
