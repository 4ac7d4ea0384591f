"""A run's concept mentions folded on columns: `processors.graph.Mentions`
without a Python step per mention's arithmetic.

A run of turns (`state.turn_run`) mentions each of its concepts one or more
times; every mention changes the concept's values as `Mentions.mention`
does (`processors.graph.contributed` for its activation). Here the run's
mentions are gathered as arrays (concept slot, time in µs, importance, the
meta they read) and applied in one compiled loop (`kernels.mention_all`),
on one column per value, with the same floating-point operations in the
same order: the values the run leaves are Mentions' bit for bit
(`tests/unit/test_mention_columns.py`).

The kernel works on instants (µs); a record keeps the datetime objects it
was given, with their offsets. So it says which object each time is (the
held one, a mention's, a tick's, a window's start) and the objects are
taken from there. A text whose mention falls at the very instant of the
concept's creation is compared as Python compares strings, after the kernel.

`columns_apply(params)` says whether the kernel can: its window times are
whole µs only for a window of whole seconds (else `Mentions` folds the run).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Mapping, Sequence

import numpy as np

from emgas.processors.dynamics import EPOCH
from emgas.processors.events import Concept
from emgas.processors.graph import GraphMeta, GraphParams
from emgas.state import kernels
from emgas.state.repository import to_us

_NONE_US = np.iinfo(np.int64).min


def columns_apply(params: GraphParams) -> bool:
    """Whether `MentionColumns` folds mentions under `params` (a window of whole seconds, or none)."""
    return params.window_s <= 0 or float(params.window_s).is_integer()


class MentionColumns:
    """A run's mentions of one graph version, gathered (`ticked`, `turn`)
    and folded at once (`values`)."""

    def __init__(self, held: Mapping[str, list], meta: GraphMeta, params: GraphParams) -> None:
        """`held`: the values of the concepts stored before the run (read, never changed)."""
        self._held, self._params = held, params
        self._metas = [meta]
        self._slots: dict[str, int] = {}  # concept id -> its column
        self._slot: list[int] = []  # per mention: its concept's column
        self._at_us: list[int] = []
        self._at: list[datetime] = []
        self._importance: list[float] = []
        self._meta_of: list[int] = []
        self._texts: list[str] = []

    def ticked(self, meta: GraphMeta) -> None:
        """A tick that lists nothing, inside the run: the mentions after it read `meta`."""
        self._metas.append(meta)

    def turn(self, concepts: Sequence[Concept], at: datetime) -> None:
        """A turn's mentions, at event time `at`, in its order."""
        slots, slot = self._slots, self._slot
        for concept in concepts:
            column = slots.get(concept.id)
            if column is None:
                column = slots[concept.id] = len(slots)
            slot.append(column)
            self._texts.append(concept.text)
            self._importance.append(concept.importance)
        k = len(concepts)
        self._at_us.extend([to_us(at)] * k)
        self._at.extend([at] * k)
        self._meta_of.extend([len(self._metas) - 1] * k)

    def values(self) -> dict[str, list]:
        """Every concept mentioned, as its values (`Mentions`' order) after the run's last mention of it."""
        if not self._slots:
            return {}
        ids = list(self._slots)
        held = [self._held.get(cid) for cid in ids]
        c = _Columns(held)
        slot = np.array(self._slot, dtype=np.int64)
        at_us = np.array(self._at_us, dtype=np.int64)
        c.mention_all(slot, at_us, self._importance, self._meta_of, _MetaTable(self._metas, self._params), self._params)
        counts = np.bincount(slot, minlength=len(ids)).tolist()
        ties = self._tied_texts(np.flatnonzero(c.tie).tolist(), held, slot, at_us)
        at, texts = self._at, self._texts
        out = {}
        for k, (cid, old, activation, created_src, last_src, kind, ref) in enumerate(zip(
            ids, held, c.activation.tolist(), c.created_src.tolist(), c.last_src.tolist(), c.decayed_kind.tolist(),
            c.decayed_ref.tolist(),
        )):
            # Each time the object the kernel points at: the held one (-1) or a mention's.
            created = old[3] if created_src < 0 else at[created_src]
            last = old[4] if last_src < 0 else at[last_src]
            if k in ties:
                text = ties[k]
            else:
                text = old[0] if created_src < 0 else texts[created_src]
            decayed = self._decayed(kind, ref, old)
            if old is None:
                out[cid] = [text, counts[k], activation, created, last, decayed, 0, None, None]
            else:
                out[cid] = [text, old[1] + counts[k], activation, created, last, decayed, *old[6:]]
        return out

    def _decayed(self, kind: int, ref: int, old: list | None) -> datetime | None:
        if kind == kernels.TICK:
            return self._metas[ref].decayed_to
        if kind == kernels.WINDOW:
            return EPOCH + timedelta(seconds=ref * self._params.window_s)  # `dynamics.window_start`
        if kind == kernels.CREATED:
            return old[3] if ref < 0 else self._at[ref]  # type: ignore[index]
        return None if old is None else old[5]

    def _tied_texts(self, tied: list[int], held: list[list | None], slot: np.ndarray,
                    at_us: np.ndarray) -> dict[int, str]:
        """The text `Mentions` keeps for each tied column: the earliest
        mention's (ties: the smallest text), mention by mention as it
        compares them (each column's mentions found by one sort of all)."""
        if not tied:
            return {}
        order = np.argsort(slot, kind="stable")  # each column's mentions, in run order
        starts = np.searchsorted(slot[order], np.array(tied, dtype=np.int64))
        counts = np.bincount(slot)
        texts, times = self._texts, at_us.tolist()
        out = {}
        for k, start in zip(tied, starts.tolist()):
            mentions = order[start:start + counts[k]].tolist()
            old = held[k]
            if old is None:
                first = mentions.pop(0)
                text, created = texts[first], times[first]
            else:
                text, created = old[0], to_us(old[3])
            for m in mentions:
                if (times[m], texts[m]) < (created, text):
                    text = texts[m]
                created = min(created, times[m])
            out[k] = text
        return out


