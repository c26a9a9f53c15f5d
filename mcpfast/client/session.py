"""Sans-IO MCP client session: bytes out, bytes in, no sockets, no gevent, no clock of its own.

A :class:`ClientSession` builds request bytes (increasing integer ids), correlates the replies it
is fed by id, and keeps the lifecycle state of one MCP connection in either era:

* **handshake era** (2024-11-05 .. 2025-11-25): ``initialize`` (protocolVersion, capabilities,
  clientInfo), then ``notifications/initialized``; the negotiated version and the server's
  capabilities are recorded; the HTTP adapter hands in the ``Mcp-Session-Id`` it was given.
* **stateless era** (2026-07-28): no handshake; every request carries
  ``_meta["io.modelcontextprotocol/protocolVersion"|"clientCapabilities"|"clientInfo"]``;
  ``server/discover`` is the (optional) first call; on HTTP every POST carries
  ``MCP-Protocol-Version``, ``Mcp-Method`` and, for ``tools/call``/``prompts/get``/``resources/read``,
  ``Mcp-Name`` (:meth:`ClientSession.http_headers`).
* **auto**: the 2026-07-28 probe (lifecycle and Streamable HTTP backward compatibility): ``server/discover`` in the modern form; a ``DiscoverResult``
  or a recognised modern error (-32020/-32021/-32022) means modern (on -32022 retry with a version
  the server lists); any other error, an unrecognised HTTP 4xx body or a timeout means legacy, so
  fall back to ``initialize``.  The decision is never keyed on one specific legacy error code.

Replies are checked with :func:`mcpfast.core.scan_reply` (id, is_error, code) without building
the result; :class:`CallResult` parses the full message only when asked.  Server-to-client
requests (legacy only) are answered: ``ping`` with ``{}``, ``roots/list``/``sampling/createMessage``/
``elicitation/create`` with a configurable canned result or error.  ``notifications/progress`` is
counted per request with the timestamp the adapter passes in (``now``, perf_counter seconds).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from mcpfast import core
from mcpfast.client.errors import InvalidJson, McpError, ToolError, UnexpectedReply, WrongId
from mcpfast.protocol import http as wire
from mcpfast.protocol.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcpfast.protocol.http import encode_header_value
from mcpfast.protocol.meta import META_CLIENT_CAPABILITIES as META_CAPABILITIES
from mcpfast.protocol.meta import META_CLIENT_INFO, META_SERVER_INFO
from mcpfast.protocol.meta import META_PROTOCOL_VERSION as META_VERSION
from mcpfast.protocol.versions import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE, STATELESS_VERSIONS

__all__ = [
    "AUTO",
    "DEFAULT_CLIENT_INFO",
    "DEFAULT_PROTOCOL_VERSION",
    "MODERN_ERROR_CODES",
    "CallResult",
    "ClientSession",
    "Event",
    "Pending",
    "ProgressUpdate",
    "encode_header_value",
]

AUTO = "auto"
DEFAULT_PROTOCOL_VERSION = LATEST_HANDSHAKE  # the swarm speaks 2025-11-25 unless told otherwise
DEFAULT_CLIENT_INFO: dict[str, str] = {"name": "mcpfast-swarm", "version": "0.1"}


# JSON-RPC errors only a 2026-07-28 server emits (HeaderMismatch, MissingRequiredClientCapability,
# UnsupportedProtocolVersion): seeing one to the discover probe means "modern server".
MODERN_ERROR_CODES = frozenset({HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION})
UNSUPPORTED_VERSION = UNSUPPORTED_PROTOCOL_VERSION

# canned replies to legacy server-to-client requests: a result dict, or an McpError to answer with
DEFAULT_SERVER_REPLIES: dict[str, Any] = {
    "roots/list": {"roots": []},
    "elicitation/create": {"action": "decline"},
    "sampling/createMessage": McpError(METHOD_NOT_FOUND, "sampling not supported by the load generator"),
}


@dataclass(slots=True)
class ProgressUpdate:
    at: float  # perf_counter seconds, as passed in by the adapter
    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(slots=True)
class Pending:
    """One request in flight."""

    id: int
    method: str
    data: bytes  # the request bytes (no framing)
    name: str | None = None  # tool / prompt name or resource uri (for Mcp-Name and stats names)
    progress_token: int | None = None
    progress: list[ProgressUpdate] = field(default_factory=list)
    notifications: int = 0  # every notification tied to this request (progress, log, ...)
    event_times: list[float] = field(default_factory=list)  # SSE event arrivals (HTTP adapter)
    params: dict[str, Any] | None = None  # the caller's params (without the added _meta), for MRTR retries

    @property
    def stat_name(self) -> str:
        """Low-cardinality stats name: ``tools/call:echo``, ``prompts/get:greet``, ``initialize``."""
        if self.name is not None and self.method != "resources/read":
            return f"{self.method}:{self.name}"
        return self.method


class CallResult:
    """The reply to one request: id, raw bytes, error flag and code; the rest is parsed lazily."""

    __slots__ = ("_message", "code", "id", "is_error", "method", "name", "progress", "raw")

    def __init__(self, pending: Pending, raw: bytes, is_error: bool, code: int | None) -> None:
        self.id = pending.id
        self.method = pending.method
        self.name = pending.name
        self.raw = raw
        self.is_error = is_error
        self.code = code
        self.progress = pending.progress
        self._message: core.Message | None = None

    @property
    def message(self) -> core.Message:
        if self._message is None:
            msg = core.decode(self.raw)
            assert not isinstance(msg, list)
            self._message = msg
        return self._message

    @property
    def result(self) -> Any:
        """The parsed ``result`` (None for an error reply)."""
        return self.message.result

    @property
    def error(self) -> dict[str, Any] | None:
        return self.message.error if self.is_error else None

    def as_dict(self) -> dict[str, Any]:
        """The whole reply as a dict (for schema validation)."""
        import orjson

        return orjson.loads(self.raw)

    @property
    def is_tool_error(self) -> bool:
        """``tools/call`` result with ``isError: true`` (byte check first, parse only if it may be)."""
        if self.is_error or self.method != "tools/call" or b'"isError"' not in self.raw:
            return False
        return bool((self.result or {}).get("isError"))

    @property
    def is_input_required(self) -> bool:
        """2026 MRTR: ``resultType: "input_required"``."""
        if self.is_error or b'"input_required"' not in self.raw:
            return False
        return (self.result or {}).get("resultType") == "input_required"

    def exception(self) -> McpError | ToolError | None:
        """The failure this reply stands for, or None."""
        if self.is_error:
            err = self.error or {}
            return McpError(self.code, str(err.get("message", "")), err.get("data"), self.method)
        if self.is_tool_error:
            return ToolError(self.name)
        return None

    def raise_for_error(self) -> CallResult:
        exc = self.exception()
        if exc is not None:
            raise exc
        return self

    def __repr__(self) -> str:
        return f"CallResult(id={self.id!r}, method={self.method!r}, is_error={self.is_error}, code={self.code})"


@dataclass(slots=True)
class Event:
    """What one incoming message meant.

    kind: ``"reply"`` (``reply`` set), ``"server-request"`` (``response`` holds the bytes to send
    back), or ``"notification"`` (``message``; ``pending`` when tied to a request in flight).
    """

    kind: str
    reply: CallResult | None = None
    message: core.Message | None = None
    response: bytes | None = None
    pending: Pending | None = None


class ClientSession:
    """Lifecycle, ids and correlation for one MCP client connection; see the module docstring."""

    def __init__(
        self,
        protocol_version: str = DEFAULT_PROTOCOL_VERSION,
        *,
        capabilities: dict[str, Any] | None = None,
        client_info: dict[str, Any] | None = None,
        server_replies: dict[str, Any] | None = None,
        supported_versions: tuple[str, ...] = HANDSHAKE_VERSIONS + STATELESS_VERSIONS,
    ) -> None:
        if protocol_version != AUTO and protocol_version not in supported_versions:
            raise ValueError(f"unsupported protocol version {protocol_version!r}")
        self.requested_version = protocol_version
        self.supported_versions = supported_versions
        self.capabilities: dict[str, Any] = capabilities if capabilities is not None else {}
        self.client_info = client_info if client_info is not None else dict(DEFAULT_CLIENT_INFO)
        self.server_replies = dict(DEFAULT_SERVER_REPLIES)
        if server_replies:
            self.server_replies.update(server_replies)
        self._next_id = 1
        self.pending: dict[int, Pending] = {}
        self._by_token: dict[int, Pending] = {}
        # lifecycle
        if protocol_version == AUTO:
            self.era: str | None = None  # unknown until detect()
            self.protocol_version = max(v for v in supported_versions if v in STATELESS_VERSIONS)
        elif protocol_version in STATELESS_VERSIONS:
            self.era = "stateless"
            self.protocol_version = protocol_version
        else:
            self.era = "handshake"
            self.protocol_version = protocol_version
        self.negotiated_version: str | None = None  # handshake era, from InitializeResult
        self.server_capabilities: dict[str, Any] | None = None
        self.server_info: dict[str, Any] | None = None
        self.initialized = False  # handshake done (initialize result + initialized notification)
        self.session_id: str | None = None  # HTTP Mcp-Session-Id, set by the adapter
        self.server_requests = 0
        self.notifications = 0
        self._modern_meta: dict[str, Any] | None = None

    # -- state -------------------------------------------------------------------------------
    @property
    def stateless(self) -> bool:
        return self.era == "stateless"

    @property
    def needs_handshake(self) -> bool:
        return self.era == "handshake" and not self.initialized

    @property
    def version(self) -> str:
        """The version in force: negotiated (handshake era) or per-request (stateless)."""
        return self.negotiated_version or self.protocol_version

    def reset(self) -> None:
        """Forget the connection (new stdio process, new HTTP session); keep ids increasing."""
        self.pending.clear()
        self._by_token.clear()
        self.negotiated_version = None
        self.server_capabilities = None
        self.server_info = None
        self.initialized = False
        self.session_id = None
        if self.requested_version == AUTO:
            self.era = None
            self.protocol_version = max(v for v in self.supported_versions if v in STATELESS_VERSIONS)

    # -- building requests ---------------------------------------------------------------------
    def _meta(self) -> dict[str, Any]:
        meta = self._modern_meta
        if meta is None or meta[META_VERSION] != self.protocol_version:
            meta = self._modern_meta = {
                META_VERSION: self.protocol_version,
                META_CAPABILITIES: self.capabilities,
                META_CLIENT_INFO: self.client_info,
            }
        return meta

    def request(self, method: str, params: dict[str, Any] | None = None, *, progress: bool = False, modern: bool | None = None) -> Pending:
        """A request in flight: id assigned, bytes built, registered for correlation.

        ``progress=True`` adds ``_meta.progressToken`` (= the id).  ``modern`` forces the 2026
        ``_meta`` (used by the auto-detection probe); default: when the era is stateless.
        """
        rid = self._next_id
        self._next_id = rid + 1
        given = params
        if modern is None:
            modern = self.era == "stateless"
        token = rid if progress else None
        if modern or token is not None:
            params = dict(params) if params else {}
            meta = dict(params.get("_meta") or {})
            if modern:
                meta.update(self._meta())
            if token is not None:
                meta["progressToken"] = token
            params["_meta"] = meta
        name = wire.name_of(method, params)
        pending = Pending(rid, method, core.encode_request(rid, method, params), name, token)
        pending.params = given
        self.pending[rid] = pending
        if token is not None:
            self._by_token[token] = pending
        return pending

    def notification(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        return core.encode_notification(method, params)

    def cancel(self, pending: Pending, reason: str | None = None) -> bytes:
        """Forget a request (timeout) and build ``notifications/cancelled`` for it."""
        self.forget(pending)
        params: dict[str, Any] = {"requestId": pending.id}
        if reason:
            params["reason"] = reason
        return core.encode_notification("notifications/cancelled", params)

    def forget(self, pending: Pending) -> None:
        self.pending.pop(pending.id, None)
        if pending.progress_token is not None:
            self._by_token.pop(pending.progress_token, None)

    # lifecycle requests
    def initialize_request(self) -> Pending:
        version = self.protocol_version if self.protocol_version in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
        return self.request(
            "initialize",
            {"protocolVersion": version, "capabilities": self.capabilities, "clientInfo": self.client_info},
            modern=False,
        )

    def on_initialize_result(self, reply: CallResult) -> None:
        """Record the negotiated version and server capabilities (raises on an error reply)."""
        reply.raise_for_error()
        result = reply.result or {}
        version = result.get("protocolVersion")
        if not isinstance(version, str) or version not in HANDSHAKE_VERSIONS:
            raise UnexpectedReply("unsupported negotiated protocol version", str(version))
        self.era = "handshake"
        self.negotiated_version = version
        self.protocol_version = version
        self.server_capabilities = result.get("capabilities") or {}
        self.server_info = result.get("serverInfo")

    def initialized_notification(self) -> bytes:
        """``notifications/initialized``; marks the handshake complete."""
        self.initialized = True
        return core.encode_notification("notifications/initialized")

    def discover_request(self) -> Pending:
        return self.request("server/discover", {}, modern=True)

    def on_discover_result(self, reply: CallResult) -> None:
        reply.raise_for_error()
        result = reply.result or {}
        self.era = "stateless"
        self.server_capabilities = result.get("capabilities") or {}
        self.server_info = (result.get("_meta") or {}).get(META_SERVER_INFO)

    # -- era detection (2026-07-28 backward compatibility) ---------------------------------------------------
    def detect(self, reply: CallResult | None, *, http_status: int | None = None, body: bytes = b"") -> str:
        """Interpret the ``server/discover`` probe; returns ``"modern"``, ``"retry"`` or ``"legacy"``.

        ``reply``: the JSON-RPC reply (None for a timeout or a non-JSON-RPC HTTP answer).
        ``"retry"``: the server is modern and listed another modern version we speak; it is now
        ``protocol_version``: send a new discover.  ``"legacy"``: fall back to ``initialize``.
        """
        if reply is None and body:
            try:
                _id, is_error, code = core.scan_reply(body)
            except core.JsonRpcError:
                is_error, code = False, None
            if is_error and code in MODERN_ERROR_CODES:
                reply = self._orphan_reply(body, code)
        if reply is not None and not reply.is_error:
            self.on_discover_result(reply)
            return "modern"
        if reply is not None and reply.code in MODERN_ERROR_CODES:
            if reply.code == UNSUPPORTED_VERSION:
                data = (reply.error or {}).get("data") or {}
                supported = data.get("supported") or []
                shared = [v for v in supported if v in STATELESS_VERSIONS and v in self.supported_versions]
                if shared and max(shared) != self.protocol_version:
                    self.protocol_version = max(shared)
                    return "retry"
                shared_legacy = [v for v in supported if v in HANDSHAKE_VERSIONS]
                if shared_legacy:
                    self.era = "handshake"
                    self.protocol_version = max(shared_legacy)
                    return "legacy"
                raise McpError(reply.code, "no shared protocol version", data, "server/discover")
            self.era = "stateless"  # modern server; the request itself needs fixing
            raise McpError(reply.code, str((reply.error or {}).get("message", "")), None, "server/discover")
        self.era = "handshake"
        self.protocol_version = LATEST_HANDSHAKE
        return "legacy"

    def _orphan_reply(self, body: bytes, code: int | None) -> CallResult:
        return CallResult(Pending(0, "server/discover", b""), body, True, code)

    # -- HTTP headers ----------------------------------------------------------------------------
    def http_headers(self, pending: Pending | None = None, method: str | None = None) -> dict[str, str]:
        """Per-request protocol headers (the adapter adds Accept/Content-Type/auth)."""
        headers: dict[str, str] = {}
        if self.era == "stateless" or (pending is not None and pending.method == "server/discover" and self.era is None):
            m = pending.method if pending is not None else method
            return wire.stateless_request_headers(self.protocol_version, m, pending.name if pending is not None else None)
        if wire.sends_version_header(self.negotiated_version):
            headers[wire.MCP_PROTOCOL_VERSION] = self.negotiated_version  # type: ignore[assignment]
        if self.session_id is not None:
            headers[wire.MCP_SESSION_ID] = self.session_id
        return headers

    # -- receiving ---------------------------------------------------------------------------------
    def receive(self, data: bytes, now: float | None = None) -> Event:
        """Interpret one incoming JSON-RPC message (one stdio line or one SSE event's data).

        Raises:
            InvalidJson: not JSON, or not a JSON-RPC message.
            WrongId: a reply matching no request in flight.
        """
        try:
            rid, is_error, code = core.scan_reply(data)
        except core.JsonRpcError as exc:
            if exc.code == core.PARSE_ERROR:
                raise InvalidJson("invalid JSON", str(exc)[:200]) from None
            return self._receive_other(data, now)
        pending = self.pending.pop(rid, None) if isinstance(rid, int) else None
        if pending is None:
            raise WrongId(rid)
        if pending.progress_token is not None:
            self._by_token.pop(pending.progress_token, None)
        return Event("reply", reply=CallResult(pending, bytes(data), is_error, code))

    def _receive_other(self, data: bytes, now: float | None) -> Event:
        try:
            msg = core.decode(data)
        except core.JsonRpcError as exc:
            raise InvalidJson("not a JSON-RPC message", str(exc)[:200]) from None
        if isinstance(msg, list):
            raise InvalidJson("unexpected batch")
        if msg.kind == "notification":
            self.notifications += 1
            pending = None
            if msg.method == "notifications/progress":
                token = msg.param("progressToken")
                pending = self._by_token.get(token) if isinstance(token, int) else None
                if pending is not None:
                    pending.progress.append(
                        ProgressUpdate(
                            time.perf_counter() if now is None else now,
                            msg.param("progress", 0),
                            msg.param("total"),
                            msg.param("message"),
                        )
                    )
                    pending.notifications += 1
            return Event("notification", message=msg, pending=pending)
        # a server-to-client request (legacy era)
        self.server_requests += 1
        return Event("server-request", message=msg, response=self.answer(msg))

    def answer(self, msg: core.Message) -> bytes:
        """The reply to a server-to-client request: ping, canned replies, else -32601."""
        assert msg.id is not None and msg.method is not None
        if msg.method == "ping":
            return core.encode_result(msg.id, {})
        canned = self.server_replies.get(msg.method)
        if canned is None:
            return core.encode_error(msg.id, METHOD_NOT_FOUND, f"method not found: {msg.method}")
        if isinstance(canned, McpError):
            return core.encode_error(msg.id, int(canned.code or INTERNAL_ERROR), canned.message or "error", canned.data)
        if callable(canned):
            value = canned(msg)
            if isinstance(value, McpError):
                return core.encode_error(msg.id, int(value.code or INTERNAL_ERROR), value.message or "error", value.data)
            return core.encode_result(msg.id, value)
        return core.encode_result(msg.id, canned)

    # -- 2026 MRTR --------------------------------------------------------------------------------
    def mrtr_retry(self, reply: CallResult, params: dict[str, Any], *, progress: bool = False) -> Pending:
        """Retry an ``input_required`` result (new id) with canned ``inputResponses``.

        ``params``: the original request params (without ``_meta``, which is rebuilt; the
        previous round's ``inputResponses``/``requestState`` are replaced).
        """
        result = reply.result or {}
        responses: dict[str, Any] = {}
        for key, req in (result.get("inputRequests") or {}).items():
            canned = self.server_replies.get(req.get("method", ""))
            if isinstance(canned, McpError) or canned is None:
                responses[key] = {"action": "decline"} if req.get("method") == "elicitation/create" else {}
            elif callable(canned):
                responses[key] = canned(req)
            else:
                responses[key] = canned
        new_params = {k: v for k, v in params.items() if k not in ("_meta", "requestState")}
        new_params["inputResponses"] = responses
        if "requestState" in result:
            new_params["requestState"] = result["requestState"]
        return self.request(reply.method, new_params, progress=progress)
