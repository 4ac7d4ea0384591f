//! The batch fold's hot part for one run of turns of one graph (a spike:
//! see tools/spike/fold_kernel.py, which defines the inputs and checks this
//! kernel bit for bit against the plain-Python reference).
//!
//! (a) Activation per mention, in log order: `processors.graph._contributed`
//!     and `concept_after_mention` on the concept columns, in place.
//! (b) Pair counts: every ordered pair (a, b) of a turn's distinct concepts
//!     adds 1 to c(a, b) and keeps last = max(last, at µs); each touched row
//!     is merged with its old entries once for the whole run.
//!
//! Times are int µs since 1970; NONE (i64::MIN) stands for "no time".
//! Floating point follows the Python reference operation by operation
//! (libm's exp and pow, division of µs by 1e6, round half to even).

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::prelude::*;

const NONE: i64 = i64::MIN;
const GRID: f64 = 4294967296.0; // 2^32
const FORWARD_WINDOWS: i64 = 2;

struct Decay {
    model: i64, // 0 exponential, 1 power, 2 hybrid
    rate: f64,
    tau: f64,
    beta: f64,
    hybrid_after: i64,
}

#[inline]
fn on_grid(x: f64) -> f64 {
    (x / (1.0 / GRID)).round_ties_even() * (1.0 / GRID)
}

#[inline]
fn decay_factor(elapsed_s: f64, reinforcements: i64, p: &Decay) -> f64 {
    if elapsed_s <= 0.0 {
        return 1.0;
    }
    let power = match p.model {
        2 => reinforcements >= p.hybrid_after,
        1 => true,
        _ => false,
    };
    if power {
        (1.0 + elapsed_s / p.tau).powf(-p.beta)
    } else {
        (-p.rate * elapsed_s).exp()
    }
}

#[inline]
fn window_index(t_us: i64, window_s: f64) -> i64 {
    ((t_us as f64 / 1e6) / window_s).floor() as i64
}

struct Columns<'a> {
    activation: &'a mut [f64],
    decayed_to: &'a mut [i64],
    created_at: &'a mut [i64],
    last_accessed: &'a mut [i64],
    count: &'a mut [i64],
    retrievals: &'a [i64],
    exists: &'a mut [u8],
}

#[allow(clippy::too_many_arguments)]
fn mention(c: &mut Columns, i: usize, importance: f64, at: i64, tick: i64, p: &Decay, window_s: f64, window_us: i64, boost: f64) {
    if c.exists[i] == 0 {
        c.exists[i] = 1;
        c.activation[i] = on_grid(importance);
        c.decayed_to[i] = NONE;
        c.created_at[i] = at;
        c.last_accessed[i] = at;
        c.count[i] = 1;
        return;
    }
    let amount = boost * importance;
    let mut activation = c.activation[i];
    let mut decayed_to = c.decayed_to[i];
    let mut reference = if decayed_to != NONE { decayed_to } else { c.created_at[i] };
    let reinforcements = c.count[i] + c.retrievals[i];
    if tick != NONE && reference < tick {
        activation = on_grid(activation * decay_factor((tick - reference) as f64 / 1e6, reinforcements, p));
        decayed_to = tick;
        reference = tick;
    }
    let (older, at_window, ref_window) = if window_s > 0.0 {
        let aw = window_index(at, window_s);
        let rw = window_index(reference, window_s);
        (aw < rw, aw, rw)
    } else {
        (at < reference, 0, 0)
    };
    if older {
        let factor = decay_factor((reference - at) as f64 / 1e6, reinforcements, p);
        activation += on_grid(amount * factor);
        decayed_to = reference;
    } else {
        // a mention brings its concept forward to its own time (forward_to = at)
        if window_s > 0.0 && at_window - ref_window >= FORWARD_WINDOWS {
            let target = at_window * window_us;
            let elapsed = (target - reference) as f64 / 1e6;
            if elapsed > FORWARD_WINDOWS as f64 * window_s {
                activation = on_grid(activation * decay_factor(elapsed, reinforcements, p));
                decayed_to = target;
            }
        }
        activation += on_grid(amount);
    }
    c.activation[i] = activation;
    c.decayed_to[i] = decayed_to;
    c.count[i] += 1;
    if at < c.created_at[i] {
        c.created_at[i] = at;
    }
    if at > c.last_accessed[i] {
        c.last_accessed[i] = at;
    }
}

type Rows<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
);

