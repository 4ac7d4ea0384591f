"""The one way to apply a graph event: live workers and replay both use it.

A partition's state is its store behind a transaction (`state.transaction`),
the typed repository over it and the in-memory views of its graph versions.
Applying an event at log offset `o`:

- `o` at or below the offset applied: a redelivery (e.g. events read again
  after a crash between commits); skipped.
- a turn already stored in its graph version (same turn_id), a decay tick
  or consolidation not later than the graph's last one, a retrieval whose
  request was applied, a turn forgotten on request, a forget request
  already applied, an event of a graph version that does not exist: only
  the offset advances (`Outcome` says which).
- otherwise: load the slice of the graph version the event needs, call the
  core's `evolve` (`processors.evolve`: every decision is made there), and
  apply the writes it returns to the store (staged with the event, in its
  graph version's journal) and to the in-memory graph (the view).
- `evolve` (or loading its slice) raising is a rejection, not a crash: the
  state is unchanged but for the offset and a record of the rejection, and
  since applying is deterministic, a replay rejects the event the same way.

The guard, the slice and the evolve are the event type's rule
(`state.rules`); a type without one fails loudly before anything else.

Staged changes reach the store when `commit` writes them, with the offset,
in one atomic batch. So every valid event changes the state exactly once,
whatever the delivery guarantees of the transport and wherever a crash
falls between commits.

Forgetting (`Forget`) re-folds each graph version that holds a forgotten
turn without that turn, into a scratch state with this same fold: from the
version's latest fold point (`state.fold_points`) that does not hold the
turn, else from the start of its journal. It swaps the version's
records for the result: the graph is then, bit for bit, the one whose log
never held the turn.
"""

from __future__ import annotations

import json
import logging
import weakref
from typing import Any, Callable, Iterator, Mapping, Sequence, cast

from emgas.processors.codec import decode_graph_event, encode
from emgas.processors.events import (
    LOG_EVENTS, Checkpoint, Consolidate, ContentEvent, Decay, Forget, GraphEvent, LogStarted, Sealed, Snapshot,
    SnapshotStarted, TurnIngested,
)
from emgas.processors.evolve import after_tick
from emgas.processors.fold_codec import (
    ConsolidateRow, DecayRow, FoldEvent, TurnRow, decode_for_fold, event_bytes, is_turn,
)
from emgas.processors.graph import GraphMeta, GraphParams, GraphRef
from emgas.processors.pruning_group import PruningTick, TickDecision, decide_ticks
from emgas.processors.writes import Forgetting, PutMeta, Records, Refolded, SwitchVersion, Writes
from emgas.state import fold_points, keys, tick_group, turn_run
from emgas.state.collector import collector_paused
from emgas.state.memory import MemoryStore
from emgas.state.rules import Outcome, Refolds, Rule, UnregisteredEvent, ViewChange, rule_for, version_named
from emgas.state.ledger import Completed, Ledger, LogIdentity
from emgas.state.snapshots import SnapshotMismatch, assemble, replace_content
from emgas.state.repository import Entry, GraphRepository, offset_batch
from emgas.state.store import PartitionStore
from emgas.state.transaction import StagedCommit, Transaction, overlaps
from emgas.state.view import GraphView, load_view
from emgas.state.view_cache import Views

log = logging.getLogger(__name__)

__all__ = ["LOG_RECORDS", "Outcome", "PartitionState", "Refolds", "UnregisteredEvent"]


