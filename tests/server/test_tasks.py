"""The tasks extension (io.modelcontextprotocol/tasks, SEP-2663): the rules over stdio and HTTP, the stores (memory, Redis)."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2 as httpx
import orjson
import pytest
from _support import free_port, start_process

from mcpfast import Context, Server
from mcpfast.protocol.errors import INTERNAL_ERROR, McpError
from mcpfast.protocol.meta import TASKS_EXTENSION
from mcpfast.server.tasks import Tasks, open_task_store
from mcpfast.store.tasks import MemoryTaskStore, TaskRecord
from mcpfast.transports.http import asgi_app
from mcpfast.transports.http_testing import serve_in_thread
from mcpfast.transports.stdio import serve_stdio

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

M2026 = "2026-07-28"
WITH_TASKS = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Probe:
    """What the handlers saw: runs started, runs stopped by a cancel."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.gate = asyncio.Event()


def make_app(probe: Probe, **options: Any) -> Server:
    app = Server("tasks-test", **options)

    @app.tool()
    def plain(text: str) -> str:
        return text

    @app.tool(task=True)
    async def work(label: str, seconds: float = 0.0) -> str:
        probe.started.append(label)
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            probe.cancelled.append(label)
            raise
        return f"done {label}"

    @app.tool(task=True)
    async def gated(label: str) -> str:
        probe.started.append(label)
        await probe.gate.wait()
        return f"opened {label}"

    @app.tool(task="required")
    async def only_task() -> str:
        return "ran as a task"

    @app.tool(task=True)
    async def broken() -> str:
        raise RuntimeError("the tool failed")

    @app.tool(task=True)
    async def protocol_error() -> str:
        raise McpError(INTERNAL_ERROR, "internal failure", {"why": "test"})

    @app.tool(task=True)
    async def two_questions(ctx: Context) -> str:
        answers = await ctx.ask({
            "a": ("elicitation/create", {"message": "A?", "requestedSchema": CONFIRM}),
            "b": ("elicitation/create", {"message": "B?", "requestedSchema": CONFIRM}),
        })  # fmt: skip
        return "answers " + ",".join(f"{k}={v['content']['ok']}" for k, v in sorted(answers.items()))

    @app.tool(task=True, defer_task=True)
    async def ask_then_task(ctx: Context) -> str:
        answer = await ctx.elicit("Go?", CONFIRM, key="go")
        task_id = await ctx.start_task()
        return f"go={answer['content']['ok']} task={task_id is not None}"

    return app


class Writer:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass

    def messages(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in bytes(self.data).splitlines()]


