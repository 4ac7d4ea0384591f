"""A worker whose Python heap is traced: `python -m emgas.tools.memtrace worker ...`
runs `emgas worker ...` with tracemalloc on, and a daemon thread that writes,
every `EMGAS_MEMTRACE_EVERY_S` seconds (default 20), the process's RSS, the
traced heap and the allocation sites that grew most since the first
snapshot to `EMGAS_MEMTRACE_DIR/<pid>.txt` (test and measurement only:
`emgas soak --trace-memory DIR`). Tracing starts `EMGAS_MEMTRACE_START_S`
(default 60) after the process, past its imports and warm-up: what grows
under load is what is looked for, and tracing the imports would slow the
start several times over.

A thread and a file, not a signal: Faust installs its own signal handlers.
Tracing costs the worker time (each allocation is recorded, `FRAMES` deep;
each report walks every traced block in Python, about a second a million).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path

FRAMES = 8
TOP = 20
TRACEBACKS = 5


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def report(first: tracemalloc.Snapshot, now: tracemalloc.Snapshot, started: float) -> str:
    """RSS, traced heap, and the `TOP` sites (file:line) that grew most since `first`, in MiB."""
    current, peak = tracemalloc.get_traced_memory()
    lines = [f"== t={time.monotonic() - started:.0f}s rss_mib={rss_mib():.1f} traced_mib={current / 2**20:.1f} "
             f"traced_peak_mib={peak / 2**20:.1f}"]
    for stat in now.compare_to(first, "lineno")[:TOP]:
        frame = stat.traceback[0]
        lines.append(f"  {stat.size_diff / 2**20:+8.2f} MiB {stat.count_diff:+9d} blocks  now {stat.size / 2**20:7.2f} MiB  "
                     f"{frame.filename}:{frame.lineno}")
    lines.append("  grown most, by where it was allocated from:")
    for stat in now.compare_to(first, "traceback")[:TRACEBACKS]:
        lines.append(f"  {stat.size_diff / 2**20:+8.2f} MiB {stat.count_diff:+9d} blocks")
        lines += [f"      {frame.filename}:{frame.lineno}" for frame in stat.traceback]
    return "\n".join(lines) + "\n"


def trace(out: Path, every_s: float, start_s: float) -> threading.Thread:
    """The thread that starts tracing after `start_s` and writes a report to `out` every `every_s`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        f.write(f"== pid {os.getpid()}: tracing from {start_s:g} s, a report every {every_s:g} s\n")

    def loop() -> None:
        time.sleep(start_s)
        tracemalloc.start(FRAMES)
        started = time.monotonic()
        first = tracemalloc.take_snapshot()
        with out.open("a") as f:
            f.write(f"== tracing since rss_mib={rss_mib():.1f}\n")
        while True:
            time.sleep(every_s)
            text = report(first, tracemalloc.take_snapshot(), started)
            with out.open("a") as f:
                f.write(text)

    thread = threading.Thread(target=loop, name="emgas-memtrace", daemon=True)
    thread.start()
    return thread


def main() -> int:
    directory = Path(os.environ.get("EMGAS_MEMTRACE_DIR", "memtrace"))
    trace(directory / f"{os.getpid()}.txt", float(os.environ.get("EMGAS_MEMTRACE_EVERY_S", "20")),
          float(os.environ.get("EMGAS_MEMTRACE_START_S", "60")))
    from emgas.streams.cli.main import main as emgas

    return emgas(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
