"""ServerSession without I/O: lifecycle, negotiation, capabilities, correlation, progress, cancellation."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcpfast import core
from mcpfast.protocol import validate
from mcpfast.sansio import (
    CapabilityError,
    Initialized,
    LifecycleError,
    NotificationReceived,
    ReplyReceived,
    RequestCancelled,
    RequestReceived,
    ServerSession,
    SessionState,
    State,
)

INFO = {"name": "srv", "version": "1.0", "title": "Server", "icons": [{"src": "https://example.com/i.png"}]}
CAPS = {"tools": {"listChanged": True}, "resources": {"subscribe": True}, "logging": {}, "completions": {}}
MODERN = "io.modelcontextprotocol/protocolVersion"
MODERN_CAPS = "io.modelcontextprotocol/clientCapabilities"


def make(**kwargs: Any) -> ServerSession:
    return ServerSession(INFO, kwargs.pop("capabilities", CAPS), instructions="hi", **kwargs)


def send(session: ServerSession, message: Any) -> tuple[list[Any], list[Any]]:
    raw = message if isinstance(message, bytes) else orjson.dumps(message)
    events = session.receive(raw)
    return events, [orjson.loads(b) for b in session.data_to_send()]


def request(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def init(session: ServerSession, version: str = "2025-11-25", caps: dict[str, Any] | None = None, ready: bool = True) -> dict[str, Any]:
    _, out = send(
        session,
        request(0, "initialize", {"protocolVersion": version, "capabilities": caps or {}, "clientInfo": {"name": "c", "version": "1"}}),
    )
    if ready:
        events, _ = send(session, notification("notifications/initialized"))
        assert events == [Initialized()]
    return out[0]


def test_initialize_negotiates_and_declares() -> None:
    s = make()
    reply = init(s, "2025-06-18", ready=False)
    validate(reply, "2025-06-18", method="initialize")
    result = reply["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["capabilities"] == CAPS
    assert result["serverInfo"] == {"name": "srv", "version": "1.0", "title": "Server"}  # icons are 2025-11-25
    assert result["instructions"] == "hi"
    assert s.state is State.INITIALIZING


@pytest.mark.parametrize("asked", ["2099-01-01", "2026-07-28", "2024-10-07"])
def test_unsupported_version_gets_counter_offer(asked: str) -> None:
    reply = init(make(), asked, ready=False)
    assert reply["result"]["protocolVersion"] == "2025-11-25"


def test_old_version_hides_later_capabilities() -> None:
    reply = init(make(), "2024-11-05", ready=False)
    assert "completions" not in reply["result"]["capabilities"]
    validate(reply, "2024-11-05", method="initialize")


def test_only_ping_before_initialize() -> None:
    s = make()
    events, out = send(s, request(1, "tools/list"))
    assert events == [] and out[0]["error"]["code"] == -32600 and out[0]["id"] == 1
    events, out = send(s, request(2, "ping"))
    assert out == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
    events, out = send(s, notification("notifications/roots/list_changed"))
    assert events == [] and out == []


def test_initialize_twice_and_bad_params() -> None:
    s = make()
    _, out = send(s, request(1, "initialize", {"protocolVersion": "2025-11-25"}))
    assert out[0]["error"]["code"] == -32602
    assert s.state is State.NEW
    init(s)
    _, out = send(s, request(2, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}))
    assert out[0]["error"]["code"] == -32600


def test_requests_after_initialize_reply_are_admitted() -> None:
    s = make()
    init(s, ready=False)
    events, out = send(s, request(1, "tools/list", {"cursor": "x"}))
    assert isinstance(events[0], RequestReceived) and out == []
    req = events[0].request
    assert (req.id, req.method, req.version, req.stateless) == (1, "tools/list", "2025-11-25", False)
    assert req.params == {"cursor": "x"}


def test_undeclared_and_unknown_methods() -> None:
    s = make(capabilities={"tools": {}})
    init(s)
    for method in ("prompts/list", "resources/read", "logging/setLevel", "completion/complete", "nope/nope"):
        _, out = send(s, request(7, method))
        assert out[0]["error"]["code"] == -32601, method
    _, out = send(s, request(8, "server/discover"))  # a 2026 method is unknown in a handshake session
    assert out[0]["error"]["code"] == -32601


def test_subscribe_needs_the_subscribe_flag() -> None:
    s = make(capabilities={"resources": {}})
    init(s)
    _, out = send(s, request(1, "resources/subscribe", {"uri": "a://b"}))
    assert out[0]["error"]["code"] == -32601


def test_duplicate_inflight_id_is_rejected() -> None:
    s = make()
    init(s)
    send(s, request(5, "tools/list"))
    _, out = send(s, request(5, "tools/list"))
    assert out[0]["error"]["code"] == -32600
    assert s.respond(5, {"tools": []})
    assert not s.in_flight()


def test_protocol_errors_keep_the_stream() -> None:
    s = make()
    init(s)
    _, out = send(s, b"{not json")
    assert out[0]["error"]["code"] == -32700 and out[0]["id"] is None
    _, out = send(s, b'{"jsonrpc":"2.0","id":3,"method":5}')
    assert out[0]["error"]["code"] == -32600 and out[0]["id"] == 3
    _, out = send(s, b'{"jsonrpc":"1.0","id":4,"method":"ping"}')
    assert out[0]["error"]["code"] == -32600
    _, out = send(s, request(9, "ping"))
    assert out[0]["result"] == {}


def test_oversized_message_reply() -> None:
    s = make()
    s.receive_oversized(10, 5)
    (out,) = [orjson.loads(b) for b in s.data_to_send()]
    assert out["error"]["code"] == -32600 and out["id"] is None


def test_set_level_filters_logs() -> None:
    s = make()
    init(s)
    assert s.log("debug", "before any level")  # the server chooses while unset: everything
    s.data_to_send()
    _, out = send(s, request(1, "logging/setLevel", {"level": "loud"}))
    assert out[0]["error"]["code"] == -32602
    _, out = send(s, request(2, "logging/setLevel", {"level": "warning"}))
    assert out == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
    assert not s.log("info", "quiet")
    assert s.log("error", {"x": 1}, "db")
    (msg,) = [orjson.loads(b) for b in s.data_to_send()]
    assert msg["params"] == {"level": "error", "data": {"x": 1}, "logger": "db"}
    validate(msg, "2025-11-25")


def test_logging_needs_the_capability() -> None:
    s = make(capabilities={"tools": {}})
    init(s)
    with pytest.raises(CapabilityError):
        s.log("info", "x")


def test_progress_rules() -> None:
    s = make()
    init(s)
    events, _ = send(s, request(1, "tools/call", {"name": "t", "_meta": {"progressToken": "tok"}}))
    send(s, request(2, "tools/call", {"name": "t"}))
    assert events[0].request.progress_token == "tok"
    assert s.progress(1, 0.5, 1, "half")
    with pytest.raises(ValueError, match="strictly increase"):
        s.progress(1, 0.5)
    assert not s.progress(2, 1)  # no token on that request
    s.respond(1, {"content": []})
    assert not s.progress(1, 0.9)  # never after the reply
    out = [orjson.loads(b) for b in s.data_to_send()]
    assert out[0]["params"] == {"progressToken": "tok", "progress": 0.5, "total": 1, "message": "half"}
    assert out[1]["id"] == 1 and len(out) == 2
    for msg in out:
        validate(msg, "2025-11-25", method="tools/call")


def test_progress_message_field_is_dropped_for_2024() -> None:
    s = make()
    init(s, "2024-11-05")
    send(s, request(1, "tools/call", {"name": "t", "_meta": {"progressToken": 7}}))
    s.progress(1, 1, message="m")
    (msg,) = [orjson.loads(b) for b in s.data_to_send()]
    assert "message" not in msg["params"]


def test_cancellation_suppresses_the_reply_and_tolerates_races() -> None:
    s = make()
    init(s)
    send(s, request(1, "tools/call", {"name": "t", "_meta": {"progressToken": 1}}))
    events, out = send(s, notification("notifications/cancelled", {"requestId": 1, "reason": "user"}))
    assert events == [RequestCancelled(1, "user")] and out == []
    assert s.is_cancelled(1)
    assert not s.progress(1, 1)
    assert not s.respond(1, {"content": []})
    assert s.data_to_send() == []
    # Unknown, finished, repeated and malformed cancels are ignored.
    for params in ({"requestId": 1}, {"requestId": 99}, {"requestId": None}, {}, [1]):
        events, out = send(s, notification("notifications/cancelled", params))
        assert events == [] and out == []


def test_cancelled_initialize_is_still_answered() -> None:
    s = make()
    _, out = send(s, notification("notifications/cancelled", {"requestId": 0}))
    assert out == []
    reply = init(s, ready=False)
    assert reply["result"]["protocolVersion"] == "2025-11-25"


def test_server_requests_need_declared_client_capabilities() -> None:
    s = make()
    init(s, caps={"sampling": {}}, ready=False)
    with pytest.raises(LifecycleError):  # not before notifications/initialized
        s.send_request("sampling/createMessage", {"messages": [], "maxTokens": 1})
    send(s, notification("notifications/initialized"))
    for method in ("elicitation/create", "roots/list"):
        with pytest.raises(CapabilityError) as info:
            s.send_request(method, {})
        assert info.value.code == -32021
    rid = s.send_request("sampling/createMessage", {"messages": [], "maxTokens": 1})
    (msg,) = [orjson.loads(b) for b in s.data_to_send()]
    assert msg["method"] == "sampling/createMessage" and msg["id"] == rid
    events, _ = send(
        s, {"jsonrpc": "2.0", "id": rid, "result": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}}
    )
    assert events == [
        ReplyReceived(rid, "sampling/createMessage", {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}, None)
    ]
    events, _ = send(s, {"jsonrpc": "2.0", "id": rid, "result": {}})  # a second reply is ignored
    assert events == []


def test_elicitation_does_not_exist_before_2025_06_18() -> None:
    s = make()
    init(s, "2025-03-26", caps={"elicitation": {}})
    with pytest.raises(CapabilityError):
        s.send_request("elicitation/create", {})


def test_cancel_outgoing_request_ignores_late_reply() -> None:
    s = make()
    init(s, caps={"roots": {}})
    rid = s.send_request("roots/list")
    s.cancel_request(rid, "timeout")
    out = [orjson.loads(b) for b in s.data_to_send()]
    assert out[-1] == {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "timeout"}}
    events, _ = send(s, {"jsonrpc": "2.0", "id": rid, "error": {"code": -1, "message": "late"}})
    assert events == [] and s.pending_requests() == []


def test_error_reply_from_client() -> None:
    s = make()
    init(s, caps={"roots": {}})
    rid = s.send_request("roots/list")
    events, _ = send(s, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
    assert events[0].error == {"code": -32601, "message": "no"} and events[0].result is None


def test_batches_only_in_2025_03_26() -> None:
    s = make()
    init(s, "2025-06-18")
    _, out = send(s, [request(1, "ping"), request(2, "ping")])
    assert out[0]["error"]["code"] == -32600 and out[0]["id"] is None

    s = make()
    init(s, "2025-03-26")
    events, out = send(s, [request(1, "ping"), request(2, "tools/list"), notification("notifications/x"), 5, request(3, "initialize", {})])
    assert out == []  # held until the admitted request is answered
    assert [type(e) for e in events] == [RequestReceived, NotificationReceived]
    s.respond(2, {"tools": []})
    (batch,) = [orjson.loads(b) for b in s.data_to_send()]
    assert [r.get("id") for r in batch] == [1, None, 3, 2]
    assert batch[1]["error"]["code"] == -32600 and batch[2]["error"]["code"] == -32600
    validate(batch[3], "2025-03-26", method="tools/list")
    _, out = send(s, [notification("notifications/x")])
    assert out == []  # a batch of notifications gets no reply


def test_batch_with_cancelled_member() -> None:
    s = make()
    init(s, "2025-03-26")
    send(s, [request(1, "tools/list"), request(2, "tools/list")])
    send(s, notification("notifications/cancelled", {"requestId": 1}))
    s.respond(2, {"tools": []})
    assert not s.respond(1, {"tools": []})
    (batch,) = [orjson.loads(b) for b in s.data_to_send()]
    assert [r["id"] for r in batch] == [2]


def test_resource_updated_only_for_subscribers() -> None:
    s = make()
    init(s)
    assert not s.notify("notifications/resources/updated", {"uri": "a://x"})
    s.subscribe("a://x")
    assert s.notify("notifications/resources/updated", {"uri": "a://x"})
    s.unsubscribe("a://x")
    assert not s.notify("notifications/resources/updated", {"uri": "a://x"})
    assert s.notify("notifications/tools/list_changed")
    with pytest.raises(CapabilityError):
        s.notify("notifications/prompts/list_changed")
    with pytest.raises(CapabilityError):  # resources declared without listChanged
        s.notify("notifications/resources/list_changed")


# ------------------------------------------------------------------ 2026-07-28


def modern(rid: Any, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    m = {MODERN: "2026-07-28", MODERN_CAPS: {}}
    m.update({k.replace("__", "/").replace("_", "."): v for k, v in meta.items()})
    return request(rid, method, {**(params or {}), "_meta": m})


def test_discover() -> None:
    s = make()
    _, out = send(s, modern(1, "server/discover"))
    validate(out[0], "2026-07-28", method="server/discover")
    result = out[0]["result"]
    assert result["supportedVersions"] == ["2026-07-28"]
    assert result["capabilities"] == CAPS
    assert result["resultType"] == "complete" and result["ttlMs"] == 0 and result["cacheScope"] == "public"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == INFO
    assert s.state is State.NEW  # nothing about the connection changed


def test_discover_without_meta_is_a_modern_probe() -> None:
    _, out = send(make(), request(1, "server/discover"))
    assert out[0]["result"]["supportedVersions"] == ["2026-07-28"]


def test_stateless_request_and_decorated_result() -> None:
    s = make()
    events, _ = send(s, modern(1, "tools/list"))
    (ev,) = events
    assert ev.request.stateless and ev.request.version == "2026-07-28" and ev.request.client_capabilities == {}
    s.respond(1, {"tools": []})
    (out,) = [orjson.loads(b) for b in s.data_to_send()]
    validate(out, "2026-07-28", method="tools/list")
    assert out["result"]["resultType"] == "complete"


def test_stateless_errors() -> None:
    s = make()
    bad_version = request(1, "tools/list", {"_meta": {MODERN: "2025-11-25", MODERN_CAPS: {}}})
    _, out = send(s, bad_version)
    assert out[0]["error"]["code"] == -32022
    assert out[0]["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}
    validate(out[0], "2026-07-28")
    _, out = send(s, request(2, "tools/list", {"_meta": {MODERN: "2026-07-28"}}))
    assert out[0]["error"]["code"] == -32602  # missing clientCapabilities
    for method in ("ping", "logging/setLevel", "resources/subscribe"):
        _, out = send(s, modern(3, method))
        assert out[0]["error"]["code"] == -32601, method
    _, out = send(
        s, request(4, "tools/list", {"_meta": {MODERN: "2026-07-28", MODERN_CAPS: {}, "io.modelcontextprotocol/logLevel": "loud"}})
    )
    assert out[0]["error"]["code"] == -32602


def test_stateless_logs_only_with_a_request_level() -> None:
    s = make()
    send(s, modern(1, "tools/call", {"name": "t"}))
    send(
        s,
        request(
            2, "tools/call", {"name": "t", "_meta": {MODERN: "2026-07-28", MODERN_CAPS: {}, "io.modelcontextprotocol/logLevel": "info"}}
        ),
    )
    assert not s.log("error", "x", request_id=1)
    assert not s.log("debug", "x", request_id=2)
    assert s.log("info", "x", request_id=2)
    assert not s.log("info", "x")  # no handshake: no connection-wide logs


def test_stateless_request_cannot_use_server_to_client_requests() -> None:
    s = make()
    send(s, request(1, "tools/call", {"name": "t", "_meta": {MODERN: "2026-07-28", MODERN_CAPS: {"sampling": {}}}}))
    with pytest.raises(LifecycleError) as info:
        s.send_request("sampling/createMessage", {}, related=1)
    assert info.value.code == -32021


def test_on_output_hook_fires_when_outbox_fills() -> None:
    s = make()
    calls: list[int] = []
    s.on_output = lambda: calls.append(1)
    send(s, request(1, "ping"))
    s.receive(orjson.dumps(request(2, "ping")))
    s.receive(orjson.dumps(request(3, "ping")))
    assert len(calls) == 2  # once per empty -> non-empty transition


def test_subscriptions_listen_stream() -> None:
    s = make(capabilities={"tools": {"listChanged": True}, "resources": {"subscribe": True}})
    wanted = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": ["a://x"]}
    events, out = send(s, modern(5, "subscriptions/listen", {"notifications": wanted}))
    assert events == []
    ack = out[0]
    validate(ack, "2026-07-28")
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    # prompts were not declared, so they are not honoured
    assert ack["params"] == {
        "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["a://x"]},
        "_meta": {"io.modelcontextprotocol/subscriptionId": 5},
    }
    assert s.notify("notifications/tools/list_changed")
    assert s.notify("notifications/resources/updated", {"uri": "a://x"})
    assert not s.notify("notifications/resources/updated", {"uri": "a://other"})
    out = [orjson.loads(b) for b in s.data_to_send()]
    assert [m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] for m in out] == [5, 5]
    for msg in out:
        validate(msg, "2026-07-28")
    s.close_listens()
    (final,) = [orjson.loads(b) for b in s.data_to_send()]
    validate(final, "2026-07-28", method="subscriptions/listen")
    assert final["id"] == 5 and final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 5
    assert not s.notify("notifications/tools/list_changed")


def test_cancelling_a_listen_closes_it_without_reply() -> None:
    s = make(capabilities={"tools": {"listChanged": True}})
    send(s, modern(5, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
    events, out = send(s, notification("notifications/cancelled", {"requestId": 5}))
    assert events == [] and out == [] and not s.in_flight()
    assert not s.notify("notifications/tools/list_changed")
    _, out = send(s, modern(6, "subscriptions/listen", {}))
    assert out[0]["error"]["code"] == -32602


# ------------------------------------------- the initialize window (spec: lifecycle, 2025-11-25)


def test_initialize_window_serves_requests_and_holds_change_notifications() -> None:
    s = make()
    init(s, ready=False)
    assert s.state is State.INITIALIZING
    # The client has the initialize reply, so it may send anything: requests are served.
    events, out = send(s, request(1, "tools/list"))
    assert isinstance(events[0], RequestReceived) and out == []
    _, out = send(s, request(2, "ping"))
    assert out == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
    _, out = send(s, request(3, "resources/subscribe", {"uri": "a://x"}))
    s.subscribe("a://x")
    s.respond(3, {})
    # The server may send responses, pings and logs, nothing else.
    assert s.log("info", "starting")
    assert s.send_request("ping") == 0
    with pytest.raises(LifecycleError):
        s.send_request("roots/list")
    s.respond(1, {"tools": []})
    before = [orjson.loads(b) for b in s.data_to_send()]
    assert [m.get("method", "reply") for m in before] == ["reply", "notifications/message", "ping", "reply"]
    # Change notifications wait for notifications/initialized (once per method and URI).
    assert s.notify("notifications/tools/list_changed")
    assert s.notify("notifications/tools/list_changed")
    assert s.notify("notifications/resources/updated", {"uri": "a://x"})
    assert not s.notify("notifications/resources/updated", {"uri": "a://not-subscribed"})
    assert s.data_to_send() == []
    events, out = send(s, notification("notifications/initialized"))
    assert events == [Initialized()] and s.state is State.READY
    assert [(m["method"], m.get("params")) for m in out] == [
        ("notifications/tools/list_changed", None),
        ("notifications/resources/updated", {"uri": "a://x"}),
    ]
    for msg in before + out:
        validate(msg, "2025-11-25")
    assert s.notify("notifications/tools/list_changed")  # from now on at once
    assert len(s.data_to_send()) == 1


def test_held_update_is_dropped_if_unsubscribed_before_initialized() -> None:
    s = make()
    init(s, ready=False)
    s.subscribe("a://x")
    assert s.notify("notifications/resources/updated", {"uri": "a://x"})
    s.unsubscribe("a://x")
    _, out = send(s, notification("notifications/initialized"))
    assert out == []


# ------------------------------- the 2026 envelope on a handshake session (spec: lifecycle, 2026-07-28)


def test_2026_request_on_a_handshake_session_is_served_statelessly() -> None:
    s = make()
    init(s, "2025-06-18", caps={"sampling": {}})
    events, out = send(s, modern(7, "tools/list", clientInfo={"name": "m"}))
    (ev,) = events
    req = ev.request
    assert (req.stateless, req.version, req.client_capabilities) == (True, "2026-07-28", {})
    s.respond(7, {"tools": []})
    (reply,) = [orjson.loads(b) for b in s.data_to_send()]
    validate(reply, "2026-07-28", method="tools/list")
    assert reply["result"]["resultType"] == "complete" and "ttlMs" in reply["result"]
    # Its rules are the 2026 ones: no server-to-client requests, the _meta log level.
    send(s, modern(8, "tools/call", {"name": "t"}))
    with pytest.raises(LifecycleError):
        s.send_request("sampling/createMessage", {}, related=8)
    assert not s.log("error", "x", request_id=8)  # no logLevel in its _meta
    # ... and its errors too.
    _, out = send(s, request(9, "tools/list", {"_meta": {MODERN: "2099-01-01", MODERN_CAPS: {}}}))
    assert out[0]["error"]["code"] == -32022 and out[0]["error"]["data"]["supported"] == ["2026-07-28"]
    _, out = send(s, request(10, "tools/list", {"_meta": {MODERN: "2026-07-28"}}))
    assert out[0]["error"]["code"] == -32602
    _, out = send(s, modern(11, "ping"))
    assert out[0]["error"]["code"] == -32601  # removed in 2026-07-28
    _, out = send(s, modern(12, "server/discover"))
    assert out[0]["result"]["supportedVersions"] == ["2026-07-28"]
    # The handshake session itself is untouched.
    assert (s.state, s.version, s.client_capabilities) == (State.READY, "2025-06-18", {"sampling": {}})
    events, _ = send(s, request(13, "tools/list"))
    assert events[0].request.stateless is False and events[0].request.version == "2025-06-18"
    _, out = send(s, request(14, "ping", {"_meta": {"progressToken": 1}}))  # a bare _meta is not the envelope
    assert out == [{"jsonrpc": "2.0", "id": 14, "result": {}}]


def test_fast_path_keeps_the_checks() -> None:
    s = make(capabilities={"tools": {}})
    init(s)
    send(s, request(1, "tools/call", {"name": "t"}))
    _, out = send(s, request(1, "tools/call", {"name": "t"}))  # id still in flight
    assert out[0]["error"]["code"] == -32600
    _, out = send(s, request(2, "prompts/list"))  # capability not declared
    assert out[0]["error"]["code"] == -32601
    _, out = send(s, request(3, "server/discover"))  # not a handshake-era method
    assert out[0]["error"]["code"] == -32601
    events, _ = send(s, request(4, "tools/call", [1, 2]))  # array params reach the app, which says -32602
    assert events[0].request.id == 4


# ------------------------------------------------------ URL-mode elicitation (2025-11-25)


def test_url_elicitation_needs_2025_11_25_and_the_url_capability() -> None:
    s = make()
    init(s, caps={"elicitation": {"url": {}}})
    form = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}
    with pytest.raises(CapabilityError):  # the client listed modes without form
        s.send_request("elicitation/create", form)
    rid = s.send_request("elicitation/create", {"mode": "url", "message": "Sign in", "url": "https://example.com/a", "elicitationId": "e1"})
    error = s.url_elicitation_required([{"message": "Pay", "url": "https://example.com/b", "elicitationId": "e2"}])
    assert error.code == -32042 and error.data["elicitations"][0]["mode"] == "url"
    assert s.elicitation_complete("e1") and s.elicitation_complete("e2")
    assert not s.elicitation_complete("e1") and not s.elicitation_complete("unknown")
    out = [orjson.loads(b) for b in s.data_to_send()]
    assert [m.get("method") for m in out] == [
        "elicitation/create",
        "notifications/elicitation/complete",
        "notifications/elicitation/complete",
    ]
    assert out[0]["id"] == rid
    for msg in out:
        validate(msg, "2025-11-25")
    # The error reply itself is valid 2025-11-25.
    send(s, request(50, "tools/call", {"name": "t"}))
    s.respond_error(50, error.code, error.message, error.data)
    (reply,) = [orjson.loads(b) for b in s.data_to_send()]
    validate(reply, "2025-11-25")


@pytest.mark.parametrize(("version", "caps"), [("2025-06-18", {"elicitation": {"url": {}}}), ("2025-11-25", {"elicitation": {}})])
def test_url_elicitation_refused(version: str, caps: dict[str, Any]) -> None:
    s = make()
    init(s, version, caps=caps)
    with pytest.raises(CapabilityError):
        s.send_request("elicitation/create", {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e"})
    with pytest.raises(CapabilityError):
        s.url_elicitation_required([{"message": "m", "url": "https://x", "elicitationId": "e"}])
    form_ok = s.send_request("elicitation/create", {"message": "m", "requestedSchema": {"type": "object", "properties": {}}})
    assert form_ok == 0


def test_replies_to_requests_it_did_not_send_go_to_on_stray_only_when_shared() -> None:
    s = make()
    init(s, caps={"roots": {}})
    rid = s.send_request("roots/list")
    s.data_to_send()
    events, _ = send(s, {"jsonrpc": "2.0", "id": 999, "result": {"roots": []}})
    assert events == [] and s.on_stray is None  # nobody asked: dropped
    strays: list[Any] = []
    changes: list[int] = []
    s.share(first_request_id=1 << 32, on_change=lambda: changes.append(1), on_stray=strays.append)  # a shared table asks
    send(s, {"jsonrpc": "2.0", "id": 998, "error": {"code": -1, "message": "elsewhere"}})
    events, _ = send(s, {"jsonrpc": "2.0", "id": rid, "result": {"roots": []}})  # its own: not a stray
    assert [e.request_id for e in events] == [rid]
    assert [(m.id, m.kind, m.error) for m in strays] == [(998, "error", {"code": -1, "message": "elsewhere"})]
    assert s.send_request("roots/list") == 1 << 32  # numbered from its process's range now
    assert changes == []


def test_on_change_fires_for_what_other_processes_must_be_told() -> None:
    s = make()
    init(s)
    changes: list[int] = []
    s.share(first_request_id=0, on_change=lambda: changes.append(1), on_stray=lambda msg: None)
    send(s, request(1, "tools/list"))
    assert changes == []  # a request that changes nothing shared
    send(s, request(2, "logging/setLevel", {"level": "debug"}))
    assert changes == [1] and s.log_level == "debug"
    send(s, request(3, "logging/setLevel", {"level": "loud"}))  # refused: nothing changed
    assert changes == [1]
    s.subscribe("file:///a")
    s.unsubscribe("file:///a")
    assert len(changes) == 3


def test_snapshot_restores_an_equivalent_session_without_a_handshake() -> None:
    first = make()
    init(first, version="2025-06-18", caps={"roots": {}})
    send(first, request(1, "logging/setLevel", {"level": "warning"}))
    first.subscribe("file:///a")
    state = first.snapshot()
    assert state == SessionState("2025-06-18", {"roots": {}}, {"name": "c", "version": "1"}, "warning", frozenset({"file:///a"}))
    again = make()
    again.restore(state)
    assert again.snapshot() == state and again.state is State.READY and again.data_to_send() == []  # nothing answered
    events, out = send(again, request(5, "tools/call", {"name": "x"}))
    assert [type(e) for e in events] == [RequestReceived] and out == []  # served as the first one serves
    assert again.notify("notifications/resources/updated", {"uri": "file:///a"})  # its subscription holds
    assert again.send_request("roots/list") == 0  # the client's capabilities too
    # an initialized session takes another process's changes; on_change is not called for them
    changes: list[int] = []
    again.share(first_request_id=0, on_change=lambda: changes.append(1), on_stray=lambda msg: None)
    again.restore(state._replace(log_level="debug", subscriptions=frozenset()))
    assert (again.log_level, again.subscriptions, changes) == ("debug", frozenset(), [])
    assert not again.notify("notifications/resources/updated", {"uri": "file:///a"})


def test_restore_refuses_a_version_it_does_not_serve() -> None:
    with pytest.raises(LifecycleError):
        make().snapshot()  # not initialized: nothing to share
    old_only = make(handshake_versions=("2024-11-05",))
    with pytest.raises(ValueError, match="not served"):
        old_only.restore(SessionState("2025-11-25", {}, None))
    assert old_only.version is None
    ready = make()
    init(ready, version="2025-11-25")
    with pytest.raises(ValueError, match="not '2025-06-18'"):
        ready.restore(SessionState("2025-06-18", {}, None))


def test_a_decode_error_given_as_the_message_is_answered_as_bad_bytes_are() -> None:
    s = make()
    init(s)
    try:
        core.decode(b"{not json")
    except core.JsonRpcError as exc:
        error = exc
    assert s.receive_message(error) == []
    by_message = s.data_to_send()
    assert s.receive(b"{not json") == []
    assert by_message == s.data_to_send() and orjson.loads(by_message[0])["error"]["code"] == -32700


def test_each_era_declares_its_own_capabilities() -> None:
    handshake = {"tools": {"listChanged": False}}
    stateless = {"tools": {"listChanged": True}, "extensions": {"x.example/ext": {}}}
    s = make(capabilities=handshake, stateless_capabilities=stateless)
    _, out = send(s, modern(1, "server/discover"))
    assert out[0]["result"]["capabilities"] == stateless
    _, out = send(s, modern(2, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
    assert out[0]["params"]["notifications"] == {"toolsListChanged": True}  # honoured by the 2026 flags
    assert s.notify("notifications/tools/list_changed")
    (sent,) = [orjson.loads(b) for b in s.data_to_send()]
    assert sent["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 2
    # a handshake session of the same server: its era did not declare it, so nothing goes out
    h = make(capabilities=handshake, stateless_capabilities=stateless)
    init(h)
    assert not h.notify("notifications/tools/list_changed") and h.data_to_send() == []
    with pytest.raises(CapabilityError):  # declared by neither era
        h.notify("notifications/prompts/list_changed")
    _, out = send(make(serves_listen=False), modern(3, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
    assert out[0]["error"]["code"] == -32601


def test_a_framework_wording_of_method_not_found() -> None:
    # Every -32601 for a method the session does not serve, in both eras and whatever is missing
    # (the method, its capability, the version), is worded one way with the method as data.
    wanted = {"code": -32601, "message": "Method not found"}
    s = make(capabilities={"tools": {}, "resources": {}}, not_found_message="Method not found")
    init(s, "2025-03-26")
    cases = [
        (request(1, "nope/nothing"), "nope/nothing"),  # no such method
        (request(2, "prompts/list"), "prompts/list"),  # its capability not offered
        (request(3, "resources/subscribe", {"uri": "a://b"}), "resources/subscribe"),  # subscriptions not offered
        (request(4, "server/discover"), "server/discover"),  # not in this version
    ]
    for message, method in cases:
        _, out = send(s, message)
        assert out[0]["error"] == {**wanted, "data": method}, out
    _, out = send(make(capabilities={"tools": {}}, not_found_message="Method not found"), modern(5, "prompts/list"))
    assert out[0]["error"] == {**wanted, "data": "prompts/list"}
    _, out = send(make(serves_listen=False, not_found_message="Method not found"), modern(6, "subscriptions/listen", {"notifications": {}}))
    assert out[0]["error"] == {**wanted, "data": "subscriptions/listen"}
    # without it, the session's own wording says what is missing
    _, out = send(make(capabilities={"tools": {}}), modern(7, "prompts/list"))
    assert out[0]["error"] == {"code": -32601, "message": "method not found: prompts/list (capability 'prompts' not offered)"}


def test_an_adopted_request_is_in_flight_as_a_received_one_would_be() -> None:
    # A transport's short path started the request itself: from adopt on, the session holds it
    # as if receive had admitted it (the same entry, its tag on the records).
    s = make()
    init(s)
    call = request(7, "tools/call", {"name": "t", "arguments": {}})
    tag = object()
    adopted = s.adopt(core.decode(orjson.dumps(call)), tag)
    assert (adopted.id, adopted.method, adopted.version, adopted.stateless) == (7, "tools/call", "2025-11-25", False)
    assert s.requests_in_flight == {7: adopted} and s.answering(tag)
    events, out = send(s, request(7, "tools/call", {"name": "t"}))
    assert events == [] and out[0]["error"]["message"] == "request id already in use by a request in flight"
    events, _ = send(s, notification("notifications/cancelled", {"requestId": 7, "reason": "r"}))
    assert events == [RequestCancelled(7, "r")] and s.is_cancelled(7)
    assert not s.respond(7, {"content": []})  # cancelled: never answered
    assert s.requests_in_flight == {}
    other = s.adopt(core.decode(orjson.dumps(request(8, "tools/call", {"name": "t"}))), tag)
    assert s.respond(8, {"content": []})
    assert [(r.request_id, r.tag, r.final) for r in s.records_to_send()] == [(7, tag, True), (8, tag, True)]
    assert other.id == 8 and s.requests_in_flight == {}


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (request(0, "initialize", {}), "a method the session does not admit directly"),
        (modern(9, "tools/call", {"name": "t"}), "a 2026-07-28 request"),
        (request(5, "tools/call", {"name": "t"}), "an id in flight"),
    ],
)
def test_a_request_the_session_would_not_admit_directly_is_not_adopted(message: dict[str, Any], why: str) -> None:
    s = make()
    init(s)
    s.adopt(core.decode(orjson.dumps(request(5, "tools/call", {"name": "t"}))))
    with pytest.raises(ValueError, match="cannot be adopted"):
        s.adopt(core.decode(orjson.dumps(message)))
    assert list(s.requests_in_flight) == [5], why
