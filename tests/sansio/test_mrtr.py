"""mcpfast.sansio.mrtr: InputRequired and the sealed requestState of 2026 multi-round requests."""

from __future__ import annotations

from typing import Any

import pytest

from mcpfast.protocol.errors import INVALID_PARAMS, McpError
from mcpfast.sansio.mrtr import InputRequired, StateSealer, input_required_result

ASK = {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {"type": "object"}}}


def test_state_round_trips_for_its_binding() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealer.seal("tools/call:interview", {"name": {"action": "accept"}})
    assert sealer.open("tools/call:interview", token) == {"name": {"action": "accept"}}
    # Another process with the same key opens it too (state travels with the client, not the server).
    assert StateSealer(b"k" * 32).open("tools/call:interview", token) == {"name": {"action": "accept"}}


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        pytest.param(lambda t: t[:-4] + ("AAAA" if not t.endswith("AAAA") else "BBBB"), "invalid", id="forged"),
        pytest.param(lambda t: "not base64!", "invalid", id="garbage"),
        pytest.param(lambda t: 42, "invalid", id="not-a-string"),
    ],
)
def test_tampered_state_is_refused(mutate: Any, why: str) -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealer.seal("tools/call:x", {})
    with pytest.raises(McpError) as info:
        sealer.open("tools/call:x", mutate(token))
    assert info.value.code == INVALID_PARAMS and why in info.value.message


def test_a_changed_last_character_is_refused_even_when_it_decodes_the_same() -> None:
    sealer = StateSealer(b"k" * 32)
    for size in range(6):  # a body length whose base64 ends with unused bits
        token = sealer.seal("tools/call:x", {"pad": "x" * size})
        if not token.endswith("="):
            continue
        body = token.rstrip("=")
        last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        twin = last[last.index(body[-1]) ^ 1]  # differs only in the lowest bit, unused here
        forged = body[:-1] + twin + token[len(body) :]
        assert forged != token
        with pytest.raises(McpError, match="invalid"):
            sealer.open("tools/call:x", forged)
        return
    pytest.fail("no padded token was produced")


def test_state_is_bound_to_its_request_and_key_and_expires() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealer.seal("tools/call:x", {})
    with pytest.raises(McpError, match="another request"):
        sealer.open("tools/call:y", token)
    with pytest.raises(McpError, match="invalid"):
        StateSealer(b"j" * 32).open("tools/call:x", token)
    stale = StateSealer(b"k" * 32, ttl=-1.0).seal("tools/call:x", {})
    with pytest.raises(McpError, match="expired"):
        sealer.open("tools/call:x", stale)


def test_input_required_collects_one_or_many_requests() -> None:
    assert InputRequired("name", ASK).requests == {"name": ASK}
    many = InputRequired({"a": ASK, "b": ASK})
    assert list(many.requests) == ["a", "b"]
    with pytest.raises(ValueError):
        InputRequired({})
    with pytest.raises(ValueError):
        InputRequired("name", None)
    assert input_required_result(many.requests, "st") == {
        "resultType": "input_required",
        "inputRequests": many.requests,
        "requestState": "st",
    }
