"""What a request on `emgas.queries` carries besides its body: how long its client waits.

A client gives up on a request after its timeout (`MemoryClient`, 30 s by
default, 1 s for a takeover's probes) and asks again, if it still wants an
answer. A worker that could not answer for a while (starting, catching up
after a takeover, behind after a burst) finds those abandoned requests
queued before the live ones; answering them first made the live ones wait
(a takeover's first answer waited 0.3-0.5 s behind earlier probes). So the
client's timeout travels with the request, as a record header (not in the
body: the request's schema is the same whatever its transport), and a
worker skips a request whose client has given up. A request without the
header (another client, a tool like kcat) waits up to the worker's
`EMGAS_QUERY_TIMEOUT_S`, as before.
"""

from __future__ import annotations

from typing import Iterable

TIMEOUT_HEADER = "emgas-timeout-ms"


def timeout_header(timeout_s: float) -> list[tuple[str, bytes]]:
    """The headers of a request whose client waits `timeout_s` seconds."""
    return [(TIMEOUT_HEADER, str(max(1, round(timeout_s * 1000))).encode())]


def client_timeout_s(headers: Iterable[tuple[str, bytes]] | None) -> float | None:
    """How long the request's client waits, in seconds (None: not said, or not a positive number)."""
    for name, value in headers or ():
        if name == TIMEOUT_HEADER:
            try:
                ms = int(value)
            except (TypeError, ValueError):
                return None
            return ms / 1000 if ms > 0 else None
    return None