class PartitionState:
    """The materialised state of one partition of `emgas.graph-events`."""

    def __init__(self, store: PartitionStore, params: GraphParams) -> None:
        self.txn = Transaction(store)
        self.repo = GraphRepository(self.txn)
        self.ledger = Ledger(self.txn)
        self.params = params
        views = _ViewStore(self.txn, params)
        self.views = Views(self.repo.graph_refs(), views.load_view, on_evict=views.stage_view)
        self.txn.defer(_ViewRows(views, self.views))
        self._offset = self.repo.applied_offset()
        self._committed = self._offset
        self.last_rejection: str | None = None
        self.rejections: dict[int, str] = {}  # offset -> why the fold rejected the event there (the last batch)
        # A version re-folded by `refolds`: its records and the view the re-fold
        # left, which serves once those very records replace the version's.
        self._refold_views: dict[GraphRef, tuple[Refolded, GraphView]] = {}
        # Whether a view with many dead slots is loaded again, compact, after a
        # tick: not in a re-fold's scratch state, which would reload it twice
        # in a long one (0.15 s of a forget); its view, if it serves, compacts
        # at the next tick instead.
        self.compacts_views = True
        # Whether a snapshot request's fold points are left to whoever serves
        # it (`SnapshotWriter.serve_all`, with `points_as_of` and `keep_points`):
        # a live worker makes them on the thread that serialises the same
        # records, off its event loop. Otherwise the fold keeps them as it
        # applies the request.
        self.defers_points = False

    @property
    def applied_offset(self) -> int:
        return self._offset

    @property
    def committed_offset(self) -> int:
        """The offset the store holds: where a restart resumes."""
        return self._committed

    @property
    def uncommitted(self) -> bool:
        return self._offset != self._committed or len(self.txn) > 0

    def commit(self) -> None:
        """Write every change staged since the last commit, with the offset, atomically."""
        if self.uncommitted:
            with collector_paused():
                self.txn.commit(offset_batch(self._offset))
            self._committed = self._offset

    def settle_steps(self) -> Iterator[GraphRef]:
        """Stage the changes the loaded views keep, one graph at a time (a
        caller may let others run between two: what a commit does first)."""
        for ref, view in list(self.views.loaded().items()):
            _stage_view(self.repo, ref, view)
            yield ref

    def stage_commit(self) -> tuple[StagedCommit, int] | None:
        """`commit` in parts: the changes staged now with the offset (None
        when nothing is uncommitted), whose `write` may run on another
        thread while nothing is applied here; then `committed` with both."""
        if not self.uncommitted:
            return None
        with collector_paused():
            return self.txn.stage_commit(offset_batch(self._offset)), self._offset

    def committed(self, staged: tuple[StagedCommit, int]) -> None:
        """The staged commit is written: the store is at its offset."""
        commit, offset = staged
        self.txn.written(commit)
        self._committed = offset

    def ref(self, graph_id: str, version: int | None = None) -> GraphRef:
        """`graph_id` at `version` (None: its active version)."""
        return GraphRef(graph_id, version or self.repo.active_version(graph_id))

    def view(self, graph_id: str, version: int | None = None) -> GraphView | None:
        """The view of `graph_id` at `version` (default: the active one)."""
        return self.views.get(self.ref(graph_id, version))

    def ref_of(self, event: ContentEvent | TurnRow | ConsolidateRow | DecayRow | SnapshotStarted | Snapshot) -> GraphRef:
        """The graph version an event applies to (no version named: the active one)."""
        return self.ref(event.graph_id, version_named(event))

    def apply(self, event: GraphEvent, offset: int, refolds: Refolds | None = None, raw: bytes | None = None) -> Outcome:
        """Apply the event at log `offset`. `refolds`: for a `Forget`, what
        `refolds(event)` returned for this state (None: computed here).
        `raw`: the event's bytes as read, kept in the journal (else encoded)."""
        if offset <= self._offset:
            return Outcome.ALREADY_APPLIED
        outcome = self._apply_new(event, offset, refolds, raw)
        self._offset = offset
        return outcome

    def _apply_new(self, event: GraphEvent, offset: int, refolds: Refolds | None, raw: bytes | None) -> Outcome:
        if isinstance(event, LOG_EVENTS):
            return LOG_RECORDS[type(event)](self, event, offset)
        return self._graph_event(event, offset, refolds, raw)

    def apply_batch(self, batch: Sequence[tuple[FoldEvent, int, bytes | None]]) -> list[Outcome]:
        """Apply (event, log offset, its bytes as read) of one partition, in log
        order: the same outcomes and state as `apply` of each in turn.

        A graph's events see only that graph's state, so between two of the
        log's own records (which see the whole partition) the batch is
        applied graph by graph, each graph's events in log order: a run of
        its turns folded at once (`state.turn_run`), any other event, which
        must see the state the events before it left, alone."""
        outcomes: list[Outcome | None] = [None] * len(batch)
        with collector_paused():  # for the whole batch: what it allocates is freed as it ends, not traversed meanwhile
            for _ in self.batch_pieces(batch, outcomes, len(batch)):
                pass
        return cast(list[Outcome], outcomes)

    def batch_pieces(
        self, batch: Sequence[tuple[FoldEvent, int, bytes | None]], outcomes: list[Outcome | None], most: int,
    ) -> Iterator[None]:
        """`apply_batch` a piece at a time, the outcomes filled in as it goes:
        it pauses (yields) after each piece, a graph's events between two of
        the log's own records, `most` of them at most. While it pauses, each
        graph is as some prefix of its events in the batch leaves it (not
        yet reached, part way, or done), so its queries may be answered; the
        partition as a whole is not at any offset until the last piece
        (`applied_offset` is already the batch's): its caller must neither
        commit it, nor hash it, nor fold anything else into it meanwhile
        (`streams.runtime.partitions.PartitionStates.folding`)."""
        graphs: dict[str, list[int]] = {}
        self.rejections = {}
        for k, (event, offset, _) in enumerate(batch):
            if offset <= self._offset:
                outcomes[k] = Outcome.ALREADY_APPLIED  # a redelivery
                continue
            if isinstance(event, LOG_EVENTS):
                yield from self._graph_pieces(batch, graphs, outcomes, most)
                graphs = {}
                with collector_paused():
                    outcomes[k] = LOG_RECORDS[type(event)](self, event, offset)
            else:
                graphs.setdefault(event.graph_id, []).append(k)
            self._offset = offset
        yield from self._graph_pieces(batch, graphs, outcomes, most)

    def _graph_pieces(
        self, batch: Sequence[tuple[FoldEvent, int, bytes | None]], graphs: dict[str, list[int]],
        outcomes: list[Outcome | None], most: int,
    ) -> Iterator[None]:
        """Each graph's events (positions in `batch`), in log order, `most` at
        a time (a run cut in two folds as the whole would: `state.turn_run`),
        with the collector paused while each piece is folded (what a piece
        allocates is freed as it ends, not traversed meanwhile)."""
        for members in graphs.values():
            for start in range(0, len(members), most):
                with collector_paused():
                    self._apply_graph(batch, members[start:start + most], outcomes)
                yield

    def _apply_graph(
        self, batch: Sequence[tuple[FoldEvent, int, bytes | None]], members: list[int],
        outcomes: list[Outcome | None],
    ) -> None:
        """A graph's events (positions in `batch`), in log order: runs of turns at once."""
        run: list[int] = []
        for k in members + [-1]:
            if k >= 0 and turn_run.joins_run(batch[k][0]):
                run.append(k)
                continue
            if run:
                events = [cast(turn_run.RunEvent, batch[j]) for j in run]
                for j, outcome in zip(run, self._apply_run(events)):
                    outcomes[j] = outcome
                run = []
            if k >= 0:
                event, offset, raw = batch[k]
                outcomes[k] = self._graph_event(cast(ContentEvent, event), offset, None, raw)

    def _apply_run(
        self, run: Sequence[turn_run.RunEvent],
    ) -> list[Outcome]:
        """A run of one graph (`turn_run.joins_run`), past the offset guard:
        each version's events folded at once."""
        outcomes: list[Outcome | None] = [None] * len(run)
        groups: dict[GraphRef, list[int]] = {}
        active: int | None = None
        for k, (event, offset, raw) in enumerate(run):
            if offset <= self.ledger.floors.get(event.graph_id, -1):
                outcomes[k] = Outcome.ALREADY_APPLIED  # in the snapshot its graph was restored from
                continue
            if self.ledger.recording(event.graph_id):
                self.ledger.record(event.graph_id, offset, event_bytes(event, raw))
            version = event.graph_version
            if version is None:
                version = active = active or self.repo.active_version(event.graph_id)
            groups.setdefault(GraphRef(event.graph_id, version), []).append(k)
        for ref, members in groups.items():
            events = [(run[k][0], run[k][1], event_bytes(run[k][0], run[k][2])) for k in members]
            for k, outcome in zip(members, self._fold_run(ref, events)):
                outcomes[k] = outcome
        return cast(list[Outcome], outcomes)

    def _fold_run(self, ref: GraphRef, run: list[turn_run.RunEvent]) -> list[Outcome]:
        """The run's events of one graph version, in log order: their
        outcomes. Folded part by part (`turn_run.part_end`): in each, the
        pruning ticks applied first, one at a time but for their meta
        (`_prune_ahead`), then the part at once."""
        outcomes = turn_run.skipped(self.repo, ref, run, known=ref in self.views)
        start = 0
        while start < len(run):
            end = turn_run.part_end(run, outcomes, start, known=ref in self.views)
            start, rejected = self._fold_part(ref, run, outcomes, start, end)
            if rejected:  # the ticks after it see the state without it
                outcomes[start:] = turn_run.skipped(self.repo, ref, run[start:], known=ref in self.views)
        return [Outcome.APPLIED if outcome is None else outcome for outcome in outcomes]

    def _fold_part(
        self, ref: GraphRef, run: list[turn_run.RunEvent], outcomes: list[Outcome | None], start: int, end: int,
    ) -> tuple[int, bool]:
        """Fold run[start:end] (`outcomes`: its guards', updated in place):
        its pruning ticks ahead, then all of it. A tick rejected ends the
        part there: where the next one starts, and whether a tick was rejected."""
        ahead: dict[int, frozenset[str]] = {}
        ticks = [k for k in range(start, end) if outcomes[k] is None and turn_run.prunes(run[k][0])]
        while ticks:
            removed = self._prune_group(ref, [run[k] for k in ticks])
            ahead.update((run[k][1], gone) for k, gone in zip(ticks, removed))
            if len(removed) == len(ticks):
                break
            k = ticks[len(removed)]  # its evolve raised in the group: applied alone, where a rejection is recorded
            event, offset, raw = run[k]
            outcome, gone = self._prune_ahead(ref, cast(Decay, _model(event, raw)), offset, raw)  # alone: as a model
            if outcome is not Outcome.APPLIED:
                outcomes[start:k] = self._fold_events(ref, run[start:k], outcomes[start:k], ahead)
                outcomes[k] = outcome
                return k + 1, True
            ahead[offset] = gone
            ticks = ticks[len(removed) + 1:]
        outcomes[start:end] = self._fold_events(ref, run[start:end], outcomes[start:end], ahead)
        return end, False

    def _fold_events(
        self, ref: GraphRef, run: list[turn_run.RunEvent], outcomes: list[Outcome | None],
        ahead: dict[int, frozenset[str]],
    ) -> list[Outcome | None]:
        """Fold `run` at once (`outcomes`: its guards'; `ahead`: its pruning
        ticks applied but for their meta): the outcomes. Should folding
        them raise, each is applied alone, so the rejection is the one
        event's, as without batches."""
        applied = [item for item, outcome in zip(run, outcomes) if outcome is None]
        if not applied:
            return outcomes
        new = ref not in self.views
        view = self._view_of(ref)  # before staging: loading it after would count the run twice
        try:
            folded = turn_run.fold_run(self.repo, view, applied, self.params, ahead)
        except Exception:  # noqa: BLE001 - folded one at a time below, where a poison event is an outcome
            if new:
                del self.views[ref]
            return [
                self._tick_meta(ref, cast(Decay, event)) if offset in ahead  # a row has the fields it reads
                else self._content_event(_model(event, raw), offset, None, raw)
                for event, offset, raw in run
            ]
        turn_run.stage_run(self.repo, ref, folded)
        view.add_turns(folded)
        return outcomes

    def _prune_group(self, ref: GraphRef, ticks: list[turn_run.RunEvent]) -> list[frozenset[str]]:
        """Pruning ticks past their guards, applied ahead of their part's
        turns but for their meta, read, decided and applied together
        (`state.tick_group`): the concepts each removed. Fewer than `ticks`
        where deciding a tick raised: those before it are applied, and it is
        the caller's, to apply alone."""
        view = self._view_of(ref)
        try:
            reads = tick_group.read_group(self.repo, view, ref, [cast(PruningTick, event) for event, _, _ in ticks])
        except Exception:  # noqa: BLE001 - each applied alone by the caller then, through its rule's own slice
            log.debug("pruning ticks of %s not read together; applied alone", ref, exc_info=True)
            return []
        decided: list[tuple[int, bytes, TickDecision]] = []
        decisions = decide_ticks((cast(PruningTick, event) for event, _, _ in ticks), reads)
        for _, offset, raw in ticks:
            try:
                decided.append((offset, raw, next(decisions)))
            except Exception:  # noqa: BLE001 - applied alone by the caller, where a rejection is recorded
                log.debug("pruning tick at offset %s of %s not decided in its group; applied alone", offset, ref,
                          exc_info=True)
                break
        gone = tick_group.apply_group(self.repo, view, ref, reads, decided)
        self._compact_if_due(ref, view)
        return gone

    def _prune_ahead(self, ref: GraphRef, tick: Decay, offset: int, raw: bytes) -> tuple[Outcome, frozenset[str]]:
        """A pruning tick past its guard (`turn_run.skipped`), applied ahead
        of its part's turns but for its meta, which its run moves in its
        place: the outcome, and the concepts it removed."""
        listed = {c.id for c in tick.concepts}
        held = {cid for cid in listed if cid in self._view_of(ref).index}
        outcome = self._evolve(rule_for(tick), tick, ref, self.repo.meta(ref), offset, None, raw, meta_in_run=True)
        index = self._view_of(ref).index  # a view compacted after it is a new one
        return outcome, frozenset(cid for cid in held if cid not in index)

    def _tick_meta(self, ref: GraphRef, tick: Decay) -> Outcome:
        """The meta move of a tick applied ahead (`evolve_decay`'s `PutMeta`)."""
        writes = (PutMeta(after_tick(self.repo.meta(ref), tick)),)
        self.repo.apply(ref, writes, None)
        self._view_of(ref).apply_all(writes)
        return Outcome.APPLIED

    def _graph_event(self, event: ContentEvent, offset: int, refolds: Refolds | None, raw: bytes | None) -> Outcome:
        rule_for(event)  # before anything: a type without a rule is never skipped or recorded
        if offset <= self.ledger.floors.get(event.graph_id, -1):
            return Outcome.ALREADY_APPLIED  # in the snapshot this graph was restored from
        if self.ledger.recording(event.graph_id):
            self.ledger.record(event.graph_id, offset, event_bytes(event, raw))
        return self._content_event(event, offset, refolds, raw)

    def _content_event(self, event: ContentEvent, offset: int, refolds: Refolds | None, raw: bytes | None) -> Outcome:
        """A graph content event past the offset and floor guards: its rule's guard, then its evolve."""
        rule = rule_for(event)
        ref = self.ref_of(event)
        meta = self.repo.meta(ref)
        outcome = rule.guard(self, event, ref, meta)
        if outcome is None:
            outcome = self._evolve(rule, event, ref, meta, offset, refolds, raw)
        return outcome

    # -- the log's own records: identity, snapshots, checkpoints (`LOG_RECORDS`) --

    def _log_started(self, event: LogStarted, offset: int) -> Outcome:
        if self.ledger.identity() is not None:
            return Outcome.LOG_STARTED_AGAIN  # the first one names the log
        self.ledger.set_identity(LogIdentity(event.log_id, offset))
        return Outcome.LOG_STARTED

    def _checkpoint(self, event: Checkpoint, offset: int) -> Outcome:
        self.ledger.checkpointed(event, offset)
        return Outcome.CHECKPOINT

    def _sealed(self, event: Sealed, offset: int) -> Outcome:
        return Outcome.ERASED  # its key is gone: a forgotten turn, or a snapshot written before a forget

    def _snapshot_started(self, event: SnapshotStarted, offset: int) -> Outcome:
        if offset <= self.ledger.floors.get(event.graph_id, -1):
            return Outcome.ALREADY_APPLIED  # in the snapshot its graph was restored from
        if not self.ledger.start(event, offset):
            return Outcome.SNAPSHOT_IGNORED
        if not event.base:  # a base snapshot replaces the graph when complete
            self._keep_fold_points(event.graph_id, offset)
        return Outcome.SNAPSHOT_STARTED

    def _snapshot_part(self, event: Snapshot, offset: int) -> Outcome:
        if offset <= self.ledger.floors.get(event.graph_id, -1):
            return Outcome.ALREADY_APPLIED  # in the snapshot its graph was restored from
        done = self.ledger.part(event, offset)
        if isinstance(done, Completed):
            return self._replace(event.graph_id, done, offset) if done.base else Outcome.SNAPSHOT_COMPLETED
        return Outcome.SNAPSHOT_PART if done else Outcome.SNAPSHOT_IGNORED

    def _replace(self, graph_id: str, done: Completed, offset: int) -> Outcome:
        """A base snapshot completed: the graph is its content, then the
        graph's events since the snapshot started, applied again in order.
        Parts that are not what their writer serialised are rejected (the
        graph stays as it is)."""
        try:
            records = assemble(done.parts)
        except SnapshotMismatch as err:
            log.error("base snapshot of graph %r completed at offset %s rejected: %s", graph_id, offset, err)
            self.repo.stage_rejection(offset, "snapshot", str(err))
            return Outcome.REJECTED
        self.restore(graph_id, records)
        for recorded_at, raw in done.recorded:
            event = cast(ContentEvent, decode_graph_event(raw))  # the ledger records only graph content events
            self._graph_event(event, recorded_at, None, raw)
        return Outcome.SNAPSHOT_COMPLETED

    def _keep_fold_points(self, graph_id: str, as_of: int) -> None:
        """Keep each version of `graph_id` as of `as_of` (`state.fold_points`),
        unless whoever serves the request makes them (`defers_points`)."""
        if not self.defers_points:
            self.keep_points(self.points_as_of(graph_id, as_of))

    def points_as_of(self, graph_id: str, as_of: int, content: Records | None = None) -> list[fold_points.Made]:
        """Each version of `graph_id` as it is now, made a fold point as of
        `as_of`. Reads only (a worker calls it on another thread); `content`:
        the graph's records, when read already (`snapshots.stored_content`)."""
        made = []
        for ref in self.repo.graph_refs():
            if ref.graph_id == graph_id:
                records = (
                    self.repo.records_but_journal(ref) if content is None else fold_points.version_records(content, ref)
                )
                value = fold_points.encode_point(as_of, self.repo.turn_ids_in(ref, records), records)
                made.append(fold_points.Made(ref, as_of, value))
        return made

    def keep_points(self, made: list[fold_points.Made]) -> None:
        """Stage fold points made (`points_as_of`)."""
        for point in made:
            fold_points.keep_made(self.txn, point)

    def restore(self, graph_id: str, records: Records) -> None:
        """Make `graph_id`'s content `records` (its views rebuilt)."""
        replace_content(self.txn, graph_id, records)
        fold_points.drop_graph(self.txn, graph_id)  # they were of the content replaced
        for ref in [r for r in self.views if r.graph_id == graph_id]:
            del self.views[ref]
        for ref in self.repo.graph_refs():
            if ref.graph_id == graph_id:
                self.views[ref] = load_view(self.repo, ref, self.params.decay)

    def restore_checkpoint(self, checkpoint: Checkpoint, parts: dict[str, list[Snapshot]]) -> None:
        """Start from a checkpoint: each graph it lists restored from its
        snapshot (`parts`: graph -> its parts), its events up to the
        snapshot skipped from now on; the state then reflects the log up to
        the oldest of them, so the fold goes on from there."""
        self.ledger.set_identity(LogIdentity(checkpoint.log_id, -1))
        for location in checkpoint.snapshots:
            self.restore(location.graph_id, assemble(parts[location.graph_id]))
            self.ledger.set_floor(location.graph_id, location.as_of)
            self.ledger.set_location(location)
        self._offset = min((loc.as_of for loc in checkpoint.snapshots), default=checkpoint.as_of)

    def restart_log(self, identity: LogIdentity, offset: int = -1) -> None:
        """Re-base: from now on this state reflects the log `identity`, read
        from after `offset` (its graphs stay; their snapshots must be written to it)."""
        self.ledger.set_identity(identity)
        for prefix in (
            keys.LOCATION, keys.FLOOR, keys.PENDING, keys.PART, keys.RECORDED, keys.REJECTED, fold_points.PREFIX,
        ):
            for key, _ in list(self.txn.scan(prefix)):
                self.txn.put(key, None)  # they name offsets of the old log
        self.txn.put(keys.LAST_CHECKPOINT, None)
        self.ledger = Ledger(self.txn)
        self._offset = offset

    def _evolve(
        self, rule: Rule, event: GraphEvent, ref: GraphRef, meta: GraphMeta, offset: int, refolds: Refolds | None,
        raw: bytes | None, meta_in_run: bool = False,
    ) -> Outcome:
        """`meta_in_run`: all the writes but the meta's (a tick applied ahead of its run's turns)."""
        try:
            writes = rule.evolve(event, rule.load(self, event, ref, meta, refolds), self.params)
            if meta_in_run:
                writes = _but_meta(writes)
        except Exception as exc:  # noqa: BLE001 - a poison event is an outcome, not a crash
            self.last_rejection = self.rejections[offset] = f"{type(exc).__name__}: {exc}"
            # One line for whoever reads the log; the traceback for whoever debugs the rule.
            log.error("graph event at offset %s (%s of %s) rejected: %s", offset, event.type, ref, self.last_rejection)
            log.debug("traceback of the rejection at offset %s", offset, exc_info=True)
            self.repo.stage_rejection(offset, event.type, self.last_rejection)
            return Outcome.REJECTED
        view = self._view_of(ref) if writes and rule.views is ViewChange.INCREMENTAL else None
        # (loaded before the store has the writes: loading it after would count them twice)
        self.repo.apply(ref, writes, Entry(offset, raw or encode(event)) if rule.journaled else None)
        if rule.views is ViewChange.SWAP:
            self._swap_views(cast(Forgetting, writes[0]))  # a forget's evolve returns its one `Forgetting`
        elif view is not None:
            self._apply_to_view(ref, view, writes, compact=rule.compacts)
        return Outcome.APPLIED

    def _view_of(self, ref: GraphRef) -> GraphView:
        """`ref`'s view (loaded if evicted; a new, empty one for a new version)."""
        view = self.views.get(ref)
        if view is None:
            view = self.views[ref] = GraphView(ref, self.params.decay)
        return view

    def _swap_views(self, forgetting: Forgetting) -> None:
        """A forget's versions: each erased dropped, each re-folded loaded again
        (the re-fold's own view of it, when it is that re-fold's)."""
        for erased in forgetting.erased:
            self.views.pop(erased, None)
        for refolded, records in forgetting.refolded.items():
            kept = self._refold_views.pop(refolded, None)
            if kept is not None and kept[0] is records:  # the re-fold's own view of this re-fold
                self.views[refolded] = kept[1]
            else:
                self.views[refolded] = load_view(self.repo, refolded, self.params.decay)

    def _apply_to_view(self, ref: GraphRef, view: GraphView, writes: Writes, compact: bool) -> None:
        """Apply the writes to `view`; `compact`: then rebuild it if dead
        slots or stale due times outnumber live ones (after a tick)."""
        view.apply_all(writes)
        if compact:
            self._compact_if_due(ref, view)

    def _compact_if_due(self, ref: GraphRef, view: GraphView) -> None:
        """Load `ref`'s view again, compact, once dead slots or stale due
        times outnumber live ones (after a tick; not in a re-fold's scratch state)."""
        if self.compacts_views and view.needs_compaction():
            self.views[ref] = load_view(self.repo, ref, self.params.decay)

    # -- forgetting ------------------------------------------------------------

    def refolds(self, event: Forget) -> Refolds:
        """What forgetting `event`'s turns makes of each graph version holding
        one of them: its records re-folded without them, or None where no
        turn is left. Reads the state and writes nothing, so a worker can
        compute it off the event loop (after a commit) and hand it to `apply`."""
        refolds: Refolds = {}
        if event.whole_graph:
            return refolds
        turn_ids = set(event.turn_ids)
        for ref in self.repo.graph_refs():
            if ref.graph_id == event.graph_id and any(self.repo.has_turn(ref, t) for t in turn_ids):
                refolds[ref] = self._refolded(ref, turn_ids)
        return refolds

    def _refolded(self, ref: GraphRef, forgotten: set[str]) -> Refolded | None:
        """The records `ref` would have if its journal never held the turns
        `forgotten`: its journal folded without them, in order and at the
        same offsets, into a scratch state whose active version is `ref`'s,
        starting from the version's latest fold point that holds none of them
        (then only the journal after it is folded). None: no turn is left,
        so the version would not exist."""
        with collector_paused():  # what the re-fold makes but its result is freed before the collector runs again
            folded = self._refold(ref, forgotten)
        if folded is None:
            return None
        refolded, view = folded
        self._refold_views[ref] = (refolded, view)  # clean: reading the records settled its rows
        return refolded

    def _refold(self, ref: GraphRef, forgotten: set[str]) -> tuple[Refolded, GraphView] | None:
        """`_refolded`'s records, with the scratch state's view of them. The
        scratch state and the decoded journal go as it returns."""
        # Points holding a turn forgotten before are dropped with that forget;
        # one a state kept anyway (written by a version that kept a single
        # point, say) must not bring the turn back.
        point = fold_points.latest_without(self.txn, ref, forgotten | self.repo.forgotten_turns(ref.graph_id))
        if point is not None:
            scratch, after = self._scratch_from(ref, point), point.as_of
        else:
            scratch, after = PartitionState(MemoryStore(), self.params), -1
            scratch.repo.apply(ref, (SwitchVersion(ref.version),), None)
        scratch.compacts_views = False
        kept, offsets = [], []
        for entry in self.repo.journal(ref, after):
            offsets.append(entry.offset)
            event = decode_for_fold(entry.event)
            if not (is_turn(event) and event.turn_id in forgotten):
                kept.append((event, entry.offset, entry.event))
        scratch.apply_batch(kept)
        if ref not in scratch.views:
            return None
        # read through its transaction: no store to fill. The journal is the
        # version's own, but for the entries the re-fold did not apply again
        # (its own journal holds the others, the same bytes at the same keys).
        records = scratch.repo.store.items(keys.graph_prefix(ref))
        journaled = [records.pop(key, None) is not None for key in keys.journal_entries(ref, offsets)]
        dropped = tuple(offset for offset, again in zip(offsets, journaled) if not again)
        return Refolded(records, dropped), scratch.views[ref]

    def _scratch_from(self, ref: GraphRef, point: fold_points.FoldPoint) -> PartitionState:
        """A scratch state holding `ref` as of its fold point, active: the
        point's records, without the journal up to the point (a point does
        not copy it, and a re-fold never reads it: forgets and version
        switches, which read or swap a journal, are not journaled)."""
        journal = keys.section(ref, b"j")  # a point of an earlier layout holds it: taken from the version instead
        store = MemoryStore()
        store.write({
            **{key: value for key, value in point.records() if not key.startswith(journal)},
            keys.registry(ref): b"",
            keys.active(ref.graph_id): json.dumps({"version": ref.version}).encode(),
        })
        return PartitionState(store, self.params)

    def close(self) -> None:
        """Commit what was applied (a clean stop) and close the store."""
        self.commit()
        self.txn.close()


