"""One timing run of ``stdio_inproc``, run as ``python -c <this file's text>`` inside a source tree.

It imports only ``mcpfast`` (whichever tree is first on ``sys.path``) and the standard library,
so the same worker measures an older checkout that lacks this file. Arguments (argv): mode
(``line``, ``engine`` or ``chunk``), messages per run, and ``profile`` to print a cProfile table of one
run instead. After the handshake, a warm-up and one checked reply, each line read from stdin
starts one timed run, answered by one JSON line on stdout (CPU and wall ns per message).
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING

from mcpfast import core
from mcpfast.server.demo import app

if TYPE_CHECKING:
    from mcpfast.server.connection import Connection

_ECHO = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the stdio benchmark"}}}'
_INIT = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"stdio-inproc","version":"1"}}}'
)
_INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
_CHUNK_LINES = 32


def _session() -> Connection:
    try:
        conn = app.connect(records=False)  # what serve_stdio asks for
    except TypeError:  # an older tree: its sessions always kept bytes only
        conn = app.connect()
    conn.feed(_INIT)
    conn.feed(_INITIALIZED)
    conn.session.data_to_send()
    return conn


def _line_loop(conn: Connection, n: int) -> None:
    """``feed`` one line, take its reply: the engine, dispatch and the handler per message."""
    feed = conn.feed
    take = conn.session.data_to_send
    line = _ECHO
    for _ in range(n):
        feed(line)
        take()


def _engine_loop(conn: Connection, n: int) -> None:
    """The engine alone: ``receive`` the line, ``respond`` with the echo result, take the reply."""
    session = conn.session
    receive = session.receive
    respond = session.respond
    take = session.data_to_send
    line = _ECHO
    result = {"content": [{"type": "text", "text": "hello from the stdio benchmark"}]}
    for _ in range(n):
        receive(line)
        respond(7, result)
        take()


def _chunk_loop(conn: Connection, n: int) -> None:
    """``serve_stdio``'s loop: frame a 32-line read, feed each line, one framed write per read."""
    feed = conn.feed
    take = conn.session.data_to_send
    framer = core.LineFramer()
    frame = core.frame_lines
    chunk = b"\n".join([_ECHO] * _CHUNK_LINES) + b"\n"
    for _ in range(max(1, n // _CHUNK_LINES)):
        for item in framer.feed(chunk):
            feed(item)  # type: ignore[arg-type]  # bytes: every _ECHO line is far under the framer's limit
        frame(take())


def main() -> None:
    mode, n = sys.argv[1], int(sys.argv[2])
    profile = len(sys.argv) > 3 and sys.argv[3] == "profile"
    loop = {"line": _line_loop, "engine": _engine_loop, "chunk": _chunk_loop}[mode]
    count = max(1, n // _CHUNK_LINES) * _CHUNK_LINES if mode == "chunk" else n
    conn = _session()
    conn.feed(_ECHO)
    reply = b"".join(conn.session.data_to_send())
    if b'"result"' not in reply or b"hello from the stdio benchmark" not in reply:
        raise SystemExit(f"unexpected reply: {reply[:200]!r}")
    loop(conn, n)  # warm-up
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        loop(conn, n)
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
        return
    # Serve timing requests: each line on stdin asks for one run of the loop, answered with one
    # JSON line (CPU and wall ns per message); the parent alternates two such processes.
    for _ in sys.stdin:
        c0, w0 = time.process_time_ns(), time.perf_counter_ns()
        loop(conn, n)
        c1, w1 = time.process_time_ns(), time.perf_counter_ns()
        sys.stdout.write(json.dumps({"cpu_ns": (c1 - c0) / count, "wall_ns": (w1 - w0) / count, "core": core.IMPLEMENTATION}) + "\n")
        sys.stdout.flush()


main()
