"""The ledger: what a fold keeps about the log itself, beside the graphs.

Its identity (`LogStarted`), each graph's latest complete snapshot, the
snapshot under way, the floors below which a graph's events are already in
a restored snapshot, and the last checkpoint. None of it is graph content:
digests do not cover it.

A base snapshot (a state re-based onto a new log) replaces the graph's
state when its last part is folded: so while it is under way the ledger
keeps its parts and the graph's events after its start, and the fold
(`state.projector`) replays those events onto the restored content. Every
fold of the log, from its beginning or from a checkpoint, then gives the
same graph.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from emgas.processors.codec import decode_graph_event
from emgas.processors.events import Checkpoint, GraphDigest, Snapshot, SnapshotLocation, SnapshotStarted
from emgas.state import keys
from emgas.state.transaction import Transaction


@dataclass(frozen=True)
class LogIdentity:
    log_id: str
    genesis: int  # the offset of its `log_started` record (-1: taken from a checkpoint)


@dataclass
class Pending:
    """A snapshot under way: started at offset `as_of`; parts seen (index -> offset)."""

    as_of: int
    base: bool
    parts: int | None = None
    seen: dict[int, int] = field(default_factory=dict)

    def dump(self) -> bytes:
        return json.dumps({"as_of": self.as_of, "base": self.base, "parts": self.parts,
                           "seen": {str(k): v for k, v in self.seen.items()}}).encode()

    @classmethod
    def load(cls, raw: bytes) -> "Pending":
        obj = json.loads(raw)
        return cls(obj["as_of"], obj["base"], obj["parts"], {int(k): v for k, v in obj["seen"].items()})


@dataclass(frozen=True)
class Completed:
    """A snapshot just completed; for a base snapshot, what replaces the graph."""

    location: SnapshotLocation
    base: bool
    parts: list[Snapshot] = field(default_factory=list)
    digests: tuple[GraphDigest, ...] = ()
    recorded: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, raw event) after its start


class Ledger:
    """The log-level records of one partition state, read and staged through its store."""

    def __init__(self, store: Transaction) -> None:
        self.store = store
        self.floors: dict[str, int] = {
            keys.split_tail(key, keys.FLOOR)[0]: json.loads(raw)["offset"] for key, raw in store.scan(keys.FLOOR)
        }
        self._base_pending: set[str] = {
            keys.split_tail(key, keys.PENDING)[0]
            for key, raw in store.scan(keys.PENDING) if Pending.load(raw).base
        }

    # identity

    def identity(self) -> LogIdentity | None:
        raw = self.store.get(keys.LOG)
        if raw is None:
            return None
        obj = json.loads(raw)
        return LogIdentity(obj["log_id"], obj["genesis"])

    def set_identity(self, identity: LogIdentity) -> None:
        self.store.put(keys.LOG, json.dumps({"log_id": identity.log_id, "genesis": identity.genesis}).encode())

    # locations and checkpoints

    def location(self, graph_id: str) -> SnapshotLocation | None:
        raw = self.store.get(keys.LOCATION + graph_id.encode())
        return None if raw is None else SnapshotLocation.model_validate_json(raw)

    def locations(self) -> dict[str, SnapshotLocation]:
        return {
            key[len(keys.LOCATION):].decode(): SnapshotLocation.model_validate_json(raw)
            for key, raw in self.store.scan(keys.LOCATION)
        }

    def set_location(self, location: SnapshotLocation) -> None:
        self.store.put(keys.LOCATION + location.graph_id.encode(), location.model_dump_json().encode())

    def last_checkpoint(self) -> dict[str, int] | None:
        raw = self.store.get(keys.LAST_CHECKPOINT)
        return None if raw is None else {k: v for k, v in json.loads(raw).items() if k != "snapshots"}

    def last_listed(self) -> dict[str, int]:
        """graph -> the offset of the snapshot the last checkpoint lists of
        it (empty: none, or a state written before checkpoints kept it)."""
        raw = self.store.get(keys.LAST_CHECKPOINT)
        return {} if raw is None else json.loads(raw).get("snapshots", {})

    def checkpointed(self, checkpoint: Checkpoint, offset: int) -> None:
        listed = {loc.graph_id: loc.as_of for loc in checkpoint.snapshots}
        self.store.put(keys.LAST_CHECKPOINT,
                       json.dumps({"offset": offset, "as_of": checkpoint.as_of, "snapshots": listed}).encode())

    def set_floor(self, graph_id: str, offset: int) -> None:
        self.floors[graph_id] = offset
        self.store.put(keys.FLOOR + graph_id.encode(), json.dumps({"offset": offset}).encode())

    # snapshots under way

    def pending(self, graph_id: str) -> Pending | None:
        raw = self.store.get(keys.PENDING + graph_id.encode())
        return None if raw is None else Pending.load(raw)

    def pending_snapshots(self) -> list[tuple[str, bool]]:
        """(graph, base) of every snapshot under way."""
        return [
            (keys.split_tail(key, keys.PENDING)[0], Pending.load(raw).base) for key, raw in self.store.scan(keys.PENDING)
        ]

    def any_pending(self) -> bool:
        return next(iter(self.store.scan(keys.PENDING)), None) is not None

    def start(self, event: SnapshotStarted, offset: int) -> bool:
        """Begin the snapshot of `event.graph_id` at `offset`; False if a base
        snapshot under way keeps its place (only another base replaces it)."""
        gid = event.graph_id
        if gid in self._base_pending and not event.base:
            return False
        self._drop_pending(gid)
        self.store.put(keys.PENDING + gid.encode(), Pending(offset, event.base).dump())
        if event.base:
            self._base_pending.add(gid)
        return True

    def recording(self, graph_id: str) -> bool:
        """Whether the graph's events are kept: its base snapshot is under way."""
        return graph_id in self._base_pending

    def record(self, graph_id: str, offset: int, raw: bytes) -> None:
        """Keep an event of a graph whose base snapshot is under way (replayed onto it)."""
        if graph_id in self._base_pending:
            self.store.put(keys.offset_key(keys.graph_keyed(keys.RECORDED, graph_id), offset), raw)

    def part(self, event: Snapshot, offset: int) -> Completed | bool:
        """Note a part; the `Completed` snapshot on its last part, True for
        another part of the one under way, False for a part of no snapshot
        under way (an older one, a duplicate, an abandoned one)."""
        gid = event.graph_id
        pending = self.pending(gid)
        if pending is None or pending.as_of != event.as_of or event.part in pending.seen or event.part >= event.parts:
            return False
        pending.seen[event.part] = offset
        pending.parts = event.parts
        if pending.base:
            self.store.put(keys.offset_key(keys.graph_keyed(keys.PART, gid), event.part), event.model_dump_json().encode())
        if len(pending.seen) < event.parts:
            self.store.put(keys.PENDING + gid.encode(), pending.dump())
            return True
        location = SnapshotLocation(
            graph_id=gid, as_of=pending.as_of, first=min(pending.seen.values()),
            last=max(pending.seen.values()), parts=event.parts,
        )
        self.set_location(location)
        if not pending.base:
            self._drop_pending(gid)
            return Completed(location, base=False, digests=event.digests)
        # Through the codec: parts kept by an earlier version (schema version 1) are upcast.
        parts = [_snapshot_part(raw) for _, raw in self.store.scan(keys.graph_keyed(keys.PART, gid))]
        recorded = [
            (keys.offset_after(key, keys.graph_keyed(keys.RECORDED, gid)), raw)
            for key, raw in self.store.scan(keys.graph_keyed(keys.RECORDED, gid))
        ]
        self._drop_pending(gid)
        digests = next((p.digests for p in parts if p.digests), ())
        return Completed(location, base=True, parts=parts, digests=digests, recorded=recorded)

    def _drop_pending(self, graph_id: str) -> None:
        self.store.put(keys.PENDING + graph_id.encode(), None)
        for prefix in (keys.graph_keyed(keys.PART, graph_id), keys.graph_keyed(keys.RECORDED, graph_id)):
            for key, _ in list(self.store.scan(prefix)):
                self.store.put(key, None)
        self._base_pending.discard(graph_id)


def _snapshot_part(raw: bytes) -> Snapshot:
    part = decode_graph_event(raw)
    assert isinstance(part, Snapshot), "the ledger keeps snapshot parts only"
    return part
