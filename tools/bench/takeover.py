"""Taking over a partition: recovery in process and live, with and without snapshots."""

from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


from emgas.processors.events import ActivationReply, Checkpoint, GraphEvent, Snapshot, SnapshotStarted, Turn
from emgas.processors.extract import ExtractionParams, extractor_id, ingest
from emgas.replay.reader import LogRecord
from emgas.streams.kafka.reader import log_reader
from emgas.state.digest import partition_digests
from emgas.testing import LocalLog
from emgas.state.projector import PartitionState
from emgas.state.rocks import RocksStore
from emgas.service.snapshot_writer import SnapshotWriter
from emgas.state.ledger import LogIdentity
from emgas.processors.graph import GraphParams
from emgas.streams.interfaces.client import MemoryClient
from emgas.testing import free_port, health, start_worker, stop_worker
from emgas.streams.errors import QueryTimeout
from emgas.streams.kafka.local import start_scratch_broker
from emgas.streams.settings import Settings
from emgas.streams.interfaces.snapshots import request_snapshots
from emgas.tools.synthetic import Shape, conversations
from emgas.tools.bench.core import decoded_records, fold_into
from emgas.tools.figures import Progress, figure


HISTORY_COPIES = 10  # the long history: the short one published this many times


def history_log(turns: list[Turn], copies: int, params: GraphParams) -> LocalLog:
    """One graph's log: its `turns` extracted and put through `LocalLog` (with
    the decay ticks and consolidations they bring), then that whole history
    re-published `copies - 1` more times: duplicates, which the fold skips,
    so every copy count gives the same final state. The state names a log
    (as a worker's does), so a snapshot request appended to it ends in a
    checkpoint."""
    extraction = ExtractionParams()
    tag = extractor_id(extraction)
    log = LocalLog(params)
    log.state.ledger.set_identity(LogIdentity("bench", -1))
    log.extend([ingest(t, extraction, tag) for t in turns])
    history = list(log.log)
    for _ in range(copies - 1):
        log.extend(history)
    return log


def _checkpoint_parts(events: list[GraphEvent], checkpoint: Checkpoint) -> dict[str, list[Snapshot]]:
    """The parts of each snapshot `checkpoint` lists, from where they lie in `events`."""
    return {
        loc.graph_id: [e for e in events[loc.first : loc.last + 1]
                       if isinstance(e, Snapshot) and e.graph_id == loc.graph_id and e.as_of == loc.as_of]
        for loc in checkpoint.snapshots
    }


def _recovered(
    events: list[tuple[GraphEvent, LogRecord]], state_dir: Path, params: GraphParams, checkpoint_at: int | None
) -> tuple[float, PartitionState]:
    """A fresh RocksDB state brought up to the end of `events` and the seconds
    it took: the whole log folded (`checkpoint_at` None), or the checkpoint
    at that offset restored and the log after its snapshots folded."""
    state = PartitionState(RocksStore(state_dir), params)
    started = time.perf_counter()
    if checkpoint_at is not None:
        checkpoint = events[checkpoint_at][0]
        assert isinstance(checkpoint, Checkpoint)
        state.restore_checkpoint(checkpoint, _checkpoint_parts([e for e, _ in events], checkpoint))
    fold_into(state, events[state.applied_offset + 1 :])
    return time.perf_counter() - started, state


def _digests(state: PartitionState) -> dict[tuple[str, int], str]:
    return {(d.graph_id, d.version): d.digest for d in partition_digests(state.repo)}


def _serialize_ms(state: PartitionState, graph: str, as_of: int) -> float:
    """Milliseconds for the owner to serve a snapshot request of `graph` on
    `state`: its content read, its digests, packed and cut into parts."""
    marker = SnapshotStarted(graph_id=graph, reason="request", timestamp=datetime.now(timezone.utc))
    started = time.perf_counter()
    SnapshotWriter(None, 0).serve(state, marker, as_of)
    return (time.perf_counter() - started) * 1000


