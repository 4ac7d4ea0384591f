"""The command line, end to end: `emgas demo` and clear errors instead of tracebacks."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from emgas.testing import free_port
from tests.support.brokers import broker_ready

import pytest

pytestmark = pytest.mark.e2e


def emgas(*args: str, home, env=None, stdin: str | None = None, timeout: float = 300):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EMGAS_")}
    full_env.update({"EMGAS_HOME": str(home), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "emgas", *args], env=full_env, input=stdin,
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


def test_a_worker_that_exits_while_its_encoder_loads_says_why(tmp_path):
    # An exit must never be aborted by onnxruntime's C++ runtime: the encoder's
    # thread (`encoder.preload`, a while after a first partition serves) is not
    # a daemon, and an exit before it starts has nothing of it to wait for.
    for _ in range(3):
        run = emgas("worker", home=tmp_path, env={"EMGAS_BROKER": "127.0.0.1:9", "EMGAS_BROKER_WAIT_S": "0"})
        assert run.returncode == 2, run.stderr[-2000:]
        assert run.stderr.strip().splitlines() == ["emgas: error: no broker answers at 127.0.0.1:9"]


def test_verbose_adds_the_traceback(tmp_path):
    run = emgas("--verbose", "query", "--graph", "g", "hello", home=tmp_path,
                env={"EMGAS_BROKER": "127.0.0.1:9", "EMGAS_QUERY_TIMEOUT_S": "3"})
    assert run.returncode == 2
    assert "Traceback" in run.stderr and run.stderr.strip().splitlines()[-1].startswith("emgas: error: cannot reach Kafka")


def test_invalid_configuration_is_one_line(tmp_path):
    run = emgas("config", home=tmp_path, env={"EMGAS_KAFKA__SECURITY_PROTOCOL": "SASL_SSL"})
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip() == "emgas: error: invalid configuration (kafka): Value error, SASL_SSL needs sasl_username and sasl_password"


@pytest.mark.parametrize("command", ["demo", "publish", "query", "digest", "replay", "eval", "bench", "simulate",
                                     "config", "stats", "explain", "switch", "forget", "worker", "broker", "snapshot", "mcp"])
def test_every_command_has_help(tmp_path, command):
    run = emgas(command, "--help", home=tmp_path, timeout=60)
    assert run.returncode == 0 and "usage: emgas" in run.stdout and len(run.stdout.splitlines()) >= 3


def test_malformed_publish_file_names_the_line(tmp_path):
    bad = tmp_path / "turns.jsonl"
    bad.write_text('{"graph_id":"g","turn_id":"1","speaker":"a","text":"ok","timestamp":"2026-01-01T00:00:00Z"}\n{oops\n')
    run = emgas("publish", str(bad), home=tmp_path, env={"EMGAS_BROKER": "127.0.0.1:9"})
    assert run.returncode == 2
    assert "turns.jsonl:2: not_json" in run.stderr and "Traceback" not in run.stderr


def test_replay_all_verify_succeeds_on_the_demo_graphs(tmp_path):
    """broker, worker, publish, digest, replay --all --verify: all through `emgas`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMGAS_")}
    env.update({"EMGAS_HOME": str(tmp_path), "EMGAS_WEB_PORT": str(free_port())})
    broker = subprocess.Popen([sys.executable, "-m", "emgas", "broker"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    worker = None
    try:
        assert broker_ready(broker)
        worker = subprocess.Popen([sys.executable, "-m", "emgas", "worker", "--loglevel", "WARNING"],
                                  env=env, stdout=open(tmp_path / "worker.log", "w"), stderr=subprocess.STDOUT)
        demo = Path(__file__).parents[2] / "tools" / "data" / "demo.jsonl"
        assert emgas("publish", str(demo), home=tmp_path).returncode == 0
        deadline = time.monotonic() + 120
        while True:  # until the worker has applied all 34 turns
            run = emgas("digest", "--all", "--json", home=tmp_path)
            if run.returncode == 0:
                passages = {d["graph_id"]: d["sections"]["passages"]["count"] for d in json.loads(run.stdout)}
                if passages == {"alice": 26, "bob": 8}:
                    break
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            assert time.monotonic() < deadline, run.stderr[-2000:]
        run = emgas("replay", "--all", "--verify", "--state-dir", str(tmp_path / "rebuilt"), home=tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr[-2000:]
        assert "verified: all 2 graph version(s) equal the live ones" in run.stdout
        assert "events/s" in run.stdout
        side = emgas("replay", "--all", "--verify", "--processes", "2", "--json", "--state-dir", str(tmp_path / "side"),
                     home=tmp_path)
        assert side.returncode == 0 and "Traceback" not in side.stderr, side.stdout + side.stderr[-2000:]
        assert json.loads(side.stdout)["processes"] == 2 and json.loads(side.stdout)["differences"] == []
        again = emgas("replay", "--all", "--state-dir", str(tmp_path / "rebuilt"), home=tmp_path)
        assert again.returncode == 2 and "not empty" in again.stderr
        offline = emgas("digest", "--all", "--state-dir", str(tmp_path / "rebuilt"), home=tmp_path)
        live = emgas("digest", "--all", home=tmp_path)
        assert offline.stdout == live.stdout and "alice v1 active" in live.stdout
    finally:
        for process in (worker, broker):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(30)


def test_an_invalid_forget_request_is_a_clear_error(tmp_path):
    run = emgas("forget", "--graph", "g", "--turn", "", home=tmp_path, env={"EMGAS_BROKER": "127.0.0.1:9"})
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith("emgas: error: invalid forget request (turn_ids.0)"), run.stderr
