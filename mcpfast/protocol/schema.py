"""The vendored official JSON Schemas, and cached validators over them.

Validation is for tests and sampled checks, never for the hot path: it builds Python objects.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from mcpfast.protocol.meta import META_PROTOCOL_VERSION
from mcpfast.protocol.methods import RESULT_DEFINITION
from mcpfast.protocol.versions import LATEST_HANDSHAKE, SUPPORTED_VERSIONS

__all__ = ["SchemaError", "TranscriptValidator", "known_fields", "load_schema", "validate", "validate_result", "validator_for"]


class SchemaError(ValueError):
    """A message does not conform to the schema of its protocol version.

    Attributes:
        version: the protocol version checked against.
        definition: the schema definition that failed.
        errors: the jsonschema error messages (best match first).
    """

    def __init__(self, version: str, definition: str, errors: list[str]) -> None:
        super().__init__(f"{version} {definition}: " + "; ".join(errors[:3]))
        self.version = version
        self.definition = definition
        self.errors = errors


@functools.cache
def load_schema(version: str) -> dict[str, Any]:
    """The parsed schema document of one protocol revision.

    Raises:
        ValueError: an unknown version.
    """
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"no schema for protocol version {version!r}")
    text = resources.files("mcpfast.protocol.schemas").joinpath(f"{version}.json").read_text(encoding="utf-8")
    return json.loads(text)


def _defs_key(schema: dict[str, Any]) -> str:
    return "$defs" if "$defs" in schema else "definitions"


@functools.cache
def validator_for(version: str, definition: str) -> Any:
    """A cached jsonschema validator for one definition of one revision's schema.

    The definition is checked by a ``$ref`` into the full document, so inner references
    resolve; the dialect (Draft-07 or 2020-12) follows the document's ``$schema``.

    Raises:
        KeyError: the revision has no such definition.
    """
    import jsonschema  # only tests and sampled checks pay for the import

    schema = load_schema(version)
    key = _defs_key(schema)
    if definition not in schema[key]:
        raise KeyError(f"{version} schema has no definition {definition!r}")
    cls = jsonschema.validators.validator_for(schema)
    wrapper = dict(schema)
    wrapper.pop("$id", None)
    wrapper["$ref"] = f"#/{key}/{definition}"
    return cls(wrapper)


@functools.cache
def _definition_by_method(version: str) -> dict[str, str]:
    schema = load_schema(version)
    out: dict[str, str] = {}
    for name, body in schema[_defs_key(schema)].items():
        const = body.get("properties", {}).get("method", {}).get("const") if isinstance(body, dict) else None
        # Request/notification definitions carry both jsonrpc and method; the params-only
        # helper types (e.g. "...RequestParams") have no method const.
        if isinstance(const, str) and "jsonrpc" in body.get("properties", {}):
            out.setdefault(const, name)
    return out


@functools.cache
def known_fields(version: str, definition: str) -> frozenset[str]:
    """The property names a definition has in one revision (e.g. ``Tool`` gains ``title`` in
    2025-06-18); the server drops later fields when it talks to an older client."""
    schema = load_schema(version)
    body = schema[_defs_key(schema)].get(definition, {})
    return frozenset(body.get("properties", {}))


def _check(version: str, definition: str, instance: Any) -> None:
    validator = validator_for(version, definition)
    errors = sorted(validator.iter_errors(instance), key=lambda e: (len(e.path), str(e.message)))
    if errors:
        raise SchemaError(version, definition, [f"{list(e.absolute_path)}: {e.message}"[:300] for e in errors])


def validate(message: dict[str, Any] | list[Any], version: str, *, method: str | None = None) -> None:
    """Check one JSON-RPC message (or a 2025-03-26 batch) against a revision's schema.

    The envelope is checked against that revision's ``JSONRPCMessage`` definition. A request
    or notification is also checked against the definition of its method, when the revision
    defines one. A result is also checked against its method's result definition when
    ``method`` (the method of the request it answers) is given.

    Args:
        message: the decoded message.
        version: the protocol revision.
        method: for a reply, the method of the request it answers.

    Raises:
        SchemaError: the message does not conform.
        ValueError: an unknown version.
    """
    if isinstance(message, list):
        for item in message:
            validate(item, version, method=method)
        return
    _check(version, "JSONRPCMessage", message)
    msg_method = message.get("method")
    if isinstance(msg_method, str):
        definition = _definition_by_method(version).get(msg_method)
        if definition is not None:
            _check(version, definition, message)
    elif "result" in message and method is not None:
        validate_result(message["result"], method, version)


def validate_result(result: Any, method: str, version: str) -> None:
    """Check a result object against the result definition of ``method`` in ``version``.

    A 2026-07-28 ``InputRequiredResult`` is accepted for the methods that may return one.

    Raises:
        SchemaError: the result does not conform.
    """
    definition = RESULT_DEFINITION.get(method)
    if definition is None:
        _check(version, "Result", result)
        return
    if isinstance(result, dict) and result.get("resultType") == "input_required":
        definition = "InputRequiredResult"
    schema = load_schema(version)
    if definition not in schema[_defs_key(schema)]:
        definition = "Result"
    _check(version, definition, result)


_META_VERSION = META_PROTOCOL_VERSION


class TranscriptValidator:
    """Checks every message a server sends, in a conversation seen from both sides.

    Feed it the client's lines (to learn request methods and versions) and the server's lines
    (to check them): replies are checked against their request's result definition, and each
    message against the version that governs it (the negotiated one, or a stateless request's).

    An error reply whose id is null (the request id could not be read) is checked without the
    id against 2025-11-25, the first revision whose schema allows an id-less error: JSON-RPC 2.0
    writes ``"id": null`` there, which no revision's schema accepts.

    Args:
        version: the version assumed before ``initialize`` is answered.

    Attributes:
        checked: how many server messages were checked.
    """

    def __init__(self, version: str = LATEST_HANDSHAKE) -> None:
        self.version = version
        self.checked = 0
        self._methods: dict[Any, tuple[str, str | None]] = {}
        self._modern: str | None = None
        self._negotiated = False

    def client(self, message: bytes | str | dict[str, Any] | list[Any]) -> None:
        """Record a message the client sent."""
        for msg in _messages(message):
            if isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg:
                params = msg.get("params")
                meta = params.get("_meta") if isinstance(params, dict) else None
                version = meta.get(_META_VERSION) if isinstance(meta, dict) else None
                if isinstance(version, str) and version in SUPPORTED_VERSIONS:
                    self._modern = version
                else:
                    version = None
                self._methods[msg["id"]] = (msg["method"], version)

    def server(self, message: bytes | str | dict[str, Any] | list[Any]) -> None:
        """Check a message the server sent.

        Raises:
            SchemaError: it does not conform.
        """
        for msg in _messages(message):
            self.checked += 1
            if not isinstance(msg, dict):
                raise SchemaError(self.version, "JSONRPCMessage", [f"not an object: {msg!r}"])
            if "error" in msg and msg.get("id", 0) is None:
                _check("2025-11-25", "JSONRPCErrorResponse", {k: v for k, v in msg.items() if k != "id"})
                continue
            if "method" in msg:
                # Server-initiated messages belong to the handshake session if there is one,
                # else to the stateless traffic seen.
                validate(msg, self.version if self._negotiated or self._modern is None else self._modern)
                continue
            method, version = self._methods.pop(msg.get("id"), (None, None))
            if method == "initialize" and isinstance(msg.get("result"), dict):
                negotiated = msg["result"].get("protocolVersion")
                if negotiated in SUPPORTED_VERSIONS:
                    self.version = negotiated
                    self._negotiated = True
            validate(msg, version or self.version, method=method)


def _messages(message: bytes | str | dict[str, Any] | list[Any]) -> list[Any]:
    if isinstance(message, bytes | str):
        message = json.loads(message)
    if isinstance(message, list):
        return message
    return [message]
