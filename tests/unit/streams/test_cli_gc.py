"""The command line tunes the cyclic garbage collector and the allocator before any command runs."""

import json
import subprocess
import sys

import pytest

from emgas.streams.cli.main import GC_THRESHOLDS

PROBE = """
import gc, json, sys
from emgas.streams.cli.main import main
main(['config'])
print(json.dumps([gc.get_threshold(), gc.get_freeze_count()]), file=sys.stderr)
"""


def test_a_command_runs_with_the_collector_at_its_thresholds_and_the_imports_frozen(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60,
        env={"EMGAS_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    thresholds, frozen = json.loads(run.stderr.strip().splitlines()[-1])
    assert tuple(thresholds) == GC_THRESHOLDS
    assert frozen > 10_000, "the objects the imports made are frozen"


CONSOLE_PROBE = """
import gc, json, sys
import emgas.__main__ as entry
seen = []
real = entry.gc.disable
entry.gc.disable = lambda: (real(), seen.append("off"))
sys.argv = ["emgas", "config"]
status = entry.console()
print(json.dumps([status, seen, "emgas.streams.cli.main" in sys.modules, gc.isenabled(), gc.get_threshold()]), file=sys.stderr)
"""


def test_the_emgas_command_loads_with_the_collector_off_and_runs_with_it_on(tmp_path):
    """`emgas` (and `python -m emgas`) load the command line with the
    collector off: its imports make no cyclic garbage. The command runs
    with it on again, at its thresholds."""
    run = subprocess.run(
        [sys.executable, "-c", CONSOLE_PROBE], capture_output=True, text=True, timeout=60,
        env={"EMGAS_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    status, seen, loaded, enabled, thresholds = json.loads(run.stderr.strip().splitlines()[-1])
    assert status == 0 and seen == ["off"] and loaded
    assert enabled and tuple(thresholds) == GC_THRESHOLDS


FAULTS_PROBE = """
import json, resource, sys
if sys.argv[1] == "tuned":
    from emgas.streams.cli.main import main
    main(['config'])
block = bytearray(48 * 2**20)  # the size of a large commit's batch, written: its pages faulted in
del block
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    block = bytearray(48 * 2**20)  # again: faulted in again unless the freed memory is reused
    del block
print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before), file=sys.stderr)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc tuning: Linux only")
def test_a_command_reuses_freed_memory_instead_of_faulting_it_in_again(tmp_path):
    faults = {}
    for mode in ("tuned", "default"):
        run = subprocess.run(
            [sys.executable, "-c", FAULTS_PROBE, mode], capture_output=True, text=True, timeout=60,
            env={"EMGAS_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
        assert run.returncode == 0, run.stderr
        faults[mode] = int(run.stderr.strip().splitlines()[-1])
    pages = 4 * 48 * 2**20 // 4096
    if faults["default"] < pages // 2:  # a kernel that maps such blocks in huge pages faults little either way
        pytest.skip(f"the default allocator faulted only {faults['default']} times: nothing to tell apart")
    assert faults["tuned"] < pages // 20, faults
