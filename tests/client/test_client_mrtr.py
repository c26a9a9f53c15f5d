"""2026-07-28 multi-round-trip requests: the client answers ``input_required`` results by itself
(canned answers, retried with ``inputResponses`` + ``requestState``), against the reference
server's conformance fixture (``test_elicitation``, ``test_sampling`` ask for input)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from _support import start_reference_server, stop

SAMPLING = {"role": "assistant", "content": {"type": "text", "text": "canned"}, "model": "m", "stopReason": "endTurn"}
CAPS = {"elicitation": {}, "sampling": {}, "roots": {}}


@pytest.fixture(scope="module")
def fixture_url() -> Iterator[str]:
    proc, url = start_reference_server("--fixture", "conformance")
    yield url
    stop(proc)


def records(out: dict) -> list[list]:
    return out["records"]


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_input_is_answered_automatically(drive, fixture_url: str, version: str) -> None:
    out = drive(
        {
            "transport": "http",
            "target": fixture_url,
            "version": version,
            "capabilities": CAPS,
            "server_replies": {"sampling/createMessage": SAMPLING},
            "ops": [["initialize"], ["tool", "test_sampling", {"prompt": "hi"}], ["tool", "test_elicitation", {"message": "who?"}]],
        }
    )
    assert not [r for r in records(out) if r[3] is not None], records(out)
    sampled, elicited = (json.loads(r)["result"]["content"][0]["text"] for r in out["replies"])
    assert sampled == "LLM response: canned"
    assert elicited.startswith("User response: action=decline")
    names = [r[0] for r in records(out)]
    if version == "2026-07-28":  # one input-required round each, then the result
        assert names[-4:] == [
            "tools/call:test_sampling (input required)",
            "tools/call:test_sampling",
            "tools/call:test_elicitation (input required)",
            "tools/call:test_elicitation",
        ]
    else:  # the handshake era asks over the request's SSE stream instead: no extra round
        assert not any("input required" in n for n in names)


def test_missing_capability_is_a_jsonrpc_error(drive, fixture_url: str) -> None:
    out = drive(
        {
            "transport": "http",
            "target": fixture_url,
            "version": "2026-07-28",
            "capabilities": {},
            "ops": [["initialize"], ["tool", "test_sampling", {"prompt": "hi"}]],
        }
    )
    failed = [r for r in records(out) if r[3] is not None]
    assert [r[0] for r in failed] == ["tools/call:test_sampling"] and "McpError" in failed[0][3]
