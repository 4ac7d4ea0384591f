"""Commands that start processes (the broker, the soak, the load test)
stop what they started when they are sent SIGTERM."""

import subprocess
import sys

PROGRAM = """
import os, signal, sys, time
from emgas.streams.cli.command import unwind_on_sigterm
unwind_on_sigterm()
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
finally:
    print("cleaned up", flush=True)
"""


def test_a_sigterm_unwinds_through_the_commands_finally_blocks():
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "cleaned up" and done.returncode == 143, done.stderr[-2000:]
