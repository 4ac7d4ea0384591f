"""A run's concept mentions folded on the graph's concept columns:
`processors.graph.Mentions` without a Python step per mention's arithmetic
or per concept's record.

A run of turns (`state.turn_run`) mentions each of its concepts one or more
times; every mention changes the concept's values as `Mentions.mention`
does (`processors.graph.contributed` for its activation). Here the run's
mentions are gathered as arrays (concept column, time in µs, importance,
the meta they read), the held values of the concepts they name are read
from the graph's columns (`state.concept_columns`) a set at a time, and the
mentions are applied in one compiled loop (`kernels.mention_all`), with the
same floating-point operations in the same order: the values the run
leaves are Mentions' bit for bit (`tests/unit/state/test_mention_columns.py`).
`fold` computes them without changing anything; `apply` writes them to
the columns, so a run that fails leaves the graph as it was.

The kernel works on instants (µs); a record keeps the datetime objects it
was given, with their offsets. So it says which object each time is (the
held one, a mention's, a tick's, a window's start) and the objects are
taken from there, a set at a time. A text whose mention falls at the very
instant of the concept's creation is compared as Python compares strings,
after the kernel.

`columns_apply(params)` says whether the kernel can: its window times are
whole µs only for a window of whole seconds (else `Mentions` folds the run,
on values read from the columns and written back).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import compress
from operator import attrgetter, ne
from typing import Mapping, Sequence

import numpy as np

from emgas.processors.dynamics import EPOCH
from emgas.processors.events import Concept
from emgas.processors.fold_codec import ConceptRow
from emgas.processors.graph import GraphMeta, GraphParams, Mentions
from emgas.state import kernels
from emgas.state.concept_columns import NONE_US, ConceptColumns
from emgas.state.repository import to_us


def columns_apply(params: GraphParams) -> bool:
    """Whether the compiled loop folds mentions under `params` (a window of whole seconds, or none)."""
    return params.window_s <= 0 or float(params.window_s).is_integer()


@dataclass
class FoldedMentions:
    """What a run's mentions leave, per concept it mentions (column k, in
    the order of their first mention): its slot (-1: not held, so new),
    its values as columns, the datetime objects of its times, and whether
    its text changed."""

    ids: list[str]
    slots: np.ndarray
    counts: np.ndarray  # mentions in the run
    activation: np.ndarray
    created_us: np.ndarray
    last_us: np.ndarray
    decayed_us: np.ndarray
    created: np.ndarray  # datetime objects
    last: np.ndarray
    decayed: np.ndarray
    texts: dict[int, str]  # column -> its text, where the run changed it (new concepts included)


_ID, _TEXT, _IMPORTANCE = attrgetter("id"), attrgetter("text"), attrgetter("importance")

# Up to this many mentions in a run, the tied columns' texts are found a
# mention at a time (`_earliest_texts_one_by_one`) rather than with arrays.
_FEW_MENTIONS = 256


class MentionColumns:
    """A run's mentions of one graph version, gathered (`ticked`, `turn`)
    and folded at once (`fold`) onto the concepts held in `columns`
    (`index`: concept id -> its live slot)."""

    def __init__(self, columns: ConceptColumns, index: Mapping[str, int], meta: GraphMeta, params: GraphParams) -> None:
        self._columns, self._index, self._params = columns, index, params
        self._metas = [meta]
        self._slots: dict[str, int] = {}  # concept id -> its column
        self._slot: list[int] = []  # per mention: its concept's column
        self._at_us: list[int] = []
        self._at: list[datetime] = []
        self._importance: list[float] = []
        self._meta_of: list[int] = []
        self._texts: list[str] = []
        self._first_text: list[str] = []  # per column: its first mention's text
        self._varied: set[int] = set()  # the columns with a mention of another text than their first
        self._pending: list[tuple[Sequence[Concept] | Sequence[ConceptRow], datetime, int]] = []  # turns not gathered yet, with their meta

    def ticked(self, meta: GraphMeta) -> None:
        """A tick that lists nothing, inside the run: the mentions after it read `meta`."""
        self._metas.append(meta)

    def turn(self, concepts: Sequence[Concept] | Sequence[ConceptRow], at: datetime) -> None:
        """A turn's mentions, at event time `at`, in its order (gathered
        with the other turns' when they are read: `_gather`)."""
        self._pending.append((concepts, at, len(self._metas) - 1))

    def _gather(self) -> None:
        """The pending turns' mentions onto the run's lists, a list at a time
        rather than a Python step per mention: each concept's column (new
        ones in the order of their first mention), text, importance, time
        and meta, each new column's first text, and the columns mentioned
        with another text than their first."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        mentioned = [concept for concepts, _, _ in pending for concept in concepts]
        ids, texts = list(map(_ID, mentioned)), list(map(_TEXT, mentioned))
        slots, first_text = self._slots, self._first_text
        new = [cid for cid in dict.fromkeys(ids) if cid not in slots]
        if new:
            slots.update(zip(new, range(len(slots), len(slots) + len(new))))
            first_texts = dict(zip(reversed(ids), reversed(texts)))  # each id's first mention's text
            first_text.extend(map(first_texts.__getitem__, new))
        slot = list(map(slots.__getitem__, ids))
        self._varied.update(compress(slot, map(ne, texts, map(first_text.__getitem__, slot))))
        self._slot += slot
        self._texts += texts
        self._importance += map(_IMPORTANCE, mentioned)
        for concepts, at, meta in pending:
            k = len(concepts)
            self._at_us += [to_us(at)] * k
            self._at += [at] * k
            self._meta_of += [meta] * k

    @property
    def mentioned(self) -> bool:
        self._gather()
        return bool(self._slots)

    @property
    def concepts_seen(self) -> int:
        """The distinct concepts the run's turns so far mention."""
        self._gather()
        return len(self._slots)

    def seen_among(self, ids: set[str], first: int) -> set[str]:
        """Those of `ids` among the first `first` distinct concepts the run mentions."""
        self._gather()
        slots = self._slots
        return {cid for cid in ids if slots.get(cid, first) < first}

    def fold(self) -> FoldedMentions:
        """Every concept mentioned, as the run's last mention of it leaves it (nothing is changed yet)."""
        self._gather()
        ids = list(self._slots)
        index = self._index
        slots = np.fromiter((index.get(cid, -1) for cid in ids), dtype=np.int64, count=len(ids))
        if not columns_apply(self._params):
            return self._by_mentions(ids, slots)
        c = _Held(self._columns, slots)
        slot = np.array(self._slot, dtype=np.int64)
        at_us = np.array(self._at_us, dtype=np.int64)
        metas = _MetaTable(self._metas, self._params)
        window_s = float(self._params.window_s)
        kernels.mention_all(
            slot, at_us, np.array(self._importance, dtype=np.float64), np.array(self._meta_of, dtype=np.int64),
            c.activation, c.decayed_us, c.decayed_kind, c.decayed_ref, c.created_us, c.created_src,
            c.last_us, c.last_src, c.reinforcements, c.fresh, c.tie,
            metas.tick_us, metas.has_tick, metas.model, metas.rate, metas.tau_s, metas.beta, metas.hybrid_after,
            window_s, round(window_s * 1e6) if window_s > 0 else 0, float(self._params.mention_boost),
        )
        at = np.empty(len(self._at), dtype=object)
        at[:] = self._at
        created, last = c.created_obj.copy(), c.last_obj.copy()
        moved = c.created_src >= 0
        created[moved] = at[c.created_src[moved]]
        moved = c.last_src >= 0
        last[moved] = at[c.last_src[moved]]
        texts = self._texts_after(c, slot, at_us)
        return FoldedMentions(
            ids, slots, np.bincount(slot, minlength=len(ids)), c.activation, c.created_us, c.last_us, c.decayed_us,
            created, last, self._decayed(c, at), texts,
        )

    def _decayed(self, c: _Held, at: np.ndarray) -> np.ndarray:
        """Each concept's decayed_to object: as held (KEPT), a tick's, a
        window's start, or its created_at as it was then."""
        decayed = c.decayed_obj.copy()
        kind, ref = c.decayed_kind, c.decayed_ref
        ticks = np.flatnonzero(kind == kernels.TICK)
        if len(ticks):
            tick_times = np.empty(len(self._metas), dtype=object)
            tick_times[:] = [meta.decayed_to for meta in self._metas]
            decayed[ticks] = tick_times[ref[ticks]]
        for k in np.flatnonzero(kind == kernels.WINDOW).tolist():
            decayed[k] = EPOCH + timedelta(seconds=int(ref[k]) * self._params.window_s)  # `dynamics.window_start`
        created = np.flatnonzero(kind == kernels.CREATED)
        if len(created):
            held = created[ref[created] < 0]
            decayed[held] = c.created_obj[held]
            mention = created[ref[created] >= 0]
            decayed[mention] = at[ref[mention]]
        return decayed

    def _texts_after(self, c: _Held, slot: np.ndarray, at_us: np.ndarray) -> dict[int, str]:
        """The text of each concept whose earliest mention the run moved (a
        new concept's included): that mention's, or for a concept tied with
        its creation instant, the one `Mentions` keeps (`_tied_texts`)."""
        texts = self._texts
        moved = np.flatnonzero(c.created_src >= 0)
        out = {k: texts[src] for k, src in zip(moved.tolist(), c.created_src[moved].tolist())}
        tied = np.flatnonzero(c.tie).tolist()
        if tied:
            out.update(self._tied_texts(tied, c, slot, at_us))
        return out

    def _tied_texts(self, tied: list[int], c: _Held, slot: np.ndarray, at_us: np.ndarray) -> dict[int, str]:
        """The text `Mentions` keeps for each tied column. Mention by mention
        it keeps the smallest (time, text) of the held creation and every
        mention (a later one replaces the text only when it is smaller), so
        here: the smallest text of the column's earliest mentions (a column
        whose mentions all have one text: that text; the others' mentions
        sorted by column, then time, at once), against the held one."""
        varied = self._varied
        best = {k: self._first_text[k] for k in tied if k not in varied}
        mixed = [k for k in tied if k in varied]
        if mixed:
            if len(slot) <= _FEW_MENTIONS:
                best.update(self._earliest_texts_one_by_one(set(mixed)))
            else:
                best.update(self._earliest_texts(mixed, c, slot, at_us))
        # A held column is tied when a mention came at its created_at, which
        # only ever moves earlier (to its earliest mention): the held text
        # competes only when no mention came before it, the column's
        # created_at then where it was.
        held = np.asarray(tied, dtype=np.int64)
        held = held[~c.fresh_before[held]]
        held = held[c.held_created_us[held] == c.created_us[held]]
        held_texts = self._columns.text
        for k, at in zip(held.tolist(), c.slots[held].tolist()):
            if held_texts[at] < best[k]:
                best[k] = held_texts[at]
        return best

    def _earliest_texts(self, tied: list[int], c: _Held, slot: np.ndarray, at_us: np.ndarray) -> dict[int, str]:
        """Per tied column, the smallest text of its earliest mentions."""
        is_tied = np.zeros(len(c.tie), dtype=bool)
        is_tied[tied] = True
        of_tied = np.flatnonzero(is_tied[slot])  # the mentions of tied columns
        order = np.lexsort((at_us[of_tied], slot[of_tied]))  # each column's mentions, earliest first
        by_column, by_time = slot[of_tied][order], at_us[of_tied][order]
        starts = np.flatnonzero(np.r_[True, by_column[1:] != by_column[:-1]])
        earliest_us = np.zeros(len(c.tie), dtype=np.int64)  # per column: its earliest mention's time
        earliest_us[by_column[starts]] = by_time[starts]
        earliest = np.flatnonzero(by_time == earliest_us[by_column])
        texts = self._texts
        best: dict[int, str] = {}
        for k, m in zip(by_column[earliest].tolist(), of_tied[order[earliest]].tolist()):
            text = best.get(k)
            if text is None or texts[m] < text:
                best[k] = texts[m]
        return best

    def _earliest_texts_one_by_one(self, tied: set[int]) -> dict[int, str]:
        """`_earliest_texts`, a mention at a time: for a short run, cheaper than its dozen array operations."""
        best: dict[int, str] = {}
        earliest: dict[int, int] = {}
        for k, us, text in zip(self._slot, self._at_us, self._texts):
            if k not in tied:
                continue
            first = earliest.get(k)
            if first is None or us < first:
                earliest[k], best[k] = us, text
            elif us == first and text < best[k]:
                best[k] = text
        return best

    def _by_mentions(self, ids: list[str], slots: np.ndarray) -> FoldedMentions:
        """`fold` one mention at a time (`Mentions`), where the kernel cannot."""
        columns = self._columns
        held = {cid: columns.values(s) for cid, s in zip(ids, slots.tolist()) if s >= 0}
        mentions = Mentions(held, self._metas[0], self._params)
        meta_at = 0
        for m, column in enumerate(self._slot):
            while meta_at < self._meta_of[m]:
                meta_at += 1
                mentions.ticked(self._metas[meta_at])
            mentions.mention(ids[column], self._texts[m], self._importance[m], self._at[m])
        values = mentions.values()
        rows = [values[cid] for cid in ids]
        objects = [np.empty(len(ids), dtype=object) for _ in range(3)]
        for times, field in zip(objects, (3, 4, 5)):
            times[:] = [row[field] for row in rows]
        return FoldedMentions(
            ids, slots, np.bincount(np.array(self._slot, dtype=np.int64), minlength=len(ids)),
            np.array([row[2] for row in rows], dtype=np.float64),
            np.array([to_us(row[3]) for row in rows], dtype=np.int64),
            np.array([to_us(row[4]) for row in rows], dtype=np.int64),
            np.array([NONE_US if row[5] is None else to_us(row[5]) for row in rows], dtype=np.int64),
            objects[0], objects[1], objects[2], {k: row[0] for k, row in enumerate(rows)},
        )

    def values(self) -> dict[str, list]:
        """Every concept mentioned, as its values (`Mentions`' order) after the
        run's last mention of it (what `fold` leaves; the columns unchanged)."""
        folded = self.fold()
        columns = self._columns
        out = {}
        for k, (cid, slot) in enumerate(zip(folded.ids, folded.slots.tolist())):
            held = slot >= 0
            text = folded.texts.get(k, columns.text[slot] if held else "")
            count = int(folded.counts[k]) + (int(columns.mentions[slot]) if held else 0)
            rest = [int(columns.retrievals[slot]), columns.first_retrieved[slot], columns.last_retrieved[slot]] \
                if held else [0, None, None]
            out[cid] = [
                text, count, float(folded.activation[k]), folded.created[k], folded.last[k], folded.decayed[k], *rest,
            ]
        return out


