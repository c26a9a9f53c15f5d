"""The decorator API, driven through a Connection (engine + tasks) without a transport."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Annotated, Any, Literal, TypedDict

import orjson
import pytest
from _support import until

import mcpfast
from mcpfast import Context, McpError, Server
from mcpfast.protocol import TranscriptValidator
from mcpfast.server import ToolResult, text

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Client:
    """Feeds a Connection and collects what it writes, checking each message's schema."""

    def __init__(self, app: Server) -> None:
        self.conn = app.connect()
        self.checker = TranscriptValidator()
        self.out: list[Any] = []
        self.next_id = 100

    def send(self, message: dict[str, Any]) -> None:
        line = orjson.dumps(message)
        self.checker.client(line)
        self.conn.feed(line)
        self._collect()

    def _collect(self) -> None:
        for data in self.conn.session.data_to_send():
            msg = orjson.loads(data)
            self.checker.server(msg)
            self.out.append(msg)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        rid = self.next_id = self.next_id + 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        async with asyncio.timeout(5):
            while True:
                self._collect()
                for msg in self.out:
                    if msg.get("id") == rid and "method" not in msg:
                        return msg
                await asyncio.sleep(0.001)

    async def init(self, version: str = "2025-11-25", caps: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = await self.request(
            "initialize", {"protocolVersion": version, "capabilities": caps or {}, "clientInfo": {"name": "t", "version": "0"}}
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    async def call(self, name: str, arguments: Any = None, **params: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, **params}
        if arguments is not None:
            body["arguments"] = arguments
        return await self.request("tools/call", body)


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    w: float
    h: float = 1.0


def build() -> Server:
    app = Server("unit", version="9.9", title="Unit", instructions="be nice", page_size=3)

    @app.tool(title="Typed", annotations={"readOnlyHint": True})
    def typed(
        name: Annotated[str, "who"],
        count: int = 2,
        mode: Literal["a", "b"] = "a",
        tags: list[str] | None = None,
        point: Point | None = None,
    ) -> Point:
        """A typed tool."""
        return {"x": count, "y": len(name)}

    @app.tool()
    async def boxed(w: float) -> Box:
        return Box(w)

    @app.tool()
    def number() -> int:
        return 42

    @app.tool()
    def fails() -> str:
        raise ValueError("bad thing")

    @app.tool()
    def protocol_error() -> str:
        raise McpError(-32099, "custom")

    @app.tool()
    def lies() -> Point:
        return {"x": "not an int"}  # type: ignore[typeddict-item]

    @app.tool()
    def full() -> ToolResult:
        return ToolResult([text("a"), text("b")], structured={"k": 1}, is_error=True)

    @app.tool(input_schema={"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False})
    def raw(q: str = "") -> str:
        return q

    @app.tool()
    async def progress(ctx: Context) -> str:
        assert ctx.report_progress(1, 2)
        with pytest.raises(ValueError):
            ctx.report_progress(1, 2)
        ctx.info("half way")
        ctx.debug("details")
        return "ok"

    @app.tool()
    async def interview(ctx: Context) -> dict[str, Any]:
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        roots = await ctx.list_roots()
        return {"name": answer["content"]["name"], "roots": len(roots)}

    @app.resource("mem://text", mime_type="text/plain", title="Text")
    def mem_text() -> str:
        """Some text."""
        return "hello"

    @app.resource("mem://bin")
    def mem_bin() -> bytes:
        return b"\x00\x01"

    @app.resource("mem://files/{+path}")
    def mem_file(path: str) -> str:
        return f"file {path}"

    @app.resource("mem://users/{id}/card")
    async def user(id: str) -> dict[str, Any]:
        return {"mimeType": "application/json", "text": f'{{"id": "{id}"}}'}

    @app.prompt(title="Greet", arguments={"who": "whom to greet"})
    def greet(who: str, tone: str = "warm") -> str:
        """Greets."""
        return f"Say hi to {who}, {tone}"

    @app.prompt()
    def convo() -> list[Any]:
        return ["first", {"role": "assistant", "content": text("second")}, text("third")]

    @app.completion()
    async def complete(ref: dict[str, Any], argument: dict[str, Any], context: dict[str, Any] | None) -> list[str]:
        return [argument["value"] + str(i) for i in range(120)]

    return app


def test_lazy_export() -> None:
    assert mcpfast.Server is Server and "__version__" in mcpfast.__all__
    with pytest.raises(AttributeError):
        mcpfast.nope  # noqa: B018


async def test_initialize_declares_what_is_registered() -> None:
    c = Client(build())
    result = (await c.init())["result"]
    assert set(result["capabilities"]) == {"tools", "resources", "prompts", "completions", "logging"}
    assert result["capabilities"]["resources"]["subscribe"] is True
    assert result["serverInfo"] == {"name": "unit", "version": "9.9", "title": "Unit"}
    assert result["instructions"] == "be nice"


def test_only_what_is_registered_is_declared() -> None:
    app = Server("bare", logging=False)
    assert app.capabilities() == {}

    @app.tool()
    def t() -> str:
        return ""

    assert app.capabilities() == {"tools": {"listChanged": True}}


async def test_tool_schemas_from_type_hints() -> None:
    c = Client(build())
    await c.init()
    tools = (await c.request("tools/list"))["result"]
    typed = tools["tools"][0]
    assert typed["title"] == "Typed" and typed["description"] == "A typed tool."
    assert typed["annotations"] == {"readOnlyHint": True}
    schema = typed["inputSchema"]
    assert schema["required"] == ["name"]
    assert schema["properties"]["name"] == {"type": "string", "description": "who"}
    assert schema["properties"]["count"] == {"type": "integer", "default": 2}
    assert schema["properties"]["mode"] == {"enum": ["a", "b"], "default": "a"}
    assert schema["properties"]["tags"] == {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None}
    assert schema["properties"]["point"]["anyOf"][0]["required"] == ["x", "y"]
    assert typed["outputSchema"]["properties"] == {"x": {"type": "integer"}, "y": {"type": "integer"}}
    assert tools["nextCursor"]


async def test_list_pagination_and_bad_cursor() -> None:
    c = Client(build())
    await c.init()
    names, cursor = [], None
    while True:
        result = (await c.request("tools/list", {"cursor": cursor} if cursor else None))["result"]
        names += [t["name"] for t in result["tools"]]
        cursor = result.get("nextCursor")
        if not cursor:
            break
    assert names == ["typed", "boxed", "number", "fails", "protocol_error", "lies", "full", "raw", "progress", "interview"]
    assert (await c.request("tools/list", {"cursor": "nope"}))["error"]["code"] == -32602


async def test_later_fields_are_dropped_for_older_versions() -> None:
    c = Client(build())
    await c.init("2025-03-26")
    typed = (await c.request("tools/list"))["result"]["tools"][0]
    assert "title" not in typed and "outputSchema" not in typed and "annotations" in typed
    c = Client(build())
    await c.init("2024-11-05")
    typed = (await c.request("tools/list"))["result"]["tools"][0]
    assert set(typed) == {"name", "description", "inputSchema"}
    prompt = (await c.request("prompts/list"))["result"]["prompts"][0]
    assert "title" not in prompt


async def test_structured_results() -> None:
    c = Client(build())
    await c.init()
    typed = (await c.call("typed", {"name": "abc", "count": 5}))["result"]
    assert typed == {"content": [{"type": "text", "text": '{"x":5,"y":3}'}], "structuredContent": {"x": 5, "y": 3}}
    assert (await c.call("boxed", {"w": 2}))["result"]["structuredContent"] == {"w": 2, "h": 1.0}
    assert (await c.call("number"))["result"]["structuredContent"] == {"result": 42}
    assert (await c.call("lies"))["error"]["code"] == -32603  # output that breaks the declared schema
    full = (await c.call("full"))["result"]
    assert full == {"content": [text("a"), text("b")], "structuredContent": {"k": 1}, "isError": True}


async def test_structured_content_is_not_sent_before_2025_06_18() -> None:
    c = Client(build())
    await c.init("2025-03-26")
    result = (await c.call("number"))["result"]
    assert result == {"content": [{"type": "text", "text": '{"result":42}'}]}


async def test_tool_errors() -> None:
    c = Client(build())
    await c.init()
    fails = (await c.call("fails"))["result"]
    assert fails == {"content": [{"type": "text", "text": "bad thing"}], "isError": True}
    assert (await c.call("protocol_error"))["error"] == {"code": -32099, "message": "custom"}
    assert (await c.call("nope"))["error"]["code"] == -32602
    assert (await c.request("tools/call", {"arguments": {}}))["error"]["code"] == -32602
    bad = (await c.call("typed", {"name": 5}))["result"]
    assert bad["isError"] and "name" in bad["content"][0]["text"]
    assert (await c.call("typed", [1]))["result"]["isError"]
    assert (await c.call("raw", {"q": "x", "extra": 1}))["result"]["isError"]  # the explicit schema is enforced
    assert (await c.call("raw", {"q": "x"}))["result"]["content"][0]["text"] == "x"


async def test_context_progress_and_logs() -> None:
    c = Client(build())
    await c.init()
    await c.request("logging/setLevel", {"level": "info"})
    reply = await c.call("progress", {}, _meta={"progressToken": "tok"})
    assert reply["result"]["content"][0]["text"] == "ok"
    notes = [m for m in c.out if m.get("method")]
    assert [n["method"] for n in notes] == ["notifications/progress", "notifications/message"]
    assert notes[1]["params"] == {"level": "info", "data": "half way"}


async def test_resources() -> None:
    c = Client(build())
    await c.init()
    listed = (await c.request("resources/list"))["result"]["resources"]
    assert listed[0] == {"uri": "mem://text", "name": "mem_text", "title": "Text", "description": "Some text.", "mimeType": "text/plain"}
    templates = (await c.request("resources/templates/list"))["result"]["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["mem://files/{+path}", "mem://users/{id}/card"]
    read = (await c.request("resources/read", {"uri": "mem://bin"}))["result"]["contents"]
    assert read == [{"uri": "mem://bin", "mimeType": "application/octet-stream", "blob": "AAE="}]
    read = (await c.request("resources/read", {"uri": "mem://files/a/b.txt"}))["result"]["contents"]
    assert read[0]["text"] == "file a/b.txt"
    read = (await c.request("resources/read", {"uri": "mem://users/7/card"}))["result"]["contents"]
    assert read == [{"uri": "mem://users/7/card", "mimeType": "application/json", "text": '{"id": "7"}'}]
    missing = (await c.request("resources/read", {"uri": "mem://users/7"}))["error"]
    assert missing["code"] == -32002 and missing["data"] == {"uri": "mem://users/7"}
    assert (await c.request("resources/read", {"uri": 5}))["error"]["code"] == -32602


async def test_resource_not_found_is_invalid_params_in_2026() -> None:
    c = Client(build())
    reply = await c.request("resources/read", {"uri": "mem://none", "_meta": MODERN_META})
    assert reply["error"]["code"] == -32602


async def test_prompts() -> None:
    c = Client(build())
    await c.init()
    prompts = (await c.request("prompts/list"))["result"]["prompts"]
    assert prompts[0]["arguments"] == [
        {"name": "who", "description": "whom to greet", "required": True},
        {"name": "tone", "required": False},
    ]
    got = (await c.request("prompts/get", {"name": "greet", "arguments": {"who": "Ada"}}))["result"]
    assert got == {"messages": [{"role": "user", "content": text("Say hi to Ada, warm")}], "description": "Greets."}
    convo = (await c.request("prompts/get", {"name": "convo"}))["result"]["messages"]
    assert [m["role"] for m in convo] == ["user", "assistant", "user"]
    assert (await c.request("prompts/get", {"name": "greet"}))["error"]["code"] == -32602
    assert (await c.request("prompts/get", {"name": "greet", "arguments": {"who": 1}}))["error"]["code"] == -32602
    assert (await c.request("prompts/get", {"name": "nope"}))["error"]["code"] == -32602


async def test_completion() -> None:
    c = Client(build())
    await c.init()
    ref = {"type": "ref/prompt", "name": "greet"}
    done = (await c.request("completion/complete", {"ref": ref, "argument": {"name": "who", "value": "A"}}))["result"]
    assert len(done["completion"]["values"]) == 100 and done["completion"]["hasMore"] is True
    bad_ref = {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "x", "value": ""}}
    assert (await c.request("completion/complete", bad_ref))["error"]["code"] == -32602
    template_ref = {"ref": {"type": "ref/resource", "uri": "mem://users/{id}/card"}, "argument": {"name": "id", "value": "1"}}
    assert "completion" in (await c.request("completion/complete", template_ref))["result"]
    assert (await c.request("completion/complete", {"ref": ref}))["error"]["code"] == -32602


async def test_stateless_tool_call_and_logs_need_a_level() -> None:
    c = Client(build())
    reply = await c.call("progress", {}, _meta={**MODERN_META, "progressToken": 1})
    assert reply["result"]["resultType"] == "complete"
    assert [m["method"] for m in c.out if m.get("method")] == ["notifications/progress"]  # no level: no logs
    listed = (await c.request("tools/list", {"_meta": MODERN_META}))["result"]
    assert listed["ttlMs"] == 0 and listed["cacheScope"] == "public"


def test_registration_errors() -> None:
    app = Server("x")
    with pytest.raises(ValueError, match="invalid tool name"):
        app.tool("has space")(lambda: "")
    app.tool("dup")(lambda: "")
    with pytest.raises(ValueError, match="already registered"):
        app.tool("dup")(lambda: "")
    with pytest.raises(TypeError):

        @app.tool()
        def star(*args: int) -> str:
            return ""

    with pytest.raises(ValueError, match="not variables"):

        @app.resource("x://{a}")
        def res(b: str) -> str:
            return b

    with pytest.raises(ValueError):
        app.resource("x://{/a}")(lambda a: a)


async def test_mrtr_input_required_rounds() -> None:
    c = Client(build())
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "roots": {}}}
    first = (await c.call("interview", {}, _meta=meta))["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {
        "elicitation-0": {
            "method": "elicitation/create",
            "params": {"message": "Name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
        }
    }
    answer = {"action": "accept", "content": {"name": "Ada"}}
    second = (await c.call("interview", {}, _meta=meta, inputResponses={"elicitation-0": answer}, requestState=first["requestState"]))[
        "result"
    ]
    assert second["resultType"] == "input_required" and list(second["inputRequests"]) == ["roots-1"]
    roots = {"roots": [{"uri": "file:///a"}]}
    done = (await c.call("interview", {}, _meta=meta, inputResponses={"roots-1": roots}, requestState=second["requestState"]))["result"]
    assert done["resultType"] == "complete"
    assert orjson.loads(done["content"][0]["text"]) == {"name": "Ada", "roots": 1}


async def test_mrtr_rejects_tampered_or_foreign_state_and_missing_capabilities() -> None:
    app = build()
    c = Client(app)
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "roots": {}}}
    first = (await c.call("interview", {}, _meta=meta))["result"]
    state = first["requestState"]
    forged = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
    assert (await c.call("interview", {}, _meta=meta, requestState=forged))["error"]["code"] == -32602
    foreign = app.sealer.seal("tools/call:other", {})
    assert (await c.call("interview", {}, _meta=meta, requestState=foreign))["error"]["code"] == -32602
    missing = (await c.call("interview", {}, _meta=MODERN_META))["error"]
    assert missing["code"] == -32021 and missing["data"] == {"requiredCapabilities": {"elicitation": {}}}


def _asking_app() -> Server:
    app = Server("asking")

    @app.tool()
    async def named(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="user_name")
        return f"{answer['content']['name']} resumed={ctx.resumed}"

    @app.tool()
    async def several(ctx: Context) -> str:
        answers = await ctx.ask({
            "who": ("elicitation/create", {"message": "Who?", "requestedSchema": {"type": "object", "properties": {}}}),
            "where": ("roots/list", {}),
        })  # fmt: skip
        return f"{answers['who']['action']} {len(answers['where']['roots'])}"

    return app


async def test_mrtr_named_keys_several_at_once_and_resumed() -> None:
    c = Client(_asking_app())
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "roots": {}}}
    first = (await c.call("named", {}, _meta=meta))["result"]
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["user_name"]
    name = {"action": "accept", "content": {"name": "Ada"}}
    done = await c.call("named", {}, _meta=meta, inputResponses={"user_name": name}, requestState=first["requestState"])
    assert done["result"]["content"][0]["text"] == "Ada resumed=True"
    bare = (await c.call("named", {}, _meta=meta, inputResponses={"user_name": name}))["result"]  # no state sent
    assert bare["content"][0]["text"] == "Ada resumed=False"
    # Wrong keys are asked for again (not an error); extra keys are ignored.
    again = (await c.call("named", {}, _meta=meta, inputResponses={"other": name}))["result"]
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["user_name"]
    extra = (await c.call("named", {}, _meta=meta, inputResponses={"user_name": name, "junk": 1}))["result"]
    assert extra["resultType"] == "complete"
    # ask(): every missing answer in one round; a partial retry is asked for what is still missing.
    both = (await c.call("several", {}, _meta=meta))["result"]
    assert both["inputRequests"] == {
        "who": {"method": "elicitation/create", "params": {"message": "Who?", "requestedSchema": {"type": "object", "properties": {}}}},
        "where": {"method": "roots/list", "params": {}},
    }
    half = (await c.call("several", {}, _meta=meta, inputResponses={"who": name}, requestState=both["requestState"]))["result"]
    assert list(half["inputRequests"]) == ["where"]
    roots = {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]}
    full = await c.call("several", {}, _meta=meta, inputResponses={"where": roots}, requestState=half["requestState"])
    assert full["result"]["content"][0]["text"] == "accept 2"
    no_roots = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    refused = (await c.call("several", {}, _meta=no_roots))["error"]
    assert refused["code"] == -32021 and refused["data"] == {"requiredCapabilities": {"roots": {}}}


