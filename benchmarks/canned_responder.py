"""The canned-reply responder: Streamable HTTP's replies with no MCP behind them.

The lower bound ``benchmarks.server_canned`` measures ``mcpfast serve`` against: an HTTP/1.1
keep-alive server on uvloop with httptools' parser that answers ``POST /mcp`` with replies built
when it starts. It finds the JSON-RPC ``method`` and ``id`` by searching the body's bytes (no
JSON parsing, no session table, no header checks) and splices the id into the reply:

* ``initialize``: 200, a fixed result with the capabilities ``mcpfast serve`` gives the demo app
  and a body of the same length, and a new ``mcp-session-id`` of the same length (a counter:
  unique, not secret);
* a notification (``notifications/initialized``) or a JSON-RPC response: 202, no body;
* ``tools/call``: 200, ``{"content":[{"type":"text","text":"hello"}]}`` whatever the arguments:
  byte for byte ``mcpfast serve``'s reply to the generator's call, ``echo {"text": "hello"}``;
* ``ping``: an empty result; any other request: error -32601;
* ``DELETE /mcp``: 200, no body; another method on ``/mcp``: 405; another path: 404.

Every reply has the header lines ``mcpfast serve`` sends, in its order and case (``date``
included, rebuilt once a second by a timer), and a correct ``content-length``, so the same bytes
cross the socket and only the work behind them differs. Request bodies must be UTF-8 JSON with
plain (unescaped) ``method`` and ``id`` values, as every MCP client sends them.

::

    python -m benchmarks.canned_responder --port 8000     # http://127.0.0.1:8000/mcp
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from email.utils import formatdate
from typing import Any

import httptools
import uvloop

__all__ = ["ECHO_TEXT", "PATH", "SESSION_ID_LENGTH", "CannedReplies", "json_value", "main", "serve"]

PATH = b"/mcp"
ECHO_TEXT = "hello"
"""The text of every tools/call reply: what ``mcpfast-load`` asks ``echo`` to return."""
SESSION_ID_LENGTH = 32
"""The length of ``mcpfast serve``'s session ids (so the ``initialize`` head is as long as its)."""

_ID_KEY = b'"id"'
_METHOD_KEY = b'"method"'
_WHITESPACE = b" \t\r\n"
_END_OF_VALUE = b",}] \t\r\n"

# The bodies around the request id. The initialize result has mcpfast serve's capabilities for
# the demo app; its names are chosen to make the body exactly as long as that server's.
_OPEN = b'{"jsonrpc":"2.0","id":'
_INITIALIZE = (
    b',"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},'
    b'"resources":{"subscribe":true,"listChanged":true},"prompts":{"listChanged":true},"completions":{},"logging":{}},'
    b'"serverInfo":{"name":"canned-reply","version":"0.1.0","title":"canned-reply server"},'
    b'"instructions":"Canned replies: no MCP, no JSON."}}'
)
_ECHO = b',"result":{"content":[{"type":"text","text":"' + ECHO_TEXT.encode() + b'"}]}}'
_EMPTY = b',"result":{}}'
_NO_METHOD = b',"error":{"code":-32601,"message":"Method not found"}}'

_OK_JSON = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
_OK_SESSION = b"HTTP/1.1 200 OK\r\nmcp-session-id: "
_ACCEPTED = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n"
_OK_EMPTY = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n"
_NOT_ALLOWED = b"HTTP/1.1 405 Method Not Allowed\r\nallow: POST, DELETE\r\ncontent-length: 0\r\n"
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n"
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"


