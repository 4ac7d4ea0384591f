"""A worker whose state outlives the embedded broker's log, end to end through `emgas`.

As a new user would: broker + worker, publish, stop both, start a new
broker (a new, empty log) and a worker on the same data directory,
publish new turns. With EMGAS_ON_LOG_RESET=rebase (the default) the graph
keeps its turns and gets the new ones; rebuild keeps only the new ones;
stop ends the worker with one clear error. In every mode the mismatch is
reported, and the new log alone rebuilds what the worker serves.
"""

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

pytestmark = pytest.mark.e2e

DEMO = Path(__file__).parents[2] / "tools" / "data" / "demo.jsonl"
NEW_TURNS = [
    {"graph_id": "alice", "turn_id": "new-1", "speaker": "alice",
     "text": "I adopted a greyhound called Pretzel today", "timestamp": "2026-11-20T10:00:00Z"},
    {"graph_id": "alice", "turn_id": "new-2", "speaker": "alice",
     "text": "Pretzel loves the beach at Cromer", "timestamp": "2026-11-20T11:00:00Z"},
]


class Session:
    """An embedded broker and a worker on one EMGAS_HOME, run as `emgas` processes."""

    def __init__(self, home: Path, mode: str) -> None:
        self.home, self.port = home, free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("EMGAS_")}
        self.env.update({"EMGAS_HOME": str(home), "EMGAS_WEB_PORT": str(self.port), "EMGAS_ON_LOG_RESET": mode})
        self.broker = self.worker = None
        self.runs = 0

    def emgas(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "emgas", *args], env=self.env, input=stdin,
                              capture_output=True, text=True, timeout=300)

    def start(self) -> None:
        self.runs += 1
        # The mock cluster: what this test is about is a broker that loses its log when it stops.
        self.broker = subprocess.Popen([sys.executable, "-m", "emgas", "broker", "--mock"], env=self.env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert "bootstrap servers written" in self.broker.stdout.readline() + self.broker.stdout.readline()
        self.worker = subprocess.Popen([sys.executable, "-m", "emgas", "worker", "--loglevel", "INFO"],
                                       env=self.env, stdout=open(self.worker_log, "w"), stderr=subprocess.STDOUT)

    @property
    def worker_log(self) -> Path:
        return self.home / f"worker-{self.runs}.log"

    def stop(self) -> None:
        for process in (self.worker, self.broker):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(60)

    def passages(self) -> dict[str, int] | None:
        run = self.emgas("digest", "--all", "--json")
        if run.returncode != 0:
            return None
        return {d["graph_id"]: d["sections"]["passages"]["count"] for d in json.loads(run.stdout)}

    def wait_for(self, expected: dict[str, int], deadline_s: float = 120) -> None:
        deadline = time.monotonic() + deadline_s
        while (found := self.passages()) != expected:
            assert self.worker.poll() is None, self.worker_log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"{found} != {expected}\n" + self.worker_log.read_text()[-3000:]

    def health(self) -> dict:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as err:  # 503 while recovering: the body says why
            return json.loads(err.read())


@pytest.fixture
def session(tmp_path, request):
    s = Session(tmp_path, request.param)
    try:
        s.start()
        assert s.emgas("publish", str(DEMO)).returncode == 0
        s.wait_for({"alice": 26, "bob": 8})
        s.stop()
        s.start()  # a new embedded broker: a new, empty log; the same data directory
        yield s
    finally:
        s.stop()


def publish_new_turns(session: Session) -> None:
    run = session.emgas("publish", "-", stdin="".join(json.dumps(t) + "\n" for t in NEW_TURNS))
    assert run.returncode == 0 and "published 2 turns" in run.stdout, run.stderr


def verified(session: Session) -> None:
    for extra in ([], ["--from-beginning"]):
        run = session.emgas("replay", "--all", "--verify", *extra)
        assert run.returncode == 0 and "verified" in run.stdout, run.stdout + run.stderr[-2000:]


@pytest.mark.parametrize("session", ["rebase"], indirect=True)
def test_rebase_keeps_the_old_turns_and_applies_the_new(session):
    publish_new_turns(session)
    session.wait_for({"alice": 28, "bob": 8})
    answer = session.emgas("query", "--graph", "alice", "greyhound Pretzel")
    assert answer.returncode == 0 and "[new-1]" in answer.stdout and "[alice-" in answer.stdout
    verified(session)
    snapshot = session.emgas("snapshot", "--all")
    assert snapshot.returncode == 0 and "graph 'alice': snapshot requested" in snapshot.stdout, snapshot.stderr
    assert "checkpoint at offset" in snapshot.stdout
    verified(session)  # now from the checkpoint just written
    health = session.health()
    assert any("reset" in problem and "re-based" in problem for problem in health["log_mismatches"].values())
    log = session.worker_log.read_text()
    assert f"viewer http://127.0.0.1:{session.port}/  metrics http://127.0.0.1:{session.port}/metrics" in log
    assert "log mismatch (reset)" in log and "is not the log the state was built from" in log
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{session.port}/metrics", timeout=5).read().decode()
    assert 'emgas_log_mismatches_total{action="re-based",kind="reset"' in metrics


@pytest.mark.parametrize("session", ["rebuild"], indirect=True)
def test_rebuild_keeps_only_the_new_log(session):
    publish_new_turns(session)
    session.wait_for({"alice": 2})
    verified(session)
    assert "state dropped, rebuilt from the new log" in session.worker_log.read_text()


@pytest.mark.parametrize("session", ["stop"], indirect=True)
def test_stop_ends_the_worker_with_one_clear_error(session):
    status = session.worker.wait(120)
    output = session.worker_log.read_text()
    assert status == 2, output[-2000:]
    last = output.strip().splitlines()[-1]
    assert last.startswith("emgas: error: partition ") and "EMGAS_ON_LOG_RESET=stop" in last, last
    assert "is not the log the state was built from" in last