/// Fold one run: activation columns changed in place; returns the new rows
/// of the touched concepts as (touched, indptr, neighbours, counts, lasts).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn fold_run<'py>(
    py: Python<'py>,
    offsets: PyReadonlyArray1<i64>,
    cids: PyReadonlyArray1<i64>,
    importance: PyReadonlyArray1<f64>,
    at_us: PyReadonlyArray1<i64>,
    mut activation: PyReadwriteArray1<f64>,
    mut decayed_to: PyReadwriteArray1<i64>,
    mut created_at: PyReadwriteArray1<i64>,
    mut last_accessed: PyReadwriteArray1<i64>,
    mut count: PyReadwriteArray1<i64>,
    retrievals: PyReadonlyArray1<i64>,
    mut exists: PyReadwriteArray1<u8>,
    row_ptr: PyReadonlyArray1<i64>,
    row_nbr: PyReadonlyArray1<i64>,
    row_count: PyReadonlyArray1<i64>,
    row_last: PyReadonlyArray1<i64>,
    tick_us: i64,
    model: i64,
    rate: f64,
    tau: f64,
    beta: f64,
    hybrid_after: i64,
    window_s: f64,
    window_us: i64,
    boost: f64,
) -> PyResult<Rows<'py>> {
    let offsets = offsets.as_slice()?;
    let cids = cids.as_slice()?;
    let importance = importance.as_slice()?;
    let at_us = at_us.as_slice()?;
    let p = Decay { model, rate, tau, beta, hybrid_after };
    let mut c = Columns {
        activation: activation.as_slice_mut()?,
        decayed_to: decayed_to.as_slice_mut()?,
        created_at: created_at.as_slice_mut()?,
        last_accessed: last_accessed.as_slice_mut()?,
        count: count.as_slice_mut()?,
        retrievals: retrievals.as_slice()?,
        exists: exists.as_slice_mut()?,
    };
    let turns = at_us.len();
    for t in 0..turns {
        for m in offsets[t] as usize..offsets[t + 1] as usize {
            mention(&mut c, cids[m] as usize, importance[m], at_us[t], tick_us, &p, window_s, window_us, boost);
        }
    }
    let rows = merged_rows(
        offsets,
        cids,
        at_us,
        c.activation.len(),
        row_ptr.as_slice()?,
        row_nbr.as_slice()?,
        row_count.as_slice()?,
        row_last.as_slice()?,
    );
    Ok((
        rows.0.into_pyarray(py),
        rows.1.into_pyarray(py),
        rows.2.into_pyarray(py),
        rows.3.into_pyarray(py),
        rows.4.into_pyarray(py),
    ))
}

type RowVecs = (Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>);

/// The run's co-occurrences per touched concept (a CSR of (other, at)),
/// summed per neighbour in a dense scratch, then merged with the old row.
#[allow(clippy::too_many_arguments)]
fn merged_rows(
    offsets: &[i64],
    cids: &[i64],
    at_us: &[i64],
    n: usize,
    row_ptr: &[i64],
    row_nbr: &[i64],
    row_count: &[i64],
    row_last: &[i64],
) -> RowVecs {
    let turns = at_us.len();
    let mut fill = vec![0i64; n + 1];
    for t in 0..turns {
        let (lo, hi) = (offsets[t] as usize, offsets[t + 1] as usize);
        if hi - lo < 2 {
            continue;
        }
        for &a in &cids[lo..hi] {
            fill[a as usize + 1] += (hi - lo - 1) as i64;
        }
    }
    let mut touched: Vec<i64> = Vec::new();
    for a in 0..n {
        if fill[a + 1] > 0 {
            touched.push(a as i64);
        }
        fill[a + 1] += fill[a];
    }
    let mut pos = fill.clone();
    let total = fill[n] as usize;
    let mut other = vec![0i64; total];
    let mut when = vec![0i64; total];
    for t in 0..turns {
        let (lo, hi) = (offsets[t] as usize, offsets[t + 1] as usize);
        if hi - lo < 2 {
            continue;
        }
        for x in lo..hi {
            let a = cids[x] as usize;
            for y in lo..hi {
                if x != y {
                    let k = pos[a] as usize;
                    other[k] = cids[y];
                    when[k] = at_us[t];
                    pos[a] += 1;
                }
            }
        }
    }
    let mut add_count = vec![0i64; n];
    let mut add_last = vec![0i64; n];
    let mut seen: Vec<i64> = Vec::new();
    let mut indptr = Vec::with_capacity(touched.len() + 1);
    indptr.push(0i64);
    let (mut out_nbr, mut out_count, mut out_last) = (Vec::new(), Vec::new(), Vec::new());
    for &a in &touched {
        let a = a as usize;
        seen.clear();
        for k in fill[a] as usize..fill[a + 1] as usize {
            let b = other[k] as usize;
            if add_count[b] == 0 {
                seen.push(b as i64);
                add_last[b] = when[k];
            } else if when[k] > add_last[b] {
                add_last[b] = when[k];
            }
            add_count[b] += 1;
        }
        seen.sort_unstable();
        let (mut i, end) = (row_ptr[a] as usize, row_ptr[a + 1] as usize);
        let mut j = 0;
        while i < end || j < seen.len() {
            if j == seen.len() || (i < end && row_nbr[i] < seen[j]) {
                out_nbr.push(row_nbr[i]);
                out_count.push(row_count[i]);
                out_last.push(row_last[i]);
                i += 1;
                continue;
            }
            let b = seen[j] as usize;
            if i < end && row_nbr[i] == seen[j] {
                out_nbr.push(row_nbr[i]);
                out_count.push(row_count[i] + add_count[b]);
                out_last.push(if row_last[i] > add_last[b] { row_last[i] } else { add_last[b] });
                i += 1;
            } else {
                out_nbr.push(seen[j]);
                out_count.push(add_count[b]);
                out_last.push(add_last[b]);
            }
            add_count[b] = 0;
            j += 1;
        }
        indptr.push(out_nbr.len() as i64);
    }
    (touched, indptr, out_nbr, out_count, out_last)
}

/// `processors.dynamics.decay_factor` elementwise (to check libm against Python's).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn decay_factors<'py>(
    py: Python<'py>,
    elapsed_s: PyReadonlyArray1<f64>,
    reinforcements: PyReadonlyArray1<i64>,
    model: i64,
    rate: f64,
    tau: f64,
    beta: f64,
    hybrid_after: i64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let p = Decay { model, rate, tau, beta, hybrid_after };
    let e = elapsed_s.as_slice()?;
    let r = reinforcements.as_slice()?;
    let out: Vec<f64> = e.iter().zip(r).map(|(&x, &k)| decay_factor(x, k, &p)).collect();
    Ok(out.into_pyarray(py))
}

#[pymodule]
fn fold_kernel_rs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fold_run, m)?)?;
    m.add_function(wrap_pyfunction!(decay_factors, m)?)?;
    Ok(())
}
