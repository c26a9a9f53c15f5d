"""SSE streams resume on another process (GET + Last-Event-ID): every missed event exactly once."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from scale_client import Mcp

pytestmark = pytest.mark.timeout(120)


def _replay(client: Mcp, last: str) -> list[tuple[str, dict]]:  # type: ignore[type-arg]
    """Resume with ``last``; the events until the stream ends (a replay of a stream not live here)."""
    status, sse = client.open("GET", headers={"last-event-id": last})
    assert status == 200, sse
    assert not isinstance(sse, bytes)
    return sse.drain()


def test_dropped_post_stream_resumes_on_the_other_process(servers) -> None:
    a, b = servers(2)
    client = a.client()
    client.initialize({"elicitation": {}})
    stream = client.ask_me()
    priming = stream.next()
    assert priming is not None and priming[1] is None
    ask_id, ask = stream.message()
    assert ask["method"] == "elicitation/create"
    stream.close()  # the client loses the stream (not a cancel in this era)
    assert client.on(b.port).raw("POST", Mcp.accept(ask, "bo"))[0] == 202
    on_b = client.on(b.port)
    deadline = time.monotonic() + 15
    while True:  # the answer is reached by a; the result lands in the shared event store
        missed = _replay(on_b, ask_id)
        if missed or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(missed) == 1, missed
    assert "bo@example.test" in missed[0][1]["result"]["content"][0]["text"]
    # From the priming event: the question and the answer, once each, in order, on either process.
    for port in (b.port, a.port):
        again = _replay(client.on(port), priming[0])
        assert [e[0] for e in again] == [ask_id, missed[0][0]]
        assert again[0][1]["method"] == "elicitation/create" and "result" in again[1][1]
    assert len({ask_id, missed[0][0], priming[0]}) == 3


def test_get_stream_of_a_killed_process_resumes_on_the_other(servers) -> None:
    a, b = servers(2)
    client = a.client()
    client.initialize()
    get = client.get_stream()
    assert client.call("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})[0] == 200
    first_id, first = get.message()
    assert first["method"] == "notifications/tools/list_changed"
    a.kill()  # mid-stream
    assert get.next() is None
    get.close()
    # While nobody holds the stream, b sends a notification for it: kept under its id.
    assert client.on(b.port).call("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})[0] == 200
    resumed = client.on(b.port).get_stream(first_id)
    second_id, second = resumed.message()
    assert second["method"] == "notifications/tools/list_changed" and second_id != first_id
    # The resumed stream is live on b: the next notification comes on it, once.
    assert client.on(b.port).call("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})[0] == 200
    third_id, third = resumed.message()
    assert third["method"] == "notifications/tools/list_changed" and third_id not in (first_id, second_id)
    resumed.close()


def test_unknown_last_event_id_is_404(servers) -> None:
    a, b = servers(2)
    client = a.client()
    client.initialize()
    status, _, _ = client.on(b.port).raw("GET", headers={"last-event-id": "0-nope.1"})
    assert status == 404


def test_post_stream_resumed_on_the_other_process_follows_the_live_request(servers) -> None:
    a, b = servers(2)
    client = a.client()
    client.initialize({"elicitation": {}})
    stream = client.ask_me()  # the request runs on a
    priming = stream.next()
    assert priming is not None and priming[1] is None
    ask_id, ask = stream.message()
    assert ask["method"] == "elicitation/create"
    stream.close()
    # Resumed on b before the request is answered: nothing missed yet, and the stream stays open.
    on_b = client.on(b.port)
    resumed = on_b.get_stream(ask_id)
    # The answer reaches a (through b: a reply for a request b did not send is passed on) ...
    assert on_b.raw("POST", Mcp.accept(ask, "live"))[0] == 202
    # ... and the result a produces comes on b's resumed stream, once, then the stream ends.
    rest = resumed.drain()
    assert len(rest) == 1, rest
    result_id, result = rest[0]
    assert "result" in result
    assert "live@example.test" in result["result"]["content"][0]["text"]
    # What was followed is kept once: a later resumption from the question replays the same event.
    again = _replay(client.on(a.port), ask_id)
    assert again == [(result_id, result)]


def test_an_event_goes_out_only_once_the_store_has_it(servers, redis) -> None:
    """While Redis does not answer, a notification waits; once kept it goes out, and the process
    that sent it may die at once: its id resumes on the other process."""
    a, b = servers(2)
    client = a.client()
    client.initialize()
    get = client.get_stream()
    got: list[tuple[str | None, object]] = []
    reader = threading.Thread(target=lambda: got.append(get.message()), daemon=True)
    assert redis.proc is not None
    pid = redis.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        reader.start()
        caller = threading.Thread(
            target=client.call, args=("tools/call", {"name": "test_trigger_tool_change", "arguments": {}}), daemon=True
        )
        caller.start()
        time.sleep(0.5)  # well inside the store's 1 s round-trip limit
        assert not got, got  # sent before Redis had it, an id nobody else could resume from
    finally:
        os.kill(pid, signal.SIGCONT)
    reader.join(15)
    caller.join(15)
    assert got, "the notification never came"
    eid, message = got[0]
    assert isinstance(message, dict) and message["method"] == "notifications/tools/list_changed" and eid
    a.kill()
    get.close()
    # b knows the id (a 404 would mean the client holds an event the store never got)
    assert client.on(b.port).call("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})[0] == 200
    resumed = client.on(b.port).get_stream(eid)
    later_id, later = resumed.message()
    assert later["method"] == "notifications/tools/list_changed" and later_id != eid
    resumed.close()