class Stdio:
    """A client speaking 2026-07-28 to ``app`` over an in-process stdio transport."""

    ids = itertools.count(1)

    def __init__(self, app: Server, caps: dict[str, Any] | None = None) -> None:
        self.app = app
        self.caps = WITH_TASKS if caps is None else caps
        self.reader = asyncio.StreamReader()
        self.writer = Writer()
        self.task = asyncio.get_running_loop().create_task(serve_stdio(app, self.reader, self.writer))  # type: ignore[arg-type]

    async def raw(self, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None) -> dict[str, Any]:
        rid = next(self.ids)
        meta = {"io.modelcontextprotocol/protocolVersion": M2026,
                "io.modelcontextprotocol/clientCapabilities": self.caps if caps is None else caps}  # fmt: skip
        self.reader.feed_data(orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}) + b"\n")
        async with asyncio.timeout(5):
            while True:
                for message in self.writer.messages():
                    if message.get("id") == rid and "method" not in message:
                        return message
                await asyncio.sleep(0.005)

    async def result(self, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        reply = await self.raw(method, params, **kw)
        assert "result" in reply, reply
        return reply["result"]

    async def error(self, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        reply = await self.raw(method, params, **kw)
        assert "error" in reply, reply
        return reply["error"]

    async def call(self, name: str, args: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        return await self.result("tools/call", {"name": name, "arguments": args or {}}, **kw)

    async def until(self, task_id: str, *statuses: str) -> dict[str, Any]:
        async with asyncio.timeout(10):
            while True:
                got = await self.result("tasks/get", {"taskId": task_id})
                if got["status"] in statuses:
                    return got
                await asyncio.sleep(0.01)

    async def close(self) -> None:
        self.reader.feed_eof()
        await asyncio.wait_for(self.task, 10)


@pytest.fixture
async def probe() -> Probe:
    return Probe()


@pytest.fixture
async def client(probe: Probe) -> AsyncIterator[Stdio]:
    app = make_app(probe)
    c = Stdio(app)
    yield c
    await c.close()
    await app.tasks.aclose()
    await asyncio.sleep(0)


# ----------------------------------------------------------- stdio: the rules


async def test_discover_advertises_the_extension_and_a_task_runs_to_completion(client: Stdio) -> None:
    caps = (await client.result("server/discover", {}))["capabilities"]
    assert caps["extensions"] == {TASKS_EXTENSION: {}} and "tasks" not in caps
    created = await client.call("work", {"label": "a", "seconds": 0.05})
    assert created["resultType"] == "task" and created["status"] == "working"
    assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= created.keys()
    assert not {"result", "error", "inputRequests", "requestState", "task", "ttl", "pollInterval"} & created.keys()
    assert isinstance(created["ttlMs"], int) and created["ttlMs"] > 0 and isinstance(created["pollIntervalMs"], int)
    first = await client.result("tasks/get", {"taskId": created["taskId"]})  # at once: the record exists
    assert first["taskId"] == created["taskId"] and first["resultType"] == "complete"
    done = await client.until(created["taskId"], "completed")
    assert done["result"]["content"] == [{"type": "text", "text": "done a"}]
    assert "error" not in done and "requestState" not in done
    # A plain tool is never a task.
    plain = await client.call("plain", {"text": "x"})
    assert plain["resultType"] == "complete" and "taskId" not in plain


async def test_cancel_stops_the_handler_and_is_idempotent(client: Stdio, probe: Probe) -> None:
    created = await client.call("work", {"label": "long", "seconds": 60})
    async with asyncio.timeout(5):
        while "long" not in probe.started:
            await asyncio.sleep(0.005)
    ack = await client.result("tasks/cancel", {"taskId": created["taskId"]})
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}  # no task envelope
    async with asyncio.timeout(5):
        while "long" not in probe.cancelled:  # the handler saw CancelledError: it really stopped
            await asyncio.sleep(0.005)
    got = await client.result("tasks/get", {"taskId": created["taskId"]})
    assert got["status"] == "cancelled" and "result" not in got
    assert client.app.tasks.running() == 0
    # A finished task: the same empty ack, and it stays as it was.
    quick = await client.call("work", {"label": "quick"})
    await client.until(quick["taskId"], "completed")
    again = await client.result("tasks/cancel", {"taskId": quick["taskId"]})
    assert again["resultType"] == "complete" and "status" not in again
    assert (await client.result("tasks/get", {"taskId": quick["taskId"]}))["status"] == "completed"
    assert (await client.result("tasks/cancel", {"taskId": created["taskId"]}))["resultType"] == "complete"


async def test_unknown_and_malformed_task_ids(client: Stdio) -> None:
    for method, extra in [("tasks/get", {}), ("tasks/cancel", {}), ("tasks/update", {"inputResponses": {}})]:
        err = await client.error(method, {"taskId": "no-such-task", **extra})
        assert err["code"] == -32602 and "unknown task" in err["message"]
        err = await client.error(method, {"taskId": 7, **extra})
        assert err["code"] == -32602
    created = await client.call("work", {"label": "u"})
    err = await client.error("tasks/update", {"taskId": created["taskId"], "inputResponses": None})
    assert err["code"] == -32602
    for removed in ("tasks/result", "tasks/list"):
        assert (await client.error(removed, {"taskId": created["taskId"]}))["code"] == -32601


async def test_without_the_extension(client: Stdio) -> None:
    bare = {"elicitation": {}}
    for method, extra in [("tasks/get", {}), ("tasks/cancel", {}), ("tasks/update", {"inputResponses": {}})]:
        err = await client.error(method, {"taskId": "x", **extra}, caps=bare)
        assert err["code"] == -32021
        assert err["data"] == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
    # An optional task tool answers plainly; a required one refuses before its handler runs.
    plain = await client.call("work", {"label": "sync"}, caps=bare)
    assert plain["resultType"] == "complete" and plain["content"][0]["text"] == "done sync"
    err = await client.error("tools/call", {"name": "only_task", "arguments": {}}, caps=bare)
    assert err["code"] == -32021 and TASKS_EXTENSION in err["data"]["requiredCapabilities"]["extensions"]
    # Declared on this request only: a task.
    assert (await client.call("only_task"))["resultType"] == "task"


async def test_wrong_era_has_no_tasks(probe: Probe) -> None:
    app = make_app(probe)
    reader, writer = asyncio.StreamReader(), Writer()
    served = asyncio.get_running_loop().create_task(serve_stdio(app, reader, writer))  # type: ignore[arg-type]
    init = {"protocolVersion": "2025-11-25", "capabilities": {"extensions": {TASKS_EXTENSION: {}}},
            "clientInfo": {"name": "c", "version": "1"}}  # fmt: skip
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": "x"}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "work", "arguments": {"label": "old"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "only_task", "arguments": {}}},
    ]
    for line in lines:
        reader.feed_data(orjson.dumps(line) + b"\n")
    reader.feed_eof()
    await asyncio.wait_for(served, 10)
    replies = {m["id"]: m for m in writer.messages() if "id" in m}
    assert replies[2]["error"]["code"] == -32601  # tasks/* do not exist before 2026-07-28
    assert replies[3]["result"]["content"][0]["text"] == "done old" and "resultType" not in replies[3]["result"]
    assert replies[4]["error"]["code"] == -32602 and "only as a task" in replies[4]["error"]["message"]


async def test_tool_errors_complete_and_protocol_errors_fail(client: Stdio) -> None:
    failed_tool = await client.call("broken")
    got = await client.until(failed_tool["taskId"], "completed", "failed")
    assert got["status"] == "completed" and got["result"]["isError"] is True and "error" not in got
    protocol = await client.call("protocol_error")
    got = await client.until(protocol["taskId"], "completed", "failed")
    assert got["status"] == "failed" and "result" not in got
    assert got["error"] == {"code": INTERNAL_ERROR, "message": "internal failure", "data": {"why": "test"}}


async def test_input_required_partial_updates_and_resume(client: Stdio) -> None:
    created = await client.call("two_questions")
    waiting = await client.until(created["taskId"], "input_required")
    assert sorted(waiting["inputRequests"]) == ["a", "b"]
    assert waiting["inputRequests"]["a"]["method"] == "elicitation/create"
    ack = await client.result("tasks/update", {"taskId": created["taskId"], "inputResponses": {
        "a": {"action": "accept", "content": {"ok": True}}, "never-asked": {"action": "accept"}}})  # fmt: skip
    assert ack["resultType"] == "complete" and not {"taskId", "status", "inputRequests"} & ack.keys()
    still = await client.result("tasks/get", {"taskId": created["taskId"]})
    assert still["status"] == "input_required" and list(still["inputRequests"]) == ["b"]
    # An answer that is no ElicitResult is refused and recorded nowhere.
    err = await client.error("tasks/update", {"taskId": created["taskId"], "inputResponses": {"b": {"action": "maybe"}}})
    assert err["code"] == -32602 and "inputResponses['b']" in err["message"]
    assert list((await client.result("tasks/get", {"taskId": created["taskId"]}))["inputRequests"]) == ["b"]
    # An answer to a key already answered is ignored (the first one stands).
    await client.result("tasks/update", {"taskId": created["taskId"], "inputResponses": {
        "a": {"action": "accept", "content": {"ok": False}}, "b": {"action": "accept", "content": {"ok": False}}}})  # fmt: skip
    done = await client.until(created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "answers a=True,b=False"
    # An update to a finished task is acknowledged and changes nothing.
    await client.result("tasks/update", {"taskId": created["taskId"], "inputResponses": {"b": {}}})
    assert (await client.result("tasks/get", {"taskId": created["taskId"]}))["status"] == "completed"


async def test_cancel_while_waiting_for_input(client: Stdio) -> None:
    created = await client.call("two_questions")
    await client.until(created["taskId"], "input_required")
    await client.result("tasks/cancel", {"taskId": created["taskId"]})
    got = await client.result("tasks/get", {"taskId": created["taskId"]})
    assert got["status"] == "cancelled" and "inputRequests" not in got
    async with asyncio.timeout(5):
        while client.app.tasks.running():
            await asyncio.sleep(0.005)


async def test_deferred_task_asks_in_the_request_first(client: Stdio) -> None:
    first = await client.call("ask_then_task")
    assert first["resultType"] == "input_required" and "taskId" not in first and list(first["inputRequests"]) == ["go"]
    second = await client.result("tools/call", {"name": "ask_then_task", "arguments": {},
                                                "inputResponses": {"go": {"action": "accept", "content": {"ok": True}}},
                                                "requestState": first["requestState"]})  # fmt: skip
    assert second["resultType"] == "task" and "requestState" not in second
    done = await client.until(second["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "go=True task=True"
    # Without the extension the same handler runs through as a plain request.
    bare = {"elicitation": {}}
    plain = await client.result("tools/call", {"name": "ask_then_task", "arguments": {},
                                               "inputResponses": {"go": {"action": "accept", "content": {"ok": False}}}},
                                caps=bare)  # fmt: skip
    assert plain["resultType"] == "complete" and plain["content"][0]["text"] == "go=False task=False"


async def test_limits_per_session_and_per_server(probe: Probe) -> None:
    app = make_app(probe, max_tasks=4, max_tasks_per_session=2)
    one, two = Stdio(app), Stdio(app)
    try:
        made = [await one.call("gated", {"label": f"s{i}"}) for i in range(2)]
        err = await one.error("tools/call", {"name": "gated", "arguments": {"label": "s2"}})
        assert err["code"] == -32600 and "max_tasks_per_session" in err["message"]
        assert err["data"] == {"limit": "max_tasks_per_session", "max": 2}
        assert (await one.call("plain", {"text": "still served"}))["content"][0]["text"] == "still served"
        await two.call("gated", {"label": "t0"})  # another session has its own count
        await two.call("gated", {"label": "t1"})
        err = await two.error("tools/call", {"name": "gated", "arguments": {"label": "t2"}})
        assert err["code"] == -32600 and err["data"] == {"limit": "max_tasks", "max": 4}
        # The refused calls never ran; the others are intact, and another session cannot see them.
        assert sorted(probe.started) == ["s0", "s1", "t0", "t1"]
        assert (await two.error("tasks/get", {"taskId": made[0]["taskId"]}))["code"] == -32602
        assert (await one.result("tasks/get", {"taskId": made[0]["taskId"]}))["status"] == "working"
        probe.gate.set()
        for task in made:
            await one.until(task["taskId"], "completed")
        # Finished tasks are kept (the server bound) until their TTL; the store test shows they
        # stop counting for their session.
        assert await app.tasks.store.count() == 4
        err = await one.error("tools/call", {"name": "gated", "arguments": {"label": "s3"}})
        assert err["data"] == {"limit": "max_tasks", "max": 4}
    finally:
        await one.close()
        await two.close()
        await app.tasks.aclose()


async def test_ttl_drops_finished_tasks_and_stops_overdue_ones(probe: Probe) -> None:
    app = make_app(probe, task_ttl=0.3)
    c = Stdio(app)
    try:
        finished = await c.call("work", {"label": "f"})
        overdue = await c.call("work", {"label": "o", "seconds": 60})
        await c.until(finished["taskId"], "completed")
        async with asyncio.timeout(10):
            while True:  # the sweep runs at most once a second, on task requests
                reply = await c.raw("tasks/get", {"taskId": finished["taskId"]})
                if "error" in reply:
                    break
                await asyncio.sleep(0.05)
        assert reply["error"]["code"] == -32602
        assert (await c.error("tasks/get", {"taskId": overdue["taskId"]}))["code"] == -32602
        assert "o" in probe.cancelled and app.tasks.running() == 0
        assert await app.tasks.store.count() == 0
    finally:
        await c.close()
        await app.tasks.aclose()


def test_bad_registrations() -> None:
    app = Server("bad")
    with pytest.raises(ValueError, match="task must be"):
        app.tool(task="sometimes")
    with pytest.raises(ValueError, match="defer_task"):
        app.tool(defer_task=True)
    with pytest.raises(ValueError, match="needs a Context parameter"):

        @app.tool(task=True, defer_task=True)
        async def no_context() -> str:
            return "never a task"

    with pytest.raises(ValueError):
        Tasks(ttl=0)
    with pytest.raises(ValueError):
        Server("bad", max_tasks_per_session=0)


# ------------------------------------------------------------------ over HTTP


def _headers(method: str, name: str | None = None) -> dict[str, str]:
    h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
         "MCP-Protocol-Version": M2026, "Mcp-Method": method}  # fmt: skip
    if name is not None:
        h["Mcp-Name"] = name
    return h


def _body(rid: int, method: str, params: dict[str, Any], caps: dict[str, Any] = WITH_TASKS) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": M2026, "io.modelcontextprotocol/clientCapabilities": caps}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}


def _json(r: httpx.Response) -> dict[str, Any]:
    if r.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:].strip() for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return orjson.loads(data[-1])
    return r.json()


@pytest.mark.parametrize("runner", ["asgi", "native"])
async def test_tasks_over_http_across_posts(runner: str, probe: Probe) -> None:
    app = make_app(probe)
    transport = asgi_app(app)

    async def run(c: httpx.AsyncClient) -> None:
        r = await c.post("/mcp", json=_body(1, "tools/call", {"name": "work", "arguments": {"label": "h", "seconds": 60}}),
                         headers=_headers("tools/call", "work"))  # fmt: skip
        assert r.status_code == 200, r.text
        created = _json(r)["result"]
        assert created["resultType"] == "task"
        tid = created["taskId"]
        r = await c.post("/mcp", json=_body(2, "tasks/get", {"taskId": tid}), headers=_headers("tasks/get", tid))
        assert r.status_code == 200 and _json(r)["result"]["status"] == "working"  # another POST, the same task
        r = await c.post("/mcp", json=_body(3, "tasks/get", {"taskId": tid}), headers=_headers("tasks/get", "other"))
        assert (r.status_code, r.json()["error"]["code"]) == (400, -32020)
        r = await c.post("/mcp", json=_body(4, "tasks/get", {"taskId": tid}), headers=_headers("tasks/get"))
        assert (r.status_code, r.json()["error"]["code"]) == (400, -32020)  # Mcp-Name is required
        r = await c.post("/mcp", json=_body(5, "tasks/get", {"taskId": tid}, {}), headers=_headers("tasks/get", tid))
        assert (r.status_code, _json(r)["error"]["code"]) == (400, -32021)
        r = await c.post("/mcp", json=_body(6, "tasks/get", {"taskId": "nope"}), headers=_headers("tasks/get", "nope"))
        assert (r.status_code, _json(r)["error"]["code"]) == (400, -32602)
        r = await c.post("/mcp", json=_body(7, "tasks/result", {"taskId": tid}), headers=_headers("tasks/result"))
        assert (r.status_code, r.json()["error"]["code"]) == (404, -32601)
        r = await c.post("/mcp", json=_body(8, "tasks/cancel", {"taskId": tid}), headers=_headers("tasks/cancel", tid))
        assert r.status_code == 200 and _json(r)["result"]["resultType"] == "complete"
        async with asyncio.timeout(5):
            while "h" not in probe.cancelled:
                await asyncio.sleep(0.005)
        r = await c.post("/mcp", json=_body(9, "tasks/get", {"taskId": tid}), headers=_headers("tasks/get", tid))
        assert _json(r)["result"]["status"] == "cancelled"

    try:
        if runner == "asgi":
            async with httpx.AsyncClient(transport=httpx.ASGITransport(transport), base_url="http://127.0.0.1") as c:
                await run(c)
        else:
            with serve_in_thread(transport) as base:
                async with httpx.AsyncClient(base_url=base) as c:
                    await run(c)
    finally:
        await transport.aclose()
        await app.tasks.aclose()


# ------------------------------------------------------------------ the store


async def test_memory_store_counts_sweeps_and_copies() -> None:
    store = MemoryTaskStore()
    rec = TaskRecord("t1", "o1", "working", 100.0, 100.0, 10.0, 0.5)
    assert await store.create(rec, max_total=2, max_per_owner=1) is None
    assert await store.create(TaskRecord("t2", "o1", "working", 100.0, 100.0, 10.0, 0.5), 2, 1) == "owner"
    assert await store.create(TaskRecord("t3", "o2", "working", 100.0, 100.0, 10.0, 0.5), 2, 1) is None
    assert await store.create(TaskRecord("t4", "o3", "working", 100.0, 100.0, 10.0, 0.5), 2, 1) == "total"
    loaded = await store.load("t1")
    assert loaded == rec and loaded is not rec
    loaded.answers["k"] = {"action": "accept"}
    assert (await store.load("t1")).answers == {}  # a copy: nothing changes until save
    await store.save(loaded)
    assert (await store.load("t1")).answers == {"k": {"action": "accept"}}
    assert await store.count() == 2 and await store.count("o1") == 1
    loaded.status = "completed"
    await store.save(loaded)  # finished: no longer counted for its owner, still kept
    assert await store.count("o1") == 0 and await store.count() == 2
    assert await store.create(TaskRecord("t5", "o1", "working", 100.0, 100.0, 10.0, 0.5), 3, 1) is None
    assert await store.count() == 3
    assert await store.sweep(109.0) == []
    assert sorted(await store.sweep(110.0)) == ["t1", "t3", "t5"]
    assert await store.load("t1") is None and await store.count() == 0
    await store.save(loaded)  # a swept record is not brought back
    assert await store.load("t1") is None
    assert TaskRecord.decode("t1", rec.encode()) == rec and await store.count("o1") == 0


# ------------------------------------------------ engine and wire facts (no I/O)


def test_engine_admits_tasks_methods_only_in_2026() -> None:
    from mcpfast.sansio import RequestReceived, ServerSession

    meta = {"io.modelcontextprotocol/protocolVersion": M2026, "io.modelcontextprotocol/clientCapabilities": {}}
    session = ServerSession({"name": "t", "version": "1"}, {"tools": {}})
    for rid, method in enumerate(["tasks/get", "tasks/update", "tasks/cancel"], 1):
        (event,) = session.receive(orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": {"taskId": "x", "_meta": meta}}))
        assert isinstance(event, RequestReceived) and event.request.method == method and event.request.stateless
    for rid, method in [(7, "tasks/result"), (8, "tasks/list")]:
        assert session.receive(orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": {"_meta": meta}})) == []
        assert orjson.loads(session.data_to_send()[-1])["error"]["code"] == -32601
    old = ServerSession({"name": "t", "version": "1"}, {"tools": {}})
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    old.receive(orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
    old.receive(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    old.data_to_send()
    assert old.receive(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "x"}})) == []
    assert orjson.loads(old.data_to_send()[-1])["error"]["code"] == -32601


def test_mcp_name_of_tasks_methods_is_the_task_id() -> None:
    from mcpfast.protocol import http as wire

    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        assert wire.name_of(method, {"taskId": "abc"}) == "abc"
        base = {b"mcp-protocol-version": M2026.encode(), b"mcp-method": method.encode()}
        param = {"taskId": "abc"}.get
        assert wire.check_request_headers({**base, b"mcp-name": b"abc"}, method, param, M2026) is None
        assert "does not match" in (wire.check_request_headers({**base, b"mcp-name": b"xyz"}, method, param, M2026) or "")
        assert "missing Mcp-Name" in (wire.check_request_headers(base, method, param, M2026) or "")
    assert wire.stateless_request_headers(M2026, "tasks/get", "abc")["Mcp-Name"] == "abc"


# ------------------------------------------- shared through Redis (one server answers another's tasks)
# Needs redis-server and the redis package (the redis extra); skipped, saying which is missing, without them.


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    pytest.importorskip("redis", reason="the redis package is not installed (pip install .[redis])")
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = start_process([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], port, "redis-server")
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def make_shared_app(url: str, prefix: str, **options: Any) -> Server:
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


class Process:
    """One server 'process' (its own Server and transport) reached over ASGI."""

    def __init__(self, app: Server) -> None:
        self.app = app
        self.transport = asgi_app(app)
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(self.transport), base_url="http://127.0.0.1")
        self.ids = iter(range(1, 10_000))

    async def reply(self, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        r = await self.client.post("/mcp", json=_body(next(self.ids), method, params), headers=_headers(method, name))
        return _json(r)

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
    a, b = Process(make_shared_app(redis_url, prefix, max_tasks=3)), Process(make_shared_app(redis_url, prefix, max_tasks=3))
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