async def test_mrtr_answers_are_checked_against_the_result_schema() -> None:
    c = Client(_asking_app())
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "roots": {}}}
    wrong = (await c.call("named", {}, _meta=meta, inputResponses={"user_name": 12345}))["error"]
    assert wrong["code"] == -32602 and "user_name" in wrong["message"] and "elicitation/create" in wrong["message"]
    not_roots = (await c.call("several", {}, _meta=meta, inputResponses={
        "who": {"action": "decline"}, "where": {"roots": "nope"}}))["error"]  # fmt: skip
    assert not_roots["code"] == -32602 and "where" in not_roots["message"]
    null = (await c.call("named", {}, _meta=meta, inputResponses=None))["error"]
    assert null["code"] == -32602 and "inputResponses" in null["message"]


async def test_remove_tool_and_prompt() -> None:
    app = Server("removal")
    app.tool("gone")(lambda: "x")
    app.prompt("p")(lambda: "hello")
    c = Client(app)
    await c.init()
    assert [t["name"] for t in (await c.request("tools/list"))["result"]["tools"]] == ["gone"]
    assert app.remove_tool("gone") is True and app.remove_tool("gone") is False
    assert (await c.request("tools/list"))["result"]["tools"] == []
    assert (await c.call("gone", {}))["error"]["code"] == -32602
    assert app.remove_prompt("p") is True and app.remove_prompt("p") is False
    assert (await c.request("prompts/list"))["result"]["prompts"] == []


