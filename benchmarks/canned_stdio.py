"""The canned-reply stdio responder: MCP's stdio replies with no MCP behind them.

The floor ``benchmarks.server_deployed`` measures ``mcpfast serve --transport stdio`` against, on
the same client (``benchmarks.stdio_bench.run_server``): uvloop read and write pipes on stdin and
stdout, one write per read, every reply from prepared bytes with the request's id spliced in. It
finds a line's ``id`` and ``method`` by a byte search (``canned_responder.json_value``: no JSON
parsing, no session, no checks) and answers

* ``tools/call``: ``{"content":[{"type":"text","text":ECHO_TEXT}]}`` whatever the arguments,
  ``ECHO_TEXT`` being the text ``stdio_bench``'s client asks ``echo`` to return;
* ``initialize``: the result ``mcpfast serve --transport stdio`` gives for the demo app;
* any other request: error -32601; a notification or a line without an id: nothing.

These bytes are ``mcpfast serve``'s own for the same requests (``server_deployed`` compares them
before it measures), so the same bytes cross the pipes and only the work behind them differs.

::

    python -m benchmarks.canned_stdio
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import uvloop

from benchmarks.canned_responder import json_value
from benchmarks.stdio_bench import ECHO_TEXT, PROTOCOL

__all__ = ["main", "replies"]

_OPEN = b'{"jsonrpc":"2.0","id":'
_ECHO = b',"result":{"content":[{"type":"text","text":' + json.dumps(ECHO_TEXT).encode() + b"}]}}\n"
_INITIALIZE = (
    b',"result":{"protocolVersion":"' + PROTOCOL.encode() + b'","capabilities":{"tools":{"listChanged":true},'
    b'"resources":{"subscribe":true,"listChanged":true},"prompts":{"listChanged":true},"completions":{},"logging":{}},'
    b'"serverInfo":{"name":"mcpfast-demo","version":"0.1.0","title":"mcpfast demo server"},'
    b'"instructions":"A small demo: echo, add, stream."}}\n'
)
_NO_METHOD = b',"error":{"code":-32601,"message":"Method not found"}}\n'
_TOOLS_CALL = b'"tools/call"'
_INITIALIZE_METHOD = b'"initialize"'


def replies(lines: list[bytes]) -> bytes:
    """The replies to whole request lines, in order, as one write."""
    out = []
    for line in lines:
        rid = json_value(line, b'"id"')
        method = json_value(line, b'"method"')
        if rid is None or method is None:  # a notification, or the client's answer to a request
            continue
        body = _ECHO if method == _TOOLS_CALL else _INITIALIZE if method == _INITIALIZE_METHOD else _NO_METHOD
        out.append(_OPEN + rid + body)
    return b"".join(out)


class _Stdin(asyncio.Protocol):
    """Lines from stdin; the replies to every whole line of a read written at once."""

    def __init__(self, out: asyncio.WriteTransport, done: asyncio.Future[None]) -> None:
        self._out = out
        self._done = done
        self._rest = b""

    def data_received(self, data: bytes) -> None:
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        answer = replies(lines)
        if answer:
            self._out.write(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._done.done():
            self._done.set_result(None)


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(1, "wb", buffering=0))
    done: asyncio.Future[None] = loop.create_future()
    stdin: Any = os.fdopen(0, "rb", buffering=0)
    await loop.connect_read_pipe(lambda: _Stdin(out, done), stdin)
    await done
    out.close()


def main() -> int:
    uvloop.run(_serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