def _snapshotted(turns: list[Turn], copies: int, params: GraphParams) -> tuple[LocalLog, int, int]:
    """`history_log` with a snapshot request of its graph appended (served:
    parts, then a checkpoint); the log, the request's offset and the checkpoint's."""
    log = history_log(turns, copies, params)
    marker_at = len(log.log)
    log.append(SnapshotStarted(graph_id=turns[0].graph_id, reason="request", timestamp=log.log[-1].timestamp))
    return log, marker_at, max(i for i, e in enumerate(log.log) if isinstance(e, Checkpoint))


def _recovery_s(
    events: list[tuple[GraphEvent, LogRecord]], state_dir: Path, params: GraphParams, checkpoint_at: int | None,
    digests: set[tuple],
) -> float:
    """`_recovered`'s seconds; the state's digests are added to `digests`."""
    seconds, state = _recovered(events, state_dir, params, checkpoint_at)
    digests.add(tuple(sorted(_digests(state).items())))
    state.close()
    return seconds


def _snapshot_figures(log: LocalLog, marker_at: int, checkpoint_at: int, tmp: Path, repeats: int) -> dict[str, Any]:
    """The snapshot of the log's graph: compressed bytes per edge of the
    graph, and the time to serve it on a RocksDB state (restored from it)."""
    graph = log.log[marker_at].graph_id
    parts = [e for e in log.log[marker_at:] if isinstance(e, Snapshot)]
    edges = log.state.view(graph).edges
    _, state = _recovered(decoded_records(log.log), tmp, log.params, checkpoint_at)
    try:
        serialize = [_serialize_ms(state, graph, marker_at) for _ in range(repeats)]
    finally:
        state.close()
    return {
        "snapshot_graph_edges": edges,
        "snapshot_bytes_per_edge": round(sum(len(base64.b64decode(p.data)) for p in parts) / max(edges, 1), 1),
        "snapshot_serialize_ms": figure(serialize, 1),
    }


def in_process_recovery_figures(turns: int, repeats: int, params: GraphParams) -> dict[str, Any]:
    """Recovery alone, without Kafka, of a graph of `turns` synthetic turns
    with a history of 1 and HISTORY_COPIES times its events: the whole log
    folded into a fresh RocksDB state, against its checkpoint restored and
    the tail folded; the snapshot's size per edge and the time to serve it."""
    synthetic = conversations(turns, Shape(graphs=1))
    out: dict[str, Any] = {"recovery_in_process_turns": turns}
    digests: set[tuple] = set()
    with tempfile.TemporaryDirectory(prefix="emgas-bench-recovery-") as tmp:
        for copies in (1, HISTORY_COPIES):
            tag = f"{copies}x"
            log, marker_at, checkpoint_at = _snapshotted(synthetic, copies, params)
            events = decoded_records(log.log)
            whole = [_recovery_s(events[:marker_at], Path(tmp) / f"{tag}-whole-{r}", params, None, digests)
                     for r in range(repeats)]
            restored = [_recovery_s(events, Path(tmp) / f"{tag}-restored-{r}", params, checkpoint_at, digests)
                        for r in range(repeats)]
            out[f"recovery_in_process_events_{tag}"] = marker_at
            out[f"recovery_in_process_s_{tag}"] = figure(restored, 3)
            out[f"recovery_in_process_s_{tag}_no_snapshots"] = figure(whole, 3)
            if copies == 1:
                out.update(_snapshot_figures(log, marker_at, checkpoint_at, Path(tmp) / "snapshot", repeats))
    if len(digests) != 1:
        raise RuntimeError(f"recovery gave {len(digests)} different states of one graph: a bug in snapshots or the fold")
    return out


# A worker that takes over: no automatic snapshot rounds, so the one
# snapshot in the log is the one the bench asks for.
TAKEOVER_ENV = {"EMGAS_SNAPSHOT_MIN_BYTES": "0"}
TAKEOVER_DEADLINE_S = 180.0  # a takeover not answered by then fails the bench