async def test_unanswered_client_request_times_out_and_is_cancelled() -> None:
    app = Server("timeouts", request_timeout=0.05)

    @app.tool()
    async def ask(ctx: Context) -> str:
        await ctx.sample("anyone there?")
        return "answered"

    c = Client(app)
    await c.init(caps={"sampling": {}})
    result = (await c.call("ask", {}))["result"]
    assert result["isError"] is True  # the TimeoutError is a tool failure the model can see
    sent = [m for m in c.out if m.get("method")]
    assert [m["method"] for m in sent] == ["sampling/createMessage", "notifications/cancelled"]
    assert sent[1]["params"]["requestId"] == sent[0]["id"]
    c.send(
        {"jsonrpc": "2.0", "id": sent[0]["id"], "result": {"role": "assistant", "content": {"type": "text", "text": "late"}, "model": "m"}}
    )
    assert c.conn.session.pending_requests() == []  # the late answer was dropped


async def test_client_error_reply_reaches_the_handler() -> None:
    app = Server("errors")

    @app.tool()
    async def ask(ctx: Context) -> str:
        try:
            await ctx.list_roots()
        except McpError as exc:
            return f"client said {exc.code}"
        return "no error"

    c = Client(app)
    await c.init(caps={"roots": {}})
    c.send({"jsonrpc": "2.0", "id": 200, "method": "tools/call", "params": {"name": "ask", "arguments": {}}})
    async with asyncio.timeout(5):
        while not any(m.get("method") == "roots/list" for m in c.out):
            await asyncio.sleep(0.001)
            c._collect()
    request = next(m for m in c.out if m.get("method") == "roots/list")
    c.send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no roots"}})
    async with asyncio.timeout(5):
        while not any(m.get("id") == 200 for m in c.out):
            await asyncio.sleep(0.001)
            c._collect()
    reply = next(m for m in c.out if m.get("id") == 200)
    assert reply["result"]["content"][0]["text"] == "client said -32601"


