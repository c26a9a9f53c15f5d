"""Transport-independent MCP client API over a :class:`ClientSession` (no gevent import here).

A transport adapter (``stdio.py``, ``http.py``) subclasses :class:`McpClient` and implements
``_roundtrip(pending, stream)`` (send the request bytes, return the :class:`CallResult`, raise an
:class:`McpClientError` on failure) and ``_send_notification(data, method)``.

Every operation is timed and handed to ``reporter(name, elapsed_us, response_length, exception)``
(the Locust layer turns that into ``stats.report``).  Latency is measured with
``time.perf_counter()`` from the time returned by ``pace()`` - the pacer's intended send time in
the open model, "now" in the closed model - in integer microseconds.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from mcpfast.client.errors import HttpStatusError, McpClientError, RequestTimeout, UnexpectedReply
from mcpfast.client.session import CallResult, ClientSession, Pending

__all__ = ["McpClient", "Reporter", "rss_kib"]

Reporter = Callable[[str, int, int, "BaseException | None"], None]

MAX_INPUT_ROUNDS = 8
"""2026 MRTR: input-required rounds answered before a call is failed (a server that keeps asking)."""


def _no_report(name: str, elapsed_us: int, length: int, exc: BaseException | None) -> None:
    return None


class McpClient:
    """MCP operations (initialize/discover, tools, resources, prompts, completion, DELETE)."""

    transport = "mcp"
    session_is_connection = False  # True: a new session needs a new connection (restart()), no DELETE

    def __init__(
        self,
        session: ClientSession,
        *,
        reporter: Reporter | None = None,
        pace: Callable[[], float] | None = None,
        validator: Callable[[str], Any] | None = None,
        timeout: float = 30.0,
        raise_errors: bool = False,
    ) -> None:
        self.session = session
        self.reporter = reporter or _no_report
        self.pace = pace or time.perf_counter
        self.validator = validator  # version -> object with sample() and validate(msg, method)
        self.timeout = timeout
        self.raise_errors = raise_errors
        self.last_error: BaseException | None = None

    # -- transport hooks -----------------------------------------------------------------------
    def _roundtrip(self, pending: Pending, stream: bool = False) -> CallResult:  # pragma: no cover
        raise NotImplementedError

    def _send_notification(self, data: bytes, method: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - adapters override
        pass

    # -- core ------------------------------------------------------------------------------------------
    def _check(self, reply: CallResult) -> BaseException | None:
        exc = reply.exception()
        if exc is None and self.validator is not None:
            v = self.validator(self.session.version)
            if v is not None and v.sample():
                from mcpfast.client.validate import SchemaViolation

                try:
                    v.validate(reply.as_dict(), method=reply.method)
                except SchemaViolation as violation:
                    return violation
        return exc

    def _finish(self, name: str, intended: float, length: int, exc: BaseException | None) -> None:
        elapsed_us = int((time.perf_counter() - intended) * 1_000_000)
        self.reporter(name, elapsed_us, length, exc)
        if exc is not None:
            self.last_error = exc
            if self.raise_errors:
                raise exc

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        name: str | None = None,
        progress: bool = False,
        stream: bool = False,
        pending: Pending | None = None,
        intended: float | None = None,
    ) -> CallResult | None:
        """One request, timed and reported; returns the reply (also for an error reply), or None."""
        if intended is None:
            intended = self.pace()
        if pending is None:
            pending = self.session.request(method, params, progress=progress or stream)
        stat = name or pending.stat_name
        reply: CallResult | None = None
        exc: BaseException | None
        try:
            reply = self._roundtrip(pending, stream)
            if self.session.era == "stateless" and reply.is_input_required:
                reply, pending = self._answer_input(reply, pending, stat, intended, stream)
            exc = self._check(reply)
        except McpClientError as error:
            self.session.forget(pending)
            exc = error
        self._finish(stat, intended, len(reply.raw) if reply is not None else 0, exc)
        if stream and reply is not None:
            self._report_stream(pending, intended)
        return reply

    def _answer_input(self, reply: CallResult, pending: Pending, stat: str, intended: float, stream: bool) -> tuple[CallResult, Pending]:
        """2026 MRTR: answer ``input_required`` results and retry until the real result.

        Every input-required round is reported as ``<stat> (input required)`` (its own round trip);
        the final result is reported by the caller under ``<stat>``, timed from the first send.
        Raises UnexpectedReply after :data:`MAX_INPUT_ROUNDS` rounds.
        """
        started = intended
        for _round in range(MAX_INPUT_ROUNDS):
            self.reporter(f"{stat} (input required)", int((time.perf_counter() - started) * 1_000_000), len(reply.raw), None)
            started = time.perf_counter()
            pending = self.session.mrtr_retry(reply, pending.params or {}, progress=pending.progress_token is not None)
            reply = self._roundtrip(pending, stream)
            if not reply.is_input_required:
                return reply, pending
        raise UnexpectedReply("input still required", f"after {MAX_INPUT_ROUNDS} rounds")

    def _report_stream(self, pending: Pending, intended: float) -> None:
        """Streaming metrics from progress arrival times: first event and inter-event gaps."""
        times = [u.at for u in pending.progress]
        self._report_times("progress", times, intended)

    def _report_times(self, prefix: str, times: list[float], intended: float) -> None:
        if not times:
            return
        self.reporter(f"{prefix}:first-event", int((times[0] - intended) * 1_000_000), 0, None)
        for a, b in itertools.pairwise(times):
            self.reporter(f"{prefix}:gap", int((b - a) * 1_000_000), 0, None)

    def notify(self, method: str, params: dict[str, Any] | None = None, *, name: str | None = None) -> bool:
        intended = self.pace()
        data = self.session.notification(method, params)
        exc: BaseException | None = None
        try:
            self._send_notification(data, method)
        except McpClientError as error:
            exc = error
        self._finish(name or method, intended, 0, exc)
        return exc is None

    # -- lifecycle -----------------------------------------------------------------------------------
    def initialize(self) -> bool:
        """Open the connection in the configured era; True when it is ready for calls.

        Handshake era: ``initialize`` then ``notifications/initialized`` (each timed).  Stateless:
        ``server/discover``.  Auto: the discover probe, falling back to ``initialize``.
        """
        s = self.session
        if s.era == "handshake":
            return self._handshake()
        if s.era == "stateless":
            reply = self.call("server/discover", pending=s.discover_request())
            if reply is None or reply.is_error:
                return False
            s.on_discover_result(reply)
            return True
        return self._detect()

    def _handshake(self) -> bool:
        s = self.session
        reply = self.call("initialize", pending=s.initialize_request())
        if reply is None or reply.is_error:
            return False
        try:
            s.on_initialize_result(reply)
        except McpClientError as exc:
            self._finish("initialize:version", time.perf_counter(), 0, exc)
            return False
        return self.notify("notifications/initialized") and self._mark_initialized()

    def _mark_initialized(self) -> bool:
        self.session.initialized = True
        return True

    def _detect(self) -> bool:
        s = self.session
        for _attempt in range(3):
            intended = self.pace()
            pending = s.discover_request()
            exc: BaseException | None = None
            outcome = "failed"
            try:
                try:
                    reply = self._roundtrip(pending, False)
                except HttpStatusError as error:  # legacy servers may answer the probe with a 4xx
                    s.forget(pending)
                    outcome = s.detect(None, http_status=error.status, body=error.body)
                except RequestTimeout:
                    s.forget(pending)
                    outcome = s.detect(None)
                else:
                    outcome = s.detect(reply)
            except McpClientError as error:  # transport failure, or a modern error we cannot fix
                s.forget(pending)
                exc = error
            self._finish("server/discover", intended, 0, exc)
            if outcome == "modern":
                return True
            if outcome == "legacy":
                self.on_legacy_fallback()
                return self._handshake()
            if outcome != "retry":
                return False
        return False

    def on_legacy_fallback(self) -> None:
        """Hook: the auto probe found a legacy server (HTTP drops any connection state here)."""

    # -- MCP operations ------------------------------------------------------------------------------
    def list_tools(self, cursor: str | None = None) -> CallResult | None:
        return self.call("tools/list", {"cursor": cursor} if cursor else None)

    def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *, stream: bool = False, progress: bool = False
    ) -> CallResult | None:
        return self.call("tools/call", {"name": name, "arguments": arguments or {}}, stream=stream, progress=progress)

    def list_resources(self, cursor: str | None = None) -> CallResult | None:
        return self.call("resources/list", {"cursor": cursor} if cursor else None)

    def read_resource(self, uri: str) -> CallResult | None:
        return self.call("resources/read", {"uri": uri})

    def list_prompts(self, cursor: str | None = None) -> CallResult | None:
        return self.call("prompts/list", {"cursor": cursor} if cursor else None)

    def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> CallResult | None:
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = arguments
        return self.call("prompts/get", params)

    def complete(
        self,
        ref: dict[str, Any],
        argument: dict[str, str],
        context: dict[str, Any] | None = None,
    ) -> CallResult | None:
        params: dict[str, Any] = {"ref": ref, "argument": argument}
        if context:
            params["context"] = context
        return self.call("completion/complete", params, name="completion/complete")

    def ping(self) -> CallResult | None:
        return self.call("ping")

    def delete(self) -> bool:
        """End the session (HTTP DELETE); transports without sessions do nothing and return False."""
        return False


def rss_kib(pid: int) -> int | None:
    """VmRSS of a process in KiB, from ``/proc/PID/status`` (None if unavailable)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None
