"""A short `emgas loadtest`: every published turn reconciled, no error replies, bounded, stops by itself."""

import json
import os
import subprocess
import sys


def test_short_load_reconciles(tmp_path):
    out = tmp_path / "load.json"
    done = subprocess.run(
        [sys.executable, "-m", "emgas", "loadtest", "--turns", "600", "--queries-per-s", "10",
         "--duration", "5", "--graphs", "20", "--json", str(out)],
        capture_output=True, text=True, timeout=180, env={**os.environ, "EMGAS_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["ok"] and figures["turns_missing"] == {} and figures["error_replies"] == []
    assert figures["queries"] >= 30 and figures["query_p99_ms"] < 2000  # loose: a smoke bound, not a benchmark
    assert figures["worker_rss_mib"]["end"] < 2048