# ------------------------------------------------ how handlers run (inline, task, thread)


def test_plain_sync_tool_is_answered_inside_feed() -> None:
    app = Server("inline")

    @app.tool()
    def echo(text: str) -> str:
        return text

    conn = app.connect()
    conn.feed(
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
            }
        )
    )
    conn.feed(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    conn.session.data_to_send()
    # No event loop is running here: a plain sync tool needs none (no task, no thread).
    conn.feed(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"now"}}}')
    (reply,) = [orjson.loads(b) for b in conn.session.data_to_send()]
    assert reply == {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "now"}]}}
    assert conn.in_flight == 0


async def test_blocking_tool_runs_in_the_pool_and_does_not_stall_the_loop() -> None:
    import threading

    app = Server("pool")
    started = threading.Event()
    release = threading.Event()
    seen: dict[str, Any] = {}

    @app.tool(blocking=True)
    def crunch(seconds: float, ctx: Context) -> str:
        seen["thread"] = threading.current_thread().name
        started.set()
        release.wait(seconds)  # blocks its worker thread only (until the test saw the echo answered)
        assert ctx.report_progress(1, 1, "done")  # handed to the event loop's thread
        ctx.info("crunched")
        return "crunched"

    @app.tool()
    def echo(text: str) -> str:
        seen.setdefault("echo_thread", threading.current_thread().name)
        return text

    c = Client(app)
    await c.init()
    c.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "crunch", "arguments": {"seconds": 30}, "_meta": {"progressToken": "p"}},
        }
    )
    async with asyncio.timeout(15):
        while not started.is_set():
            await asyncio.sleep(0.001)
    assert c.conn.in_flight == 1
    fast = await c.call("echo", {"text": "meanwhile"})
    assert fast["result"]["content"][0]["text"] == "meanwhile"
    assert not any(m.get("id") == 1 for m in c.out)  # the blocking call is still running
    release.set()
    async with asyncio.timeout(15):
        while not any(m.get("id") == 1 for m in c.out):
            await asyncio.sleep(0.01)
            c._collect()
    reply = next(m for m in c.out if m.get("id") == 1)
    assert reply["result"]["content"][0]["text"] == "crunched"
    assert seen["thread"].startswith("mcpfast-blocking") and seen["echo_thread"] == threading.current_thread().name
    kinds = [m.get("method", "reply") for m in c.out if m.get("id") in (1, None)]
    assert kinds == ["notifications/progress", "notifications/message", "reply"]


