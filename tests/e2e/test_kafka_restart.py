"""`emgas broker` on Apache Kafka keeps its log: broker and worker stopped and
started again find the first run's turns, on the same log (no re-base, no
mismatch), the worker resuming from its state; and it says which broker it is.
`--kafka` where no Java is found is a one-line error."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from emgas.testing import free_port
from tests.support.brokers import broker_ready, require_kafka

pytestmark = pytest.mark.e2e
DEMO = Path(__file__).parents[2] / "tools" / "data" / "demo.jsonl"


class Machine:
    """`emgas broker` and `emgas worker` as a user runs them, on one EMGAS_HOME."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("EMGAS_")}
        self.env.update({"EMGAS_HOME": str(home), "EMGAS_WEB_PORT": str(self.port)})
        self.broker = self.worker = None
        self.runs = 0

    def emgas(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "emgas", *args], env=self.env, capture_output=True, text=True, timeout=300)

    def start(self) -> None:
        self.runs += 1
        self.broker = subprocess.Popen([sys.executable, "-m", "emgas", "broker"], env=self.env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert broker_ready(self.broker)
        self.worker = subprocess.Popen([sys.executable, "-m", "emgas", "worker", "--loglevel", "INFO"], env=self.env,
                                       stdout=open(self.home / f"worker-{self.runs}.log", "w"), stderr=subprocess.STDOUT)

    def stop(self) -> None:
        for process in (self.worker, self.broker):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(60)

    def passages(self) -> dict[str, int] | None:
        run = self.emgas("digest", "--all", "--json")
        if run.returncode != 0:
            return None
        return {d["graph_id"]: d["sections"]["passages"]["count"] for d in json.loads(run.stdout) if d["active"]}

    def until_passages(self, wanted: dict[str, int]) -> None:
        deadline = time.monotonic() + 120
        while self.passages() != wanted:
            assert self.worker.poll() is None, (self.home / f"worker-{self.runs}.log").read_text()[-3000:]
            assert time.monotonic() < deadline, self.passages()
            time.sleep(0.3)

    def health(self) -> dict:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:  # 503 while catching up
            return json.loads(err.read())


def test_stopping_and_starting_broker_and_worker_keeps_the_same_log(tmp_path):
    require_kafka()
    machine = Machine(tmp_path)
    try:
        machine.start()
        broker = json.loads((tmp_path / "broker.json").read_text())
        assert broker["kind"] == "kafka" and broker["version"] and Path(broker["log_dir"]).is_dir()
        assert machine.emgas("publish", str(DEMO)).returncode == 0
        machine.until_passages({"alice": 26, "bob": 8})
        machine.stop()
        assert not (tmp_path / "broker.json").exists()

        machine.start()  # the same home: the same Kafka log, the same worker state
        assert json.loads((tmp_path / "broker.json").read_text())["bootstrap_servers"] == broker["bootstrap_servers"]
        machine.until_passages({"alice": 26, "bob": 8})
        run = machine.emgas("query", "--graph", "alice", "Biscuit chewed what?", "--no-reinforce")
        assert run.returncode == 0 and "[alice-003]" in run.stdout
        deadline = time.monotonic() + 60
        while not (health := machine.health()).get("ready"):
            assert time.monotonic() < deadline, health
            time.sleep(0.3)
        assert health["log_mismatches"] == {}
        second = (tmp_path / "worker-2.log").read_text()
        assert "re-bas" not in second.lower() and "mismatch" not in second.lower()
        verify = machine.emgas("replay", "--all", "--verify", "--from-beginning", "--state-dir", str(tmp_path / "replayed"))
        assert verify.returncode == 0 and "verified: all 2 graph version(s) equal the live ones" in verify.stdout
    finally:
        machine.stop()


def test_kafka_asked_for_without_java_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMGAS_") and k != "JAVA_HOME"}
    env.update({"EMGAS_HOME": str(tmp_path), "PATH": str(Path(sys.executable).parent)})  # no java on it
    run = subprocess.run([sys.executable, "-m", "emgas", "broker", "--kafka"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "emgas: error: cannot run Kafka: no Java found (install OpenJDK 17 or newer, or set JAVA_HOME)"
    ]


def test_without_java_the_broker_is_the_mock_and_says_what_it_does_not_keep(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMGAS_") and k != "JAVA_HOME"}
    env.update({"EMGAS_HOME": str(tmp_path), "PATH": str(Path(sys.executable).parent)})
    broker = subprocess.Popen([sys.executable, "-m", "emgas", "broker"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        first = broker.stdout.readline()
        assert first.startswith("no real Kafka here (no Java found") and "keeps at most ~5 MiB per partition" in first
        assert broker_ready(broker)
        assert json.loads((tmp_path / "broker.json").read_text())["kind"] == "mock"
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(30)
