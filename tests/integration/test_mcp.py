"""`emgas mcp` against a live worker: an MCP client from the official SDK
drives the server over stdio and over streamable HTTP, as an agent would."""

import os
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

mcp = pytest.importorskip("mcp")  # the `emgas[mcp]` extra (the test extra installs it)

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from emgas.testing import free_port  # noqa: E402
from tests.support.servers import server_env, wait_for_port  # noqa: E402

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"remember", "recall", "forget", "explain", "stats"}
DOG = "I adopted a greyhound called Pretzel last week"
WORK = "The quarterly report for the Lisbon office is due on Friday"
MUSIC = "My sister plays the cello in an orchestra in Leeds"
DEADLINE_S = 120  # for a whole scenario; the first remember waits for the worker to create the graph


async def call(session: ClientSession, tool: str, **arguments):
    """The tool's structured result; fails the test on a tool error."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    return result.structured_content


async def refused(session: ClientSession, tool: str, **arguments) -> str:
    """The text of a tool error (isError), which must be one line, not a traceback."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, (tool, result.structured_content)
    text = result.content[0].text
    assert "Traceback" not in text and "\n" not in text, text
    return text


async def check_tools(session: ClientSession) -> None:
    """All five tools, each with a description an agent can act on and an input schema."""
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) >= TOOLS
    for name in TOOLS:
        assert len(tools[name].description or "") > 80, name
        assert tools[name].input_schema["type"] == "object" and tools[name].input_schema["properties"], name
        assert tools[name].output_schema, name
    assert tools["remember"].input_schema["required"] == ["text"]
    assert tools["forget"].annotations.destructive_hint


async def remember_recall_forget(session: ClientSession, graph: str, texts: list[str]) -> None:
    """The agent's round trip: remember, recall the topic first, forget it, recall it no more."""
    ids = [(await call(session, "remember", text=text, speaker="user"))["turn_id"] for text in texts]
    dog = ids[0]
    found = await call(session, "recall", query="What do you know about my greyhound Pretzel?", k=3)
    assert found["graph"] == graph
    first = found["passages"][0]
    assert (first["turn_id"], first["text"], first["speaker"]) == (dog, DOG, "user")
    assert first["score"] > 0 and first["timestamp"].endswith(("Z", "+00:00"))
    assert "greyhound" in [c["concept"].lower() for c in found["concepts"]]
    pets = await call(session, "recall", query="What pets do I have?", k=3)  # a category word (WordNet)
    assert pets["passages"][0]["turn_id"] == dog and pets["empty"] is None
    nothing = await call(session, "recall", query="What about the zorbulax?", k=3)
    assert nothing["passages"] == [] and nothing["empty"] == "no_seeds" and nothing["unmatched"] == ["zorbulax"]
    assert "other words" in nothing["note"]

    forgotten = await call(session, "forget", turn_ids=[dog, "never-said"])
    assert forgotten["forgotten"] == [dog] and forgotten["not_held"] == ["never-said"]
    assert forgotten["turns_left"] == len(texts) - 1
    after = await call(session, "recall", query="What do you know about my greyhound Pretzel?", k=3)
    assert dog not in [p["turn_id"] for p in after["passages"]]


async def check_refusals(session: ClientSession) -> None:
    """Every failure is a tool error starting with its reason code."""
    assert (await refused(session, "recall", query="greyhound", graph="other")).startswith("graph_not_allowed: ")
    allowed = await session.call_tool("recall", {"query": "greyhound", "graph": "team-x"})  # allowed, but empty
    assert not allowed.is_error or allowed.content[0].text.startswith("graph_not_found: "), allowed.content
    assert (await refused(session, "recall", query="greyhound", k=0)).startswith("invalid_arguments: ")
    assert (await refused(session, "forget")).startswith("invalid_arguments: ")
    naive = await refused(session, "remember", text="x", timestamp="2026-01-01T10:00:00")
    assert naive.startswith("invalid_arguments: timestamp")


