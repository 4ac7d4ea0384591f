"""Who may use the memory's own HTTP doors: the worker's web server (viewer,
graphs, traced queries, metrics, health) and `emgas mcp --http`.

Both take one bearer token, from `EMGAS_HTTP_TOKEN` or the file named by
`EMGAS_HTTP_TOKEN_FILE` (its first line), compared in constant time. With a
token, every request must carry `Authorization: Bearer <token>`; one
without it, or with another, gets 401 and reads nothing. Without a token a
server listens on loopback only: binding beyond it is refused.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any, Awaitable, Callable

from pydantic import SecretStr

from emgas.streams.errors import ConfigError

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
UNAUTHORIZED = b'{"error": "unauthorized", "message": "a bearer token is required (Authorization: Bearer <token>)"}'


def http_token(token: SecretStr | None, token_file: Path | None) -> str | None:
    """The configured token (None: none), read from the file when one is named."""
    if token is not None and token_file is not None:
        raise ConfigError("set EMGAS_HTTP_TOKEN or EMGAS_HTTP_TOKEN_FILE, not both")
    if token is None and token_file is None:
        return None
    if token_file is not None:
        try:
            lines = token_file.read_text().splitlines()
        except OSError as exc:
            raise ConfigError(f"cannot read EMGAS_HTTP_TOKEN_FILE {token_file}: {exc.strerror}") from None
        value = lines[0].strip() if lines else ""
    else:
        assert token is not None
        value = token.get_secret_value().strip()
    if len(value) < 16:
        raise ConfigError("the HTTP token must be at least 16 characters")
    return value


def check_exposure(host: str, token: str | None, what: str) -> None:
    """Refuse to listen beyond loopback without a token."""
    if token is None and host not in LOOPBACK:
        raise ConfigError(
            f"{what} would listen on {host} with no authentication: set EMGAS_HTTP_TOKEN (or EMGAS_HTTP_TOKEN_FILE), "
            "or bind it to 127.0.0.1"
        )


def authorized(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries `Bearer <token>` (constant-time comparison)."""
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def asgi_guard(app: ASGIApp, token: str | None) -> ASGIApp:
    """`app` behind the bearer token (unchanged without one)."""
    if token is None:
        return app

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            if not authorized(headers.get("authorization"), token):
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="emgas"')]})
                await send({"type": "http.response.body", "body": UNAUTHORIZED})
                return
        await app(scope, receive, send)

    return guarded


def aiohttp_guard(token: str) -> Any:
    """An aiohttp middleware answering 401 to a request without the token."""
    from aiohttp import web

    @web.middleware
    async def guarded(request: Any, handler: Any) -> Any:
        if not authorized(request.headers.get("Authorization"), token):
            return web.Response(status=401, body=UNAUTHORIZED, content_type="application/json",
                                headers={"WWW-Authenticate": 'Bearer realm="emgas"'})
        return await handler(request)

    return guarded
