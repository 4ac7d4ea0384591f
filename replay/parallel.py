"""Rebuilding partitions side by side, in processes of their own.

Partitions are independent: each folds the records of its own log
partition into a store of its own, so a rebuild of several can fold them
at once, one process per core. The partitions are dealt into shares of
about equal records; the rebuilding process folds the largest share
itself, and each other share folds in a process of its own, which opens
its own reader and stores, folds as `rebuild.rebuild` does and sends
back its partitions' counts and digests (the records it reads go to the
parent's progress as it reads them).

A process is a fresh interpreter (`python -m emgas.replay.parallel`),
not a fork: the parent holds an event loop, a connection to the broker
and RocksDB's threads, which a fork would copy in the middle of their
use; and not multiprocessing's spawn, which runs the parent's main
script again in the child (a script that calls `replay` without an
`if __name__ == "__main__"` guard would start over there). It reads its
job from stdin and writes its messages, pickled, to the stdout it was
started with (its own prints go to stderr). It pays its imports and the
compiled kernels' load from their cache, about a second on two cores,
so a rebuild takes a process only for every `RECORDS_PER_PROCESS`
records it has to read.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import struct
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, Callable

from emgas.processors.events import GraphDigest
from emgas.processors.graph import GraphParams
from emgas.replay.errors import ReplayError
from emgas.replay.fold import FoldCounts, Selection
from emgas.replay.reader import LogReader
from emgas.replay.rebuild import (
    Progress, RebuildReport, closed_with_digests, open_rebuild_state, rebuild, warm_for_fold,
)
from emgas.state.projector import PartitionState

# Records to read that pay for one more process: a process starts in about
# a second. On 2 cores (4 partitions, the share here the largest), two
# processes against one: 16,000 records 0.84 times as fast, 36,000 1.38
# times, 64,000 1.47 times (docs/performance.md).
RECORDS_PER_PROCESS = 15_000

_FRAME_SIZE = struct.Struct(">I")  # each message between a share's process and its parent: its length, then its pickle


def available_cores() -> int:
    """The cores this process may run on (its affinity, where the system says)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def processes_for(to_read: dict[int, int], asked: int | None, cores: int) -> int:
    """How many processes fold a rebuild that reads `to_read` (partition ->
    records): `asked` if given, else one per core, per partition with
    records to read and per `RECORDS_PER_PROCESS` records, at least one;
    never more than the partitions with records to read."""
    busy = sum(1 for n in to_read.values() if n > 0)
    if asked is not None:
        return max(1, min(asked, busy))
    return max(1, min(cores, busy, sum(to_read.values()) // RECORDS_PER_PROCESS))


def shares(to_read: dict[int, int], processes: int) -> list[list[int]]:
    """The partitions with records to read, dealt into `processes` shares
    of about equal records: the largest first, each to the share with the
    fewest records so far (ties: the lower share); each share in
    partition order."""
    dealt: list[list[int]] = [[] for _ in range(processes)]
    loads = [0] * processes
    for partition in sorted((p for p, n in to_read.items() if n > 0), key=lambda p: (-to_read[p], p)):
        lightest = loads.index(min(loads))
        dealt[lightest].append(partition)
        loads[lightest] += to_read[partition]
    return [sorted(share) for share in dealt if share]


@dataclass(frozen=True)
class SideBySide:
    """A rebuild may fold its partitions in processes of their own, each
    reading with a reader of `make_reader` (picklable: a module-level
    function or a partial of one); `processes`: how many (None: as
    `processes_for` decides)."""

    make_reader: Callable[[], LogReader]
    processes: int | None = None


@dataclass(frozen=True)
class ShareJob:
    """What a process needs to rebuild its partitions (pickled to it)."""

    make_reader: Callable[[], LogReader]  # a module-level function or a partial of one
    topic: str
    state_dir: Path
    params: GraphParams
    selection: Selection
    graph_id: str | None  # whose digests (None: every graph's)
    stops: dict[int, int]  # partition -> end offset, exclusive


@dataclass
class ShareResult:
    counts: FoldCounts
    ranges: dict[int, tuple[int, int]]  # partition -> offsets read [start, stop)
    digests: dict[int, list[GraphDigest]]  # partition -> its graphs' digests


async def fold_share(job: ShareJob, progress: Progress | None = None) -> ShareResult:
    """Rebuild the job's partitions, in partition order, each from the
    offset its store holds (a checkpoint the parent restored, or none)."""
    open_state = open_rebuild_state(job.state_dir, job.params)
    async with job.make_reader() as reader:
        report = await rebuild(reader, job.topic, job.stops, open_state, job.selection, progress)
    return ShareResult(report.counts, report.ranges, closed_with_digests(open_state, job.stops, job.graph_id))


@dataclass(frozen=True)
class LoggingOfParent:
    """The parent's logging, as a process takes it over: the levels its
    loggers were given (`emgas replay` quiets the fold's rejections unless
    --verbose) and the format of its root handler, if it has one."""

    levels: dict[str, int]  # logger name ("": the root) -> level
    root_format: str | None

    @staticmethod
    def now() -> "LoggingOfParent":
        loggers = logging.root.manager.loggerDict.items()
        levels = {name: lg.level for name, lg in loggers if isinstance(lg, logging.Logger) and lg.level}
        handler = logging.root.handlers[0] if logging.root.handlers else None
        formatter = handler.formatter if handler is not None else None
        return LoggingOfParent({"": logging.root.level, **levels}, formatter._fmt if formatter else None)

    def apply(self) -> None:
        if self.root_format is not None:
            logging.basicConfig(format=self.root_format)
        for name, level in self.levels.items():
            logging.getLogger(name or None).setLevel(level)


async def rebuild_side_by_side(
    reader: LogReader, whole: ShareJob, to_read: dict[int, int], processes: int,
    open_state: Callable[[int], PartitionState], progress: Progress | None = None,
) -> tuple[RebuildReport, list[GraphDigest]]:
    """Rebuild `whole`'s partitions in `processes` shares (`shares`) from
    the states `open_state` holds (restored from checkpoints, or empty):
    the first share (it holds the largest partition) here, with `reader`,
    while each other one folds in a process of its own (its states closed
    here first, as it opens them); the report (ranges, counts; not its
    seconds) and every partition's digests, in partition order. A
    partition with nothing to read stays as it is. Folding a share here
    spares one process's start, about a second, on the share the largest
    partition makes long."""
    theirs = shares(to_read, processes)[1:]  # the first, with the largest partition, is folded here
    handed = {p for share in theirs for p in share}
    for partition in handed:
        open_state(partition).close()
    jobs = [replace(whole, stops={p: whole.stops[p] for p in share}) for share in theirs]
    children = asyncio.ensure_future(run_shares(jobs, progress))
    try:
        report = await rebuild(reader, whole.topic, {p: s for p, s in whole.stops.items() if p not in handed}, open_state,
                               whole.selection, progress)
        results = await children
    finally:
        if not children.done():
            children.cancel()
            await asyncio.gather(children, return_exceptions=True)
    digests = closed_with_digests(open_state, [p for p in whole.stops if p not in handed], whole.graph_id)
    for result in results:
        report.counts.add(result.counts)
        report.ranges.update(result.ranges)
        digests.update(result.digests)
    report.ranges = dict(sorted(report.ranges.items()))
    return report, [d for p in sorted(digests) for d in digests[p]]


async def run_shares(jobs: list[ShareJob], progress: Progress | None = None) -> list[ShareResult]:
    """Run each job in a process of its own: their results, in job order.
    The first failure ends the other processes and is raised here."""
    started: list[asyncio.subprocess.Process] = []
    follows: list[asyncio.Future[ShareResult]] = []
    try:
        for job in jobs:
            started.append(await _start(job))
            follows.append(asyncio.ensure_future(_follow(started[-1], job, progress)))
        return list(await asyncio.gather(*follows))
    finally:
        for follow in follows:
            follow.cancel()
        for process in started:
            if process.returncode is None:
                process.kill()
            await process.wait()


async def _start(job: ShareJob) -> asyncio.subprocess.Process:
    """A process for `job`, given the parent's import path (so that the
    job's reader factory unpickles there as here), then the job and the
    parent's logging."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "emgas.replay.parallel",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        # Out of the terminal's process group: a Ctrl-C stops the parent,
        # which ends its processes (`run_shares`), and prints no
        # traceback of theirs.
        start_new_session=True,
    )
    assert process.stdin is not None
    try:
        process.stdin.write(_frame(list(sys.path)) + _frame((job, LoggingOfParent.now())))
        await process.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # it ended at once: `_follow` says with what exit code
    process.stdin.close()
    return process


async def _follow(process: asyncio.subprocess.Process, job: ShareJob, progress: Progress | None) -> ShareResult:
    """The process's result, passing the records it reads on to `progress`
    as they come; its error raised here; ReplayError if it ends without a
    word (killed, or out of memory)."""
    assert process.stdout is not None
    while True:
        try:
            (size,) = _FRAME_SIZE.unpack(await process.stdout.readexactly(_FRAME_SIZE.size))
            kind, body = pickle.loads(await process.stdout.readexactly(size))
        except asyncio.IncompleteReadError:
            code = await process.wait()
            raise ReplayError(
                f"the process rebuilding partitions {sorted(job.stops)} ended with exit code {code} and no result"
            ) from None
        if kind == "read":
            if progress is not None:
                progress(body)
        elif kind == "done":
            return body
        else:
            raise body


def _frame(value: object) -> bytes:
    body = pickle.dumps(value)
    return _FRAME_SIZE.pack(len(body)) + body


def _read_frame(stream: BinaryIO) -> Any:
    (size,) = _FRAME_SIZE.unpack(stream.read(_FRAME_SIZE.size))
    return pickle.loads(stream.read(size))


def serve_share() -> None:
    """A share's process: read the job from stdin, fold it, and write what
    happens to the stdout it was started with; whatever else it prints
    goes to stderr."""
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    # The compiled loops and the lemmatiser load while the job is read and
    # the reader connects, not in the first fold (as `emgas replay` does).
    threading.Thread(target=warm_for_fold, name="emgas-warm-share", daemon=True).start()
    sys.path[:] = _read_frame(sys.stdin.buffer)
    job, parent_logging = _read_frame(sys.stdin.buffer)
    parent_logging.apply()

    def send(kind: str, body: object) -> None:
        channel.write(_frame((kind, body)))
        channel.flush()

    try:
        message: tuple[str, object] = ("done", asyncio.run(fold_share(job, lambda n: send("read", n))))
    except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent, which raises it
        message = ("failed", _sendable(exc))
    try:
        send(*message)
    except OSError:  # the parent is gone (stopped, or failed first and ended us): nobody to tell
        os._exit(1)


def _sendable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling (the replay's own errors do), else a
    ReplayError that names it."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - whatever made it unpicklable
        return ReplayError(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":  # python -m emgas.replay.parallel: a share's process
    from emgas.replay.parallel import serve_share as serve

    serve()
