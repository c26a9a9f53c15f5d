"""The stdio adapter (gevent, in a child interpreter) against a fake server and the official SDK."""

from __future__ import annotations

import json
import sys

import pytest
from _support import FAKE, SDK


def names(out: dict) -> list[str]:
    return [r[0] for r in out["records"]]


def failures(out: dict) -> list[list]:
    return [r for r in out["records"] if r[3] is not None]


def test_fake_server_handshake_calls_progress_server_requests_concurrency(drive) -> None:
    out = drive(
        {
            "transport": "stdio",
            "target": [sys.executable, FAKE, "stdio"],
            "ops": [
                ["initialize"],
                ["tool", "echo", {"text": "hi"}],
                ["stream", 4],
                ["tool", "ping_me"],
                ["concurrent", 20],
                ["tool", "fail"],
            ],
        }
    )
    assert out["initialized"] == [True] and out["era"] == "handshake" and out["version"] == "2025-11-25"
    assert names(out)[:3] == ["initialize", "notifications/initialized", "tools/call:echo"]
    assert json.loads(out["replies"][0])["result"]["content"][0]["text"] == "hi"
    assert out["progress"] == 4
    assert names(out).count("progress:gap") == 3 and "progress:first-event" in names(out)
    assert out["server_requests"] == 2  # ping and roots/list answered
    assert sorted(out["concurrent"]) == sorted(f"t{i}" for i in range(20))  # 20 in flight, all matched
    assert failures(out) == [["tools/call:fail", failures(out)[0][1], failures(out)[0][2], "ToolError('tool returned isError (fail)')"]]
    assert all(isinstance(r[1], int) and r[1] >= 0 for r in out["records"])
    assert out["returncode"] == 0  # closed stdin -> clean exit, no kill
    assert "got tools/call" in out["stderr_tail"]  # stderr drained (its tail kept)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("wrong-id", "WrongId('reply id matches no request in flight')"),
        ("invalid-json", "InvalidJson('invalid JSON')"),
    ],
)
def test_broken_fake_server_failure_categories(drive, mode: str, expected: str) -> None:
    out = drive(
        {
            "transport": "stdio",
            "target": [sys.executable, FAKE, "stdio", "--mode", mode],
            "ops": [["initialize"], ["tool", "echo", {"text": "x"}]],
            "timeout": 3,
        }
    )
    assert out["initialized"] == [False]
    assert failures(out)[0][0] == "initialize" and failures(out)[0][3] == expected


def test_timeout_and_dead_server(drive) -> None:
    out = drive(
        {
            "transport": "stdio",
            "target": [sys.executable, FAKE, "stdio", "--delay-ms", "1500"],
            "ops": [["call", "ping"]],
            "timeout": 0.3,
        }
    )
    assert failures(out)[0][3] == "RequestTimeout('timeout on ping')"
    out = drive({"transport": "stdio", "target": [sys.executable, "-c", "pass"], "ops": [["call", "ping"]]})
    assert failures(out)[0][3].startswith("ConnectionFailure(")


def test_modern_and_auto_against_fake(drive) -> None:
    out = drive(
        {
            "transport": "stdio",
            "target": [sys.executable, FAKE, "stdio", "--mode", "modern"],
            "version": "auto",
            "ops": [["initialize"], ["tool", "echo", {"text": "m"}]],
        }
    )
    assert out["era"] == "stateless" and names(out) == ["server/discover", "tools/call:echo"]
    assert json.loads(out["replies"][0])["result"]["resultType"] == "complete"
    out = drive(
        {
            "transport": "stdio",
            "target": [sys.executable, FAKE, "stdio"],
            "version": "auto",
            "ops": [["initialize"], ["tool", "echo", {"text": "l"}]],
        }
    )
    assert out["era"] == "handshake"  # -32601 to the probe -> fall back to initialize
    assert names(out) == ["server/discover", "initialize", "notifications/initialized", "tools/call:echo"]
    assert not failures(out)


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28", "auto"])
def test_official_sdk_stdio_server(drive, version: str) -> None:
    out = drive(
        {
            "transport": "stdio",
            "target": [sys.executable, SDK, "stdio"],
            "version": version,
            "timeout": 20,
            "ops": [
                ["initialize"],
                ["tool", "echo", {"text": "sdk"}],
                ["tool", "add", {"a": 2, "b": 3}],
                ["stream", 5],
                ["call", "tools/list"],
                ["concurrent", 8],
            ],
        },
        timeout=90,
    )
    assert not failures(out), failures(out)
    assert out["era"] == ("handshake" if version == "2025-11-25" else "stateless")
    echo, add = (json.loads(r)["result"] for r in out["replies"][:2])
    assert echo["content"][0]["text"] == "sdk" and add["content"][0]["text"] == "5"
    assert out["progress"] == 5
    assert len(out["concurrent"]) == 8
    assert out["returncode"] is not None
