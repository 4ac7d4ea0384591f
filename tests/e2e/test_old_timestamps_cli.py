"""Old timestamps and bad values, through `emgas` and kcat (issue 25).

One broker and one worker (`emgas broker`, `emgas worker`, default graph
settings) for the module. The worker, and every replay here, runs with a
bug in the retrieval rule for requests named `poison*`
(`tests.support.rule_bug`), so the fold has something to reject.
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

from emgas.testing import free_port
from tests.support.brokers import broker_ready
from tests.support.rule_bug import environment as rule_bug_environment

pytestmark = pytest.mark.e2e

KCAT = shutil.which("kcat")
if KCAT is None and os.environ.get("CI"):
    raise RuntimeError("kcat is required in CI (.ci/run installs the Debian package)")
needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat not installed (apt-get install kcat); CI installs it")


class Live:
    def __init__(self, home, env):
        self.home, self.env = home, env

    def emgas(self, *args: str, stdin: str | None = None, extra: dict | None = None, timeout: float = 120):
        return subprocess.run([sys.executable, "-m", "emgas", *args], env={**self.env, **(extra or {})}, input=stdin,
                              capture_output=True, text=True, timeout=timeout)

    @property
    def servers(self) -> str:
        return json.loads((self.home / "broker.json").read_text())["bootstrap_servers"]

    def kcat(self, *args: str, stdin: str | None = None) -> str:
        cmd = [KCAT, "-b", self.servers, "-X", "partitioner=murmur2_random", *args]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30, check=True).stdout

    def until(self, what, check, deadline_s: float = 120):  # noqa: ANN001
        deadline = time.monotonic() + deadline_s
        while not (got := check()):
            assert self.worker.poll() is None, (self.home / "worker.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"not within {deadline_s} s: {what}"
            time.sleep(0.3)
        return got

    def explain(self, concept: str) -> list[dict]:
        run = self.emgas("explain", "--graph", "alice", concept, "--json")
        return json.loads(run.stdout) if run.returncode == 0 else []

    def passages(self, graph: str) -> int:
        run = self.emgas("digest", "--graph", graph, "--json")
        if run.returncode != 0:
            return -1
        return sum(d["sections"]["passages"]["count"] for d in json.loads(run.stdout) if d["active"])


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    home = tmp_path_factory.mktemp("old-timestamps")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMGAS_")}
    env.update({"EMGAS_HOME": str(home), "EMGAS_WEB_PORT": str(free_port()), **rule_bug_environment()})
    broker = subprocess.Popen([sys.executable, "-m", "emgas", "broker"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    worker = None
    try:
        assert broker_ready(broker)
        worker = subprocess.Popen([sys.executable, "-m", "emgas", "worker", "--loglevel", "WARNING"],
                                  env=env, stdout=open(home / "worker.log", "w"), stderr=subprocess.STDOUT)
        state = Live(home, env)
        state.worker = worker
        yield state
    finally:
        for process in (worker, broker):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(30)


def turn(turn_id: str, text: str, at: datetime) -> str:
    return json.dumps({"graph_id": "alice", "turn_id": turn_id, "speaker": "alice", "text": text,
                       "timestamp": at.isoformat()})


def test_an_old_turn_does_not_erase_what_recent_turns_said(live):
    """The issue's reproduction: three turns said now, one dated 1970 that
    mentions the greyhound, then a turn in the next window (a decay tick)."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    said = now - timedelta(hours=2)
    lines = [
        turn("a1", "I adopted a greyhound called Pretzel last week", said),
        turn("a2", "Pretzel loves the beach at Cromer", said + timedelta(minutes=1)),
        turn("a3", "My sister Mina lives in Leeds and bakes sourdough", said + timedelta(minutes=2)),
        turn("a4", "I visited Lisbon with my greyhound", datetime(1970, 1, 1, tzinfo=timezone.utc)),
        turn("a5", "Good morning, the weather is grey today", now),  # the clock enters a new window: a tick
    ]
    run = live.emgas("publish", "-", stdin="\n".join(lines) + "\n")
    assert run.returncode == 0, run.stderr
    lisbon = live.until("the tick prunes the old turn's own concept",
                        lambda: [s for s in live.explain("lisbon") if s["kind"] == "pruned"])
    assert "base activation" in lisbon[0]["detail"]  # decayed by its own age, 56 years

    steps = live.explain("greyhound")
    assert [s["kind"] for s in steps][:2] == ["created", "mentioned"] and "pruned" not in {s["kind"] for s in steps}
    run = live.emgas("query", "--graph", "alice", "greyhound", "--json", "--no-reinforce")
    assert run.returncode == 0, run.stderr
    reply = json.loads(run.stdout)
    assert "greyhound" in reply["seeds"]
    assert reply["passages"][0]["turn_id"] in {"a1", "a4"}
    assert {"a1", "a2"} <= {p["turn_id"] for p in reply["passages"]}  # Pretzel's turns, through the greyhound

    # Everyday words (issue 27): a category word finds its instance; a query
    # with no word in the memory says so instead of answering nothing.
    for question, first in (("What pets do I have?", {"a1", "a4"}), ("Tell me about my family", {"a3"})):
        run = live.emgas("query", "--graph", "alice", question, "--json", "--no-reinforce")
        assert run.returncode == 0 and json.loads(run.stdout)["passages"][0]["turn_id"] in first, run.stdout
    run = live.emgas("query", "--graph", "alice", "What about the zorbulax?", "--no-reinforce")
    assert run.returncode == 0, run.stderr
    assert "no passage (no_seeds)" in run.stdout and "zorbulax" in run.stdout


