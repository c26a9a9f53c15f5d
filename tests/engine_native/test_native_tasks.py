"""The native engine's ``tasks`` family against the conformance fixture (``slow_compute`` runs as a
task) with ``--metrics``: calls, polls and cancels counted as the server counts them, each task
ended once; bad values refused naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _native_runs import run_engines, scrape
from _support import metric, start_reference_server, stop

from mcpfast import core

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not core.HAS_NATIVE_ENGINE, reason="the native engine needs the compiled core"),
]

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


@pytest.fixture
def served() -> Iterator[str]:
    proc, url = start_reference_server("--app", "mcpfast.server.conformance:app", "--metrics")
    yield url
    stop(proc)


def test_tasks_polled_to_their_end_counted_as_the_server_counts(served: str) -> None:
    cfg = core.EngineConfig(
        family="tasks",
        url=served,
        protocol_version="2026-07-28",
        client_capabilities=TASKS,
        tool="slow_compute",
        arguments={"seconds": 0.7},  # the first poll (at the server's 500 ms) finds it working
        tasks_cancel_share=0.5,
    )
    (totals,) = run_engines([core.native_engine(cfg)], [3], 3.0, grace=3.0)
    assert all(f == 0 for _, f in totals.values()), totals
    ok = {name: n for name, (n, _) in totals.items()}
    text = scrape(served)

    def count(method: str) -> int:
        return int(metric(text, "mcpfast_http_requests_total", method=method, status="200"))

    made = ok["tools/call:slow_compute"]
    assert made == count("tools/call") and made >= 3
    assert ok["tasks/get"] == count("tasks/get") and ok["tasks/cancel"] == count("tasks/cancel")
    assert ok["server/discover"] == count("server/discover") == 3
    completed, cancelled = ok.get("task:completed", 0), ok.get("task:cancelled", 0)
    assert completed > 0 and cancelled > 0, ok
    assert made - 3 <= completed + cancelled <= made  # a task per user may be in flight at the stop
    assert cancelled <= ok["tasks/cancel"] and ok["tasks/get"] >= 2 * (completed + cancelled)
    assert "task:not-a-task" not in ok and "task:failed" not in ok


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"protocol_version": "2025-11-25"}, "family"),  # tasks are 2026-07-28's
        ({"transport": "stdio", "command": ["true"], "protocol_version": "2026-07-28"}, "family"),
        ({"protocol_version": "2026-07-28", "tasks_cancel_share": 1.5}, "tasks_cancel_share"),
        ({"protocol_version": "2026-07-28", "tasks_cancel_share": float("nan")}, "tasks_cancel_share"),
    ],
)
def test_bad_tasks_values_name_their_field(kw: dict[str, Any], field: str) -> None:
    kw.setdefault("url", "http://127.0.0.1:1/mcp")
    with pytest.raises(ValueError, match=f"^engine config: {field}: "):
        core.EngineConfig(family="tasks", **kw)
