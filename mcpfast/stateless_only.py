"""``mcpfast serve --transport http --stateless-only``: serve 2026-07-28 stateless requests only.

A stateless-only server keeps no session, so any number of processes (``--workers N``, several
machines) serve it with the memory store. What it answers to the handshake era (the protocol
digest, "Dual-era servers" and "Older traffic seen by a modern-only server"):

* ``initialize``: HTTP 400 with -32022 (unsupported protocol version), ``data.supported`` naming
  the stateless versions, ``data.requested`` the client's: a dual-era client retries in 2026-07-28;
* ``GET`` and ``DELETE`` of the endpoint (a session's stream, its end): 405, ``Allow: POST``;
* the 2024-11-05 ``/sse`` endpoints are not served (the CLI turns them off).

Anything else goes to the transport unchanged: a 2026 request is served as always (the check
costs it one header look-up), and a handshake-era request that is not ``initialize`` can name no
session, since none is ever made (the transport's 400/404). The refusals come after the Host
check, before Origin and authentication: they tell a caller only that the server is stateless.
:func:`refusal` is the rule (no I/O);
:class:`StatelessOnly` puts it in front of an ``HttpTransport`` for the native server and ASGI.
"""

from __future__ import annotations

from typing import Any, Final, cast

from mcpfast import core
from mcpfast.protocol import http as wire
from mcpfast.protocol.errors import unsupported_version
from mcpfast.protocol.methods import INITIALIZE
from mcpfast.protocol.versions import STATELESS_VERSIONS

__all__ = ["StatelessOnly", "refusal", "stateless_only"]

_JSON: Final = ((b"content-type", b"application/json"),)
_STATELESS: Final = frozenset(v.encode() for v in STATELESS_VERSIONS)


def refusal(method: str, headers: dict[bytes, bytes], body: bytes) -> tuple[int, Any, bytes] | None:
    """The answer a stateless-only server gives one request of its endpoint itself (``None``: the
    transport serves it). ``headers``: lower-case names, as ``HttpTransport.handle`` takes them."""
    if method in ("GET", "DELETE"):
        return (405, [(b"allow", b"POST")], b"")
    if method != "POST" or headers.get(b"mcp-protocol-version") in _STATELESS:
        return None
    try:
        decoded = core.decode(body)
    except core.JsonRpcError:
        return None  # the transport's parse error
    if isinstance(decoded, list) or decoded.kind != "request" or decoded.method != INITIALIZE:
        return None
    params = decoded.params
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    error = unsupported_version(STATELESS_VERSIONS, requested)
    message = f"{error.message}: this server serves only {', '.join(STATELESS_VERSIONS)} (no initialize, no sessions)"
    return (wire.status_for_error(error.code), _JSON, wire.refusal(message, error.code, decoded.id, error.data))


class StatelessOnly:
    """``transport`` (an ``HttpTransport``) answering the handshake era with :func:`refusal`."""

    direct_http: Final = True

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.max_body = transport.max_body

    def __getattr__(self, name: str) -> Any:  # aclose, sessions, path... : the transport's
        return getattr(self.transport, name)

    def handle(self, method: str, path: str, query: bytes, headers: dict[bytes, bytes], body: bytes, root: str = "") -> Any:
        transport = self.transport
        endpoint = path == transport.path or (path.endswith("/") and path[:-1] == transport.path)
        if endpoint and transport.host_rules.check(headers.get(b"host")) is None:  # a bad Host: the transport's 400/421
            refused = refusal(method, headers, body)
            if refused is not None:
                return refused
        return transport.handle(method, path, query, headers, body, root)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """ASGI: the transport's own entry point, answering through :meth:`handle`."""
        from mcpfast.transports.http import HttpTransport

        await HttpTransport.__call__(cast(HttpTransport, self), scope, receive, send)


def stateless_only(transport: Any) -> StatelessOnly:
    """``transport`` serving 2026-07-28 stateless requests only (see the module doc)."""
    return StatelessOnly(transport)
