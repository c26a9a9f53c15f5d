"""Whatever arrives, the engine answers with at most one message per line and never raises."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfast.sansio import RequestReceived, ServerSession

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
methods = st.sampled_from(
    ["initialize", "ping", "tools/list", "tools/call", "logging/setLevel", "notifications/cancelled", "server/discover", "x/y"]
)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0"])},
    optional={"id": st.integers(0, 5) | st.text(max_size=2) | st.none(), "method": methods, "params": json_values, "result": json_values},
)


def session() -> ServerSession:
    s = ServerSession({"name": "f", "version": "0"}, {"tools": {}, "logging": {}})
    s.receive(
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "0"}},
            }
        )
    )
    s.data_to_send()
    return s


@settings(max_examples=150, deadline=None)
@given(st.lists(messages | st.binary(max_size=20).map(lambda b: b), max_size=6))
def test_arbitrary_input(items: list[Any]) -> None:
    s = session()
    for item in items:
        raw = item if isinstance(item, bytes) else orjson.dumps(item)
        events = s.receive(raw)
        out = s.data_to_send()
        assert len(out) <= 1
        for data in out:
            orjson.loads(data)  # every output line is JSON
        for event in events:
            if isinstance(event, RequestReceived):
                s.respond(event.request.id, {"content": []})
                assert len(s.data_to_send()) == 1
