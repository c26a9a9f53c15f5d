"""A small blocking MCP-over-HTTP client for the scale-out tests (stdlib ``http.client``).

Deliberately independent of ``mcpfast.client``: it speaks the wire format the tests assert.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from typing import Any

VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def until(check: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something true (an AssertionError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout}s")


class Sse:
    """An open SSE response: ``next()`` gives ``(id, data)`` per event (comments skipped)."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self.conn = conn
        self.resp = resp

    def next(self) -> tuple[str | None, Any] | None:
        eid: str | None = None
        data: list[str] = []
        while True:
            try:
                line = self.resp.readline()
            except (http.client.IncompleteRead, ConnectionError):
                return None  # the server went away mid-stream
            if not line:
                return None
            text = line.decode().rstrip("\r\n")
            if text == "":
                if data or eid is not None:
                    joined = "\n".join(data)
                    return eid, (json.loads(joined) if joined else None)
                continue
            if text.startswith(":"):
                continue
            field, _, value = text.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                eid = value
            elif field == "data":
                data.append(value)

    def message(self) -> tuple[str | None, Any]:
        """The next event that carries a message (skips the empty priming event)."""
        while True:
            event = self.next()
            assert event is not None, "the stream ended"
            if event[1] is not None:
                return event

    def drain(self) -> list[tuple[str | None, Any]]:
        """Every message event until the stream ends (then closed)."""
        events = []
        while (event := self.next()) is not None:
            if event[1] is not None:
                events.append(event)
        self.close()
        return events

    def close(self) -> None:
        self.conn.close()


class Mcp:
    """Requests to one server process (``session`` may be set to any process's session id)."""

    def __init__(self, port: int, session: str | None = None, timeout: float = 15.0) -> None:
        self.port = port
        self.session = session
        self.timeout = timeout
        self._next = 1

    def on(self, port: int) -> Mcp:
        """The same session, talking to another process."""
        other = Mcp(port, self.session, self.timeout)
        other._next = self._next + 1000
        return other

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        h = {"accept": ACCEPT, "content-type": "application/json", "mcp-protocol-version": VERSION}
        if self.session:
            h["mcp-session-id"] = self.session
        h.update(extra or {})
        return h

    def raw(self, method: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            conn.request(method, "/mcp", body=payload, headers=self._headers(headers))
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def open(self, method: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Sse | bytes]:
        """A request whose answer may stream: an ``Sse`` when it does, else the body."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        payload = json.dumps(body).encode() if body is not None else None
        conn.request(method, "/mcp", body=payload, headers=self._headers(headers))
        resp = conn.getresponse()
        if resp.getheader("content-type", "").startswith("text/event-stream"):
            return resp.status, Sse(conn, resp)
        data = resp.read()
        conn.close()
        return resp.status, data

    def request_body(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        rid = self._next
        self._next += 1
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            body["params"] = params
        return body

    def initialize(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        status, headers, data = self.raw(
            "POST",
            self.request_body(
                "initialize",
                {"protocolVersion": VERSION, "capabilities": capabilities or {}, "clientInfo": {"name": "scale-test", "version": "1"}},
            ),
        )
        assert status == 200, (status, data)
        self.session = headers["mcp-session-id"]
        status, _, _ = self.raw("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert status == 202
        return json.loads(data)

    def get_stream(self, last_event_id: str | None = None) -> Sse:
        """The session's GET stream (resumed after ``last_event_id`` when given)."""
        status, sse = self.open("GET", headers={"last-event-id": last_event_id} if last_event_id else None)
        assert status == 200 and not isinstance(sse, bytes), (status, sse)
        return sse

    def ask_me(self) -> Sse:
        """Call the fixture's ``test_elicitation`` tool: its answer streams (the question first)."""
        status, stream = self.open("POST", self.request_body("tools/call", {"name": "test_elicitation", "arguments": {"message": "who?"}}))
        assert status == 200 and not isinstance(stream, bytes), (status, stream)
        return stream

    @staticmethod
    def accept(ask: dict[str, Any], username: str) -> dict[str, Any]:
        """The client's answer to an ``elicitation/create`` request."""
        return {
            "jsonrpc": "2.0",
            "id": ask["id"],
            "result": {"action": "accept", "content": {"username": username, "email": f"{username}@example.test"}},
        }

    def call(self, method: str, params: dict[str, Any] | None = None) -> tuple[int, Any]:
        status, _, data = self.raw("POST", self.request_body(method, params))
        return status, (json.loads(data) if data else None)


class Legacy:
    """A 2024-11-05 HTTP+SSE session: the ``/sse`` stream open on ``port``, its ``/messages``
    endpoint, ``event()`` for the next message on the stream and ``post()`` to any process."""

    def __init__(self, port: int, timeout: float = 15.0) -> None:
        self.timeout = timeout
        self.headers: dict[str, str] = {}
        """The last ``post`` answer's headers (lower-case names)."""
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.request("GET", "/sse", headers={"accept": "text/event-stream"})
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.status
        self.endpoint = ""
        while not self.endpoint:
            self.endpoint = self._data()

    def _data(self) -> str:
        while True:
            line = self.resp.readline().decode().strip()
            if line.startswith("data:"):
                return line.split(":", 1)[1].strip()

    def event(self) -> Any:
        return json.loads(self._data())

    def post(self, port: int, message: dict[str, Any] | bytes, path: str | None = None) -> tuple[int, bytes]:
        """POST a message (a dict, or raw bytes) to ``path`` (the endpoint) on ``port``."""
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=self.timeout)
        try:
            conn.request("POST", path or self.endpoint, body=body, headers={"content-type": "application/json"})
            answer = conn.getresponse()
            self.headers = {k.lower(): v for k, v in answer.getheaders()}
            return answer.status, answer.read()
        finally:
            conn.close()

    def close(self) -> None:
        self.conn.close()
