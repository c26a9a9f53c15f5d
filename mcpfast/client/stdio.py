"""gevent adapter: an MCP client over a server subprocess's stdin/stdout (newline-delimited JSON).

* lazy spawn: the process starts on first use (``start()`` or the first request), never at import,
  so Locust's ``--processes`` fork happens before any child exists;
* a reader greenlet reads the stdout fd cooperatively (``gevent.os.nb_read``), feeds
  :class:`mcpfast.core.LineFramer` and resolves one ``gevent.event.AsyncResult`` per JSON-RPC id,
  so many requests can be in flight on one process;
* writes go through one lock (a line is never interleaved with another);
* stderr is drained by its own greenlet (or sent to /dev/null) so the child never blocks on it;
* shutdown: close stdin, wait ``shutdown_timeout``, SIGTERM, wait, SIGKILL.

A reply whose id matches nothing in flight, or a line that is not JSON, cannot be attributed to a
request; it fails the *oldest* request in flight with :class:`WrongId` / :class:`InvalidJson`
(with one request in flight - the usual user - that is exactly the request it belonged to).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from typing import Any

import gevent
import gevent.os
import gevent.subprocess
from gevent.event import AsyncResult
from gevent.lock import Semaphore

from mcpfast import core
from mcpfast.client._inflight import InFlight
from mcpfast.client.base import McpClient
from mcpfast.client.errors import ConnectionFailure, InvalidJson, McpClientError, RequestTimeout, WrongId
from mcpfast.client.session import CallResult, ClientSession, Pending

__all__ = ["StdioClient"]

READ_SIZE = 65536


class StdioClient(InFlight, McpClient):
    _dead_message = "stdio server exited"
    transport = "stdio"
    session_is_connection = True

    def __init__(
        self,
        command: str | Sequence[str],
        session: ClientSession | None = None,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        stderr: str = "drain",
        shutdown_timeout: float = 2.0,
        **kw: Any,
    ) -> None:
        super().__init__(session or ClientSession(), **kw)
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        self.env = env
        self.cwd = cwd
        self.stderr_mode = stderr  # "drain" (read and drop, keeps the tail) | "devnull"
        self.shutdown_timeout = shutdown_timeout
        self.proc: gevent.subprocess.Popen | None = None
        self._waiters: dict[int, AsyncResult] = {}
        self._write_lock = Semaphore()
        self._greenlets: list[gevent.Greenlet] = []
        self._framer = core.LineFramer()
        self.stderr_tail = b""
        self.dead: str | None = None
        self.bytes_in = 0

    # -- process ------------------------------------------------------------------------------------
    def start(self) -> None:
        if self.proc is not None:
            return
        self.proc = gevent.subprocess.Popen(
            self.argv,
            stdin=gevent.subprocess.PIPE,
            stdout=gevent.subprocess.PIPE,
            stderr=gevent.subprocess.PIPE if self.stderr_mode == "drain" else gevent.subprocess.DEVNULL,
            env=self.env,
            cwd=self.cwd,
            bufsize=0,
        )
        self.dead = None
        self._framer = core.LineFramer()
        self._stdin_fd = self.proc.stdin.fileno()
        self._stdout_fd = self.proc.stdout.fileno()
        gevent.os.make_nonblocking(self._stdin_fd)
        gevent.os.make_nonblocking(self._stdout_fd)
        self._greenlets = [gevent.spawn(self._read_loop)]
        if self.stderr_mode == "drain":
            fd = self.proc.stderr.fileno()
            gevent.os.make_nonblocking(fd)
            self._greenlets.append(gevent.spawn(self._drain_stderr, fd))

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _read_loop(self) -> None:
        fd = self._stdout_fd
        session = self.session
        try:
            while True:
                try:
                    chunk = gevent.os.nb_read(fd, READ_SIZE)
                except OSError:
                    break
                if not chunk:
                    break
                self.bytes_in += len(chunk)
                now = time.perf_counter()
                for line in self._framer.feed(chunk):
                    if isinstance(line, core.FrameTooLarge):
                        self._fail_oldest(InvalidJson("line too large"))
                        continue
                    self._dispatch(session, line, now)
        finally:
            self._on_dead("stdio server closed stdout")

    def _dispatch(self, session: ClientSession, line: bytes, now: float) -> None:
        try:
            event = session.receive(line, now)
        except (WrongId, InvalidJson) as exc:
            self._fail_oldest(exc)
            return
        if event.kind == "reply":
            assert event.reply is not None
            waiter = self._waiters.pop(event.reply.id, None)
            if waiter is not None:
                waiter.set(event.reply)
        elif event.kind == "server-request" and event.response is not None:
            gevent.spawn(self._write_quiet, event.response)

    def _on_dead(self, why: str) -> None:
        self._fail_all(why)

    def _drain_stderr(self, fd: int) -> None:
        while True:
            try:
                chunk = gevent.os.nb_read(fd, READ_SIZE)
            except OSError:
                return
            if not chunk:
                return
            self.stderr_tail = (self.stderr_tail + chunk)[-4096:]

    def _write(self, data: bytes) -> None:
        if self.proc is None:
            self.start()
        if self.dead is not None:
            raise ConnectionFailure("stdio server exited", self.dead)
        view = memoryview(data + b"\n")
        with self._write_lock:
            try:
                while view:
                    n = gevent.os.nb_write(self._stdin_fd, view)
                    view = view[n:]
            except OSError as exc:
                raise ConnectionFailure("stdio write failed", str(exc)) from None

    def _write_quiet(self, data: bytes) -> None:
        try:
            self._write(data)
        except McpClientError:
            pass

    # -- McpClient hooks -------------------------------------------------------------------------------
    def _roundtrip(self, pending: Pending, stream: bool = False) -> CallResult:
        waiter = AsyncResult()
        self._waiters[pending.id] = waiter
        try:
            self._write(pending.data)
        except McpClientError:
            self._waiters.pop(pending.id, None)
            raise
        try:
            return waiter.get(timeout=self.timeout)
        except gevent.Timeout:
            self._waiters.pop(pending.id, None)
            if pending.method != "initialize":  # initialize must never be cancelled
                self._write_quiet(self.session.cancel(pending, "timeout"))
            raise RequestTimeout(pending.method) from None

    def _send_notification(self, data: bytes, method: str) -> None:
        self._write(data)

    def on_legacy_fallback(self) -> None:
        pass  # same process: the probe left no state behind

    # -- shutdown -----------------------------------------------------------------------------------------
    def close(self) -> None:
        proc = self.proc
        if proc is None:
            return
        self.proc = None
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=self.shutdown_timeout)
        except gevent.subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=self.shutdown_timeout)
            except gevent.subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for g in self._greenlets:
            g.join(timeout=1.0)
        gevent.killall([g for g in self._greenlets if not g.dead], block=False)
        self._greenlets = []
        for stream in (proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._on_dead("closed")
        self.dead = "closed"
        self.session.reset()

    def restart(self) -> None:
        """A fresh process (the session forgets its lifecycle; ids keep increasing)."""
        self.close()
        self.start()
