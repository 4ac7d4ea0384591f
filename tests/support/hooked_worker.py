"""A worker with test-only faults, added from outside: `emgas worker` never has them.

    python tests/support/hooked_worker.py --commit-hold-s 0.05 --sync-group-errors 1 [--loglevel WARNING]

- `--commit-hold-s`: the worker's port to the log (`streams.runtime.ports.GraphLog`)
  wrapped so that a batch's flush takes that much longer: between a batch's
  events in the log and its states committed (`streams.runtime.commit_order`),
  so a crash test can kill the worker in between.
- `--sync-group-errors`: that many SyncGroup requests refused with
  INVALID_REQUEST before they are sent (the embedded broker's race, which
  `streams.runtime.patches.SyncGroupGuard` answers).

Settings come from the environment as for `emgas worker`. Tests start it
with `command(...)` in place of the worker's command line.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any, Awaitable

from emgas.streams.runtime.app import Output
from emgas.streams.runtime.patches import SYNC_GROUP_GUARD
from emgas.streams.runtime.ports import GraphLog
from emgas.streams.runtime.worker import run_worker
from emgas.streams.settings import Settings


def command(commit_hold_s: float = 0.0, sync_group_errors: int = 0) -> list[str]:
    """The command line of a worker with these faults."""
    return [sys.executable, str(Path(__file__).resolve()),
            "--commit-hold-s", str(commit_hold_s), "--sync-group-errors", str(sync_group_errors)]


class HeldFlush:
    """Kafka's `Output`, each flush of a batch held `hold_s` after its acknowledgements."""

    def __init__(self, output: Output, hold_s: float) -> None:
        self._output, self._hold_s = output, hold_s

    async def acknowledged(self, acks: list[Awaitable[Any]]) -> None:
        await self._output.acknowledged(acks)
        await asyncio.sleep(self._hold_s)

    def __getattr__(self, name: str) -> Any:  # every other part of the port, and `sealer` and `app`, Kafka's
        return getattr(self._output, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commit-hold-s", type=float, default=0.0)
    parser.add_argument("--sync-group-errors", type=int, default=0)
    parser.add_argument("--loglevel", default="INFO")
    args = parser.parse_args()
    SYNC_GROUP_GUARD.fail_first = args.sync_group_errors

    def graph_log(*parts: Any) -> GraphLog:
        output = Output(*parts)
        return HeldFlush(output, args.commit_hold_s) if args.commit_hold_s else output  # type: ignore[return-value]

    run_worker(Settings(), loglevel=args.loglevel.upper(), graph_log=graph_log)


if __name__ == "__main__":
    main()
