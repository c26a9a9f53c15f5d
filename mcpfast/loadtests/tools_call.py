"""tools/call family: one session per user, then ``--mcp-tool`` with ``--mcp-tool-args`` in a loop
(``--mcp-rate`` > 0 for the open model)."""

import locust  # noqa: F401, I001 - first

from locust import task

from mcpfast.loadtests._common import McpUser


class ToolsCallUser(McpUser):
    native_family = "tools_call"

    @task
    def call(self) -> None:
        if self.ready():
            self.mcp.call_tool(self.tool, self.tool_args)