def test_stdio(pipeline, tmp_path):
    """A desktop agent's set-up: the server is the client's child, speaking on stdin/stdout."""
    graph = "mcp-stdio"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "emgas", "mcp", "--graph", graph, "--allow", "team-*"],
        env=server_env(pipeline, tmp_path / "home"), cwd=str(ROOT),
    )

    async def scenario() -> None:
        with anyio.fail_after(DEADLINE_S), open(tmp_path / "server.err", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                await check_tools(session)
                await remember_recall_forget(session, graph, [DOG, WORK, MUSIC])
                stats = await call(session, "stats")
                assert (stats["graph"], stats["turns"]) == (graph, 2)
                steps = (await call(session, "explain", concept="greyhound"))["steps"]
                # The forgotten turn's words are erased from the log: its replay never held them.
                assert steps == [], steps
                steps = (await call(session, "explain", concept="report"))["steps"]
                assert steps[0]["kind"] == "created", steps
                await check_refusals(session)

    try:
        anyio.run(scenario)
    finally:
        print((tmp_path / "server.err").read_text()[-3000:])


def test_streamable_http(pipeline, tmp_path):
    """An agent connecting to a running server: `emgas mcp --http`, bound to 127.0.0.1."""
    graph, port = "mcp-http", free_port()
    errlog = open(tmp_path / "server.err", "w+")
    server = subprocess.Popen(
        [sys.executable, "-m", "emgas", "mcp", "--http", "--port", str(port), "--graph", graph],
        env=server_env(pipeline, tmp_path / "home"), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=errlog,
    )
    try:
        wait_for_port(server, port, deadline_s=60)
        assert f"http://127.0.0.1:{port}/mcp" in (tmp_path / "server.err").read_text()

        async def scenario() -> None:
            with anyio.fail_after(DEADLINE_S):
                async with http_session(f"http://127.0.0.1:{port}/mcp") as session:
                    await check_tools(session)
                    await remember_recall_forget(session, graph, [DOG, WORK])
                    text = await refused(session, "stats", graph="team-x")  # no --allow: only mcp-http
                    assert text.startswith("graph_not_allowed: "), text

        anyio.run(scenario)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        errlog.close()
        print((tmp_path / "server.err").read_text()[-3000:])
    assert server.returncode == 0  # SIGTERM: a clean shutdown, the memory closed


def test_without_a_default_graph_calls_must_name_one(pipeline, tmp_path):
    """No --graph: a call naming no graph is refused with `no_graph`, an allowed one goes through."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "emgas", "mcp", "--allow", "mcp-open-*"],
        env=server_env(pipeline, tmp_path / "home"), cwd=str(ROOT),
    )

    async def scenario() -> None:
        with anyio.fail_after(DEADLINE_S), open(tmp_path / "server.err", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                assert (await refused(session, "recall", query="greyhound")).startswith("no_graph: ")
                turn = (await call(session, "remember", text=DOG, graph="mcp-open-1"))["turn_id"]
                found = await call(session, "recall", query="greyhound", graph="mcp-open-1")
                assert [p["turn_id"] for p in found["passages"]] == [turn]

    anyio.run(scenario)


def test_help_and_bad_start(tmp_path):
    """`emgas mcp --help` works; a server that would serve nothing, has no broker or no SDK says so in one line."""
    env = {**os.environ, "EMGAS_HOME": str(tmp_path), "EMGAS_BROKER_WAIT_S": "0"}  # no broker starting: no wait
    env.pop("EMGAS_BROKER", None)
    run = [sys.executable, "-m", "emgas", "mcp"]
    shown = subprocess.run([*run, "--help"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "--allow" in shown.stdout and "--http" in shown.stdout
    for args, reason in ((["--allow", "x"], "no broker configured"), ([], "give --graph")):
        failed = subprocess.run([*run, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
                                stdin=subprocess.DEVNULL)
        assert failed.returncode == 2 and failed.stdout == "", failed
        assert failed.stderr.startswith("emgas: error: ") and reason in failed.stderr, failed.stderr
    without_sdk = "import sys; sys.modules['mcp'] = None; from streams.cli.main import main; sys.exit(main(['mcp', '--graph', 'g']))"
    missing = subprocess.run([sys.executable, "-c", without_sdk], env=env, cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 2 and "pip install -e '.[mcp]' in a clone of emgas" in missing.stderr, missing.stderr


@asynccontextmanager
async def http_session(url: str):
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session
