"""``mcpfast serve --transport http --stateless-only``: serve 2026-07-28 stateless requests only.

A stateless-only server keeps no session, so any number of processes (``--workers N``, several
machines) serve it with the memory store. What it answers to the handshake era (the protocol
digest, "Dual-era servers" and "Older traffic seen by a modern-only server"):

* ``initialize``: HTTP 400 with -32022 (unsupported protocol version), ``data.supported`` naming
  the stateless versions, ``data.requested`` the client's: a dual-era client retries in 2026-07-28;
* ``GET`` and ``DELETE`` of the endpoint (a session's stream, its end): 405, ``Allow: POST``;
* the 2024-11-05 ``/sse`` endpoints are not served (the CLI turns them off).

Anything else goes on through the transport unchanged: a 2026 request is served as always (the
check costs it one header look-up), and a handshake-era request that is not ``initialize`` can
name no session, since none is ever made (the transport's 400/404). :func:`refusal` is the rule
(no I/O), a ``Gate`` of the transport's pipeline: it runs after the transport's Host check and
path match, before Origin and authentication (it tells a caller only that the server is
stateless), on the message the transport decoded. :func:`stateless_only` adds it.
"""

from __future__ import annotations

from typing import Any, Final

from mcpfast import core
from mcpfast.protocol import http as wire
from mcpfast.protocol.errors import unsupported_version
from mcpfast.protocol.methods import INITIALIZE
from mcpfast.protocol.versions import STATELESS_VERSIONS
from mcpfast.transports.answers import Reply
from mcpfast.transports.http import ENDPOINT_MCP, HttpTransport

__all__ = ["refusal", "stateless_only"]

_JSON: Final = ((b"content-type", b"application/json"),)
_STATELESS: Final = frozenset(v.encode() for v in STATELESS_VERSIONS)
_POST_ONLY: Final[Reply] = (405, ((b"allow", b"POST"),), b"")


def refusal(method: str, endpoint: str | None, headers: dict[bytes, bytes], message: Any) -> Reply | None:
    """The answer a stateless-only server gives one request itself (``None``: the transport
    serves it); the arguments are a ``Gate``'s (``mcpfast.transports.http.Gate``)."""
    if endpoint != ENDPOINT_MCP:
        return None
    if method in ("GET", "DELETE"):
        return _POST_ONLY
    if method != "POST" or headers.get(b"mcp-protocol-version") in _STATELESS:
        return None
    if message is None or type(message) is list or isinstance(message, core.JsonRpcError):
        return None  # a batch needs a session, bad JSON is the transport's parse error
    if message.kind != "request" or message.method != INITIALIZE:
        return None
    params = message.params
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    error = unsupported_version(STATELESS_VERSIONS, requested)
    text = f"{error.message}: this server serves only {', '.join(STATELESS_VERSIONS)} (no initialize, no sessions)"
    return (wire.status_for_error(error.code), _JSON, wire.refusal(text, error.code, message.id, error.data))


def stateless_only(transport: HttpTransport) -> HttpTransport:
    """``transport`` serving 2026-07-28 stateless requests only (see the module doc)."""
    transport.gates.append(refusal)
    transport.stateless_gates.add(refusal)  # a 2026-07-28 POST goes on unchanged
    return transport