# How the fold applies each of the log's own records (`processors.events.log`);
# a graph event's rule is in `state.rules`.
LOG_RECORDS: Mapping[type, Callable[[PartitionState, Any, int], Outcome]] = {
    LogStarted: PartitionState._log_started,
    Checkpoint: PartitionState._checkpoint,
    Sealed: PartitionState._sealed,
    SnapshotStarted: PartitionState._snapshot_started,
    Snapshot: PartitionState._snapshot_part,
}


def _but_meta(writes: Writes) -> Writes:
    """All of a tick's writes but its meta's: a tick applied ahead of its run's turns, which move the meta."""
    return tuple(write for write in writes if not isinstance(write, PutMeta))


def _model(
    event: TurnIngested | TurnRow | Decay | DecayRow | Consolidate | ConsolidateRow, raw: bytes,
) -> TurnIngested | Decay | Consolidate:
    """A run's event as its rule takes it (an event decoded for the fold becomes its model)."""
    if isinstance(event, (TurnRow, ConsolidateRow, DecayRow)):
        return cast(TurnIngested | Decay | Consolidate, decode_graph_event(raw))
    return event


def _view_records(ref: GraphRef, view: GraphView) -> dict[bytes, bytes | None]:
    """The records of the concepts and pair rows `view` changed since they
    were last taken (it keeps them while folding), by key: the concepts as
    their JSON (a rule reads concepts through `_ViewRows.settle_concepts`)."""
    records: dict[bytes, bytes | None] = {}
    if view.has_concept_changes:
        concepts = view.encoded_concepts()
        records.update(zip(keys.concepts(ref, concepts), concepts.values()))
    if view.has_row_changes:
        rows = view.row_records()
        records.update(zip(keys.rows(ref, rows), rows.values()))
    return records


