"""Tasks shared through Redis: a task one server process runs is read, answered and counted by another.

Needs ``redis-server`` and the ``redis`` package (the ``redis`` extra); skipped, saying which is
missing, without them.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2 as httpx
import pytest

from mcpfast import Context, Server
from mcpfast.protocol.meta import TASKS_EXTENSION
from mcpfast.store.tasks import TaskRecord, open_task_store
from mcpfast.transports.http import asgi_app

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

M2026 = "2026-07-28"
CAPS = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    pytest.importorskip("redis", reason="the redis package is not installed (pip install .[redis])")
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def make_app(url: str, prefix: str, **options: Any) -> Server:
    app = Server("redis-tasks", task_store=open_task_store(url, prefix=prefix), task_poll_interval=0.05, **options)

    @app.tool(task=True)
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("OK?", CONFIRM, key="ok")
        return f"ok={answer['content']['ok']}"

    @app.tool(task=True)
    async def wait(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "waited"

    return app


def _post(rid: int, method: str, params: dict[str, Any], name: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    meta = {"io.modelcontextprotocol/protocolVersion": M2026, "io.modelcontextprotocol/clientCapabilities": CAPS}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": M2026, "Mcp-Method": method}  # fmt: skip
    if name is not None:
        headers["Mcp-Name"] = name
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}, headers


class Process:
    """One server 'process' (its own Server and transport) reached over ASGI."""

    def __init__(self, app: Server) -> None:
        self.app = app
        self.transport = asgi_app(app)
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(self.transport), base_url="http://127.0.0.1")
        self.ids = iter(range(1, 10_000))

    async def reply(self, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        body, headers = _post(next(self.ids), method, params, name)
        r = await self.client.post("/mcp", json=body, headers=headers)
        if r.headers["content-type"].startswith("text/event-stream"):
            import orjson

            data = [line[5:].strip() for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]
            return orjson.loads(data[-1])
        return r.json()

    async def get(self, task_id: str) -> dict[str, Any]:
        return (await self.reply("tasks/get", {"taskId": task_id}, task_id))["result"]

    async def until(self, task_id: str, status: str) -> dict[str, Any]:
        async with asyncio.timeout(10):
            while (got := await self.get(task_id))["status"] != status:
                await asyncio.sleep(0.02)
        return got

    async def aclose(self) -> None:
        await self.client.aclose()
        await self.transport.aclose()
        await self.app.tasks.aclose()
        await self.app.tasks.store.aclose()  # type: ignore[attr-defined]


@pytest.fixture
async def pair(redis_url: str, request: pytest.FixtureRequest) -> AsyncIterator[tuple[Process, Process]]:
    prefix = f"test:{request.node.name}:{time.time_ns()}:"
    a, b = Process(make_app(redis_url, prefix, max_tasks=3)), Process(make_app(redis_url, prefix, max_tasks=3))
    yield a, b
    await a.aclose()
    await b.aclose()


async def test_another_process_reads_and_answers_a_task(pair: tuple[Process, Process]) -> None:
    a, b = pair
    created = (await a.reply("tools/call", {"name": "confirm", "arguments": {}}, "confirm"))["result"]
    assert created["resultType"] == "task"
    tid = created["taskId"]
    waiting = await b.until(tid, "input_required")  # B has never seen this task: the store has
    assert list(waiting["inputRequests"]) == ["ok"]
    assert a.app.tasks.running() == 1 and b.app.tasks.running() == 0
    ack = await b.reply("tasks/update", {"taskId": tid, "inputResponses": {"ok": {"action": "accept", "content": {"ok": True}}}}, tid)
    assert ack["result"]["resultType"] == "complete"
    done = await b.until(tid, "completed")  # A's handler saw B's answer in the store and finished
    assert done["result"]["content"][0]["text"] == "ok=True"
    assert (await a.get(tid))["status"] == "completed"


async def test_limits_count_across_processes_and_cancel_elsewhere(pair: tuple[Process, Process]) -> None:
    a, b = pair
    made = [(await p.reply("tools/call", {"name": "wait", "arguments": {"seconds": 60}}, "wait"))["result"] for p in (a, b, a)]
    assert all(m["resultType"] == "task" for m in made)
    refused = await b.reply("tools/call", {"name": "wait", "arguments": {"seconds": 60}}, "wait")
    assert refused["error"]["code"] == -32600 and refused["error"]["data"] == {"limit": "max_tasks", "max": 3}
    # B cancels a task A runs: the status is cancelled everywhere at once.
    ack = await b.reply("tasks/cancel", {"taskId": made[0]["taskId"]}, made[0]["taskId"])
    assert ack["result"]["resultType"] == "complete"
    assert (await a.get(made[0]["taskId"]))["status"] == "cancelled"
    unknown = await b.reply("tasks/get", {"taskId": "nope"}, "nope")
    assert unknown["error"]["code"] == -32602


async def test_redis_store_expiry_and_live_counts(redis_url: str) -> None:
    store = open_task_store(redis_url, prefix=f"test:store:{time.time_ns()}:")
    try:
        now = time.time()
        rec = TaskRecord("r1", "o", "working", now, now, 0.3, 0.1)
        assert await store.create(rec, 10, 1) is None
        assert await store.create(TaskRecord("r2", "o", "working", now, now, 0.3, 0.1), 10, 1) == "owner"
        assert await store.load("r1") == rec and await store.count("o") == 1
        rec.status = "completed"
        await store.save(rec)
        assert await store.count("o") == 0 and await store.count() == 1
        await asyncio.sleep(0.4)
        assert await store.load("r1") is None  # Redis dropped it at its TTL
        assert await store.sweep(time.time()) == ["r1"] and await store.count() == 0
        await store.save(rec)  # a swept record is not brought back
        assert await store.load("r1") is None
    finally:
        await store.aclose()  # type: ignore[attr-defined]
