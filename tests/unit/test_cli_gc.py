"""The command line tunes the cyclic garbage collector before any command runs."""

import json
import subprocess
import sys

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