def _stage_view(repo: GraphRepository, ref: GraphRef, view: GraphView) -> None:
    """Stage the pair rows and the concepts `view` changed (`_view_records`):
    what settles them is a scan, a commit staged for another thread, or an
    eviction, which read them from the transaction."""
    repo.store.stage(_view_records(ref, view))


class _ViewStore:
    """Where the state's views load from and stage to: the state's
    repository for what its transaction holds (its views,
    their loader and eviction, the settling of their changes), reached
    through a weak reference to that transaction: a strong one would make a
    cycle, so a state let go of (a forget's scratch state, the whole graph
    it re-folded) would wait for the cyclic collector to be freed."""

    def __init__(self, txn: Transaction, params: GraphParams) -> None:
        self._txn, self._decay = weakref.ref(txn), params.decay

    @property
    def repo(self) -> GraphRepository:
        txn = self._txn()
        if txn is None:
            raise RuntimeError("the partition state these views belong to is gone")
        return GraphRepository(txn)

    def load_view(self, ref: GraphRef) -> GraphView:
        return load_view(self.repo, ref, self._decay)

    def stage_view(self, ref: GraphRef, view: GraphView) -> None:
        _stage_view(self.repo, ref, view)


class _ViewRows:
    """The pair rows and concepts the loaded views changed, staged when the
    transaction settles (before a scan or a commit; the concepts alone before
    a concept is read): each changed record written once."""

    def __init__(self, store: _ViewStore, views: Views) -> None:
        self._store, self._views = store, views

    def settle(self) -> None:
        for ref, view in self._views.loaded().items():
            self._store.stage_view(ref, view)

    def settle_under(self, prefix: bytes) -> None:
        """`settle` of the views whose records (concepts, pair rows) a read of `prefix` can meet."""
        for ref, view in self._views.loaded().items():
            if overlaps(prefix, keys.section(ref, b"c")) or overlaps(prefix, keys.section(ref, b"r")):
                self._store.stage_view(ref, view)

    def take(self) -> dict[bytes, bytes | None]:
        """What `settle` would stage, as records for a commit to write."""
        records: dict[bytes, bytes | None] = {}
        for ref, view in self._views.loaded().items():
            records.update(_view_records(ref, view))
        return records

    def settle_concepts(self, ref: GraphRef, ids: Sequence[str]) -> None:
        view = self._views.loaded().get(ref)
        if view is not None and view.has_concept_changes:
            self._store.repo.put_concepts(ref, view.concept_records(ids))

    def drop(self) -> None:
        """A rollback: the state is reopened from the store (its views with it)."""
