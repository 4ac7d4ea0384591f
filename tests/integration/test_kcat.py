"""Any Kafka client can use the memory: kcat publishes hand-written JSON lines
(turns and a query) and reads the reply from the reply topic."""

import json
import os
import shutil
import subprocess
import time

import pytest

pytestmark = pytest.mark.integration

KCAT = shutil.which("kcat")
if KCAT is None and os.environ.get("CI"):
    raise RuntimeError("kcat is required in CI (.ci/run installs the Debian package)")

TURN_LINES = [
    '{"graph_id":"kc","turn_id":"1","speaker":"eve","text":"My parrot Kiwi whistles the Zelda theme every morning.","timestamp":"2026-02-01T08:00:00Z"}',
    '{"graph_id":"kc","turn_id":"2","speaker":"eve","text":"Kiwi learned the Zelda theme from my brother Lars.","timestamp":"2026-02-01T08:05:00Z"}',
    '{"graph_id":"kc","turn_id":"3","speaker":"eve","text":"Lars repairs pianos in Utrecht.","timestamp":"2026-02-01T08:10:00+01:00"}',
]


def kcat(servers: str, *args: str, stdin: str | None = None) -> str:
    # murmur2_random: the Java client's partitioner (what aiokafka and Faust use)
    cmd = [KCAT, "-b", servers, "-X", "partitioner=murmur2_random", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30, check=True).stdout


def replies(servers: str, request_id: str) -> list[dict]:
    out = kcat(servers, "-C", "-t", "emgas.replies", "-o", "beginning", "-e", "-q")
    found = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [r for r in found if r.get("request_id") == request_id]


@pytest.mark.skipif(KCAT is None, reason="kcat not installed (apt-get install kcat); CI installs it")
def test_kcat_round_trip(pipeline):
    servers = pipeline.bootstrap_servers()
    kcat(servers, "-P", "-t", "emgas.turns", "-K", "\t", stdin="".join(f"kc\t{line}\n" for line in TURN_LINES))
    deadline = time.monotonic() + 60
    attempt = 0
    while time.monotonic() < deadline:
        attempt += 1
        request_id = f"kcat-{attempt}"
        query = {"request_id": request_id, "graph_id": "kc", "text": "Who taught Kiwi the Zelda theme?", "reply_to": "emgas.replies"}
        kcat(servers, "-P", "-t", "emgas.queries", "-K", "\t", stdin=f"kc\t{json.dumps(query)}\n")
        got = []
        for _ in range(20):
            got = replies(servers, request_id)
            if got:
                break
            time.sleep(0.25)
        if got and got[0]["type"] == "activation_reply" and got[0]["stats"]["turns"] == 3:
            reply = got[0]
            break
    else:
        pytest.fail("no complete reply through kcat within 60 s")
    assert reply["graph_id"] == "kc"
    assert "kiwi" in reply["seeds"]
    assert {p["turn_id"] for p in reply["passages"][:2]} == {"1", "2"}  # the two Kiwi + Zelda turns
    assert {p["turn_id"] for p in reply["passages"]} <= {"1", "2", "3"}