async def test_async_handlers_that_do_not_wait_are_answered_inside_feed() -> None:
    app = Server("inline")

    @app.tool()
    async def shout(text: str) -> str:
        return text.upper()

    @app.tool()
    async def count(n: int, ctx: Context) -> str:
        for i in range(1, n + 1):
            ctx.report_progress(i, n)
        return f"counted {n}"

    @app.tool()
    async def broken() -> str:
        raise ValueError("no luck")

    @app.resource("inline://note")
    async def note() -> str:
        return "a note"

    @app.prompt()
    async def ask(topic: str) -> str:
        return f"tell me about {topic}"

    c = Client(app)
    await c.init()
    calls = [
        ("tools/call", {"name": "shout", "arguments": {"text": "hi"}}),
        ("tools/call", {"name": "count", "arguments": {"n": 2}, "_meta": {"progressToken": "t"}}),
        ("tools/call", {"name": "broken", "arguments": {}}),
        ("resources/read", {"uri": "inline://note"}),
        ("prompts/get", {"name": "ask", "arguments": {"topic": "tea"}}),
    ]
    for rid, (method, params) in enumerate(calls, 1):
        c.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})  # collects what feed left in the outbox
        assert c.conn.in_flight == 0
    replies = {m["id"]: m for m in c.out if "id" in m and m["id"] in range(1, 6)}
    assert replies[1]["result"]["content"] == [{"type": "text", "text": "HI"}]
    assert replies[2]["result"]["content"] == [{"type": "text", "text": "counted 2"}]
    assert replies[3]["result"]["isError"] is True and replies[3]["result"]["content"][0]["text"] == "no luck"
    assert replies[4]["result"]["contents"][0]["text"] == "a note"
    assert replies[5]["result"]["messages"][0]["content"]["text"] == "tell me about tea"
    progress = [m["params"]["progress"] for m in c.out if m.get("method") == "notifications/progress"]
    assert progress == [1, 2] and c.out.index(replies[2]) > max(
        i for i, m in enumerate(c.out) if m.get("method") == "notifications/progress"
    )


