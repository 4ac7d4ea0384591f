"""Log events: the identity of a partition of `emgas.graph-events`, snapshots, checkpoints (see `state.snapshots`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from emgas.processors.events.base import Event, EventTime, Identifier
from emgas.processors.events.queries import GraphDigest


class LogStarted(Event):
    """Log event: the identity of one partition of `emgas.graph-events`.

    Written once, by the first worker to find the partition without one,
    to that partition (no graph key). The first `log_started` record of a
    partition names it: a log recreated (a new embedded broker, a topic
    deleted and created again, another cluster) gets a new `log_id`, so a
    state can tell the log it reflects from any other. Checkpoints carry
    the id forward once retention drops this record.
    """

    type: Literal["log_started"] = "log_started"
    schema_version: Literal[1] = 1
    log_id: Identifier
    partition: int = Field(ge=0)
    timestamp: EventTime


# Why a snapshot round started: the size policy, `emgas snapshot`, a forget, a re-base.
SnapshotReason = Literal["policy", "request", "forget", "rebase"]
SnapshotLayout = Literal["rows", "pairs"]
SnapshotCompression = Literal["zstd", "zlib"]


class SnapshotStarted(Event):
    """Log event: a snapshot of `graph_id` as of this record's offset.

    The worker that owns the partition, on applying it, serialises the
    graph (every version, with its graph-level records) exactly as of this
    offset and appends the `Snapshot` parts. `base`: the parts replace the
    graph's state when complete, whatever a fold of the log before gave
    (a state re-based onto a new log: its graphs are not in this log);
    otherwise they are a copy recovery may start from.
    """

    type: Literal["snapshot_started"] = "snapshot_started"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    reason: SnapshotReason
    base: bool = False
    timestamp: EventTime


class Snapshot(Event):
    """Log event: part `part` of `parts` of the snapshot started at offset `as_of`.

    `data`: base64 of this part's slice of the graph's records (see
    `state.snapshots`), compressed as `compression` says (`zstd`, one frame,
    since schema version 3; `zlib`: every earlier snapshot), in the record
    layout `layout` names: `rows`, the store's own (pair counts in one row
    per concept, links inside their passages; since schema version 2), or
    `pairs` (one record per pair and per link: every version 1 snapshot).
    The parts of one snapshot are compressed alike. The last part carries
    the SHA-256 of the records, which a restore checks, and, when the
    snapshot was asked for (not a round's), the digests of the graph's
    versions as of `as_of`. A snapshot whose parts are not all in the log
    (its writer stopped) is ignored.
    """

    type: Literal["snapshot"] = "snapshot"
    schema_version: Literal[3] = 3
    graph_id: Identifier
    as_of: int = Field(ge=0)
    part: int = Field(ge=0)
    parts: int = Field(ge=1)
    data: str
    # Added in schema version 2; version 1 snapshots are upcast with "pairs".
    layout: SnapshotLayout = "rows"
    # Added in schema version 3; versions 1 and 2 are upcast with "zlib".
    compression: SnapshotCompression = "zstd"
    digests: tuple[GraphDigest, ...] = ()
    content_sha256: str = ""  # on the last part: SHA-256 of the records before compression
    timestamp: EventTime


class SnapshotLocation(Event):
    """Where a complete snapshot of a graph lies in its partition."""

    graph_id: str
    as_of: int = Field(ge=0)  # the offset of its `snapshot_started`: the state it holds
    first: int = Field(ge=0)  # offset of its first part
    last: int = Field(ge=0)  # offset of its last part
    parts: int = Field(ge=1)


class Checkpoint(Event):
    """Log event: every graph of the partition has a complete snapshot here.

    Recovery restores these snapshots and folds the log after the oldest
    of them, skipping each graph's events up to its own snapshot: the cost
    is the state's size plus the recent history, not the whole log.
    """

    type: Literal["checkpoint"] = "checkpoint"
    schema_version: Literal[1] = 1
    log_id: Identifier
    partition: int = Field(ge=0)
    as_of: int = Field(ge=0)  # the offset the listing reflects
    snapshots: tuple[SnapshotLocation, ...]
    timestamp: EventTime


class Sealed(Event):
    """Log event: a `turn_ingested` event or a snapshot part whose bytes are
    sealed under a data key of their own (`processors.sealing`).

    Readers open it with its key (`replay.keyring`) before the fold, which
    then sees the event that was sealed. The fold meets a `sealed` event
    only when its key is gone: the turn was forgotten and its key erased,
    and the record applies nothing, as if the log never held it.

    On the wire this object is the record's first line; the sealed bytes
    (nonce, AES-256-GCM ciphertext and tag) follow a newline, raw.
    """

    type: Literal["sealed"] = "sealed"
    schema_version: Literal[1] = 1
    graph_id: Identifier
    key_id: Identifier  # `turn/<turn id>` or `snapshot/<offset of its snapshot_started>`
    sealed_type: Literal["turn_ingested", "snapshot"]
    timestamp: EventTime
