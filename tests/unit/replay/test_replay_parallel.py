"""Rebuilding partitions side by side (`replay.parallel`): how many
processes, which partitions each folds, and a process's failure reaching
the parent. The digests of a rebuild side by side against one in a single
process are compared on Apache Kafka (tests/integration/test_replay.py)."""

import logging
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from emgas.processors.graph import GraphParams
from emgas.replay.errors import LogUnavailable, ReplayError
from emgas.replay.fold import Selection
from emgas.replay.parallel import (
    RECORDS_PER_PROCESS, LoggingOfParent, ShareJob, processes_for, rebuild_side_by_side, run_shares, shares,
)
from emgas.replay.rebuild import open_rebuild_state
from emgas.replay.reader import LogReader
from tests.support.live import run

R = RECORDS_PER_PROCESS


@pytest.mark.parametrize(
    ("to_read", "asked", "cores", "expected"),
    [
        ({0: 3 * R, 1: 3 * R, 2: 3 * R}, None, 2, 2),  # the cores bound it
        ({0: 3 * R, 1: 3 * R, 2: 3 * R}, None, 16, 3),  # the partitions with records do
        ({0: R, 1: R // 2, 2: 0}, None, 16, 1),  # the records do: 1.5 processes' worth
        ({0: R, 1: R, 2: 0}, None, 16, 2),
        ({0: 100, 1: 100}, None, 16, 1),  # a small log: not worth a process's start
        ({0: 0, 1: 0}, None, 16, 1),  # nothing to read
        ({}, None, 4, 1),
        ({0: 100, 1: 100, 2: 100}, 3, 1, 3),  # asked for: whatever the records and cores
        ({0: 100, 1: 0, 2: 100}, 3, 1, 2),  # but never more than the partitions with records
        ({0: 5 * R, 1: 5 * R}, 1, 16, 1),
    ],
)
def test_processes_for(to_read, asked, cores, expected):
    assert processes_for(to_read, asked, cores) == expected


@pytest.mark.parametrize(
    ("to_read", "processes", "expected"),
    [
        ({0: 10, 1: 10, 2: 10, 3: 10}, 2, [[0, 2], [1, 3]]),
        ({0: 100, 1: 10, 2: 10, 3: 10, 4: 60}, 2, [[0], [1, 2, 3, 4]]),  # largest first, each to the lightest
        ({0: 5, 1: 0, 2: 7}, 2, [[2], [0]]),  # a partition with nothing to read is in no share
        ({0: 5}, 3, [[0]]),  # no empty share
        ({3: 1, 1: 1, 2: 1}, 1, [[1, 2, 3]]),
    ],
)
def test_shares(to_read, processes, expected):
    assert shares(to_read, processes) == expected


def _job(make_reader, tmp_path: Path) -> ShareJob:
    return ShareJob(make_reader, "emgas.graph-events", tmp_path, GraphParams(), Selection(), None, {0: 10})


def test_a_process_that_fails_raises_its_error_in_the_parent(tmp_path):
    unreachable = partial(LogReader, "127.0.0.1:1", timeout_s=1.0)
    with pytest.raises(LogUnavailable, match="cannot reach Kafka at 127.0.0.1:1"):
        run(run_shares([_job(unreachable, tmp_path / "a")]))


def ends_at_once() -> LogReader:
    os._exit(3)


def test_a_process_that_ends_without_a_word_is_reported(tmp_path):
    with pytest.raises(ReplayError, match=r"partitions \[0\] ended with exit code 3 and no result"):
        run(run_shares([_job(ends_at_once, tmp_path / "a")]))


def test_a_process_takes_over_the_parents_logger_levels():
    quiet = logging.getLogger("emgas.state.projector")
    before = quiet.level
    try:
        quiet.setLevel(logging.CRITICAL)
        taken = LoggingOfParent.now()
        quiet.setLevel(logging.NOTSET)
        taken.apply()
        assert quiet.level == logging.CRITICAL
        assert taken.levels[""] == logging.getLogger().level
    finally:
        quiet.setLevel(before)


def test_a_script_without_a_main_guard_runs_once(tmp_path):
    """The processes are fresh interpreters, not multiprocessing's spawn,
    which would run the calling script again in each of them."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from functools import partial\n"
        "from emgas.processors.graph import GraphParams\n"
        "from emgas.replay.errors import LogUnavailable\n"
        "from emgas.replay.fold import Selection\n"
        "from emgas.replay.parallel import ShareJob, run_shares\n"
        "from emgas.replay.reader import LogReader\n"
        "from asyncio import run\n"
        "print('script started', flush=True)\n"
        "reader = partial(LogReader, '127.0.0.1:1', timeout_s=1.0)\n"
        f"job = ShareJob(reader, 't', __import__('pathlib').Path({str(tmp_path / 's')!r}), GraphParams(), Selection(), None, {{0: 5}})\n"
        "try:\n"
        "    run(run_shares([job, job]))\n"
        "except LogUnavailable as err:\n"
        "    print('raised', err)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[3])
    assert done.stdout.count("script started") == 1, done.stdout + done.stderr
    assert "raised cannot reach Kafka at 127.0.0.1:1" in done.stdout, done.stdout + done.stderr


class _NothingToRead:
    """A reader whose partitions hold no records (the share folded here)."""

    async def read(self, topic, partition, start, stop):  # noqa: ANN001, ANN201 - a stub of LogReader.read
        return
        yield


def test_a_share_that_fails_in_its_process_fails_the_rebuild_folded_here_too(tmp_path):
    unreachable = partial(LogReader, "127.0.0.1:1", timeout_s=1.0)
    whole = ShareJob(unreachable, "t", tmp_path, GraphParams(), Selection(), None, {0: 10, 1: 10})
    open_state = open_rebuild_state(tmp_path, GraphParams())
    with pytest.raises(LogUnavailable, match="cannot reach Kafka at 127.0.0.1:1"):
        run(rebuild_side_by_side(_NothingToRead(), whole, {0: 10, 1: 5}, 2, open_state))