def apply(columns: ConceptColumns, folded: FoldedMentions, slots: np.ndarray) -> None:
    """Write what a run's mentions leave (`MentionColumns.fold`) to the
    columns, at `slots` (folded.slots with the new concepts' slots filled
    in): each concept's values, marked unwritten and unfiled."""
    columns.activation[slots] = folded.activation
    columns.mentions[slots] += folded.counts
    columns.created_us[slots], columns.created[slots] = folded.created_us, folded.created
    columns.last_us[slots], columns.last[slots] = folded.last_us, folded.last
    columns.decayed_us[slots], columns.decayed[slots] = folded.decayed_us, folded.decayed
    text = columns.text
    for k, value in folded.texts.items():
        text[slots[k]] = value
    columns.unwritten[slots] = True
    columns.unfiled[slots] = True
    columns.any_unwritten = True


class _Held:
    """One column per value of the run's concepts, as held before it (`slots`: -1 where not held)."""

    def __init__(self, columns: ConceptColumns, slots: np.ndarray) -> None:
        n = len(slots)
        self.slots = slots
        known = np.flatnonzero(slots >= 0)
        at = slots[known]
        self.fresh = slots < 0
        self.fresh_before = self.fresh.copy()
        self.activation = np.zeros(n, dtype=np.float64)
        self.activation[known] = columns.activation[at]
        self.decayed_us = np.full(n, NONE_US, dtype=np.int64)
        self.decayed_us[known] = columns.decayed_us[at]
        self.decayed_kind = np.full(n, kernels.KEPT, dtype=np.int64)
        self.decayed_ref = np.full(n, -1, dtype=np.int64)
        self.created_us = np.zeros(n, dtype=np.int64)
        self.created_us[known] = columns.created_us[at]
        self.held_created_us = self.created_us.copy()
        self.created_src = np.full(n, -1, dtype=np.int64)
        self.last_us = np.zeros(n, dtype=np.int64)
        self.last_us[known] = columns.last_us[at]
        self.last_src = np.full(n, -1, dtype=np.int64)
        self.reinforcements = np.zeros(n, dtype=np.int64)
        self.reinforcements[known] = columns.mentions[at] + columns.retrievals[at]
        self.tie = np.zeros(n, dtype=np.bool_)
        self.created_obj = np.full(n, None, dtype=object)
        self.created_obj[known] = columns.created[at]
        self.last_obj = np.full(n, None, dtype=object)
        self.last_obj[known] = columns.last[at]
        self.decayed_obj = np.full(n, None, dtype=object)
        self.decayed_obj[known] = columns.decayed[at]


