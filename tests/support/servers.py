"""Starting `emgas mcp` in tests: its environment, and waiting until it listens."""

import os
import socket
import subprocess
import time
from pathlib import Path


def server_env(settings, home: Path) -> dict[str, str]:
    """The server finds the pipeline's broker like any client: EMGAS_BROKER, EMGAS_HOME;
    and the workers' key-encryption key (to read the log: `explain`), as another
    machine would be given it: EMGAS_KEY_ENCRYPTION_KEY_FILE."""
    return {**os.environ, "EMGAS_BROKER": settings.bootstrap_servers(), "EMGAS_HOME": str(home),
            "EMGAS_QUERY_TIMEOUT_S": "20",
            "EMGAS_KEY_ENCRYPTION_KEY_FILE": str(settings.home / "key-encryption-key")}


def wait_for_port(process: subprocess.Popen, port: int, deadline_s: float) -> None:
    """Until the server accepts connections (it fails the test if it exits first)."""
    deadline = time.monotonic() + deadline_s
    while True:
        assert process.poll() is None, f"emgas mcp exited with {process.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"emgas mcp not listening on {port} within {deadline_s:g} s") from None
            time.sleep(0.1)
