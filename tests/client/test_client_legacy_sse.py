"""The 2024-11-05 HTTP+SSE adapter (gevent, in a child interpreter) against the reference server
(``mcpfast serve --transport http`` serves ``GET /sse`` + ``POST /messages?session_id=...``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from _support import start_reference_server, stop


@pytest.fixture(scope="module")
def reference_url() -> Iterator[str]:
    proc, url = start_reference_server()
    yield url
    stop(proc)


def names(out: dict) -> list[str]:
    return [r[0] for r in out["records"]]


def failures(out: dict) -> list[list]:
    return [r for r in out["records"] if r[3] is not None]


def test_legacy_sse_session_against_the_reference_server(drive, reference_url: str) -> None:
    ops = [
        ["initialize"],
        ["tool", "echo", {"text": "old"}],
        ["stream", 4],
        ["call", "tools/list"],
        ["concurrent", 4],
        ["restart"],
        ["initialize"],
        ["tool", "echo", {"text": "again"}],
        ["delete"],
    ]
    out = drive({"transport": "legacy_sse", "target": reference_url, "version": "2024-11-05", "ops": ops})
    assert not failures(out), failures(out)
    assert out["initialized"] == [True, True]
    assert out["era"] == "handshake" and out["version"] == "2024-11-05"
    assert out["session_id"] is None  # no Mcp-Session-Id: the session is the stream
    old, stream, listing, again = (json.loads(r)["result"] for r in out["replies"])
    assert old["content"][0]["text"] == "old" and again["content"][0]["text"] == "again"
    assert stream["content"][0]["text"] == "streamed 4 steps" and "echo" in {t["name"] for t in listing["tools"]}
    assert out["progress"] == 4
    assert "sse:first-event" in names(out) and names(out).count("progress:gap") == 3
    assert sorted(out["concurrent"]) == ["t0", "t1", "t2", "t3"]
    assert out["deleted"] is False and "DELETE" not in names(out)


def test_legacy_sse_url_and_refusals(drive, reference_url: str) -> None:
    base = reference_url.rsplit("/", 1)[0]
    out = drive(
        {
            "transport": "legacy_sse",
            "target": reference_url,
            "version": "2024-11-05",
            "ops": [["sse_url", f"{base}/mcp"], ["sse_url", f"{base}/sse"], ["sse_url", f"{base}/x/mcp/"]],
        }
    )
    assert out["sse_urls"] == [f"{base}/sse", f"{base}/sse", f"{base}/x/sse"]
    # the Streamable HTTP endpoint is not an event stream to GET: a categorised failure, no hang
    out = drive(
        {"transport": "legacy_sse", "target": f"{base}/nothing/here/sse", "version": "2024-11-05", "timeout": 3.0, "ops": [["initialize"]]}
    )
    assert out["initialized"] == [False]
    assert failures(out) and failures(out)[0][3].startswith("HttpStatusError(")
