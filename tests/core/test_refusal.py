"""``refusal``: the failure reason of a refused request and its ``Retry-After`` wait, the same on
both core implementations (the native engine calls the Rust one, the gevent client the twin)."""

from __future__ import annotations

import calendar
from types import ModuleType

import pytest

NOW = float(calendar.timegm((1994, 11, 6, 8, 49, 30)))


@pytest.mark.parametrize(
    ("status", "www", "retry", "reason", "wait"),
    [
        (404, None, None, "http 404", None),
        (401, b'Bearer realm="mcp", error="invalid_token", error_description="expired"', None, "http 401 invalid_token", None),
        (403, b'Bearer error=insufficient_scope, scope="tools:call"', None, "http 403 insufficient_scope", None),
        (401, b'Bearer resource_metadata="https://x/.well-known/oauth-protected-resource"', None, "http 401", None),
        (401, b'Bearer error_description="no error=here"', None, "http 401", None),
        (401, b'Bearer error="unterminated', None, "http 401", None),
        (401, b"Basic realm=x, Bearer error=invalid_request", None, "http 401 invalid_request", None),
        (500, b"Bearer error=invalid_token", None, "http 500", None),
        (429, None, b"2", "http 429 rate limited (Retry-After 2 s)", 2.0),
        (429, None, None, "http 429 rate limited", None),
        (503, None, b" 120 ", "http 503 (Retry-After 120 s)", 120.0),
        (503, None, b"99999", "http 503 (Retry-After 300 s)", 300.0),
        (503, None, b"soon", "http 503", None),
        (503, None, b"-1", "http 503", None),
        (503, None, b"1.5", "http 503", None),
        (429, None, b"Sun, 06 Nov 1994 08:49:37 GMT", "http 429 rate limited (Retry-After 7 s)", 7.0),
        (429, None, b"Sun, 06 Nov 1994 08:49:00 GMT", "http 429 rate limited (Retry-After 0 s)", 0.0),
        (429, None, b"Sunday, 06-Nov-94 08:49:37 GMT", "http 429 rate limited", None),
        (429, None, b"Sun, 06 Foo 1994 08:49:37 GMT", "http 429 rate limited", None),
        (429, None, b"\xff", "http 429 rate limited", None),
    ],
)
def test_refusal(core: ModuleType, status: int, www: bytes | None, retry: bytes | None, reason: str, wait: float | None) -> None:
    assert core.refusal(status, www, retry, NOW) == (reason, wait)


CHALLENGE = (
    b'Bearer realm="mcp", resource_metadata="https://a.test/.well-known/oauth-protected-resource/mcp", '
    b'scope="tools:call files:read", error=invalid_token, error_description="say \\"error=x\\""'
)


@pytest.mark.parametrize(
    ("value", "name", "found"),
    [
        (CHALLENGE, "resource_metadata", "https://a.test/.well-known/oauth-protected-resource/mcp"),
        (CHALLENGE, "SCOPE", "tools:call files:read"),
        (CHALLENGE, "error", "invalid_token"),
        (CHALLENGE, "error_description", 'say "error=x"'),
        (CHALLENGE, "realm", "mcp"),
        (CHALLENGE, "resource", None),  # a prefix of a name is not the name
        (CHALLENGE, "x", None),
        (b'Bearer scope="open', "scope", None),
        (b"Bearer scope=", "scope", ""),
        (b'Bearer error_description="resource_metadata=inside"', "resource_metadata", None),
    ],
)
def test_auth_param(core: ModuleType, value: bytes, name: str, found: str | None) -> None:
    assert core.auth_param(value, name) == found
