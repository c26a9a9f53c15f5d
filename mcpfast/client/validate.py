"""Sampled protocol checking against the official MCP JSON Schemas.

``Validator(share, version)`` validates an exact share of the messages it is shown (deterministic
sampling by counter: after ``n`` messages exactly ``floor(n * share)`` have been checked, the share
taken as a fraction with denominator <= 10**6) against the schema of the negotiated protocol
version (vendored at ``mcpfast/protocol/schemas/<version>.json``).

Schema loading and validation reuse :mod:`mcpfast.protocol` (``validate`` checks the
``JSONRPCMessage`` envelope, the method's request/notification definition, and with ``method=``
the result definition; validators are cached once per version and definition per process, built
lazily so a ``--processes`` fork builds them in each child on first use).  On top of that this
module checks the envelope definition of the message's *kind*, because ``JSONRPCMessage`` is an
``anyOf`` whose ``JSONRPCNotification`` branch accepts any object with ``method`` (so a request
with a malformed ``id`` would otherwise pass):

* ``method`` and ``id`` -> ``JSONRPCRequest``; ``method`` only -> ``JSONRPCNotification``;
* ``result`` -> ``JSONRPCResultResponse`` (2025-11-25+) or ``JSONRPCResponse`` (older);
* ``error`` -> ``JSONRPCErrorResponse`` (2025-11-25+) or ``JSONRPCError`` (older).

Failures raise :class:`SchemaViolation`; its message is ``"schema violation: <version>
<definition> at <json path>"`` - no instance values, ids or timestamps - so Locust groups equal
violations under one failure row.  The jsonschema messages are kept in ``.detail``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from mcpfast.protocol import SchemaError, load_schema
from mcpfast.protocol import validate as _protocol_validate
from mcpfast.protocol.schema import validator_for

__all__ = ["SchemaViolation", "Validator", "envelope_definition", "validate_message"]


class SchemaViolation(Exception):
    """A message does not conform to the MCP JSON Schema of the negotiated version."""

    def __init__(self, version: str, definition: str, path: str = "$", detail: str = "") -> None:
        super().__init__(f"schema violation: {version} {definition} at {path}")
        self.version = version
        self.definition = definition
        self.path = path
        self.detail = detail


def _json_path(parts: Any) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _path_of(error_text: str) -> str:
    """JSON path from a ``mcpfast.protocol.SchemaError`` entry ``"['a', 0]: message"``."""
    head, sep, _ = error_text.partition("]: ")
    if not sep or not head.startswith("["):
        return "$"
    import ast

    try:
        parts = ast.literal_eval(head + "]")
    except (ValueError, SyntaxError):
        return "$"
    return _json_path(parts) if isinstance(parts, list) else "$"


def envelope_definition(version: str, message: Any) -> str | None:
    """The envelope definition for the message's kind, or None (left to ``JSONRPCMessage``)."""
    if not isinstance(message, dict):
        return None
    defs = load_schema(version)
    defs = defs.get("$defs") or defs["definitions"]
    if "method" in message:
        return "JSONRPCRequest" if "id" in message else "JSONRPCNotification"
    if "error" in message:
        return "JSONRPCErrorResponse" if "JSONRPCErrorResponse" in defs else "JSONRPCError"
    if "result" in message:
        return "JSONRPCResultResponse" if "JSONRPCResultResponse" in defs else "JSONRPCResponse"
    return None


def validate_message(message: Any, version: str, method: str | None = None) -> None:
    """Validate one decoded message; ``method`` = the request method a reply answers.

    Raises:
        SchemaViolation: the message does not conform.
        ValueError: an unknown protocol version.
    """
    envelope = envelope_definition(version, message)
    if envelope is not None:
        from jsonschema.exceptions import best_match

        error = best_match(validator_for(version, envelope).iter_errors(message))
        if error is not None:
            raise SchemaViolation(version, envelope, _json_path(error.absolute_path), error.message[:500])
    try:
        _protocol_validate(message, version, method=method)
    except SchemaError as exc:
        first = exc.errors[0] if exc.errors else ""
        raise SchemaViolation(exc.version, exc.definition, _path_of(first), "; ".join(exc.errors[:3])) from None


class Validator:
    """Validate an exact, deterministic share of messages for one protocol version."""

    __slots__ = ("_acc", "_den", "_num", "checked", "seen", "share", "version", "violations")

    def __init__(self, share: float = 0.01, version: str = "2025-11-25") -> None:
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"share must be within 0..1, got {share!r}")
        load_schema(version)  # fail fast on an unknown version (cached)
        fraction = Fraction(share).limit_denominator(1_000_000)
        self.share = float(share)
        self._num = fraction.numerator
        self._den = fraction.denominator
        self._acc = 0
        self.version = version
        self.seen = 0
        self.checked = 0
        self.violations = 0

    def sample(self) -> bool:
        """Advance the counter; True for exactly ``floor(n * share)`` of the first ``n`` calls."""
        self.seen += 1
        acc = self._acc + self._num
        if acc >= self._den:
            self._acc = acc - self._den
            return True
        self._acc = acc
        return False

    def validate(self, message: Any, method: str | None = None) -> None:
        """Always validate (counted in ``checked``/``violations``, outside the sampling)."""
        self.checked += 1
        try:
            validate_message(message, self.version, method)
        except SchemaViolation:
            self.violations += 1
            raise

    def check(self, message: Any, method: str | None = None) -> bool:
        """Validate if this message is sampled; return whether it was.

        Raises:
            SchemaViolation: a sampled message does not conform.
        """
        if not self.sample():
            return False
        self.validate(message, method)
        return True

    def counters(self) -> dict[str, int]:
        return {"seen": self.seen, "checked": self.checked, "violations": self.violations}

    def reset_counters(self) -> None:
        self.seen = self.checked = self.violations = 0
        self._acc = 0