async def test_an_async_tool_that_waits_is_answered_once_it_finishes() -> None:
    app = Server("waits")
    release = asyncio.Event()

    @app.tool()
    async def later(text: str) -> str:
        await release.wait()
        return text

    c = Client(app)
    await c.init()
    c.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "later", "arguments": {"text": "done"}}})
    assert c.conn.in_flight == 1 and not any(m.get("id") == 1 for m in c.out)
    release.set()
    await c.request("ping")  # answered inline, after the waiting tool had a turn of the loop...
    assert await until(lambda: c.conn.in_flight == 0)  # ...which finished it
    c._collect()
    reply = next(m for m in c.out if m.get("id") == 1)
    assert reply["result"]["content"] == [{"type": "text", "text": "done"}] and c.conn.in_flight == 0


async def test_cancelled_blocking_tool_sends_no_reply() -> None:
    import threading

    app = Server("pool")
    started = threading.Event()
    release = threading.Event()
    returned = threading.Event()

    @app.tool(blocking=True)
    def wait() -> str:
        started.set()
        release.wait(15)
        returned.set()
        return "late"

    c = Client(app)
    await c.init()
    c.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "wait", "arguments": {}}})
    assert await until(started.is_set)  # the cancel reaches a call that is running in the pool
    c.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    release.set()
    await c.request("ping")
    assert await until(returned.is_set)  # the function returned its (late) value...
    assert await until(lambda: c.conn.in_flight == 0)  # ...and the loop has dealt with it
    await c.request("ping")  # anything the loop would have sent for id 1 is out before this answer
    c._collect()
    assert not any(m.get("id") == 1 for m in c.out) and c.conn.in_flight == 0


