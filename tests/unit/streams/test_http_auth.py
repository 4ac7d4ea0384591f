"""The bearer token of the memory's HTTP doors (`streams.http_auth`)."""

import asyncio

import pytest
from pydantic import SecretStr

from emgas.streams.errors import ConfigError
from emgas.streams.http_auth import asgi_guard, authorized, check_exposure, http_token

TOKEN = "0123456789abcdef-token"


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        (f"Bearer {TOKEN}", True),
        (f"bearer {TOKEN}", True),  # the scheme is case-insensitive
        (f"Bearer {TOKEN} ", True),
        (None, False),
        ("", False),
        (TOKEN, False),  # no scheme
        (f"Basic {TOKEN}", False),
        (f"Bearer {TOKEN[:-1]}", False),
        (f"Bearer {TOKEN}x", False),
        ("Bearer ", False),
    ],
)
def test_only_the_bearer_token_is_authorized(header, ok):
    assert authorized(header, TOKEN) is ok


def test_the_token_comes_from_the_setting_or_the_first_line_of_its_file(tmp_path):
    assert http_token(None, None) is None
    assert http_token(SecretStr(TOKEN), None) == TOKEN
    (tmp_path / "t").write_text(f"{TOKEN}\nanything after\n")
    assert http_token(None, tmp_path / "t") == TOKEN
    with pytest.raises(ConfigError, match="not both"):
        http_token(SecretStr(TOKEN), tmp_path / "t")
    with pytest.raises(ConfigError, match="cannot read EMGAS_HTTP_TOKEN_FILE"):
        http_token(None, tmp_path / "missing")
    with pytest.raises(ConfigError, match="at least 16 characters"):
        http_token(SecretStr("short"), None)


@pytest.mark.parametrize(("host", "token", "refused"), [
    ("127.0.0.1", None, False), ("::1", None, False), ("0.0.0.0", None, True), ("0.0.0.0", TOKEN, False),
])
def test_beyond_loopback_only_with_a_token(host, token, refused):
    if refused:
        with pytest.raises(ConfigError, match="with no authentication"):
            check_exposure(host, token, "the server")
    else:
        check_exposure(host, token, "the server")


def test_the_asgi_guard_answers_401_and_never_reaches_the_app():
    reached = []

    async def app(scope, receive, send):  # noqa: ANN001
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def call(headers):  # noqa: ANN001
        sent = []

        async def send(message):  # noqa: ANN001
            sent.append(message)

        scope = {"type": "http", "path": "/mcp", "headers": headers}
        await asgi_guard(app, TOKEN)(scope, None, send)
        return sent[0]["status"]

    assert asyncio.run(call([])) == 401 and asyncio.run(call([(b"authorization", b"Bearer nope")])) == 401
    assert reached == []
    assert asyncio.run(call([(b"authorization", f"Bearer {TOKEN}".encode())])) == 200 and reached == ["/mcp"]
    assert asgi_guard(app, None) is app