class _MetaTable:
    """Per meta a run's mentions read: its last tick and the decay parameters they use."""

    def __init__(self, metas: list[GraphMeta], params: GraphParams) -> None:
        self.tick_us = np.array(
            [NONE_US if meta.decayed_to is None else to_us(meta.decayed_to) for meta in metas], dtype=np.int64,
        )
        self.has_tick = np.array([m.decayed_to is not None and m.decay is not None for m in metas], dtype=np.bool_)
        # A run's metas (one a tick) share one or two decay objects: each read once, then spread.
        decays = [meta.decay or params.decay for meta in metas]
        distinct = {id(d): d for d in decays}  # alive in `decays`: no id is reused meanwhile
        place = {key: k for k, key in enumerate(distinct)}
        which = np.array([place[id(d)] for d in decays], dtype=np.int64)
        ds = list(distinct.values())
        self.model = np.array([kernels.MODEL_CODES[d.model] for d in ds], dtype=np.int64)[which]
        self.rate = np.array([d.rate for d in ds], dtype=np.float64)[which]
        self.tau_s = np.array([d.power_tau_s for d in ds], dtype=np.float64)[which]
        self.beta = np.array([d.power_beta for d in ds], dtype=np.float64)[which]
        self.hybrid_after = np.array([d.hybrid_after for d in ds], dtype=np.int64)[which]
