"""B: Locust's FastHttpUser POSTing the MCP user's bytes and headers (generator_cost.py)."""
from locust import FastHttpUser, task

VERSION = "2025-11-25"
INIT = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        b'"capabilities":{},"clientInfo":{"name":"mcpfast-swarm","version":"0.1"}}}')
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
HEAD = b'{"jsonrpc":"2.0","id":'
TAIL = b',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'
ACCEPT = "application/json, text/event-stream"


class FastHttpToolsCall(FastHttpUser):
    def on_start(self):
        base = {"Content-Type": "application/json", "Accept": ACCEPT}
        reply = self.client.post("", data=INIT, headers=base, name="initialize")
        self.headers = dict(base, **{"Mcp-Session-Id": reply.headers["mcp-session-id"],
                                     "MCP-Protocol-Version": VERSION})
        self.client.post("", data=INITIALIZED, headers=self.headers, name="notifications/initialized")
        self.next_id = 2

    @task
    def call(self):
        rid = self.next_id
        self.next_id = rid + 1
        self.client.post("", data=HEAD + str(rid).encode() + TAIL, headers=self.headers, name="tools/call:echo")


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
