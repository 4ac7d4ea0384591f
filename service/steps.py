"""The step functions of a partition: what every driver of the state calls.

The live agents (`streams.runtime.app`) and the in-process log (`emgas.testing.LocalLog`)
decode, call one of these, persist and emit, and nothing else:

- `on_graph_event`: apply one graph event (`state.projector`), and return
  the events that became due because of it (decay ticks, consolidations:
  `service.scheduler`), for the caller to append to the log;
- `on_request`: answer a query, a digest or a stats request from the state
  (reads only), and return the events the answer asks for (the retrieval's
  reinforcement);
- `on_timer`: the events due by the window (missed before a restart) or by
  a graph's idleness at wall time `wall`.

The scheduler decides from the applied state (its views' due times, moved
as the fold applies each write to them) and remembers what it emitted and when
each graph last got a turn. It still takes due entries off the views'
heaps and files again an edge it finds not yet due: the heap is its cursor.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Callable, Generator, TypeVar, cast

from emgas.processors.activation import ActivationParams
from emgas.processors.errors import QueryError
from emgas.processors.codec import encode
from emgas.processors.events import (
    LOG_EVENTS, ActivationQuery, ContentEvent, DigestQuery, DigestReply, ErrorReply, GraphEvent, PassageQuery, Reply, SnapshotStarted, StatsQuery,
)
from emgas.processors.extract import ExtractionParams
from emgas.processors.fold_codec import ConsolidateRow, DecayRow, FoldEvent, TurnRow, event_bytes, is_turn
from emgas.processors.graph import GraphParams, GraphRef
from emgas.state.collector import collector_paused
from emgas.state.digest import partition_digests
from emgas.state.projector import Outcome, PartitionState, Refolds
from emgas.state.rules import version_named
from emgas.state.repository import GraphRepository
from emgas.service.retrieval import Clock, answer, graph_stats, held_passages, reinforcement
from emgas.service.scheduler import Scheduler
from emgas.service.snapshot_writer import SnapshotPolicy, SnapshotWriter

log = logging.getLogger(__name__)
Request = ActivationQuery | DigestQuery | StatsQuery | PassageQuery
T = TypeVar("T")


class PartitionSteps:
    """One partition's state and its scheduler, driven by events and requests."""

    def __init__(
        self,
        state: PartitionState,
        params: GraphParams,
        activation: ActivationParams | None = None,
        extraction: ExtractionParams | None = None,
        name: str = "local",
        partition: int = 0,
        snapshots: SnapshotPolicy | None = None,
    ) -> None:
        self.state = state
        self.params = params
        self.scheduler = Scheduler(params)
        self.activation = activation or ActivationParams()
        self.extraction = extraction or ExtractionParams()
        self.name = name
        self.partition = partition
        self.snapshots = SnapshotWriter(snapshots, partition)

    def on_graph_event(
        self, event: GraphEvent, offset: int, wall: datetime, raw: bytes | None = None, refolds: Refolds | None = None,
        serve: bool = True,
    ) -> tuple[Outcome, list[GraphEvent]]:
        """Apply `event` at log `offset` (`wall`: when, for the idle clock);
        the outcome and the events now due for its graph version. A
        snapshot request is served here unless `serve` is False: then the
        caller calls `serve_snapshots` before the next event."""
        # A snapshot request's fold points are made with its parts, off the
        # caller's event loop (`serve_snapshots`), from the records they read.
        self.state.defers_points = isinstance(event, SnapshotStarted)
        try:
            with collector_paused():  # a batch of one, as `on_graph_events` folds one (a forget's replaced records)
                outcome = self.state.apply(event, offset, refolds, raw)
        finally:
            self.state.defers_points = False
        size = len(raw) if raw is not None else (len(encode(event)) if self.snapshots.policy else 0)
        snapshots = self.snapshots.after(self.state, event, offset, outcome, size, wall)
        if serve:
            snapshots += self.serve_snapshots()
            self.keep_served_points()
        if isinstance(event, LOG_EVENTS):
            return outcome, snapshots
        ref = self.state.ref_of(event)
        self.scheduler.applied(event, ref, wall)
        return outcome, self.scheduler.due(self.state, ref) + snapshots

    def on_graph_events(
        self, batch: list[tuple[FoldEvent, int, bytes | None]], wall: datetime
    ) -> tuple[list[Outcome], list[GraphEvent]]:
        """`on_graph_event` of each (event, offset, bytes) in turn, folded as
        one batch (`PartitionState.apply_batch`): the outcomes, and the events
        due once the batch is applied (each graph's ticks as of its state
        then). A snapshot request must be served as of its own offset, so
        it is not taken here: apply it with `on_graph_event`."""
        with collector_paused():  # for the whole batch, as `PartitionState.apply_batch` folds it
            return finish(self.fold_steps(batch, wall, len(batch)))

    def fold_steps(
        self, batch: list[tuple[FoldEvent, int, bytes | None]], wall: datetime, most: int,
    ) -> Generator[None, None, tuple[list[Outcome], list[GraphEvent]]]:
        """`on_graph_events`, pausing (yielding) after each piece of the batch
        (`PartitionState.batch_pieces`: a graph's events, `most` at most), so
        that a caller on an event loop can answer queries between two pieces;
        returns what `on_graph_events` returns. While it pauses, the
        partition must not be committed, hashed or folded into otherwise."""
        if any(isinstance(event, SnapshotStarted) for event, _, _ in batch):
            raise ValueError("a snapshot request is applied alone (on_graph_event), to be served as of its offset")
        refs: dict[tuple[str, int | None], GraphRef] = {}
        before: dict[GraphRef, datetime | None] = {}  # each graph's clock before the batch
        for event, _, _ in batch:
            if is_turn(event):
                ref = self._ref(event, refs)
                if ref not in before:
                    before[ref] = self.state.repo.meta(ref).clock
        found: list[Outcome | None] = [None] * len(batch)
        yield from self.state.batch_pieces(batch, found, most)
        outcomes = cast(list[Outcome], found)
        due: list[GraphEvent] = []
        times: dict[GraphRef, list[datetime]] = {}
        for (event, offset, raw), outcome in zip(batch, outcomes):
            size = len(raw) if raw is not None else (len(event_bytes(event, raw)) if self.snapshots.policy else 0)
            due += self.snapshots.after(self.state, event, offset, outcome, size, wall)
            if isinstance(event, LOG_EVENTS):
                continue
            ref = self._ref(event, refs)
            self.scheduler.applied(event, ref, wall)
            if is_turn(event) and outcome is Outcome.APPLIED:
                times.setdefault(ref, []).append(event.timestamp)
        for ref in dict.fromkeys(refs.values()):
            for clock in self.scheduler.windows_entered(before.get(ref), times.get(ref, [])):
                due += self.scheduler.due(self.state, ref, clock)
            due += self.scheduler.due(self.state, ref)
        return outcomes, due

    def _ref(
        self, event: ContentEvent | TurnRow | ConsolidateRow | DecayRow, refs: dict[tuple[str, int | None], GraphRef],
    ) -> GraphRef:
        """The graph version `event` applies to, looked up once per batch."""
        version = version_named(event)
        ref = refs.get((event.graph_id, version))
        if ref is None:
            ref = refs[(event.graph_id, version)] = self.state.ref_of(event)
        return ref

    def serve_snapshots(self) -> list[GraphEvent]:
        """The parts of the snapshots requested by the events just applied,
        and their fold points, kept by `keep_served_points`. It reads the
        state only, so it may run on another thread while nothing is applied."""
        return self.snapshots.serve_all(self.state, points=True)  # `on_graph_event` left them to it

    def keep_served_points(self) -> None:
        """Stage the fold points `serve_snapshots` made (before the next event is applied)."""
        made, self.snapshots.points_made = self.snapshots.points_made, []
        self.state.keep_points(made)

    def on_request(self, request: Request, clock: Clock) -> tuple[Reply, list[GraphEvent]]:
        """The reply to `request` and the events it asks to append; a query the
        state cannot answer is an `ErrorReply` with the reason's code."""
        try:
            if isinstance(request, StatsQuery):
                return graph_stats(self.state, request), []
            if isinstance(request, PassageQuery):
                return held_passages(self.state, request), []
            if isinstance(request, DigestQuery):
                return self._digests(request, self.state.repo, self.state.applied_offset), []
            reply = answer(self.state, request, self.activation, self.extraction, clock)
        except QueryError as err:
            return error_reply(request, err.code, err.message), []
        except Exception as exc:  # noqa: BLE001 - a bug must not leave a client hanging
            return _failed(request, exc), []
        retrieved = reinforcement(self.state, request, reply, self.params)
        return reply, [retrieved] if retrieved is not None else []

    def _digests(self, request: DigestQuery, repo: GraphRepository, offset: int) -> DigestReply:
        return DigestReply(
            request_id=request.request_id, worker=self.name, partition=self.partition,
            applied_offset=offset, graphs=tuple(partition_digests(repo, request.graph_id)),
        )

    def digests_later(self, request: DigestQuery) -> Callable[[], DigestReply | ErrorReply]:
        """`request`'s digests of the state as it is now, to hash later on any
        thread while this one folds on (hashing every graph of a partition
        takes seconds, and queries must not wait for it): what is needed is
        taken now (a copy of the pending writes over the store, which must
        not be committed to until the hashing is done: `Transaction.read_copy`,
        and the offset), the hashing is the function returned."""
        repo, offset = GraphRepository(self.state.txn.read_copy()), self.state.applied_offset

        def digests() -> DigestReply | ErrorReply:
            try:
                return self._digests(request, repo, offset)
            except Exception as exc:  # noqa: BLE001 - a bug must not leave a client hanging
                return _failed(request, exc)

        return digests

    def on_timer(self, wall: datetime) -> list[GraphEvent]:
        """Ticks due by the window (missed before a restart) or by idleness."""
        due: list[GraphEvent] = []
        for ref in sorted(self.state.views):
            due += self.scheduler.due(self.state, ref)
        return due + self.scheduler.idle_due(self.state, wall)


def finish(steps: Generator[None, None, T]) -> T:
    """What a generator of steps returns, all of its steps taken at once."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(T, done.value)


def _failed(request: Request, exc: Exception) -> ErrorReply:
    """A request a bug failed: said in the log with its traceback, answered as an internal error."""
    log.exception("request %s failed", request.request_id)
    return error_reply(request, "internal_error", f"{type(exc).__name__}: {exc}")


def error_reply(request: Request, code: str, message: str) -> ErrorReply:
    return ErrorReply(request_id=request.request_id, graph_id=request.graph_id, code=code, message=message)
