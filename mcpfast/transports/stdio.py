"""The stdio transport: newline-delimited JSON-RPC over a child process's stdin and stdout.

A thin adapter: it frames bytes, feeds the session machine through a ``Connection`` and writes
what the session machine queued with one ``core.frame_lines`` write. Replies of plain sync
handlers are produced inline while a chunk of input is fed, so every reply a read chunk produced
goes out in one write at the end of that chunk; output produced later (by tasks) is written by a
writer task, one write per wake-up. Backpressure runs both ways: input is not read while too
many requests are in flight or while the peer is not reading our output.

The framing is the core's ``StdioLane``: once the session serves ``tools/call`` directly (after
``initialize``), it also answers the lines that are a plain ``tools/call`` of a plain sync tool
(the application's ``run_plain_tool``), with the reply encoded in the core, in one crossing per
read; the other lines, from the first it leaves on, take the session machine's full path. The
replies are the same bytes either way (``lane=False``: every line takes the full path).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import sys
from typing import TYPE_CHECKING, Any, Final

from mcpfast import core
from mcpfast.protocol import methods as m
from mcpfast.sansio import error_reply, unencodable_result

if TYPE_CHECKING:
    from mcpfast.server.app import Server
    from mcpfast.server.connection import Connection

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "DEFAULT_SHUTDOWN_GRACE", "run_stdio", "serve_stdio"]

logger = logging.getLogger("mcpfast.transports.stdio")

DEFAULT_MAX_IN_FLIGHT: Final = 256
"""Requests served at once before the transport stops reading input."""
DEFAULT_SHUTDOWN_GRACE: Final = 0.5
"""Seconds requests in flight at stdin EOF get to finish before they are cancelled."""
_READ_SIZE: Final = 1 << 16


class _Writer:
    """Drains the session machine's outbox into the stream, one batched write per wake-up.

    While the read loop feeds a chunk (``hold``), output is left in the outbox and written by
    ``flush`` at the end of the chunk; the writer task only wakes for output made outside that.
    """

    def __init__(self, conn: Connection, writer: asyncio.StreamWriter) -> None:
        self._conn = conn
        self._writer = writer
        self._wake = asyncio.Event()
        self._closing = False
        self._holding = False
        self._answered = b""
        self.broken = False
        conn.session.on_output = self._on_output

    def _on_output(self) -> None:
        if not self._holding:
            self._wake.set()

    def hold(self, answered: bytes = b"") -> None:
        """Keep output in the outbox until ``flush`` (the read loop is feeding a chunk);
        ``answered``: the lane's replies to the chunk's first lines, written first."""
        self._holding = True
        self._answered = answered

    def flush(self) -> None:
        """Write whatever is queued now, in one write (no waiting: see ``drained``)."""
        self._holding = False
        answered, self._answered = self._answered, b""
        messages = self._conn.session.data_to_send()
        if messages:
            self.write(answered + core.frame_lines(messages))
        elif answered:
            self.write(answered)

    def write(self, data: bytes) -> None:
        """Write framed lines now (the lane's replies to a whole chunk, or what ``flush`` took)."""
        if not self.broken:
            try:
                self._writer.write(data)
            except (ConnectionError, BrokenPipeError, RuntimeError):
                self.broken = True

    def close(self) -> None:
        self._closing = True
        self._wake.set()

    async def run(self) -> None:
        session = self._conn.session
        while True:
            await self._wake.wait()
            self._wake.clear()
            messages = session.data_to_send()
            if messages:
                try:
                    self._writer.write(core.frame_lines(messages))
                    await self._writer.drain()
                except (ConnectionError, BrokenPipeError, RuntimeError):
                    self.broken = True
                    return
            elif self._closing:
                return
            if self._closing and not self._wake.is_set():
                self._wake.set()  # one more pass to flush what came in during the drain

    async def drained(self) -> None:
        """Wait while the peer is not reading (the transport buffer is over its high mark)."""
        if not self.broken:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self._writer.drain()


async def serve_stdio(
    server: Server,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    max_line: int = core.DEFAULT_MAX_LINE,
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
    lane: bool = True,
) -> None:
    """Serve one MCP session over a pair of streams until the input ends.

    Args:
        server: the application.
        reader: the input stream (the process's stdin).
        writer: the output stream (the process's stdout); nothing else may write to it.
        max_in_flight: requests served at once before input reading pauses.
        max_line: the longest message accepted, in bytes; a longer line is answered with
            -32600 (id null) and skipped.
        shutdown_grace: seconds in-flight requests get to finish after EOF before they are
            cancelled.
        lane: answer plain sync tool calls in the core (``core.StdioLane``); ``False``: every
            line through the session machine. The replies are the same bytes either way.
    """
    await server.start(transport="stdio")
    try:
        await _serve(server, reader, writer, max_in_flight, max_line, shutdown_grace, lane)
    finally:
        await server.stop()


async def _serve(server: Server, reader: Any, writer: Any, max_in_flight: int, max_line: int, shutdown_grace: float, lane: bool) -> None:
    conn = server.connect(records=False)  # one stream, in order: the bytes are all it needs
    session = conn.session
    out = _Writer(conn, writer)
    writer_task = asyncio.get_running_loop().create_task(out.run())
    framing = core.StdioLane(max_line, server.run_plain_tool, unencodable_result, error_reply)
    serving = not lane  # a lane never told to serve a session only frames
    feed = conn.feed
    frame_too_large = core.FrameTooLarge
    try:
        while not out.broken:
            chunk = await reader.read(_READ_SIZE)
            if not serving and session.serves_directly(m.TOOLS_CALL) and session.version is not None:  # initialize was answered
                framing.serve(session.version, session.requests_in_flight)
                serving = True
            fed = framing.feed(chunk) if chunk else framing.close()
            if isinstance(fed, bytes):  # the usual read: the lane answered every line
                if fed:
                    out.write(fed)
                if not chunk:
                    break
                await out.drained()
                continue
            answered, items = fed
            out.hold(answered)
            for item in items:
                try:
                    if type(item) is frame_too_large:
                        conn.feed_oversized(item.size, item.limit)
                    else:
                        # bytes: the test above is by identity on a local alias (the hot path),
                        # which mypy does not read as narrowing the framer's union.
                        feed(item)  # type: ignore[arg-type]
                except Exception:
                    # A session machine bug must not end the session: log it and keep serving.
                    logger.exception("unexpected failure handling one message; the stream goes on")
                if conn.in_flight >= max_in_flight:
                    out.flush()
                    await conn.wait_for_slot(max_in_flight)
                    out.hold()
            out.flush()
            if not chunk:
                break
            await out.drained()
        if conn.in_flight and shutdown_grace > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(shutdown_grace):
                    await conn.wait_for_slot(1)
    finally:
        await conn.close()
        out.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer_task, timeout=5.0)
        writer_task.cancel()
        with contextlib.suppress(Exception):
            writer.close()


