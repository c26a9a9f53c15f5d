"""One inbound request as the application sees it."""

from __future__ import annotations

from typing import Any

from mcpfast.protocol.errors import INVALID_PARAMS, McpError

__all__ = ["InboundRequest"]


class InboundRequest:
    """A request read by the session machine; ``params`` stays raw until someone reads it.

    Attributes:
        id: the request id exactly as sent.
        method: the method name.
        version: the protocol version that governs this request (the negotiated one, or the
            one in its ``_meta`` for a stateless request).
        stateless: whether the request is served under 2026-07-28 per-request rules.
        client_capabilities: the capabilities that apply to this request.
        log_level: the minimum level of log notifications this request may emit, or ``None``
            when logging is off for it.
        batch: the session machine's number for the batch it came in, or ``None``.

    While it is in flight it is also the session machine's entry for it (``ServerSession`` keeps the
    private ``_tag``, ``_cancelled`` and ``_last_progress`` here: one object per request).
    """

    __slots__ = (
        "_cancelled",
        "_last_progress",
        "_message",
        "_tag",
        "batch",
        "client_capabilities",
        "id",
        "log_level",
        "method",
        "stateless",
        "version",
    )

    def __init__(
        self,
        message: Any,
        version: str,
        stateless: bool,
        client_capabilities: dict[str, Any],
        log_level: str | None,
        batch: int | None = None,
        tag: Any = None,
    ) -> None:
        self._message = message
        self.id: int | str = message.id
        self.method: str = message.method
        self.version = version
        self.stateless = stateless
        self.client_capabilities = client_capabilities
        self.log_level = log_level
        self.batch = batch
        self._tag = tag  # what the transport gave with the message; on every record for this request
        self._cancelled = False  # the client cancelled it: its answer is dropped
        self._last_progress: float | None = None  # the last progress value sent for it

    @property
    def params(self) -> dict[str, Any]:
        """The params object, parsed on first access (``{}`` when absent).

        Raises:
            McpError: -32602 when params is an array (MCP params are always objects).
        """
        params = self._message.params
        if params is None:
            return {}
        if not isinstance(params, dict):
            raise McpError(INVALID_PARAMS, "params must be an object")
        return params

    @property
    def raw_params(self) -> bytes | None:
        """The params bytes exactly as sent, or ``None``."""
        return self._message.raw_params

    @property
    def meta(self) -> dict[str, Any]:
        """``params._meta`` (``{}`` when absent or not an object)."""
        if self._message.raw_params is None:
            return {}
        params = self._message.params
        meta = params.get("_meta") if isinstance(params, dict) else None
        return meta if isinstance(meta, dict) else {}

    @property
    def progress_token(self) -> int | str | None:
        """``params._meta.progressToken`` when it is a valid token, else ``None``."""
        token = self.meta.get("progressToken")
        if isinstance(token, bool) or not isinstance(token, int | str):
            return None
        return token

    def __repr__(self) -> str:
        return f"InboundRequest(id={self.id!r}, method={self.method!r}, version={self.version!r})"