def test_blocking_is_for_sync_functions() -> None:
    app = Server("x")
    with pytest.raises(ValueError, match="blocking"):

        @app.tool(blocking=True)
        async def nope() -> str:
            return ""


async def test_blocking_resource_and_prompt() -> None:
    import threading

    app = Server("pool")

    @app.resource("mem://slow", blocking=True)
    def slow() -> str:
        return threading.current_thread().name

    @app.prompt(blocking=True)
    def slow_prompt() -> str:
        return threading.current_thread().name

    c = Client(app)
    await c.init()
    read = await c.request("resources/read", {"uri": "mem://slow"})
    assert read["result"]["contents"][0]["text"].startswith("mcpfast-blocking")
    got = await c.request("prompts/get", {"name": "slow_prompt"})
    assert got["result"]["messages"][0]["content"]["text"].startswith("mcpfast-blocking")


# -------------------------------------------------------------- roots/list_changed hook


async def test_roots_changed_hook_fetches_the_new_roots() -> None:
    app = Server("roots")
    seen: list[Any] = []

    @app.tool()
    def echo(text: str) -> str:
        return text

    @app.on_roots_changed()
    async def roots_changed(conn: Any) -> None:
        seen.append(await conn.list_roots())

    c = Client(app)
    await c.init(caps={"roots": {"listChanged": True}})
    c.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
    async with asyncio.timeout(5):
        while not any(m.get("method") == "roots/list" for m in c.out):
            await asyncio.sleep(0.001)
            c._collect()
    ask = next(m for m in c.out if m.get("method") == "roots/list")
    c.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": "file:///work", "name": "work"}]}})
    async with asyncio.timeout(5):
        while not seen:
            await asyncio.sleep(0.001)
    assert seen == [[{"uri": "file:///work", "name": "work"}]]


