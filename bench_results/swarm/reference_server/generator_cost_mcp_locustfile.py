"""A: the swarm's MCP user, tools/call echo in a closed loop (generator_cost.py)."""
import locust  # noqa: F401, I001 - first

from locust import task

from mcpfast.locust.users import McpHttpUser


class McpToolsCall(McpHttpUser):
    @task
    def call(self):
        if self.ready():
            self.mcp.call_tool("echo", {"text": "hello"})


import json as _json
import os as _os
import time as _time

from locust import events as _events

_MARK = {}


@_events.test_start.add_listener
def _generator_cost_start(environment, **_kw):
    _MARK["cpu"], _MARK["wall"] = _time.process_time(), _time.perf_counter()


@_events.test_stop.add_listener
def _generator_cost_stop(environment, **_kw):
    cpu, wall = _time.process_time() - _MARK["cpu"], _time.perf_counter() - _MARK["wall"]
    entries = [e for (name, _m), e in environment.stats.entries.items() if name == "tools/call:echo"]
    failures = sum(e.num_failures for e in environment.stats.entries.values())
    with open(_os.environ["GENERATOR_COST_OUT"], "w") as fh:
        _json.dump({"requests": sum(e.num_requests for e in entries), "failures": failures,
                    "wall_s": wall, "cpu_s": cpu}, fh)
