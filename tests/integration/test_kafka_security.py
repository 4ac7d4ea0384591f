"""Who may connect to Kafka: a broker that enforces TLS (a throw-away CA) and
SASL/SCRAM users. The worker, the CLI, the Memory API, MCP and kcat connect
with credentials; a client without them, with a wrong password, or not
trusting the broker's certificate is refused with one line that says so,
and a worker never falls back to plaintext."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from emgas.replay.fold import Selection
from emgas.replay.parallel import ShareJob, fold_share, run_shares
from emgas.streams.kafka.reader import log_reader
from emgas.streams.settings import KafkaSecurity
from emgas.streams.settings import Settings
from emgas.streams.kafka.topics import ensure_topics
from emgas.testing import start_worker, stop_worker
from tests.support.live import run
from tests.support.brokers import start_secured_kafka
from tests.support.tls import make_certificates

pytestmark = pytest.mark.integration
USER, PASSWORD = "alice", "alice-s3cret"
KCAT = shutil.which("kcat")
TURNS = "\n".join([
    '{"graph_id":"sec","turn_id":"1","speaker":"eve","text":"My parrot Kiwi whistles the Zelda theme.","timestamp":"2026-02-01T08:00:00Z"}',
    '{"graph_id":"sec","turn_id":"2","speaker":"eve","text":"Kiwi learned it from my brother Lars.","timestamp":"2026-02-01T08:05:00Z"}',
]) + "\n"


class Secured:
    def __init__(self, home: Path, bootstrap: str, ca: Path, other_ca: Path) -> None:
        self.home, self.bootstrap, self.ca, self.other_ca = home, bootstrap, ca, other_ca

    def env(self, password: str | None = PASSWORD, protocol: str = "SASL_SSL", ca: Path | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMGAS_")}
        env.update({"EMGAS_HOME": str(self.home), "EMGAS_BROKER": self.bootstrap, "EMGAS_QUERY_TIMEOUT_S": "15",
                    "EMGAS_KAFKA__SECURITY_PROTOCOL": protocol})
        if protocol.startswith("SASL"):
            env.update({"EMGAS_KAFKA__SASL_MECHANISM": "SCRAM-SHA-256", "EMGAS_KAFKA__SASL_USERNAME": USER,
                        "EMGAS_KAFKA__SASL_PASSWORD": password or ""})
        if protocol.endswith("SSL"):
            env["EMGAS_KAFKA__SSL_CAFILE"] = str(ca or self.ca)
        return env

    def settings(self, password: str = PASSWORD) -> Settings:
        security = KafkaSecurity(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256", sasl_username=USER,
                                 sasl_password=password, ssl_cafile=self.ca)
        return Settings(home=self.home, broker=self.bootstrap, kafka=security, query_timeout_s=15)

    def emgas(self, *args: str, env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "emgas", *args], env=env or self.env(), input=stdin,
                              capture_output=True, text=True, timeout=120)

    def kcat(self, *args: str, password: str = PASSWORD) -> subprocess.CompletedProcess:
        # PLAIN over TLS: Debian's kcat (librdkafka 2.0.2) fails SCRAM against Kafka 4.1 even with the right password.
        # errors="replace": a sealed turn's bytes follow its envelope raw (`processors.sealing`).
        return subprocess.run([KCAT, "-b", self.bootstrap, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=PLAIN",
                               "-X", f"sasl.username={USER}", "-X", f"sasl.password={password}", "-X", f"ssl.ca.location={self.ca}",
                               *args], capture_output=True, text=True, errors="replace", timeout=60)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    home = tmp_path_factory.mktemp("secured")
    certs = make_certificates(home / "certs")
    kafka = start_secured_kafka(home / "kafka", certs.server, {USER: PASSWORD})
    state = Secured(home, kafka.secured, certs.ca, certs.other_ca)
    run(ensure_topics(state.settings()))  # the admin API, through TLS and SASL
    worker_env = {k: v for k, v in state.env().items() if k.startswith("EMGAS_KAFKA__")}
    worker = start_worker(state.settings(), home / "worker.log", env=worker_env)
    try:
        yield state
    finally:
        stop_worker(worker)
        kafka.close()


def one_line(run: subprocess.CompletedProcess) -> str:
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    return lines[0]


def test_the_worker_cli_memory_api_mcp_and_kcat_connect_with_credentials(secured):
    assert secured.emgas("publish", "-", stdin=TURNS).returncode == 0
    deadline = time.monotonic() + 120
    while True:
        query = secured.emgas("query", "--graph", "sec", "who taught Kiwi?", "--no-reinforce")
        if query.returncode == 0 and "[2]" in query.stdout:
            break
        assert time.monotonic() < deadline, query.stdout + query.stderr[-2000:]
        time.sleep(0.5)
    from emgas.streams.interfaces.memory import Memory

    with Memory(graph="sec", settings=secured.settings()) as memory:
        assert {h.turn_id for h in memory.search("Kiwi whistles", k=5).hits} >= {"1"}
    if KCAT is not None:
        consumed = secured.kcat("-C", "-t", "emgas.graph-events", "-o", "beginning", "-e", "-q")
        # The turns' words are sealed there (`processors.sealing`): kcat reads the envelopes.
        assert consumed.returncode == 0 and '"sealed_type":"turn_ingested"' in consumed.stdout
        assert "Kiwi" not in consumed.stdout
    pytest.importorskip("mcp")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "emgas", "mcp", "--graph", "sec"], env=secured.env())

    async def recall() -> list[str]:
        with anyio.fail_after(120):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("recall", {"query": "Kiwi"})
                assert not result.is_error, result.content
                return [p["turn_id"] for p in result.structured_content["passages"]]

    assert "1" in anyio.run(recall)


def test_a_replay_share_in_a_process_of_its_own_reads_through_tls_and_sasl(secured, tmp_path):
    """`emgas replay` side by side: a share's process makes its reader from
    the settings it was sent, security included, and folds as this one does."""
    from functools import partial

    settings = secured.settings()
    topic = settings.graph_events_topic

    async def stops() -> dict[int, int]:
        async with log_reader(settings) as reader:
            return {p: end for p, (_, end) in (await reader.bounds(topic, await reader.partitions(topic))).items()}

    assert secured.emgas("publish", "-", stdin=TURNS).returncode == 0  # (again, if the test above ran: the same turns)
    deadline = time.monotonic() + 120
    while sum(run(stops()).values()) == 0:  # until the worker has written its events
        assert time.monotonic() < deadline
        time.sleep(0.2)
    job = ShareJob(partial(log_reader, settings), topic, tmp_path / "there", settings.graph, Selection(), None, run(stops()))
    [there] = run(run_shares([job]))
    here = run(fold_share(ShareJob(job.make_reader, topic, tmp_path / "here", settings.graph, Selection(), None, job.stops)))
    assert there.counts.read == sum(job.stops.values()) > 0
    assert (there.digests, there.ranges, there.counts) == (here.digests, here.ranges, here.counts)


def test_a_wrong_password_no_credentials_or_an_untrusted_broker_is_refused_in_one_line(secured):
    wrong = one_line(secured.emgas("query", "--graph", "sec", "Kiwi", env=secured.env(password="not-the-password")))
    assert "authentication failed" in wrong.lower() and "EMGAS_KAFKA__SASL" in wrong, wrong
    plain = one_line(secured.emgas("query", "--graph", "sec", "Kiwi", env=secured.env(protocol="PLAINTEXT")))
    assert plain.startswith("emgas: error: cannot reach Kafka at"), plain
    untrusted = one_line(secured.emgas("query", "--graph", "sec", "Kiwi", env=secured.env(ca=secured.other_ca)))
    assert "certificate" in untrusted.lower() and "EMGAS_KAFKA__SSL_CAFILE" in untrusted, untrusted
    if KCAT is not None:
        assert secured.kcat("-L", "-m", "5", password="not-the-password").returncode != 0


def test_a_worker_with_a_wrong_password_stops_in_one_line_and_never_falls_back_to_plaintext(secured):
    env = {**secured.env(password="not-the-password"), "EMGAS_WORKER_NAME": "intruder", "EMGAS_WEB_PORT": "0"}
    worker = secured.emgas("worker", env=env)
    line = one_line(worker)
    assert "authentication failed" in line.lower(), line
    assert "intruder" not in (secured.kcat("-L").stdout)  # it never joined
