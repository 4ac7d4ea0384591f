"""Every concept of one graph version on columns, by node slot.

The in-memory graph (`state.view.GraphView`) holds its concepts' values
here, one column per value of `processors.graph.Mentions`' order (text,
count, base activation, created_at, last_accessed, decayed_to,
retrievals, first and last retrieval), so a run of turns reads and
changes them in place, a set of slots at a time (`state.mention_columns`),
instead of reading each concept's record, changing it and staging it
again per run. Times are kept twice: as the datetime objects the events
carried (their offsets are part of the record) and, for the compiled
mentions loop, as µs since 1970.

While folding, the columns are the newest state of the concepts: the
slots a run changed are marked `unwritten` and their records reach the
store when the partition transaction settles (`records`), once per
concept however many runs changed it, as the adjacency's rows do. A
record written by a rule (a tick, a retrieval, a turn applied alone)
goes to the store directly and is copied here (`put`).
"""

from __future__ import annotations

from datetime import datetime
import numpy as np

from emgas.processors.graph import ConceptState, concept_record
from emgas.state.records import PLAIN_FLOATS_BELOW, dumps_concepts, dumps_flat
from emgas.state.repository import to_us

NONE_US = np.iinfo(np.int64).min  # a time that is not there (None)


class ConceptColumns:
    """The values of a graph version's concepts, by slot (see the module)."""

    def __init__(self) -> None:
        self.size = 0
        self.text: list[str] = []
        self.activation = np.zeros(0, dtype=np.float64)
        self.mentions = np.zeros(0, dtype=np.int64)  # c(x): turns mentioning it
        self.retrievals = np.zeros(0, dtype=np.int64)
        self.created_us = np.zeros(0, dtype=np.int64)
        self.last_us = np.zeros(0, dtype=np.int64)
        self.decayed_us = np.zeros(0, dtype=np.int64)  # NONE_US: decayed_to is None
        self.created = np.zeros(0, dtype=object)
        self.last = np.zeros(0, dtype=object)
        self.decayed = np.zeros(0, dtype=object)
        self.first_retrieved = np.zeros(0, dtype=object)
        self.last_retrieved = np.zeros(0, dtype=object)
        # Slots changed since their records were last written (`records`), and
        # since their due times were last filed (the view's scheduler heap).
        self.unwritten = np.zeros(0, dtype=np.bool_)
        self.dead = np.zeros(0, dtype=np.bool_)  # a removed concept's slot (`drop`)
        self.unfiled = np.zeros(0, dtype=np.bool_)
        self.any_unwritten = False
        self._grow(64)

    _ARRAYS = (
        "activation", "mentions", "retrievals", "created_us", "last_us", "decayed_us", "created", "last", "decayed",
        "first_retrieved", "last_retrieved", "unwritten", "unfiled", "dead",
    )

    def _grow(self, capacity: int) -> None:
        for name in self._ARRAYS:
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype) if old.dtype != object else np.full(capacity, None, dtype=object)
            if name == "decayed_us":
                new[:] = NONE_US
            new[: len(old)] = old
            setattr(self, name, new)

    def add(self, text: str) -> int:
        """A new slot (a concept not mentioned yet: every value empty); its index."""
        return self.add_many([text])

    def add_many(self, texts: list[str]) -> int:
        """A new slot per text, in order (`add` of each); the first one's index."""
        first = self.size
        if first + len(texts) > len(self.activation):
            self._grow(max(2 * len(self.activation), first + len(texts)))
        self.text.extend(texts)
        self.size += len(texts)
        return first

    def put(self, slot: int, concept: ConceptState) -> None:
        """The slot's values become the record's (as loaded, or as a rule wrote
        it: the store has it already, so it is not marked unwritten)."""
        self.text[slot] = concept.text
        self.activation[slot] = concept.base_activation
        self.mentions[slot] = concept.count
        self.retrievals[slot] = concept.retrievals
        self.created[slot], self.created_us[slot] = concept.created_at, to_us(concept.created_at)
        self.last[slot], self.last_us[slot] = concept.last_accessed, to_us(concept.last_accessed)
        decayed = concept.decayed_to
        self.decayed[slot], self.decayed_us[slot] = decayed, NONE_US if decayed is None else to_us(decayed)
        self.first_retrieved[slot], self.last_retrieved[slot] = concept.first_retrieved, concept.last_retrieved
        self.unfiled[slot] = True

    def put_values(self, slot: int, values: list) -> None:
        """The slot's values become `values` (`Mentions`' order), to be written."""
        text, count, activation, created, last, decayed, retrievals, first, latest = values
        self.text[slot] = text
        self.activation[slot], self.mentions[slot], self.retrievals[slot] = activation, count, retrievals
        self.created[slot], self.created_us[slot] = created, to_us(created)
        self.last[slot], self.last_us[slot] = last, to_us(last)
        self.decayed[slot], self.decayed_us[slot] = decayed, NONE_US if decayed is None else to_us(decayed)
        self.first_retrieved[slot], self.last_retrieved[slot] = first, latest
        self.unwritten[slot] = self.unfiled[slot] = True
        self.any_unwritten = True

    def load_many(self, first: int, rows: list[list]) -> None:
        """The slots from `first` on take `rows`' values (`Mentions`' order)
        as loaded records hold them (`put` without a model each), a column at a time."""
        if not rows:
            return
        at = slice(first, first + len(rows))
        text, count, activation, created, last, decayed, retrievals, first_seen, latest = map(list, zip(*rows))
        self.text[at] = text
        self.activation[at], self.mentions[at], self.retrievals[at] = activation, count, retrievals
        self.created[at], self.created_us[at] = created, [to_us(t) for t in created]
        self.last[at], self.last_us[at] = last, [to_us(t) for t in last]
        self.decayed[at], self.decayed_us[at] = decayed, [NONE_US if t is None else to_us(t) for t in decayed]
        self.first_retrieved[at], self.last_retrieved[at] = first_seen, latest
        self.unfiled[at] = True

    def values(self, slot: int) -> list:
        """The slot's values in `Mentions`' order."""
        return [
            self.text[slot], int(self.mentions[slot]), float(self.activation[slot]), self.created[slot],
            self.last[slot], self.decayed[slot], int(self.retrievals[slot]), self.first_retrieved[slot],
            self.last_retrieved[slot],
        ]

    def encoded(self, slots: list[int], ids: list[str]) -> list[bytes]:
        """The records (`ConceptState` JSON, `state.records`) of `slots`,
        whose concepts are `ids`, their values taken a column at a time."""
        at = np.array(slots, dtype=np.int64)
        columns = zip(
            ids, [self.text[slot] for slot in slots], self.mentions[at].tolist(), self.activation[at].tolist(),
            self.created[at].tolist(), self.last[at].tolist(), self.decayed[at].tolist(),
            self.retrievals[at].tolist(), self.first_retrieved[at].tolist(), self.last_retrieved[at].tolist(),
        )
        values = list(columns)
        encoded: list[bytes] | list[bytes | None] | None = None
        if bool(np.all(np.abs(self.activation[at]) < PLAIN_FLOATS_BELOW)):
            encoded = dumps_concepts(values)
        if encoded is None:
            encoded = dumps_flat([
                {
                    "id": cid, "text": text, "count": count, "base_activation": activation, "created_at": created,
                    "last_accessed": last, "decayed_to": decayed, "retrievals": retrievals, "first_retrieved": first,
                    "last_retrieved": latest,
                }
                for cid, text, count, activation, created, last, decayed, retrievals, first, latest in values
            ], "id")
        return [
            record or concept_record(one[0], list(one[1:])).model_dump_json().encode()
            for record, one in zip(encoded, values)
        ]

    def drop(self, slot: int) -> None:
        """A removed concept's slot: dead, never written or filed again."""
        self.unwritten[slot] = self.unfiled[slot] = False
        self.dead[slot] = True

    def take_unwritten(self) -> list[int]:
        """The slots changed since the last call, in slot order (then not unwritten)."""
        if not self.any_unwritten:
            return []
        slots = np.flatnonzero(self.unwritten[: self.size])
        self.unwritten[slots] = False
        self.any_unwritten = False
        return slots.tolist()

    def take_unwritten_of(self, slots: list[int]) -> list[int]:
        """Those of `slots` changed since they were last taken (then not unwritten)."""
        if not self.any_unwritten:
            return []
        taken = [slot for slot in dict.fromkeys(slots) if self.unwritten[slot]]
        self.unwritten[taken] = False
        return taken

    def take_unfiled(self) -> list[int]:
        """The slots changed since their due times were last filed (then filed)."""
        slots = np.flatnonzero(self.unfiled[: self.size])
        self.unfiled[slots] = False
        return slots.tolist()

    def reference(self, slot: int) -> datetime:
        """The event time the slot's base activation is as of (`decay_reference`)."""
        decayed = self.decayed[slot]
        return decayed if decayed is not None else self.created[slot]
