"""``benchmarks.capacity_peers``: its table says each peer's capacity, its bounds when the search
found none, what broke first, and each peer's share of mcpfast's; a peer that could not run is
said, not dropped."""

from __future__ import annotations

from typing import Any

from benchmarks.capacity_peers import QUESTIONS, report


def outcome(status: str, capacity: float | None, sentence: str, **extra: Any) -> dict[str, Any]:
    return {"exit": 0, "folder": "x", "status": status, "capacity": capacity, "sentence": sentence, "slo": None, **extra}


def test_the_table_gives_capacities_bounds_shares_and_failures() -> None:
    data = {
        "command": "flock /tmp/mcpfast-bench.lock python -m benchmarks.capacity_peers",
        "peers": ["mcpfast", "python-sdk", "typescript-sdk"],
        "versions": {"mcp": "1.2.3"},
        "results": {
            "mcpfast": {
                "calls": outcome("found", 8000.0, "capacity 8,000 calls/s at p99 < 10ms; at 8,400/s p99 read 12 ms"),
                "sessions": outcome("at_least", None, "capacity at least 3,200 sessions/s", last_good=3200),
            },
            "python-sdk": {
                "calls": outcome("found", 2000.0, "capacity 2,000 calls/s at p99 < 10ms; at 2,100/s achieved 1,900/s"),
                "sessions": outcome("below", None, "capacity below 25 sessions/s", last_good=None, first_bad=25),
            },
            "typescript-sdk": {"calls": {"error": "node not found"}, "sessions": {"error": "node not found"}},
        },
    }
    text = report(data)
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| question")]
    calls = {r.split(" | ")[2].split(" ")[0]: r for r in rows if r.startswith(f"| {QUESTIONS['calls']['unit']}")}
    assert "**8,000** calls/s" in calls["mcpfast"] and "1x" in calls["mcpfast"]
    assert "**2,000** calls/s" in calls["python-sdk"] and "0.25x" in calls["python-sdk"]
    assert "at 2,100/s achieved 1,900/s" in calls["python-sdk"]  # what broke first
    assert "not measured: node not found" in calls["typescript-sdk"]
    sessions = [r for r in rows if r.startswith(f"| {QUESTIONS['sessions']['unit']}")]
    assert any("at least 3,200 sessions/s" in r for r in sessions)
    assert any("below (last good None, first bad 25)" in r for r in sessions)
    assert "Versions: mcp 1.2.3" in text and text.startswith("# Capacity at one SLO")


def test_a_generator_bound_search_is_a_lower_bound_and_the_shares_upper_bounds() -> None:
    data = {
        "command": "python -m benchmarks.capacity_peers",
        "peers": ["mcpfast", "python-sdk"],
        "versions": {},
        "results": {
            "mcpfast": {"calls": outcome("inconclusive", None, "inconclusive: the generator ran out of CPU", last_good=51200.0)},
            "python-sdk": {"calls": outcome("found", 925.0, "capacity 925 calls/s; at 950/s p99 read 15.6 ms")},
        },
    }
    rows = [line for line in report(data).splitlines() if line.startswith("| calls/s")]
    assert "at least 51,200 calls/s (the generator was the limit above)" in rows[0]
    assert "| ≤ 0.0181x |" in rows[1], rows[1]
