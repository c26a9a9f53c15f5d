"""What ``--app`` accepts and what it refuses at load, each with a message saying why and what to do."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from mcpfast.adapters import UnsupportedApp, load_server, servable
from mcpfast.server import Server

pytestmark = pytest.mark.filterwarnings("ignore:The logging capability is deprecated")


def test_an_mcpfast_server_is_served_as_it_is() -> None:
    app = Server("mine")
    assert servable(app) is app


@pytest.mark.parametrize("obj", [object(), "module:app", 42])
def test_anything_else_is_refused_naming_its_type(obj: Any) -> None:
    what = type(obj)
    with pytest.raises(UnsupportedApp, match=f"{what.__module__}.{what.__qualname__} is not a server mcpfast can serve"):
        servable(obj)


def test_load_server_turns_a_refusal_into_an_exit_naming_the_spec() -> None:
    with pytest.raises(SystemExit, match=r"mcpfast: mcpfast\.server\.loader:load_app: builtins\.function is not a server"):
        load_server("mcpfast.server.loader:load_app")


def test_an_sdk_app_becomes_a_server_with_its_lifespan() -> None:
    import sdk_app

    server = servable(sdk_app.mcp)
    assert isinstance(server, Server)
    assert server.server_info() == {"name": "sdk-sample", "version": ""}
    assert server.lifespan is not None
    assert server.tool_definition("add") == {"name": "add", "inputSchema": sdk_app.mcp._tool_manager.get_tool("add").parameters}
    assert server.tool_definition("nope") is None


@pytest.mark.parametrize(("dist", "installed"), [("mcp", "1.25.0"), ("mcp", "3.0.0"), ("fastmcp", "2.14.1"), ("fastmcp", "5.0.0")])
def test_a_framework_version_outside_the_range_is_refused(monkeypatch: pytest.MonkeyPatch, dist: str, installed: str) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: installed if name == dist else real(name))
    works = {"mcp": ">=2.3,<3", "fastmcp": ">=4.2,<5"}[dist]
    if dist == "mcp":
        import sdk_app

        app: Any = sdk_app.mcp
    else:
        pytest.importorskip("fastmcp")
        import fastmcp_app

        app = fastmcp_app.mcp
    with pytest.raises(UnsupportedApp, match=f"{dist} {installed} is not supported: mcpfast serves apps of {dist}{works}"):
        servable(app)


def test_an_mcp_1_app_is_refused_naming_the_versions_that_work() -> None:
    # What mcp 1.x's FastMCP class looks like to the loader (mcp 2.x cannot import it).
    legacy = type("FastMCP", (), {"__module__": "mcp.server.fastmcp.server"})
    with pytest.raises(UnsupportedApp, match=r"an mcp 1.x FastMCP app: mcpfast serves official-SDK apps of mcp>=2.3,<3"):
        servable(legacy())


# ------------------------------------------------------------------ official SDK refusals


def _sdk_app(**options: Any) -> Any:
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("refused", **options)

    @app.tool()
    def hello() -> str:
        return "hi"

    return app


def test_sdk_custom_routes_are_refused() -> None:
    from starlette.responses import PlainTextResponse

    app = _sdk_app()

    @app.custom_route("/health", methods=["GET"])
    async def health(request: Any) -> Any:
        return PlainTextResponse("ok")

    with pytest.raises(UnsupportedApp, match=r"custom HTTP routes \(/health\): mcpfast serves the MCP endpoint only"):
        servable(app)


def test_sdk_middleware_and_extra_handlers_are_refused() -> None:
    from mcp.server.context import ServerRequestContext
    from mcp_types import RequestParams

    async def observe(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        return await call_next(ctx)

    app = _sdk_app(middleware=[observe])

    async def custom(ctx: Any, params: Any) -> dict[str, Any]:
        return {}

    app._lowlevel_server.add_request_handler("acme/custom", RequestParams, custom)
    with pytest.raises(UnsupportedApp) as refused:
        servable(app)
    message = str(refused.value)
    assert "middleware (function): it would not run on mcpfast" in message
    assert "request handlers for acme/custom: methods of its own are not carried" in message


def test_sdk_auth_is_refused() -> None:
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings

    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            return None

    settings = AuthSettings(
        issuer_url="https://auth.example.test", resource_server_url="http://127.0.0.1:8000/mcp", validate_token_resource=True
    )
    app = _sdk_app(auth=settings, token_verifier=Verifier())
    with pytest.raises(UnsupportedApp, match=r"auth .*use mcpfast's own"):
        servable(app)


# ------------------------------------------------------------------ FastMCP refusals


def _fastmcp_app(**options: Any) -> Any:
    fastmcp = pytest.importorskip("fastmcp")
    app = fastmcp.FastMCP("refused", **options)

    @app.tool
    def hello() -> str:
        return "hi"

    return app


def test_fastmcp_root_middleware_is_refused_component_middleware_is_carried() -> None:
    pytest.importorskip("fastmcp")
    from fastmcp.server.middleware import Middleware

    class Observe(Middleware):
        async def on_message(self, context: Any, call_next: Any) -> Any:
            return await call_next(context)

    class Tools(Middleware):
        async def on_call_tool(self, context: Any, call_next: Any) -> Any:
            return await call_next(context)

    assert isinstance(servable(_fastmcp_app(middleware=[Tools()])), Server)
    with pytest.raises(UnsupportedApp, match=r"middleware Observe \(on_message\): hooks around every message do not run"):
        servable(_fastmcp_app(middleware=[Observe()]))


def test_fastmcp_custom_routes_and_mounts_are_refused() -> None:
    from starlette.responses import PlainTextResponse

    app = _fastmcp_app()

    @app.custom_route("/health", methods=["GET"])
    async def health(request: Any) -> Any:
        return PlainTextResponse("ok")

    app.mount(_fastmcp_app(), namespace="child")
    with pytest.raises(UnsupportedApp) as refused:
        servable(app)
    message = str(refused.value)
    assert "custom HTTP routes (/health)" in message
    assert "mounted servers or providers (FastMCPProvider)" in message


@pytest.mark.parametrize("inline", [False, True])
def test_inline_sync_tools_run_on_the_event_loop_thread(inline: bool) -> None:
    import asyncio
    import threading

    from _harness import handshake, mcpfast_transcript, request

    threads: list[int] = []
    app = _sdk_app()

    @app.tool()
    def where() -> str:
        threads.append(threading.get_ident())
        return "here"

    async def run() -> list[dict[str, Any]]:
        threads.append(threading.get_ident())  # the event loop's
        return await mcpfast_transcript(
            servable(app, inline_sync_tools=inline), [*handshake("2025-11-25"), request(1, "tools/call", {"name": "where"})]
        )

    out = asyncio.run(run())
    assert out[-1]["result"]["structuredContent"] == {"result": "here"}
    loop_thread, tool_thread = threads
    assert (tool_thread == loop_thread) is inline
