"""The command line runs numpy's BLAS on one thread unless told otherwise:
its one matrix product, a query's semantic seeds, waits 15-20 ms for a
second thread whenever the other core is busy (`streams/cli/__init__.py`)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

COUNT = (
    "import os, sys; import emgas.streams.cli.main; import numpy; "
    "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))"
)


def _threads(env: dict[str, str]) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", COUNT], env=env, check=True, capture_output=True, text=True, timeout=60)
    setting, threads = out.stdout.split()
    return setting, int(threads)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts the process's threads in /proc (Linux)")
def test_the_command_line_loads_blas_with_one_thread():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _threads(env) == ("1", 1)  # OpenBLAS started no thread of its own


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts the process's threads in /proc (Linux)")
def test_a_users_own_blas_threads_are_kept():
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    setting, threads = _threads(env)
    assert setting == "2" and threads == min(2, os.cpu_count() or 1)
