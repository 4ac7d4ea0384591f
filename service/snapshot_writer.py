"""When the owner of a partition writes snapshots and checkpoints.

The writer decides from what it applies and returns log events for the
caller to append, like the scheduler's ticks:

- a `SnapshotStarted` it applies (written by itself, by `emgas snapshot`,
  by a re-base) is served before the next event is applied: the graph's
  content as of that offset, cut into `Snapshot` parts;
- after a `Forget`, a snapshot of the graph (so the latest snapshot no
  longer holds the forgotten turns);
- a round, once the bytes of events applied since the last round pass
  `max(min_bytes, ratio x the bytes of the last round's snapshots)`: a
  snapshot of every graph, so the history after the latest checkpoint
  stays small relative to the state (and within the embedded broker's
  retention);
- when the last snapshot under way completes and every graph of the
  partition has one, a `Checkpoint` listing them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from emgas.processors.events import Checkpoint, Forget, GraphEvent, Snapshot, SnapshotStarted
from emgas.processors.events.log import SnapshotReason
from emgas.processors.fold_codec import FoldEvent
from emgas.state.digest import partition_digests
from emgas.state.projector import Outcome, PartitionState
from emgas.state import fold_points
from emgas.state.snapshots import PART_BYTES, Records, graph_ids, snapshot_parts, stored_content


@dataclass(frozen=True)
class SnapshotPolicy:
    """`min_bytes`, `ratio`: when a round starts (see the module); 0 bytes: never."""

    min_bytes: int = 1024 * 1024
    ratio: float = 1.0
    part_bytes: int = PART_BYTES


class SnapshotWriter:
    """The snapshot side of one partition's owner (in memory: a restart
    starts counting again)."""

    def __init__(self, policy: SnapshotPolicy | None, partition: int) -> None:
        self.policy = policy
        self.partition = partition
        self.bytes_since = 0
        self.round_bytes = 0  # the last round's snapshot bytes
        self._round: set[str] | None = None  # graphs still to complete in this round
        # Snapshot requests applied and not served yet: the caller serves them
        # (`serve_all`) before applying anything else, so the state is still
        # the one as of their offsets.
        self.to_serve: list[tuple[SnapshotStarted, int]] = []
        self.points_made: list[fold_points.Made] = []  # by `serve_all`, for the caller to keep (on its own thread)

    def after(self, state: PartitionState, event: FoldEvent, offset: int, outcome: Outcome, size: int, wall: datetime) -> list[GraphEvent]:
        """The events to append after `event` was applied at `offset` with `outcome`."""
        if outcome is Outcome.SNAPSHOT_STARTED:
            assert isinstance(event, SnapshotStarted)
            self.to_serve.append((event, offset))
            return []
        if outcome is Outcome.SNAPSHOT_COMPLETED:
            assert isinstance(event, Snapshot)
            return self._completed(state, event, offset, wall)
        due: list[GraphEvent] = []
        if self.policy is not None and isinstance(event, Forget) and outcome is Outcome.APPLIED:
            due.append(SnapshotStarted(graph_id=event.graph_id, reason="forget", timestamp=wall))
        self.bytes_since += size
        if self._round_due():
            due += self.start_round(state, wall)
        return due

    def serve_all(self, state: PartitionState, points: bool = False) -> list[GraphEvent]:
        """The parts of every snapshot request applied and not served yet.
        `points`: the requests were applied leaving their fold points to
        this (`PartitionState.defers_points`): a request but a base one's are
        made from the records its parts are, into `points_made`. It only
        reads the state: a live worker runs it off its event loop."""
        requests, self.to_serve = self.to_serve, []
        parts: list[GraphEvent] = []
        for event, offset in requests:
            records = stored_content(state.txn, event.graph_id)
            if points and not event.base:  # the fold keeps none for a base snapshot, which replaces the graph
                self.points_made += state.points_as_of(event.graph_id, offset, records)
            parts += self.serve(state, event, offset, records)
        return parts

    def serve(self, state: PartitionState, event: SnapshotStarted, offset: int, records: Records | None = None) -> list[Snapshot]:
        """The parts of the graph's content now (`records`, when read
        already), as of `offset` (the marker's), as the store keeps it. A
        round's snapshots carry no digests: hashing every record again
        costs as much as the rest of a snapshot, and a round is the worker's
        own; asked for, after a forget or a re-base, they do (what `emgas digest` prints)."""
        gid = event.graph_id
        if records is None:
            records = stored_content(state.txn, gid)
        digests = partition_digests(state.repo, gid) if event.reason != "policy" else []
        part_bytes = self.policy.part_bytes if self.policy else PART_BYTES
        return snapshot_parts(gid, offset, records, digests, event.timestamp, part_bytes)

    def _round_due(self) -> bool:
        if self.policy is None or self.policy.min_bytes <= 0 or self._round is not None:
            return False
        return self.bytes_since >= max(self.policy.min_bytes, self.policy.ratio * self.round_bytes)

    def start_round(self, state: PartitionState, wall: datetime, reason: SnapshotReason = "policy") -> list[GraphEvent]:
        """A snapshot of every graph of the partition."""
        graphs = graph_ids(state.txn)
        self.bytes_since = 0
        if not graphs:
            return []
        self._round, self.round_bytes = set(graphs), 0
        return [SnapshotStarted(graph_id=g, reason=reason, timestamp=wall) for g in graphs]

    def _completed(self, state: PartitionState, event: Snapshot, offset: int, wall: datetime) -> list[GraphEvent]:
        self.round_bytes += len(event.data) * 3 // 4 * event.parts  # about: the parts are equal but the last
        if self._round is not None:
            self._round.discard(event.graph_id)
        if state.ledger.any_pending():
            return []
        locations = state.ledger.locations()
        missing = [g for g in graph_ids(state.txn) if g not in locations]
        if missing:  # graphs that came during the round: one more, small, round
            self._round = set(missing)
            return [SnapshotStarted(graph_id=g, reason="policy", timestamp=wall) for g in missing]
        self._round = None
        identity = state.ledger.identity()
        if identity is None:
            return []  # a log with no identity yet: recovery writes it first
        present = set(graph_ids(state.txn))
        listed = tuple(loc for g, loc in sorted(locations.items()) if g in present)
        return [Checkpoint(log_id=identity.log_id, partition=self.partition, as_of=offset, snapshots=listed, timestamp=wall)]