@needs_kcat
def test_a_poison_graph_event_goes_to_the_dead_letters_and_the_worker_goes_on(live):
    poison = json.dumps({"type": "retrieved", "schema_version": 1, "graph_id": "dlq-g", "graph_version": 1,
                         "request_id": "q-overflow", "timestamp": "2026-11-20T10:00:00Z",
                         "boosts": [{"id": "dog", "amount": 1e300}]})
    live.kcat("-P", "-t", "emgas.graph-events", "-K", "\t", stdin=f"dlq-g\t{poison}\n")

    def dead_letter():
        out = live.kcat("-C", "-t", "emgas.dlq", "-o", "beginning", "-e", "-q")
        letters = [json.loads(line) for line in out.splitlines() if line.strip()]
        return [d for d in letters if d["topic"] == "emgas.graph-events" and b"q-overflow" in base64.b64decode(d["value_b64"])]

    [letter] = live.until("the poison event in emgas.dlq", dead_letter)
    assert letter["reason"] == "invalid_fields" and "less than or equal to 10" in letter["message"]
    assert base64.b64decode(letter["value_b64"]).decode() == poison  # the original bytes
    run = live.emgas("publish", "-", stdin=turn("after-poison", "The worker still takes turns", datetime.now(timezone.utc)).replace('"alice"', '"dlq-g"') + "\n")
    assert run.returncode == 0
    live.until("the next turn applied", lambda: live.passages("dlq-g") == 1)


@needs_kcat
def test_replay_prints_one_line_per_rejected_event_and_no_traceback(live):
    live.emgas("publish", "-", stdin=turn("r1", "Kiwi whistles the Zelda theme", datetime.now(timezone.utc)).replace('"alice"', '"rej"') + "\n")
    live.until("the turn applied", lambda: live.passages("rej") == 1)
    poison = json.dumps({"type": "retrieved", "schema_version": 1, "graph_id": "rej", "graph_version": 1,
                         "request_id": "poison-replay", "timestamp": datetime.now(timezone.utc).isoformat(),
                         "boosts": [{"id": "kiwi", "amount": 0.5}]})
    live.kcat("-P", "-t", "emgas.graph-events", "-K", "\t", stdin=f"rej\t{poison}\n")
    live.until("the worker rejects it", lambda: "rejected: RuleBug" in (live.home / "worker.log").read_text())
    run = live.emgas("replay", "--all", "--verify", "--state-dir", str(live.home / "replayed"))
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "Traceback" not in run.stdout + run.stderr
    [line] = [out for out in run.stdout.splitlines() if "rejected: RuleBug" in out]
    assert line.startswith("partition ") and "retrieved of graph 'rej' rejected: RuleBug: a bug in the retrieval rule" in line
    assert "verified: all" in run.stdout
    verbose = live.emgas("-v", "replay", "--all", "--state-dir", str(live.home / "replayed-verbose"))
    assert verbose.returncode == 0 and "Traceback" in verbose.stderr and "RuleBug" in verbose.stderr


def test_a_worker_whose_web_port_is_taken_says_so_in_one_line(live):
    run = live.emgas("worker", extra={"EMGAS_WORKER_NAME": "second"}, timeout=60)  # the first one holds the port
    assert run.returncode == 2
    port = live.env["EMGAS_WEB_PORT"]
    assert run.stderr.strip().splitlines() == [
        f"emgas: error: the web port 127.0.0.1:{port} is not free (Address already in use): "
        "stop what uses it, or choose another port with EMGAS_WEB_PORT"
    ]


def test_a_state_directory_that_cannot_be_written_is_one_line(live, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    run = live.emgas("worker", extra={"EMGAS_DATA_DIR": str(blocker / "state"), "EMGAS_WEB_PORT": str(free_port())}, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"emgas: error: cannot write the state directory {blocker / 'state'} (EMGAS_DATA_DIR): Not a directory"
    ]
