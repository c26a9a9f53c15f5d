"""A server that keeps at most three tasks at once (a finished one until its 2 s TTL ends), so a
tasks run of a few users is refused under load (tests/loadtests/test_tasks_check.py)."""

from __future__ import annotations

import asyncio

import mcpfast

app = mcpfast.Server("tasks-limited", max_tasks=3, task_ttl=2.0, task_poll_interval=0.1)


@app.tool(task=True)
async def wait(seconds: float = 0.3) -> str:
    """A task that waits ``seconds``."""
    await asyncio.sleep(seconds)
    return "done"
