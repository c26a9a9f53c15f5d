"""Two ``mcpfast serve`` processes sharing one real Redis act as one server, request by request."""

from __future__ import annotations

import json

import pytest
from scale_client import Legacy, Mcp, until

pytestmark = pytest.mark.timeout(120)


def test_session_hops_between_processes(servers) -> None:
    a, b = servers(2)
    client = a.client()
    init = client.initialize({"elicitation": {}})
    assert init["result"]["protocolVersion"] == "2025-11-25"
    # Every request lands on the other process than the one before.
    for i in range(6):
        here = client.on((a, b)[(i + 1) % 2].port)
        status, reply = here.call("tools/call", {"name": "test_simple_text", "arguments": {}})
        assert status == 200, reply
        assert reply["result"]["content"][0]["text"]
    status, reply = client.on(b.port).call("tools/list")
    assert status == 200 and any(t["name"] == "test_elicitation" for t in reply["result"]["tools"])


def test_unknown_session_is_404_on_every_process(servers) -> None:
    a, b = servers(2)
    for s in (a, b):
        status, _ = Mcp(s.port, "no-such-session").call("tools/list")
        assert status == 404


def test_delete_on_one_process_ends_the_session_everywhere(servers) -> None:
    a, b = servers(2)
    client = a.client()
    client.initialize()
    assert client.on(b.port).call("ping")[0] == 200  # now cached on b too
    status, _, _ = client.on(b.port).raw("DELETE")
    assert status == 200
    assert client.call("ping")[0] == 404  # a was told through pub/sub
    assert client.on(b.port).call("ping")[0] == 404
    assert client.raw("DELETE")[0] == 404


def test_log_level_set_on_one_process_holds_on_the_other(servers) -> None:
    a, b = servers(2)
    client = a.client()
    client.initialize()
    assert client.on(b.port).call("ping")[0] == 200  # b caches the session before the change
    status, reply = client.call("logging/setLevel", {"level": "error"})
    assert status == 200 and reply["result"] == {}

    # test_tool_with_logging logs at info: below "error", so nothing but the answer comes back
    def quiet_on_b() -> bool:
        _status, out = client.on(b.port).open(
            "POST", client.request_body("tools/call", {"name": "test_tool_with_logging", "arguments": {}})
        )
        messages = [json.loads(out)] if isinstance(out, bytes) else [e[1] for e in out.drain()]
        return all("method" not in msg for msg in messages) and messages[-1].get("result") is not None

    until(quiet_on_b, what="log level reaching b")


def test_elicitation_answer_crosses_over(servers) -> None:
    a, b = servers(2)
    client = a.client()
    client.initialize({"elicitation": {}})
    stream = client.ask_me()
    _, ask = stream.message()
    assert ask["method"] == "elicitation/create"
    status, _, _ = client.on(b.port).raw("POST", Mcp.accept(ask, "ada"))  # to the process that did not ask
    assert status == 202
    _, final = stream.message()
    stream.close()
    assert "ada@example.test" in final["result"]["content"][0]["text"]


