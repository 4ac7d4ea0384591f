"""The memory's own doors behind a bearer token: the worker's web server and
`emgas mcp --http`. A request without the token, or with a wrong one, gets
401 and reads nothing; the right one is served; neither server listens
beyond loopback without a token (refused before it binds)."""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import anyio
import pytest

from emgas.testing import free_port, start_worker, stop_worker
from tests.support.live import live_pipeline

pytestmark = pytest.mark.integration
TOKEN = "s3cret-token-for-the-test-0123456789"


def get(url: str, token: str | None = None, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, headers={**(headers or {})})
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def wait_until_served(url: str, token: str) -> None:
    import time

    deadline = time.monotonic() + 90
    while True:
        try:
            status, _ = get(url, token)
            if status in (200, 503):
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{url} not served"
        time.sleep(0.2)


def test_the_workers_web_server_answers_only_with_the_token(tmp_path):
    with live_pipeline(tmp_path / "home", partitions=1, workers=0) as live:
        port = free_port()
        worker = start_worker(live.settings, tmp_path / "home" / "w.log", name="w", web_port=port,
                              env={"EMGAS_HTTP_TOKEN": TOKEN})
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until_served(f"{base}/health", TOKEN)
            for path in ("/health", "/metrics", "/api/graphs", "/viewer", "/"):
                for token in (None, "wrong-token-wrong-token", TOKEN[:-1]):
                    status, body = get(base + path, token)
                    assert status == 401, (path, token, status)
                    assert json.loads(body)["error"] == "unauthorized"  # and nothing else
            assert get(f"{base}/health", TOKEN)[0] in (200, 503)
            status, body = get(f"{base}/api/graphs", TOKEN)
            assert status == 200 and isinstance(json.loads(body), (list, dict))
        finally:
            stop_worker(worker)


def emgas(*args: str, env: dict) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("EMGAS_")}
    return subprocess.run([sys.executable, "-m", "emgas", *args], env={**full, **env}, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_neither_server_listens_beyond_loopback_without_a_token(tmp_path):
    env = {"EMGAS_HOME": str(tmp_path), "EMGAS_BROKER": "127.0.0.1:9"}
    worker = emgas("worker", env={**env, "EMGAS_WEB_HOST": "0.0.0.0", "EMGAS_WEB_PORT": str(free_port())})
    assert worker.returncode == 2 and worker.stderr.strip().splitlines() == [
        "emgas: error: the worker's web server (EMGAS_WEB_HOST) would listen on 0.0.0.0 with no authentication: "
        "set EMGAS_HTTP_TOKEN (or EMGAS_HTTP_TOKEN_FILE), or bind it to 127.0.0.1"
    ]
    pytest.importorskip("mcp")
    mcp = emgas("mcp", "--http", "--host", "0.0.0.0", "--port", str(free_port()), "--graph", "g", env=env)
    assert mcp.returncode == 2 and mcp.stderr.strip().splitlines() == [
        "emgas: error: emgas mcp --http would listen on 0.0.0.0 with no authentication: "
        "set EMGAS_HTTP_TOKEN (or EMGAS_HTTP_TOKEN_FILE), or bind it to 127.0.0.1"
    ]
    short = emgas("worker", env={**env, "EMGAS_HTTP_TOKEN": "short"})
    assert short.returncode == 2 and "at least 16 characters" in short.stderr


def test_mcp_over_http_answers_only_with_the_token(pipeline, tmp_path):
    pytest.importorskip("mcp")
    import httpx2  # noqa: F401 - the MCP SDK's HTTP client (its extra brings it)
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from tests.support.servers import server_env, wait_for_port

    port = free_port()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    env = {**server_env(pipeline, tmp_path / "home"), "EMGAS_HTTP_TOKEN_FILE": str(token_file)}
    server = subprocess.Popen([sys.executable, "-m", "emgas", "mcp", "--http", "--port", str(port), "--graph", "auth"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(server, port, deadline_s=60)
        url = f"http://127.0.0.1:{port}/mcp"
        initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        for token in (None, "wrong-token-wrong-token"):
            status, body = get(url, token, initialize, headers)
            assert status == 401 and json.loads(body)["error"] == "unauthorized"

        async def with_the_token() -> list[str]:
            client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
            async with streamable_http_client(url, http_client=client) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return [t.name for t in (await session.list_tools()).tools]

        assert "recall" in anyio.run(with_the_token)
    finally:
        server.terminate()
        server.wait(20)
