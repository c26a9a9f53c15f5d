"""Sampled schema validation: valid and invalid messages per version, exact sampling share."""

from __future__ import annotations

from fractions import Fraction

import pytest

from mcpfast.client.validate import SchemaViolation, Validator, envelope_definition, validate_message

META_2026 = {
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
}


def call(version: str, **params: object) -> dict:
    p = {"name": "echo", "arguments": {"text": "hi"}, **params}
    if version == "2026-07-28":
        p.setdefault("_meta", META_2026)
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": p}


def call_result(version: str) -> dict:
    result: dict = {"content": [{"type": "text", "text": "hi"}]}
    if version == "2026-07-28":
        result["resultType"] = "complete"
    return {"jsonrpc": "2.0", "id": 7, "result": result}


VERSIONS = ["2025-11-25", "2026-07-28"]


@pytest.mark.parametrize("version", VERSIONS)
def test_valid_messages_pass(version: str) -> None:
    validate_message(call(version), version)
    validate_message(call_result(version), version, method="tools/call")
    validate_message({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}, version)
    validate_message({"jsonrpc": "2.0", "id": "x", "error": {"code": -32601, "message": "no such method"}}, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("mutate", "definition"),
    [
        (lambda m: m["params"].pop("name"), "CallToolRequest"),
        (lambda m: m.update(jsonrpc="1.0"), "JSONRPCRequest"),
        (lambda m: m.update(id=1.5), "JSONRPCRequest"),  # JSONRPCMessage alone lets this pass as a notification
        (lambda m: m["params"].update(arguments="not an object"), "CallToolRequest"),
    ],
)
def test_invalid_requests_fail_with_a_groupable_message(version: str, mutate, definition: str) -> None:
    message = call(version)
    mutate(message)
    with pytest.raises(SchemaViolation) as info:
        validate_message(message, version)
    text = str(info.value)
    assert text.startswith("schema violation:")
    assert version in text and definition in text
    assert "1.5" not in text and "not an object" not in text  # no instance values: one Locust row per kind
    # the same violation on another message gives the very same text, so Locust groups them
    other = call(version)
    other["id"] = 99
    mutate(other)
    with pytest.raises(SchemaViolation) as again:
        validate_message(other, version)
    assert str(again.value) == text


@pytest.mark.parametrize("version", VERSIONS)
def test_invalid_responses_fail(version: str) -> None:
    bad_error = {"jsonrpc": "2.0", "id": 1, "error": {"code": "oops", "message": "x"}}
    with pytest.raises(SchemaViolation, match=r"^schema violation: .*ErrorResponse at \$\.error\.code"):
        validate_message(bad_error, version)
    bad_result = call_result(version)
    bad_result["result"]["content"] = [{"type": "text"}]  # text content without text
    with pytest.raises(SchemaViolation, match=r"^schema violation:"):
        validate_message(bad_result, version, method="tools/call")
    with pytest.raises(SchemaViolation, match=r"^schema violation:"):
        validate_message({"hello": "world"}, version)


def test_envelope_names_follow_each_schema_file() -> None:
    assert envelope_definition("2025-06-18", {"id": 1, "result": {}}) == "JSONRPCResponse"
    assert envelope_definition("2025-06-18", {"id": 1, "error": {}}) == "JSONRPCError"
    assert envelope_definition("2026-07-28", {"id": 1, "result": {}}) == "JSONRPCResultResponse"
    assert envelope_definition("2026-07-28", {"id": 1, "error": {}}) == "JSONRPCErrorResponse"
    assert envelope_definition("2025-11-25", {"method": "x"}) == "JSONRPCNotification"
    assert envelope_definition("2025-11-25", [1]) is None


@pytest.mark.parametrize("share", [0.0, 0.01, 0.1, 1 / 3, 0.29, 1.0])
def test_sampling_share_is_exact_at_every_count(share: float) -> None:
    v = Validator(share, "2025-11-25")
    fraction = Fraction(share).limit_denominator(1_000_000)
    sampled = 0
    for n in range(1, 3001):
        sampled += v.sample()
        assert sampled == (n * fraction.numerator) // fraction.denominator
    assert v.seen == 3000


def test_check_validates_only_the_sampled_share_and_counts_violations() -> None:
    v = Validator(0.01, "2026-07-28")
    good = call("2026-07-28")
    checked = sum(v.check(good) for _ in range(10_000))
    assert checked == 100 == v.checked
    bad = call("2026-07-28")
    del bad["params"]["_meta"]
    raised = 0
    for _ in range(1_000):
        try:
            v.check(bad)
        except SchemaViolation:
            raised += 1
    assert raised == 10 == v.violations
    assert v.counters() == {"seen": 11_000, "checked": 110, "violations": 10}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Validator(1.5)
    with pytest.raises(ValueError):
        Validator(0.1, "1999-01-01")
