"""The command line, end to end: `emgas demo` and clear errors instead of tracebacks."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def emgas(*args: str, home, env=None, stdin: str | None = None, timeout: float = 300):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EMGAS_")}
    full_env.update({"EMGAS_HOME": str(home), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", *args], env=full_env, input=stdin,
        capture_output=True, text=True, timeout=timeout,
    )


def test_demo_prints_answers_and_figures(tmp_path):
    figures_path = tmp_path / "figures.json"
    run = emgas("demo", "--rounds", "3", "--json-out", str(figures_path), home=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "[alice-011]" in out  # the Kafka consumer lag turn
    assert "[alice-019]" in out  # the sourdough starter from Lucia
    assert "[alice-025]" in out  # Chinese: Ingrid in Bergen
    assert "[bob-001]" in out
    figures = json.loads(figures_path.read_text())
    assert figures["turns"] == 34 and figures["queries"] == 15
    assert figures["ingest_turns_per_s"] > 0 and figures["round_trip_ms_p99"] >= figures["round_trip_ms_p50"]


def test_no_broker_is_a_clear_error(tmp_path):
    run = emgas("query", "--graph", "g", "hello", home=tmp_path)
    assert run.returncode == 2
    assert "no broker configured" in run.stderr and "Traceback" not in run.stderr


def test_unreachable_broker_is_a_clear_error(tmp_path):
    run = emgas("query", "--graph", "g", "hello", home=tmp_path,
                env={"EMGAS_BROKER": "127.0.0.1:9", "EMGAS_QUERY_TIMEOUT_S": "3"})
    assert run.returncode == 2
    assert "cannot reach Kafka" in run.stderr and "Traceback" not in run.stderr


def test_malformed_publish_file_names_the_line(tmp_path):
    bad = tmp_path / "turns.jsonl"
    bad.write_text('{"graph_id":"g","turn_id":"1","speaker":"a","text":"ok","timestamp":"2026-01-01T00:00:00Z"}\n{oops\n')
    run = emgas("publish", str(bad), home=tmp_path, env={"EMGAS_BROKER": "127.0.0.1:9"})
    assert run.returncode == 2
    assert "turns.jsonl:2: not_json" in run.stderr and "Traceback" not in run.stderr