def json_value(body: bytes, key: bytes) -> bytes | None:
    """The raw value that follows the first ``key`` (a quoted member name) used as a name: a
    string with its quotes, or a number or literal; ``None`` when there is none.

    A byte search, not a parser: it takes the first occurrence followed by a colon, wherever it
    stands. That is the top-level member when ``id`` and ``method`` come before ``params``, as
    ``mcpfast-load`` and mcpfast's client write them; a request whose ``params`` come first and
    hold a member of that name would get the wrong value."""
    n = len(body)
    at = body.find(key)
    while at >= 0:
        i = at + len(key)
        while i < n and body[i] in _WHITESPACE:
            i += 1
        if i < n and body[i] == 0x3A:  # ":"
            i += 1
            while i < n and body[i] in _WHITESPACE:
                i += 1
            if body[i : i + 1] == b'"':
                end = body.find(b'"', i + 1)
                return body[i : end + 1] if end > 0 else None
            end = i
            while end < n and body[end] not in _END_OF_VALUE:
                end += 1
            return body[i:end] or None
        at = body.find(key, at + 1)
    return None


class CannedReplies:
    """The reply to each request, from prepared bytes; the ``date`` line is kept by :meth:`tick`."""

    def __init__(self) -> None:
        self.date = b""
        self._sessions = itertools.count(1)
        self.tick()

    def tick(self) -> None:
        """Rebuild the ``date`` header line (the server calls this once a second)."""
        self.date = b"date: " + formatdate(time.time(), usegmt=True).encode("ascii") + b"\r\n\r\n"

    def answer(self, method: bytes, url: bytes, body: bytes) -> bytes:
        """The whole HTTP response to one request."""
        if url != PATH and not url.startswith(PATH + b"?"):
            return _NOT_FOUND + self.date
        if method == b"POST":
            return self._post(body)
        if method == b"DELETE":
            return _OK_EMPTY + self.date
        return _NOT_ALLOWED + self.date

    def _post(self, body: bytes) -> bytes:
        rid = json_value(body, _ID_KEY)
        name = json_value(body, _METHOD_KEY)
        if rid is None or name is None:  # a notification, or the client's reply to a request
            return _ACCEPTED + self.date
        if name == b'"tools/call"':
            reply = _OPEN + rid + _ECHO
        elif name == b'"initialize"':
            reply = _OPEN + rid + _INITIALIZE
            session = b"%0*x" % (SESSION_ID_LENGTH, next(self._sessions))
            return _OK_SESSION + session + b"\r\ncontent-type: application/json\r\ncontent-length: %d\r\n" % len(reply) + self.date + reply
        elif name == b'"ping"':
            reply = _OPEN + rid + _EMPTY
        else:
            reply = _OPEN + rid + _NO_METHOD
        return _OK_JSON + b"%d\r\n" % len(reply) + self.date + reply


class _Connection(asyncio.Protocol):
    """One client connection: httptools calls back with the parts of each request."""

    __slots__ = ("_body", "_parser", "_replies", "_transport", "_url")

    def __init__(self, replies: CannedReplies) -> None:
        self._replies = replies
        self._parser = httptools.HttpRequestParser(self)
        self._transport: Any = None
        self._url = b""
        self._body = b""

    def connection_made(self, transport: Any) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._transport.write(_BAD_REQUEST)
            self._transport.close()

    # httptools' callbacks (only those defined are called)
    def on_message_begin(self) -> None:
        self._url = b""
        self._body = b""

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_body(self, body: bytes) -> None:
        self._body += body

    def on_message_complete(self) -> None:
        self._transport.write(self._replies.answer(self._parser.get_method(), self._url, self._body))
        if not self._parser.should_keep_alive():
            self._transport.close()


async def serve(host: str, port: int) -> None:
    """Serve on ``host:port`` until cancelled (or the process ends)."""
    loop = asyncio.get_running_loop()
    replies = CannedReplies()

    def tick() -> None:
        replies.tick()
        loop.call_later(1.0, tick)

    loop.call_later(1.0, tick)
    server = await loop.create_server(lambda: _Connection(replies), host, port, backlog=2048)
    print(f"canned responder on http://{host}:{port}{PATH.decode()}", file=sys.stderr, flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.canned_responder", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    opts = parser.parse_args(argv)
    uvloop.run(serve(opts.host, opts.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
