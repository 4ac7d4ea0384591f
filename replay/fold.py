"""Folding records read from `emgas.graph-events` into a partition state.

Both live recovery and offline replay go through `fold_records`, and it
applies events only through `PartitionState.apply`: one way to apply an
event, whoever reads the log. The state commits every `COMMIT_EVERY`
events and at the end (see `state.transaction`): a crash in between
rewinds it to its last commit, and the rebuild goes on from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable, Iterator

from emgas.processors.errors import DecodeError
from emgas.processors.fold_codec import FoldEvent, decode_for_fold
from emgas.replay.reader import LogRecord
from emgas.state.collector import collector_paused
from emgas.state.projector import Outcome, PartitionState
from emgas.state.transaction import COMMIT_EVERY


@dataclass(frozen=True)
class Selection:
    """Which events of the log a rebuild takes.

    `graph_id`: only that graph's events (None: all). `as_of`: only events
    whose event time is at or before it. `to_offset`: only events at or
    before this log offset (of the graph's partition).
    """

    graph_id: str | None = None
    as_of: datetime | None = None
    to_offset: int | None = None

    def wants(self, event: FoldEvent) -> bool:
        if self.graph_id is not None and getattr(event, "graph_id", None) != self.graph_id:
            return False  # another graph's, or the log's own records (identity, checkpoints)
        return self.as_of is None or event.timestamp <= self.as_of


@dataclass(frozen=True)
class Rejection:
    """An event the fold rejected: where it is in the log, what it is, why."""

    partition: int
    offset: int
    type: str
    graph_id: str | None
    reason: str

    def __str__(self) -> str:
        graph = f" of graph {self.graph_id!r}" if self.graph_id is not None else ""
        return f"partition {self.partition} offset {self.offset}: {self.type}{graph} rejected: {self.reason}"


@dataclass
class FoldCounts:
    """What happened to each record read, and which events the fold rejected."""

    read: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    not_selected: int = 0
    undecodable: int = 0
    rejections: list[Rejection] = field(default_factory=list)

    def add(self, other: "FoldCounts") -> None:
        self.read += other.read
        self.not_selected += other.not_selected
        self.undecodable += other.undecodable
        self.rejections += other.rejections
        for name, n in other.outcomes.items():
            self.outcomes[name] = self.outcomes.get(name, 0) + n

    @property
    def applied(self) -> int:
        return self.outcomes.get(Outcome.APPLIED.value, 0)


def fold_records(
    state: PartitionState, records: Iterable[LogRecord], selection: Selection, counts: FoldCounts,
    last: bool = True,
) -> None:
    """Apply the selected, decodable records to `state`, in order, in
    batches (`PartitionState.apply_batch`).

    An undecodable record is counted and skipped: on the live path it went
    to the dead-letter topic and changed nothing, so a rebuild skips it too.
    Commits every `COMMIT_EVERY` events (counted in `counts`) and, when
    these are the `last` records, after them: a rebuild handing over one
    fetched batch at a time commits at the end of the partition, not after
    every batch (a commit rewrites every row changed since the last one).
    """
    records = iter(records)
    while True:
        with collector_paused():  # a batch's decoded events live as long as the batch (`state.collector`)
            batch, more = _next_batch(records, selection, counts)
            apply_batch(state, batch, counts)
            if more or last:
                state.commit()
        if not more:
            return


def _next_batch(
    records: Iterator[LogRecord], selection: Selection, counts: FoldCounts,
) -> tuple[list[tuple[FoldEvent, LogRecord]], bool]:
    """The selected, decodable records read up to the next commit (a record
    taken when the read count is a multiple of `COMMIT_EVERY`), and whether
    that happened (False: the records ended first)."""
    batch: list[tuple[FoldEvent, LogRecord]] = []
    for record in records:
        counts.read += 1
        try:
            event = decode_for_fold(record.value)
        except DecodeError:
            counts.undecodable += 1
            continue
        if not selection.wants(event):
            counts.not_selected += 1
            continue
        batch.append((event, record))
        if counts.read % COMMIT_EVERY == 0:
            return batch, True
    return batch, False


def apply_batch(state: PartitionState, batch: list[tuple[FoldEvent, LogRecord]], counts: FoldCounts) -> None:
    """Apply decoded records at once, counting their outcomes and naming each rejection."""
    if not batch:
        return
    outcomes = state.apply_batch([(event, record.offset, record.value) for event, record in batch])
    for (event, record), outcome in zip(batch, outcomes):
        counts.outcomes[outcome.value] = counts.outcomes.get(outcome.value, 0) + 1
        if outcome is Outcome.REJECTED:
            reason = state.rejections.get(record.offset, "rejected")
            counts.rejections.append(
                Rejection(record.partition, record.offset, event.type, getattr(event, "graph_id", None), reason)
            )
