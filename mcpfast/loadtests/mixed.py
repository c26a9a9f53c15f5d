"""Mixed family: a realistic session - mostly tools/call, some listing, reading, prompts and
completion (each only when the server offers it), the session kept for the user's lifetime."""

import locust  # noqa: F401, I001 - first

from locust import task

from mcpfast.loadtests._common import McpUser


class MixedUser(McpUser):
    native_family = "mixed"
    resource_uri = None
    prompt_name = None
    prompt_args: dict = {}  # noqa: RUF012 - replaced per user, never mutated
    complete_arg = None

    def on_start(self) -> None:
        super().on_start()
        self._discover()

    def _discover(self) -> None:
        caps = self.mcp.session.server_capabilities or {}
        if "resources" in caps:
            reply = self.mcp.list_resources()
            if reply is not None and not reply.is_error:
                items = (reply.result or {}).get("resources") or []
                self.resource_uri = items[0]["uri"] if items else None
        if "prompts" in caps:
            reply = self.mcp.list_prompts()
            if reply is not None and not reply.is_error:
                items = (reply.result or {}).get("prompts") or []
                if items:
                    self.prompt_name = items[0]["name"]
                    arguments = items[0].get("arguments") or []
                    # every required argument gets a value; the first one is the completion target
                    self.prompt_args = {a["name"]: "x" for a in arguments if a.get("required")}
                    self.complete_arg = arguments[0]["name"] if arguments else None

    @task(10)
    def call_tool(self) -> None:
        if self.ready():
            self.mcp.call_tool(self.tool, self.tool_args)

    @task(3)
    def list_tools(self) -> None:
        if self.ready():
            self.mcp.list_tools()

    @task(2)
    def read_resource(self) -> None:
        if self.resource_uri and self.ready():
            self.mcp.read_resource(self.resource_uri)

    @task(2)
    def get_prompt(self) -> None:
        if self.prompt_name and self.ready():
            self.mcp.get_prompt(self.prompt_name, self.prompt_args)

    @task(1)
    def complete(self) -> None:
        caps = self.mcp.session.server_capabilities or {}
        if self.prompt_name and self.complete_arg and "completions" in caps and self.ready():
            self.mcp.complete({"type": "ref/prompt", "name": self.prompt_name}, {"name": self.complete_arg, "value": "a"})
