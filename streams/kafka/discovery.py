"""Finding the broker a long-running command is to use, waiting for one that is starting.

`emgas broker` writes its file under EMGAS_HOME only once Kafka is up and
the topics exist (a few seconds), so a worker started beside it would
otherwise find no broker and exit. A command that waits says so in one
line, and waits `broker_wait_s` at most: for the file, then for one of the
bootstrap servers to accept a connection.
"""

from __future__ import annotations

import socket
import sys
import time
from typing import Callable, TextIO

from emgas.streams.errors import BrokerError, ConfigError
from emgas.streams.settings import Settings

POLL_S = 0.2  # how often the file and the servers are looked at
CONNECT_TIMEOUT_S = 1.0


def answering(servers: str) -> bool:
    """Whether any of the `host:port` servers accepts a TCP connection."""
    for server in servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
                return True
        except (OSError, ValueError):
            continue
    return False


def wait_for_broker(
    settings: Settings, say: TextIO = sys.stderr, clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep, reachable: Callable[[str], bool] = answering,
) -> Settings:
    """`settings` with `broker` set to the servers found, once one answers;
    ConfigError (no broker configured) or BrokerError (none answers) after
    `settings.broker_wait_s`. One line on `say` if it has to wait at all."""
    deadline = clock() + settings.broker_wait_s
    waited = f" (waited {settings.broker_wait_s:g} s, EMGAS_BROKER_WAIT_S)" if settings.broker_wait_s else ""
    said = False
    while True:
        try:
            servers = settings.bootstrap_servers()
            waiting_for = f"the broker at {servers} to answer"
            if reachable(servers):
                return settings.model_copy(update={"broker": servers})
            failure: Exception = BrokerError(f"no broker answers at {servers}{waited}")
        except ConfigError as exc:
            waiting_for = f"{settings.broker_file} (`emgas broker` writes it once Kafka is up)"
            failure = ConfigError(f"{exc}{waited}")
        if clock() >= deadline:
            raise failure
        if not said:
            print(f"emgas: waiting up to {settings.broker_wait_s:g} s for {waiting_for}", file=say, flush=True)
            said = True
        sleep(POLL_S)