async def test_sync_roots_hook_and_failures_are_contained(caplog: pytest.LogCaptureFixture) -> None:
    app = Server("roots")
    calls: list[Any] = []

    @app.tool()
    def echo(text: str) -> str:
        return text

    @app.on_roots_changed()
    def roots_changed(conn: Any) -> None:
        calls.append(conn)
        raise RuntimeError("hook bug")

    c = Client(app)
    c.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})  # before initialize: ignored
    assert calls == []
    await c.init(caps={"roots": {"listChanged": True}})
    c.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
    assert calls == [c.conn] and "hook bug" in caplog.text
    assert (await c.call("echo", {"text": "still fine"}))["result"]["content"][0]["text"] == "still fine"


# ------------------------------- the 2026 envelope on a handshake session, end to end


async def test_2026_call_on_a_handshake_session() -> None:
    c = Client(build())
    await c.init("2025-06-18")
    modern = await c.call("typed", {"name": "abc"}, _meta=MODERN_META)
    assert modern["result"]["resultType"] == "complete"
    assert modern["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "unit"
    legacy = await c.call("typed", {"name": "abc"})
    assert "resultType" not in legacy["result"] and legacy["result"]["structuredContent"] == {"x": 2, "y": 3}


async def test_url_elicitation_end_to_end() -> None:
    app = Server("url")

    @app.tool()
    async def login(ctx: Context) -> str:
        answer = await ctx.elicit_url("Sign in", "https://example.com/login", elicitation_id="login-1")
        return answer["action"]

    @app.tool()
    def pay(ctx: Context) -> str:
        ctx.url_elicitation_required("Pay first", "https://example.com/pay", elicitation_id="pay-1")

    c = Client(app)
    await c.init(caps={"elicitation": {"form": {}, "url": {}}})
    c.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "login", "arguments": {}}})
    async with asyncio.timeout(5):
        while not any(m.get("method") == "elicitation/create" for m in c.out):
            await asyncio.sleep(0.001)
            c._collect()
    ask = next(m for m in c.out if m.get("method") == "elicitation/create")
    assert ask["params"] == {"mode": "url", "message": "Sign in", "url": "https://example.com/login", "elicitationId": "login-1"}
    c.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}})
    async with asyncio.timeout(5):
        while not any(m.get("id") == 1 for m in c.out):
            await asyncio.sleep(0.001)
            c._collect()
    assert next(m for m in c.out if m.get("id") == 1)["result"]["content"][0]["text"] == "accept"
    assert app.notify_elicitation_complete("login-1") == 1
    error = (await c.call("pay", {}))["error"]
    assert error["code"] == -32042 and error["data"]["elicitations"][0]["elicitationId"] == "pay-1"
    assert app.notify_elicitation_complete("pay-1") == 1 and app.notify_elicitation_complete("pay-1") == 0
    c._collect()
    done = [m["params"]["elicitationId"] for m in c.out if m.get("method") == "notifications/elicitation/complete"]
    assert done == ["login-1", "pay-1"]


async def test_url_elicitation_needs_the_client_capability() -> None:
    app = Server("url")

    @app.tool()
    def pay(ctx: Context) -> str:
        ctx.url_elicitation_required("Pay first", "https://example.com/pay")

    c = Client(app)
    await c.init(caps={"elicitation": {}})
    error = (await c.call("pay", {}))["error"]
    assert error["code"] == -32021 and error["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}
