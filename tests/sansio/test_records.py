"""The engine's output describes itself: each ``Outgoing`` record says what its message is."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcpfast import core
from mcpfast.sansio import BATCH, END, ERROR, NOTIFICATION, REQUEST, RESULT, Outgoing, RequestReceived, ServerSession

CAPS = {"tools": {"listChanged": True}, "resources": {"subscribe": True}, "logging": {}}
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def ready(version: str = "2025-11-25", caps: dict[str, Any] | None = None, records: bool = True) -> ServerSession:
    s = ServerSession({"name": "srv", "version": "1"}, CAPS, records=records)
    s.receive(
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": version, "capabilities": caps or {}, "clientInfo": {"name": "c", "version": "1"}},
            }
        )
    )
    s.receive(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    s.data_to_send()
    return s


def call(rid: Any, meta: dict[str, Any] | None = None) -> bytes:
    params: dict[str, Any] = {"name": "t", "arguments": {}}
    if meta:
        params["_meta"] = meta
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


def shape(record: Outgoing) -> tuple[str, Any, Any, bool, Any]:
    return record.kind, record.request_id, record.code, record.final, record.tag


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param(b'{"jsonrpc":"2.0","id":7,"method":"ping"}', (RESULT, 7, None, True, "T"), id="ping"),
        pytest.param(b'{"jsonrpc":"2.0","id":8,"method":"nope/x"}', (ERROR, 8, -32601, True, "T"), id="unknown-method"),
        pytest.param(b'{"jsonrpc":"2.0","id":9,', (ERROR, None, -32700, True, "T"), id="parse-error"),
        pytest.param(
            b'{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"loud"}}', (ERROR, 1, -32602, True, "T"), id="bad-level"
        ),
    ],
)
def test_engine_answers_carry_their_request_code_and_tag(message: bytes, expected: tuple[Any, ...]) -> None:
    s = ready()
    assert s.receive(message, "T") == []
    (record,) = s.records_to_send()
    assert shape(record) == expected
    assert not s.answering("T")
    rid, is_error, code = core.scan_reply(record.data)  # what the record says is what the bytes say
    assert (rid, is_error, code) == (expected[1], expected[0] == ERROR, expected[2])


def test_admitted_request_progress_and_result() -> None:
    s = ready()
    (event,) = s.receive(call(3, {"progressToken": "p"}), "POST-1")
    assert isinstance(event, RequestReceived)
    assert s.answering("POST-1") and not s.answering("POST-2")
    s.progress(3, 0.5)
    s.log("info", "working", request_id=3)
    s.notify("notifications/tools/list_changed")  # unrelated: no request, no tag
    s.respond(3, {"content": []})
    records = s.records_to_send()
    assert [shape(r) for r in records] == [
        (NOTIFICATION, 3, None, False, "POST-1"),
        (NOTIFICATION, 3, None, False, "POST-1"),
        (NOTIFICATION, None, None, False, None),
        (RESULT, 3, None, True, "POST-1"),
    ]
    assert not s.answering("POST-1")


def test_error_answer_and_server_to_client_request() -> None:
    s = ready(caps={"sampling": {}})
    s.receive(call(4), "A")
    sent = s.send_request("sampling/createMessage", {"messages": []}, related=4)
    s.cancel_request(sent)
    s.respond_error(4, -32602, "bad")
    assert [shape(r) for r in s.records_to_send()] == [
        (REQUEST, 4, None, False, "A"),
        (NOTIFICATION, 4, None, False, "A"),
        (ERROR, 4, -32602, True, "A"),
    ]


def test_duplicate_id_is_answered_on_the_new_input_not_the_one_in_flight() -> None:
    s = ready()
    s.receive(call(5), "first")
    s.receive(call(5), "second")
    (record,) = s.records_to_send()
    assert shape(record) == (ERROR, 5, -32600, True, "second")
    assert s.answering("first") and not s.answering("second")


def test_cancelled_request_ends_without_bytes() -> None:
    s = ready()
    s.receive(call(6), "P")
    s.receive(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}}', "Q")
    assert not s.answering("Q")
    assert s.respond(6, {"content": []}) is False
    (record,) = s.records_to_send()
    assert shape(record) == (END, 6, None, True, "P") and record.data == b""
    assert not s.answering("P")
    assert s.data_to_send() == []  # stdio writes nothing for it


def test_batch_is_one_final_record_and_notifications_owe_nothing() -> None:
    s = ready("2025-03-26")
    batch = b'[{"jsonrpc":"2.0","id":1,"method":"ping"},' + call(2) + b',{"jsonrpc":"2.0","method":"notifications/x"}]'
    events = s.receive(batch, "B")
    assert s.answering("B") and s.records_to_send() == []
    s.respond(events[0].request.id, {"content": []})
    (record,) = s.records_to_send()
    assert shape(record) == (BATCH, None, None, True, "B")
    assert [m["id"] for m in orjson.loads(record.data)] == [1, 2]
    assert not s.answering("B")
    s.receive(b'[{"jsonrpc":"2.0","method":"notifications/x"}]', "N")
    assert s.records_to_send() == [] and not s.answering("N")


def test_batch_of_cancelled_requests_ends_with_an_end_record() -> None:
    s = ready("2025-03-26")
    s.receive(b"[" + call(1) + b"]", "B")
    s.receive(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}')
    s.respond(1, {"content": []})
    (record,) = s.records_to_send()
    assert shape(record) == (END, None, None, True, "B")


def test_stateless_listen_stream_records() -> None:
    s = ServerSession({"name": "srv", "version": "1"}, CAPS)
    listen = {
        "jsonrpc": "2.0",
        "id": "L",
        "method": "subscriptions/listen",
        "params": {"_meta": MODERN_META, "notifications": {"toolsListChanged": True}},
    }
    assert s.receive_message(core.decode(orjson.dumps(listen)), "S") == []
    s.notify("notifications/tools/list_changed")
    s.close_listens()
    assert [shape(r) for r in s.records_to_send()] == [
        (NOTIFICATION, "L", None, False, "S"),
        (NOTIFICATION, "L", None, False, "S"),
        (RESULT, "L", None, True, "S"),
    ]
    assert not s.answering("S")


def test_receive_message_takes_a_decoded_message() -> None:
    s = ready()
    (event,) = s.receive_message(core.decode(call(11)), "T")
    assert isinstance(event, RequestReceived) and event.request.id == 11


def _scenario_messages(s: ServerSession) -> None:
    """Inputs that make every kind of record: result, errors, progress, request, END, batch."""
    s.receive(call(1, {"progressToken": "p"}), "A")
    s.progress(1, 0.5)
    s.respond(1, {"content": []})
    s.receive(b'{"jsonrpc":"2.0","id":2,"method":"nope/x"}', "B")
    s.receive(b'{"jsonrpc":"2.0","id":3,', "C")
    s.receive(call(4), "D")
    s.send_request("sampling/createMessage", {"messages": []}, related=4)
    s.receive(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}', "E")
    s.respond(4, {"content": []})  # cancelled: an END record, no bytes
    s.receive(b'[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":6,"method":"ping"}]', "F")
    s.receive_oversized(10, 5, "G")


@pytest.mark.parametrize("version", ["2025-03-26", "2025-11-25"])
def test_a_session_without_records_writes_the_same_bytes(version: str) -> None:
    described = ready(version, caps={"sampling": {}})
    plain = ready(version, caps={"sampling": {}}, records=False)
    for s in (described, plain):
        _scenario_messages(s)
    records = described.records_to_send()
    assert END in [r.kind for r in records] and ERROR in [r.kind for r in records]
    assert plain.data_to_send() == [r.data for r in records if r.data]
    with pytest.raises(RuntimeError, match="records=False"):
        plain.records_to_send()


def test_a_session_without_records_wakes_its_writer_once_per_batch_of_output() -> None:
    s = ServerSession({"name": "srv", "version": "1"}, CAPS, records=False)
    woken: list[int] = []
    s.on_output = lambda: woken.append(1)
    s.receive(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    s.receive(b'{"jsonrpc":"2.0","id":2,"method":"ping"}')
    assert len(woken) == 1 and len(s.data_to_send()) == 2
    s.receive(b'{"jsonrpc":"2.0","id":3,"method":"ping"}')
    assert len(woken) == 2


def test_a_result_the_encoder_fails_on_unexpectedly_stays_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    s = ready()
    s.receive(call(9), "T")

    def broken(*args: Any) -> bytes:
        raise RuntimeError("encoder down")

    monkeypatch.setattr(core, "encode_result", broken)
    with pytest.raises(RuntimeError, match="encoder down"):
        s.respond(9, {"content": []})
    assert s.in_flight() == [9] and s.answering("T") and s.records_to_send() == []
    monkeypatch.undo()
    assert s.respond(9, {"content": []}) is True
    (record,) = s.records_to_send()
    assert shape(record) == (RESULT, 9, None, True, "T")


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(b'{"jsonrpc":"2.0","id":7,"method":"ping"}', id="ping"),
        pytest.param(b'{"jsonrpc":"2.0","id":8,"method":"nope/x"}', id="unknown-method"),
        pytest.param(b'{"jsonrpc":"2.0","id":9,', id="parse-error"),
        pytest.param(b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"nope/x"}]', id="engine-only-batch"),
    ],
)
def test_answers_the_engine_makes_say_so(message: bytes) -> None:
    s = ready("2025-03-26")
    s.receive(message, "T")
    (record,) = s.records_to_send()
    assert record.final and record.by_engine


def test_answers_through_the_application_are_not_the_engines() -> None:
    s = ready("2025-03-26")
    s.receive(call(1), "A")
    s.receive(call(2), "B")
    s.receive(b'[{"jsonrpc":"2.0","id":3,"method":"ping"},' + call(4) + b"]", "C")
    s.respond(1, {"content": []})
    s.respond_error(2, -32602, "bad")
    s.respond(4, {"content": []})
    records = s.records_to_send()
    assert [(r.kind, r.by_engine) for r in records] == [(RESULT, False), (ERROR, False), (BATCH, False)]