def test_sampling_answer_inside_a_batch_crosses_over(servers) -> None:
    # 2025-03-26 still has JSON-RPC batches: the answer arrives on b inside a batch with a ping,
    # which b answers itself while the answer goes on to a, the process that asked.
    a, b = servers(2)
    old = {"mcp-protocol-version": "2025-03-26"}
    client = a.client()
    init = client.request_body(
        "initialize", {"protocolVersion": "2025-03-26", "capabilities": {"sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}
    )
    status, headers, data = client.raw("POST", init, old)
    assert status == 200 and json.loads(data)["result"]["protocolVersion"] == "2025-03-26"
    client.session = headers["mcp-session-id"]
    assert client.raw("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, old)[0] == 202
    status, stream = client.open("POST", client.request_body("tools/call", {"name": "test_sampling", "arguments": {"prompt": "hi"}}), old)
    assert status == 200 and not isinstance(stream, bytes), (status, stream)
    _, ask = stream.message()
    assert ask["method"] == "sampling/createMessage"
    on_b = client.on(b.port)
    ping = on_b.request_body("ping")
    sampled = {"role": "assistant", "content": {"type": "text", "text": "from grace"}, "model": "m", "stopReason": "endTurn"}
    status, _, data = on_b.raw("POST", [{"jsonrpc": "2.0", "id": ask["id"], "result": sampled}, ping], old)
    assert status == 200, data
    assert [r["id"] for r in json.loads(data)] == [ping["id"]]  # b answered its own part
    _, final = stream.message()
    stream.close()
    assert "from grace" in final["result"]["content"][0]["text"]


def test_get_stream_notification_crosses_over(servers) -> None:
    a, b = servers(2)
    client = a.client()
    client.initialize()
    get = client.get_stream()
    get.next()  # the priming event: the stream is open on a; the change happens on b
    status, reply = client.on(b.port).call("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
    assert status == 200, reply
    _, notification = get.message()
    get.close()
    assert notification["method"] == "notifications/tools/list_changed"


def test_sealed_2026_state_crosses_over(servers) -> None:
    a, b = servers(2)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "scale-test", "version": "1"},
    }
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "test_input_required_result_request_state"}
    first = Mcp(a.port)
    params = {"name": "test_input_required_result_request_state", "arguments": {}, "_meta": meta}
    status, _, data = first.raw("POST", first.request_body("tools/call", params), headers)
    assert status == 200, data
    result = json.loads(data)["result"]
    assert result["resultType"] == "input_required"
    retry = dict(params, inputResponses={"confirm": {"action": "accept", "content": {"ok": True}}}, requestState=result["requestState"])
    second = Mcp(b.port)
    status, _, data = second.raw("POST", second.request_body("tools/call", retry), headers)
    assert status == 200, data
    assert json.loads(data)["result"]["content"][0]["text"].startswith("state-ok")


def test_requests_to_the_client_from_two_processes_have_their_own_ids(servers) -> None:
    a, b = servers(2)
    client = a.client()
    client.initialize({"elicitation": {}})
    on_a, on_b = client.on(a.port), client.on(b.port)
    # One session, a question from each process at once (before this, both were request 0).
    from_a, from_b = on_a.ask_me(), on_b.ask_me()
    _, ask_a = from_a.message()
    _, ask_b = from_b.message()
    assert ask_a["method"] == ask_b["method"] == "elicitation/create"
    assert ask_a["id"] != ask_b["id"]
    # Each answer is POSTed to the process that did not ask: each reaches the one question it answers.
    assert on_b.raw("POST", Mcp.accept(ask_a, "answer-a"))[0] == 202
    assert on_a.raw("POST", Mcp.accept(ask_b, "answer-b"))[0] == 202
    result_a = [e for e in from_a.drain() if "result" in e[1]]
    result_b = [e for e in from_b.drain() if "result" in e[1]]
    assert len(result_a) == len(result_b) == 1
    assert "answer-a@example.test" in result_a[0][1]["result"]["content"][0]["text"]
    assert "answer-b@example.test" in result_b[0][1]["result"]["content"][0]["text"]


def test_legacy_sse_session_is_served_through_any_process(servers) -> None:
    # 2024-11-05: the /sse stream is open on a; every /messages POST lands on b, which passes it
    # on to a, where the answers go out on the stream.
    a, b = servers(2)
    legacy = Legacy(a.port)
    post, event, endpoint = legacy.post, legacy.event, legacy.endpoint

    init = {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "legacy", "version": "1"}}
    assert post(b.port, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})[0] == 202
    assert event()["result"]["protocolVersion"] == "2024-11-05"
    assert post(b.port, {"jsonrpc": "2.0", "method": "notifications/initialized"})[0] == 202
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "test_simple_text", "arguments": {}}}
    assert post(b.port, call)[0] == 202
    answer = event()
    assert answer["id"] == 2 and "simple text response" in answer["result"]["content"][0]["text"]
    assert post(a.port, {"jsonrpc": "2.0", "id": 3, "method": "ping"})[0] == 202  # and on a itself
    assert event() == {"jsonrpc": "2.0", "id": 3, "result": {}}
    # a session no process holds is 404 on either
    unknown = endpoint.split("session_id=")[0] + "session_id=nobody"
    for port in (a.port, b.port):
        status, data = post(port, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, unknown)
        assert status == 404 and json.loads(data)["error"]["message"] == "session not found"
    legacy.close()
    # once the stream is gone, so is the session, on every process
    until(lambda: post(b.port, {"jsonrpc": "2.0", "id": 5, "method": "ping"})[0] == 404, what="the legacy session ending on b")
