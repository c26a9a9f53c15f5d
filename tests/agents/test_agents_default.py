"""The default agent (``loadtests/agents.py`` without a workload file): every tool the server
lists, called with arguments made from its schema and its descriptions' examples, each probed
once; a tool still refused is left out with the workload file lines that would give it
arguments.  Against ``mcp-server-time`` (PyPI), whose schemas give their examples in prose only."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _agents_support import apps_env

from mcpfast.client.session import ClientSession
from mcpfast.client.stdio import StdioClient
from mcpfast.locust import scenario as sc

pytestmark = pytest.mark.timeout(60)


@contextmanager
def _client(command: list[str], env: dict[str, str] | None = None) -> Iterator[StdioClient]:
    client = StdioClient(command, ClientSession("2025-11-25", capabilities={}), timeout=10.0, env=env)
    try:
        yield client
    finally:
        client.close()


def test_the_default_agent_calls_mcp_server_time_with_arguments_it_accepts() -> None:
    server = Path(sys.executable).with_name("mcp-server-time")  # the test extra installs it
    if not server.exists():
        pytest.fail("mcp-server-time is not installed: pip install -e '.[test]'")
    with _client([str(server)]) as client:
        info = sc.fetch_server_info(client)
        plan = sc.default_agent(client, info)
    assert plan.excluded == []
    (agent,) = plan.users
    args = {op.tool: op.arguments for op in agent.ops}
    assert args == {
        "get_current_time": {"timezone": "America/New_York"},
        "convert_time": {"source_timezone": "America/New_York", "time": "12:00", "target_timezone": "Asia/Tokyo"},
    }
    assert agent.agent is not None and (agent.agent.think, agent.agent.order) == ("lognormal:2:8", "weighted")


def test_a_tool_still_refused_is_left_out_with_the_lines_to_write() -> None:
    command = [sys.executable, "-m", "mcpfast", "serve", "--transport", "stdio", "--app", "apps:picky"]
    with _client(command, apps_env()) as client:
        info = sc.fetch_server_info(client)
        plan = sc.default_agent(client, info)
    assert [op.tool for op in plan.users[0].ops] == ["echo"]
    (left,) = plan.excluded
    assert left["op"] == "tools/call:lookup" and left["reason"].startswith("probe failed"), left
    assert left["workload"].splitlines() == [
        "[[ops]]",
        'op = "tools/call"',
        'tool = "lookup"',
        'arguments = {code = "mcpfast"}',
    ]