class _Columns:
    """One column per value of the run's concepts, as held before it."""

    def __init__(self, held: list[list | None]) -> None:
        n = len(held)
        known = [k for k, old in enumerate(held) if old is not None]
        olds = [held[k] for k in known]
        self.activation = np.zeros(n, dtype=np.float64)
        self.decayed_us = np.full(n, _NONE_US, dtype=np.int64)
        self.decayed_kind = np.full(n, kernels.KEPT, dtype=np.int64)
        self.decayed_ref = np.full(n, -1, dtype=np.int64)
        self.created_us = np.zeros(n, dtype=np.int64)
        self.created_src = np.full(n, -1, dtype=np.int64)
        self.last_us = np.zeros(n, dtype=np.int64)
        self.last_src = np.full(n, -1, dtype=np.int64)
        self.reinforcements = np.zeros(n, dtype=np.int64)
        self.fresh = np.ones(n, dtype=np.bool_)
        self.tie = np.zeros(n, dtype=np.bool_)
        if known:
            at = np.array(known, dtype=np.int64)
            self.fresh[at] = False
            self.activation[at] = [old[2] for old in olds]  # type: ignore[index]
            self.created_us[at] = [to_us(old[3]) for old in olds]  # type: ignore[index]
            self.last_us[at] = [to_us(old[4]) for old in olds]  # type: ignore[index]
            self.decayed_us[at] = [_NONE_US if old[5] is None else to_us(old[5]) for old in olds]  # type: ignore[index]
            self.reinforcements[at] = [old[1] + old[6] for old in olds]  # type: ignore[index]


    def mention_all(self, slot: np.ndarray, at_us: np.ndarray, importance: list[float], meta_of: list[int],
                    metas: _MetaTable, params: GraphParams) -> None:
        """Every mention applied to these columns, in order (`kernels.mention_all`)."""
        window_s = float(params.window_s)
        kernels.mention_all(
            slot, at_us, np.array(importance, dtype=np.float64), np.array(meta_of, dtype=np.int64),
            self.activation, self.decayed_us, self.decayed_kind, self.decayed_ref, self.created_us, self.created_src,
            self.last_us, self.last_src, self.reinforcements, self.fresh, self.tie,
            metas.tick_us, metas.has_tick, metas.model, metas.rate, metas.tau_s, metas.beta, metas.hybrid_after,
            window_s, round(window_s * 1e6) if window_s > 0 else 0, float(params.mention_boost),
        )


class _MetaTable:
    """Per meta a run's mentions read: its last tick and the decay parameters they use."""

    def __init__(self, metas: list[GraphMeta], params: GraphParams) -> None:
        decays = [meta.decay or params.decay for meta in metas]
        self.tick_us = np.array(
            [_NONE_US if meta.decayed_to is None else to_us(meta.decayed_to) for meta in metas], dtype=np.int64,
        )
        self.has_tick = np.array([m.decayed_to is not None and m.decay is not None for m in metas], dtype=np.bool_)
        self.model = np.array([kernels.MODEL_CODES[d.model] for d in decays], dtype=np.int64)
        self.rate = np.array([d.rate for d in decays], dtype=np.float64)
        self.tau_s = np.array([d.power_tau_s for d in decays], dtype=np.float64)
        self.beta = np.array([d.power_beta for d in decays], dtype=np.float64)
        self.hybrid_after = np.array([d.hybrid_after for d in decays], dtype=np.int64)
