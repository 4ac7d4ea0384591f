"""Association strength between concepts, from co-occurrence counts.

Counts are kept per graph: c(x) turns mentioning x, c(x, y) turns
mentioning both, N turns observed. Weights are derived from the counts
when read, so they are always exact for the current N (storing weights
would make every edge stale whenever N grows).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

WeightKind = Literal["ppmi", "ppmi_norm"]


def ppmi(pair: np.ndarray, cx: float | np.ndarray, cy: np.ndarray, n: float) -> np.ndarray:
    """PPMI(x, y) = max(0, log(p(x,y) / (p(x)·p(y)))) in nats, p(·) = count / N.

    Equivalently max(0, log(c(x,y)·N / (c(x)·c(y)))). Zero pair counts give 0.
    """
    pair = np.asarray(pair, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(pair * n / (np.asarray(cx, dtype=np.float64) * cy))
    return np.where(pair > 0, np.maximum(pmi, 0.0), 0.0)


def ppmi_norm(pair: np.ndarray, cx: float | np.ndarray, cy: np.ndarray, n: float) -> np.ndarray:
    """Normalised PPMI = max(0, NPMI) = PPMI(x,y) / −log p(x,y), unitless, in [0, 1].

    1 when x and y only ever occur together; 0 when independent or when
    they co-occur in every turn (−log p(x,y) = 0).
    """
    pair = np.asarray(pair, dtype=np.float64)
    raw = ppmi(pair, cx, cy, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = -np.log(pair / n)
    return np.where((pair > 0) & (denom > 0), raw / np.where(denom > 0, denom, 1.0), 0.0)


def edge_weights(
    kind: WeightKind, pair: np.ndarray, cx: float, cy: np.ndarray, n: float
) -> np.ndarray:
    """Weights W[x, ·] of the edges from x to the concepts whose counts are `cy`."""
    return ppmi(pair, cx, cy, n) if kind == "ppmi" else ppmi_norm(pair, cx, cy, n)


def specificity(counts: np.ndarray, n: float) -> np.ndarray:
    """Specificity in [0, 1]: log(N / c(x)) / log(N) (normalised IDF; 1 for N ≤ 1).

    A hub mentioned in every turn (speaker names, "today") gets 0, a
    concept mentioned once gets 1. Used to keep hubs from drowning rankings.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if n <= 1:
        return np.ones_like(counts)
    with np.errstate(divide="ignore"):
        return np.clip(np.log(n / np.maximum(counts, 1.0)) / np.log(n), 0.0, 1.0)


def outgoing_weights(
    kind: WeightKind, fan: bool, pair: np.ndarray, cx: float, cy: np.ndarray, n: float
) -> np.ndarray:
    """Weights used to spread from x. With `fan` (ACT-R's fan effect) they are
    divided by their sum, W[x,j] / Σ_k W[x,k], so a firing node sends out
    exactly A·D in total whatever its degree: energy is conserved instead of
    growing with each clique it crosses, and a hub's energy is spread thin."""
    weights = edge_weights(kind, pair, cx, cy, n)
    total = weights.sum()
    return weights / total if fan and total > 0 else weights
