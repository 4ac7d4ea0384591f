"""A graph view as flat arrays, for the baselines and the benchmark (not the product's query path).

Built from `GraphView`'s public reads only: its spreading weights
(`neighbours`) and its pair counts (`neighbour_counts`).
"""

from __future__ import annotations

import numpy as np

from emgas.processors.association import WeightKind
from emgas.state.view import GraphView


def edge_arrays(view: GraphView, kind: WeightKind) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, weight) of every directed edge, weights as `view.neighbours(kind, fan=False)`."""
    weighted = view.neighbours(kind, fan=False)
    parts = [(i, *weighted(i)) for i in view.index.values()]
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    src = np.concatenate([np.full(len(idx), i, dtype=np.int64) for i, idx, _ in parts])
    dst = np.concatenate([idx for _, idx, _ in parts])
    weight = np.concatenate([w for _, _, w in parts])
    return src, dst, weight


def strengths(view: GraphView) -> list[dict[int, int]]:
    """Per node slot, neighbour -> pair count c(i, j) (for the MaiBot baseline)."""
    rows = (view.neighbour_counts(i) for i in range(view.size))
    return [dict(zip(idx.tolist(), counts.tolist())) for idx, counts in rows]


def degrees(view: GraphView) -> np.ndarray:
    """Per node slot, how many neighbours it has."""
    return np.array([len(view.neighbour_counts(i)[0]) for i in range(view.size)], dtype=np.float64)