NAMING_DEADLINE_S = 60.0  # a first worker that has not named the log by then fails the bench


def _named_log(live: Settings, procs: list[subprocess.Popen[bytes]]) -> None:
    """The empty log named as every log is: by the first worker that serves
    it, which appends its `log_started` at offset 0 (started here, and
    stopped once it has). A takeover then finds the log's identity at its
    start, not by a scan of the whole log for a checkpoint."""
    worker = start_worker(live, live.home / "namer.log", name="namer", env=TAKEOVER_ENV)
    procs.append(worker)
    try:
        asyncio.run(_until_named(live, worker))
    finally:
        stop_worker(worker)


async def _until_named(live: Settings, worker: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + NAMING_DEADLINE_S
    async with log_reader(live) as reader:
        while (await reader.bounds(live.graph_events_topic, [0]))[0][1] < 1:
            if worker.poll() is not None:
                raise RuntimeError(f"the first worker exited with {worker.returncode} before naming the log")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the first worker did not name the log within {NAMING_DEADLINE_S:g} s")
            await asyncio.sleep(0.05)


async def _emit_history(live: Settings, events: list[GraphEvent]) -> None:
    """Append `events` to the graph-events log after its `log_started`; an
    error if the embedded broker's retention dropped any record (the log
    must hold them all)."""
    async with MemoryClient(live) as client:
        await client.emit(events)
    topic = live.graph_events_topic
    async with log_reader(live) as reader:
        start, end = (await reader.bounds(topic, [0]))[0]
    if start > 0 or end < len(events) + 1:
        raise RuntimeError(f"{topic}[0] holds offsets {start}..{end} of {len(events) + 1} records appended: "
                           "the embedded broker dropped some (5 MiB per partition); use fewer turns")


async def _first_answer(client: MemoryClient, worker: subprocess.Popen[bytes], graph: str, text: str) -> ActivationReply:
    """The first activation reply for `graph`, asking again after each timeout
    or error reply (the partition not served yet). Each query waits the
    client's own timeout (`query_timeout_s`): a worker skips a query whose
    client gave up (`serving._expired`), so with a wait of 1 s a worker
    ready at 1.0-1.1 s would answer only the query asked next, a round
    later, and the figures would step at 1 s."""
    deadline = time.monotonic() + TAKEOVER_DEADLINE_S
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise RuntimeError(f"the worker exited with {worker.returncode} before answering")
        try:
            reply = await client.ask(graph, text, reinforce=False)
        except QueryTimeout:
            continue
        if isinstance(reply, ActivationReply):
            return reply
        await asyncio.sleep(0.05)
    raise QueryTimeout(f"no worker answered for graph {graph!r} within {TAKEOVER_DEADLINE_S:g} s")


async def _takeover(live: Settings, name: str, graph: str, text: str, procs: list[subprocess.Popen[bytes]]) -> dict[str, Any]:
    """Start a worker with no state (a new name, so a new data directory) and
    time it from just before its process starts until the first activation
    reply for `graph`; then its graph (turns, digest) and its `/health`
    account of partition 0's catch-up. The process is left running, in `procs`."""
    port = free_port()
    async with MemoryClient(live) as client:
        started = time.perf_counter()
        worker = start_worker(live, live.home / f"{name}.log", name=name, web_port=port, env=TAKEOVER_ENV)
        procs.append(worker)
        reply = await _first_answer(client, worker, graph, text)
        seconds = time.perf_counter() - started
        [digests] = await client.digests(graph)
    recovery = (await asyncio.to_thread(health, port))["recoveries"]["0"]
    return {
        "seconds": seconds, "turns": reply.stats.turns, "recovery_s": recovery["seconds"],
        "records_read": recovery["records_read"], "checkpoint": recovery["checkpoint"],
        "digests": tuple(sorted((d.version, d.digest) for d in getattr(digests, "graphs", ()))),
    }


def _takeovers(live: Settings, tag: str, graph: str, text: str, repeats: int, procs: list, progress: Progress) -> list[dict]:
    """`repeats` takeovers one after the other, each worker stopped before the
    next starts, but the last left running."""
    runs = []
    for r in range(repeats):
        if procs:
            stop_worker(procs[-1])
        progress(f"takeover {tag} {r + 1}/{repeats}")
        runs.append(asyncio.run(_takeover(live, f"{tag}-{r}", graph, text, procs)))
    return runs


def _history_takeovers(
    settings: Settings, events: list[GraphEvent], graph: str, text: str, tag: str, repeats: int, progress: Progress
) -> tuple[list[dict], list[dict], float]:
    """On a fresh broker (1 partition) whose log, named by a first worker,
    holds `events`: takeovers with no checkpoint in the log; the last of those workers
    then writes a snapshot on request (timed until its checkpoint is in the
    log) and stops; then takeovers that start from that checkpoint."""
    home = Path(tempfile.mkdtemp(prefix="emgas-bench-takeover-"))
    bench = settings.model_copy(update={"home": home, "partitions": 1, "turn_partitions": 1})
    cluster = start_scratch_broker(bench, home / "kafka")
    live = bench.model_copy(update={"broker": cluster.bootstrap_servers})
    procs: list[subprocess.Popen[bytes]] = []
    try:
        _named_log(live, procs)
        asyncio.run(_emit_history(live, events))
        plain = _takeovers(live, f"{tag}-no-snapshots", graph, text, repeats, procs, progress)
        progress(f"snapshot {tag}")
        started = time.perf_counter()
        asyncio.run(request_snapshots(live, graph, wait_s=60))
        snapshot_s = time.perf_counter() - started
        stop_worker(procs[-1])
        restored = _takeovers(live, f"{tag}-snapshots", graph, text, repeats, procs, progress)
        return plain, restored, snapshot_s
    finally:
        for proc in procs:
            stop_worker(proc)
        cluster.close()
        shutil.rmtree(home, ignore_errors=True)


def _takeover_keys(tag: str, runs: list[dict]) -> dict[str, Any]:
    return {
        f"takeover_s_{tag}": figure([r["seconds"] for r in runs], 2),
        f"recovery_s_{tag}": figure([r["recovery_s"] for r in runs], 3),
        f"recovery_records_read_{tag}": figure([r["records_read"] for r in runs], 0),
    }


def takeover_figures(settings: Settings, turns: int, repeats: int, progress: Progress) -> dict[str, Any]:
    """Live takeovers of one partition by a worker with no state, for a graph
    of `turns` synthetic turns whose log holds its history once and
    HISTORY_COPIES times (the same final state), each with and without a
    checkpoint in the log."""
    synthetic = conversations(turns, Shape(graphs=1))
    history = history_log(synthetic, 1, settings.graph).log
    graph, text = synthetic[0].graph_id, synthetic[0].text
    out: dict[str, Any] = {"takeover_turns": turns}
    runs: list[dict] = []
    snapshot_s = []
    for copies in (1, HISTORY_COPIES):
        tag = f"history_{copies}x"
        plain, restored, seconds = _history_takeovers(settings, history * copies, graph, text, tag, repeats, progress)
        if any(r["checkpoint"] is None for r in restored) or any(r["checkpoint"] is not None for r in plain):
            raise RuntimeError(f"takeover {tag}: workers did not start from the checkpoint as expected")
        out[f"takeover_history_events_{copies}x"] = len(history) * copies
        out.update(_takeover_keys(tag, restored))
        out.update(_takeover_keys(f"{tag}_no_snapshots", plain))
        runs += plain + restored
        snapshot_s.append(seconds)
    if {r["turns"] for r in runs} != {turns}:
        raise RuntimeError(f"takeovers served {sorted({r['turns'] for r in runs})} turns, not {turns}")
    out["takeover_digests_equal"] = len({r["digests"] for r in runs}) == 1
    out["snapshot_write_s"] = figure(snapshot_s, 2)
    return out
