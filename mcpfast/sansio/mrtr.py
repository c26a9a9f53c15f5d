"""2026-07-28 multi-round-trip requests (MRTR): input-required results and sealed request state.

A stateless server cannot send requests to the client. A handler that needs input (an
elicitation, a sampling, the roots) ends the round with an ``InputRequiredResult``; the client
answers the embedded requests and retries with ``inputResponses`` and the ``requestState`` it
was given. Answers from earlier rounds travel in that state, sealed with an HMAC so the client
cannot forge or alter them, and bound to the method, the target and an expiry.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from typing import Any, Final

import orjson

from mcpfast.protocol.errors import INVALID_PARAMS, McpError

__all__ = ["DEFAULT_STATE_TTL", "InputRequired", "StateSealer", "input_required_result"]

DEFAULT_STATE_TTL: Final = 600.0
"""Seconds a ``requestState`` stays valid."""
_MAC_SIZE: Final = 16


class InputRequired(Exception):
    """Raised inside a stateless handler that needs input it does not have yet.

    ``InputRequired(key, request)`` asks for one input; ``InputRequired(requests)`` for several
    at once (``{key: request}``), all in the same ``InputRequiredResult``.

    Attributes:
        requests: ``inputRequests``: key -> the embedded request (``method`` and ``params``).
    """

    def __init__(self, key: str | dict[str, dict[str, Any]], request: dict[str, Any] | None = None) -> None:
        requests = dict(key) if isinstance(key, dict) else {key: request}
        if not requests or any(not isinstance(r, dict) for r in requests.values()):
            raise ValueError("InputRequired needs at least one request object")
        super().__init__(", ".join(requests))
        self.requests: dict[str, dict[str, Any]] = requests  # type: ignore[assignment]


def input_required_result(requests: dict[str, dict[str, Any]], state: str) -> dict[str, Any]:
    """An ``InputRequiredResult`` asking for ``requests`` and carrying ``state``."""
    return {"resultType": "input_required", "inputRequests": requests, "requestState": state}


class StateSealer:
    """Seals and opens ``requestState`` tokens (HMAC-SHA256, truncated to 128 bits).

    Args:
        key: the secret; a random one per process when ``None`` (state then does not survive a
            restart, which a retry answers with -32602 and the client starts over).
        ttl: seconds a token stays valid.
    """

    def __init__(self, key: bytes | None = None, ttl: float = DEFAULT_STATE_TTL) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)
        self.ttl = ttl

    def seal(self, binding: str, responses: dict[str, Any]) -> str:
        """A token holding ``responses``, valid only for ``binding`` (e.g. ``tools/call:name``)."""
        body = orjson.dumps({"b": binding, "exp": time.time() + self.ttl, "r": responses})
        mac = hmac.new(self._key, body, hashlib.sha256).digest()[:_MAC_SIZE]
        return base64.urlsafe_b64encode(mac + body).decode("ascii")

    def open(self, binding: str, token: object) -> dict[str, Any]:
        """The responses sealed in ``token``.

        Raises:
            McpError: -32602 for a token that is malformed, forged, expired or bound to
                another request.
        """
        try:
            raw = base64.urlsafe_b64decode(token.encode("ascii")) if isinstance(token, str) else b""
        except (ValueError, UnicodeEncodeError):
            raw = b""
        # base64 decoding ignores the unused low bits of the last character, so a token whose
        # last character was changed can decode to the sealed bytes: only the exact token counts.
        if raw and base64.urlsafe_b64encode(raw).decode("ascii") != token:
            raw = b""
        mac, body = raw[:_MAC_SIZE], raw[_MAC_SIZE:]
        if not body or not hmac.compare_digest(mac, hmac.new(self._key, body, hashlib.sha256).digest()[:_MAC_SIZE]):
            raise McpError(INVALID_PARAMS, "invalid requestState")
        state = orjson.loads(body)
        if state.get("b") != binding or not isinstance(state.get("r"), dict):
            raise McpError(INVALID_PARAMS, "requestState belongs to another request")
        if state.get("exp", 0) < time.time():
            raise McpError(INVALID_PARAMS, "requestState expired")
        return state["r"]