def _install_loop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


class _FdReader:
    """Reads a regular file in a worker thread (pipe transports refuse regular files)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def read(self, n: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(None, os.read, self._fd, n)


class _FdWriter:
    """Writes to a regular file in a worker thread; ``drain`` waits for the data to land."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        self._pending.append(data)

    async def drain(self) -> None:
        data, self._pending = b"".join(self._pending), []
        if data:
            await asyncio.get_running_loop().run_in_executor(None, _write_all, self._fd, data)

    def close(self) -> None:
        os.close(self._fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _is_stream(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


async def _open_stdio(out_fd: int) -> tuple[Any, Any, asyncio.BaseTransport | None]:
    loop = asyncio.get_running_loop()
    reader: Any
    writer: Any
    read_transport = None
    if _is_stream(0):
        reader = asyncio.StreamReader(limit=1 << 20)
        pipe_in = os.fdopen(0, "rb", buffering=0, closefd=False)
        read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe_in)
    else:
        reader = _FdReader(0)
    if _is_stream(out_fd):
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(out_fd, "wb", buffering=0))
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
    else:
        writer = _FdWriter(out_fd)
    return reader, writer, read_transport


def run_stdio(server: Server, **options: Any) -> None:
    """Serve ``server`` on this process's stdin/stdout until stdin closes.

    File descriptor 1 is re-pointed at stderr for the duration, so a stray ``print`` in a
    handler (or a C library writing to stdout) cannot corrupt the protocol stream; the
    protocol itself goes to a private duplicate of the original stdout.

    Args:
        server: the application.
        **options: passed to ``serve_stdio``.
    """
    sys.stdout.flush()
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _install_loop()

    async def main() -> None:
        reader, writer, read_transport = await _open_stdio(out_fd)
        try:
            await serve_stdio(server, reader, writer, **options)
        finally:
            if read_transport is not None:
                read_transport.close()

    asyncio.run(main())
