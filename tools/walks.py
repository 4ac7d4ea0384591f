"""Graph walks used as retrieval baselines, over a graph given as edge arrays.

The graph is (src, dst, weight) arrays of directed edges (both directions
of each association) over nodes 0..n-1. Pure numpy: no scipy here, so a
sparse matrix–vector product is a `bincount` over the edges.

- Personalised PageRank (HippoRAG): r = (1 − α)·s + α·Pᵀr, s uniform over
  the seeds, P row-stochastic (weights divided by the row sum), α the
  damping (HippoRAG uses 0.5); power iteration until Σ|Δr| < tol.
- MaiBot (seeds/002): from each keyword, breadth first to `max_depth` hops,
  a neighbour reached with activation a − 1/strength (strength = pair
  count) if that is positive; activations summed over keywords. MaiBot
  walks every path; here a node is expanded again only with a higher
  activation than before for the same keyword, which gives the same
  maximum per path length without the exponential blow-up.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

import numpy as np


def personalised_pagerank(
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    seeds: Sequence[int],
    damping: float = 0.5,
    tol: float = 1e-8,
    max_iterations: int = 100,
) -> np.ndarray:
    """PPR scores (sum 1 when every node has out-edges; dangling mass is dropped)."""
    rank = np.zeros(n)
    if not seeds:
        return rank
    restart = np.zeros(n)
    restart[list(seeds)] = 1.0 / len(seeds)
    out = np.bincount(src, weights=weight, minlength=n)
    step = np.where(out[src] > 0, weight / np.where(out[src] > 0, out[src], 1.0), 0.0)
    rank = restart.copy()
    for _ in range(max_iterations):
        spread = np.bincount(dst, weights=step * rank[src], minlength=n)
        new = (1.0 - damping) * restart + damping * spread
        change = float(np.abs(new - rank).sum())
        rank = new
        if change < tol:
            break
    return rank


def maibot_activation(
    neighbours: Sequence[dict[int, int]], keywords: Sequence[int], max_depth: int = 3
) -> dict[int, float]:
    """Node -> activation summed over keywords; `neighbours[i]` maps j -> strength c(i, j)."""
    total: dict[int, float] = {}
    for keyword in keywords:
        best = {keyword: 1.0}
        queue = deque([(keyword, 1.0, 0)])
        while queue:
            node, activation, depth = queue.popleft()
            if activation <= 0 or depth >= max_depth or activation < best.get(node, 0.0):
                continue
            for other, strength in neighbours[node].items():
                reached = activation - 1.0 / strength
                if reached > best.get(other, 0.0):
                    best[other] = reached
                    queue.append((other, reached, depth + 1))
        for node, activation in best.items():
            total[node] = total.get(node, 0.0) + activation
    return total
