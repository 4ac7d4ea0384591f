"""A worker with test-only faults (`streams.runtime.compose.Hooks`), which `emgas worker` never sets.

    python tests/support/hooked_worker.py --commit-hold-s 0.05 --sync-group-errors 1 [--loglevel WARNING]

Settings come from the environment as for `emgas worker`. Tests start it
with `command(...)` in place of the worker's command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from emgas.streams.runtime.compose import Hooks
from emgas.streams.runtime.worker import run_worker
from emgas.streams.settings import Settings

def command(commit_hold_s: float = 0.0, sync_group_errors: int = 0) -> list[str]:
    """The command line of a worker with these hooks."""
    return [sys.executable, str(Path(__file__).resolve()),
            "--commit-hold-s", str(commit_hold_s), "--sync-group-errors", str(sync_group_errors)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commit-hold-s", type=float, default=0.0)
    parser.add_argument("--sync-group-errors", type=int, default=0)
    parser.add_argument("--loglevel", default="INFO")
    args = parser.parse_args()
    hooks = Hooks(commit_hold_s=args.commit_hold_s, sync_group_errors=args.sync_group_errors)
    run_worker(Settings(), loglevel=args.loglevel.upper(), hooks=hooks)


if __name__ == "__main__":
    main()
