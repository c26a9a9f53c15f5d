"""The official SDK clients (Python, and TypeScript: ts_client.mjs) run their calls against the
sample apps on ``mcpfast serve --app``, over stdio and Streamable HTTP, and see what they see on
the framework's own server.

Each client runs one scenario per app against the framework's own server and against mcpfast:
initialize, tools/list, every kind of tool (plain, structured, progress with a progress callback,
logging with a logging callback, elicitation answered by the elicitation callback, and for the
SDK's app sampling and roots answered by the client's callbacks), a tool error, bad arguments,
resources, templates, an unknown resource, prompts, completion. It sums up what it got as JSON:
every call's result or the JSON-RPC error it raised, the progress and log notifications its
callbacks received, the elicitation requests. The summaries must hold no client failure, and be
equal but for what ``normalise`` lists (each item says why; docs/sdk-apps.md, "What differs").

The Python client runs twice per server: ``mode="legacy"`` (the handshake, 2025-11-25, where
elicitation works) and its default ``mode="auto"`` (which finds 2026-07-28 on both servers and
sends stateless requests; no elicitation there: there is no back channel on either server).
The TypeScript client follows progress on ``paced_count`` (ts_client.mjs says why) and logging on
``slow_count``.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp_types as types
import pytest
from _servers import HERE, SIDES, env, needs, stdio_command
from mcp.shared.exceptions import MCPError

ROOT = HERE.parents[1]
TS_CLIENT = HERE / "ts_client.mjs"
TS_SDK = ROOT / "peers" / "typescript" / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"

pytestmark = [
    pytest.mark.timeout(90),
    # The SDK warns on every feature 2026-07-28 deprecates (logging, the handshake), even where they are meant.
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]

ELICITED = {"date": "monday", "seats": 2}

STRUCTURED = {
    "sdk": ("weather", {"city": "Wien"}),
    "fastmcp": ("midpoint", {"a": {"x": 0, "y": 0}, "b": {"x": 2, "y": 4}}),
}
"""The tool of each app whose result is structured output from a model (an output schema)."""


def _dump(value: Any) -> Any:
    return value.model_dump(by_alias=True, mode="json", exclude_none=True) if value is not None else None


async def _step(summary: dict[str, Any], name: str, call: Any) -> None:
    """Run one client call; its result, or the JSON-RPC error the client raised, goes in ``summary``."""
    try:
        summary[name] = _dump(await call)
    except MCPError as exc:
        summary[name] = {"error": {"code": exc.error.code, "message": exc.error.message}}


async def python_scenario(target: str | mcp.StdioServerParameters, app: str, mode: str) -> dict[str, Any]:
    """What the official Python SDK client gets from ``target`` (an HTTP URL or a stdio command)."""
    progress: list[dict[str, Any]] = []
    logs: list[dict[str, Any]] = []
    elicited: list[dict[str, Any]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append({"progress": value, "total": total, "message": message})

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(_dump(params))

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        elicited.append(_dump(params))
        return types.ElicitResult(action="accept", content=ELICITED)

    async def on_sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="short"), model="test-model")

    async def on_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    summary: dict[str, Any] = {}
    client = mcp.Client(
        target,
        mode=mode,
        logging_callback=on_log,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        list_roots_callback=on_roots,
        log_level="debug",
        cache=None,
    )
    async with client:
        summary["protocolVersion"] = client.protocol_version
        summary["serverInfo"] = _dump(client.server_info)
        summary["capabilities"] = _dump(client.server_capabilities)
        summary["instructions"] = client.instructions
        await _step(summary, "tools/list", client.list_tools())
        await _step(summary, "add", client.call_tool("add", {"a": 1, "b": 2}))
        await _step(summary, "shout", client.call_tool("shout", {"text": "hi"}))
        structured, arguments = STRUCTURED[app]
        await _step(summary, "structured", client.call_tool(structured, arguments))
        await _step(summary, "progress", client.call_tool("slow_count", {"steps": 3}, progress_callback=on_progress))
        summary["progress notifications"] = progress
        summary["log notifications"] = logs
        if mode == "legacy":
            await _step(summary, "elicitation", client.call_tool("book", {}))
            summary["elicitation requests"] = elicited
            if app == "sdk":  # sampling, then roots, answered by the client's callbacks
                await _step(summary, "sampling and roots", client.call_tool("summarize", {"text": "a long text"}))
        await _step(summary, "bad arguments", client.call_tool("add", {"a": "x"}))
        await _step(summary, "tool error", client.call_tool("fail", {"reason": "boom"}))
        await _step(summary, "resources/list", client.list_resources())
        await _step(summary, "resources/templates/list", client.list_resource_templates())
        await _step(summary, "resources/read", client.read_resource("config://app"))
        await _step(summary, "resources/read template", client.read_resource("users://7/profile"))
        await _step(summary, "resources/read unknown", client.read_resource("nope://x"))
        await _step(summary, "prompts/list", client.list_prompts())
        await _step(summary, "prompts/get", client.get_prompt("review", {"code": "x=1", "language": "rust"}))
        await _step(summary, "prompts/get missing argument", client.get_prompt("review", {}))
        prompt_ref = types.PromptReference(type="ref/prompt", name="review")
        await _step(summary, "completion", client.complete(prompt_ref, {"name": "language", "value": "p"}))
        template_ref = types.ResourceTemplateReference(type="ref/resource", uri="users://{user_id}/profile")
        await _step(summary, "completion template", client.complete(template_ref, {"name": "user_id", "value": ""}))
    return summary


def _python_target(side: str, app: str, transport: str, http_url: Any) -> str | mcp.StdioServerParameters:
    if transport == "http":
        return str(http_url(side, app))
    command = stdio_command(side, app)
    return mcp.StdioServerParameters(command=command[0], args=command[1:], env=env(), cwd=str(ROOT))


def normalise(summary: dict[str, Any], app: str) -> dict[str, Any]:
    """``summary`` without what differs on purpose or in mcpfast's session machine (docs/sdk-apps.md,
    "What differs"), each for the reason given; everything else is compared as the client got it."""
    out = copy.deepcopy(summary)
    caps = out.get("capabilities")
    if app == "sdk" and isinstance(caps, dict):
        # The official SDK's handlers log without declaring ``logging``; mcpfast declares it.
        caps.pop("logging", None)
    if out.get("protocolVersion") == "2026-07-28" and isinstance(caps, dict):
        # ``server/discover`` is answered by mcpfast's session machine, with the capabilities the
        # app declares at the handshake: the frameworks derive other ``listChanged`` /
        # ``subscribe`` flags (and FastMCP an extension) for 2026-07-28. Which features are
        # offered is compared; those flags are not (a known difference of the session machine).
        out["capabilities"] = sorted(key for key in caps if key != "extensions")
    return out


def check_substance(summary: dict[str, Any], app: str, *, elicitation: bool, progress: bool = True) -> None:
    """What the comparison covered is what the app does (two summaries of errors would match too)."""
    assert summary["add"]["structuredContent"] == {"result": 3} and summary["add"]["isError"] is False
    assert summary["shout"]["content"][0]["text"] == "HI"
    expected = {"city": "Wien", "celsius": 21.5, "windy": True} if app == "sdk" else {"x": 1.0, "y": 2.0}
    assert summary["structured"]["structuredContent"] == expected
    assert summary["progress"]["content"][0]["text"] == "done 3"
    if progress:
        assert [p["progress"] for p in summary["progress notifications"]] == [1, 2, 3]
    assert any("counted to" in json.dumps(log) for log in summary["log notifications"])
    if elicitation:
        assert summary["elicitation"]["content"][0]["text"] == "booked 2 on monday"
        assert [e["message"] for e in summary["elicitation requests"]] == ["When?"]
        if app == "sdk":
            assert summary["sampling and roots"]["content"][0]["text"] == "short (test-model; roots: file:///work/project)"
    assert summary["bad arguments"]["isError"] is True
    assert summary["tool error"]["isError"] is True
    assert {r["uri"] for r in summary["resources/list"]["resources"]} >= {"config://app"}
    templates = {t["uriTemplate"] for t in summary["resources/templates/list"]["resourceTemplates"]}
    assert templates >= {"users://{user_id}/profile", "items://{item_id}"}
    assert summary["resources/read"]["contents"][0]["text"] == '{"debug": false}'
    assert summary["resources/read template"]["contents"][0]["text"] == "profile of 7"
    assert "error" in summary["resources/read unknown"]
    assert {p["name"] for p in summary["prompts/list"]["prompts"]} >= {"review"}
    assert "rust code" in summary["prompts/get"]["messages"][0]["content"]["text"]
    assert "error" in summary["prompts/get missing argument"]
    if app == "sdk":
        assert summary["completion"]["completion"]["values"] == ["python", "perl"]
        assert summary["completion template"]["completion"]["values"] == ["alice", "bob"]


def compare(own: dict[str, Any], ours: dict[str, Any], app: str) -> None:
    own, ours = normalise(own, app), normalise(ours, app)
    differ = [
        f"{key}:\n framework: {json.dumps(own.get(key))}\n mcpfast:   {json.dumps(ours.get(key))}"
        for key in sorted(own.keys() | ours.keys())
        if ours.get(key) != own.get(key)
    ]
    assert not differ, "\n".join(differ)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("app", ["sdk", "fastmcp"])
def test_python_sdk_client(app: str, transport: str, mode: str, http_url: Any) -> None:
    needs(app)
    targets = {side: _python_target(side, app, transport, http_url) for side in SIDES}
    got: dict[str, dict[str, Any]] = {}

    async def both() -> None:  # side by side: the two servers start at once
        async def run(side: str) -> None:
            got[side] = await python_scenario(targets[side], app, mode)

        async with anyio.create_task_group() as tg:
            for side in SIDES:
                tg.start_soon(run, side)

    anyio.run(both)
    expected_version = "2025-11-25" if mode == "legacy" else "2026-07-28"
    assert got["mcpfast"]["protocolVersion"] == expected_version
    check_substance(got["mcpfast"], app, elicitation=mode == "legacy")
    compare(got["own"], got["mcpfast"], app)


def _node() -> str:
    node = shutil.which("node")
    # `make test` installs both first (peers-install): their absence is a failure, not a skip
    assert node is not None and TS_SDK.is_file(), "node and the pinned TypeScript SDK (make peers-install) are needed"
    return node


def ts_scenarios(app: str, transport: str, http_url: Any) -> dict[str, dict[str, Any]]:
    """What the official TypeScript SDK client gets from each side (ts_client.mjs prints it as
    JSON); both clients run at once."""
    clients = {}
    for side in SIDES:
        target = ["http", str(http_url(side, app))] if transport == "http" else ["stdio", json.dumps(stdio_command(side, app))]
        argv = [_node(), str(TS_CLIENT), app, *target]
        clients[side] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=str(ROOT))
    got = {}
    for side, proc in clients.items():
        try:
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, f"the TypeScript client failed against the {side} server:\n{err}"
        got[side] = json.loads(out)
    return got


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("app", ["sdk", "fastmcp"])
def test_typescript_sdk_client(app: str, transport: str, http_url: Any) -> None:
    needs(app)
    got = ts_scenarios(app, transport, http_url)
    assert got["mcpfast"]["failures"] == [], got["mcpfast"]["failures"]
    assert got["mcpfast"]["protocolVersion"] == "2025-11-25"
    # This client loses a progress notification it reads in the same chunk as the reply
    # (ts_client.mjs): on a machine too busy to read between paced_count's steps it may lose
    # some from either server. What it got must be in order and each as sent; both sides got some.
    sent = [{"progress": i, "total": 3, "message": f"step {i}"} for i in (1, 2, 3)]
    for side in SIDES:
        received = got[side].pop("progress notifications")
        assert received and all(p in sent for p in received) and received == sorted(received, key=lambda p: p["progress"]), received
    check_substance(got["mcpfast"], app, elicitation=True, progress=False)
    compare(got["own"], got["mcpfast"], app)


def test_the_typescript_client_is_the_pinned_sdk() -> None:
    _node()
    pinned = json.loads((ROOT / "peers" / "typescript" / "package.json").read_text())["dependencies"]["@modelcontextprotocol/sdk"]
    assert json.loads(Path(TS_SDK).read_text())["version"] == pinned
