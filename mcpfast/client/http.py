"""gevent adapter: an MCP client over Streamable HTTP (geventhttpclient, keep-alive).

One :class:`HttpClient` per Locust user holds one ``geventhttpclient.HTTPClient`` (a small
keep-alive pool).  Every POST carries ``Accept: application/json, text/event-stream`` and
``Content-Type: application/json``, plus the session's protocol headers
(:meth:`ClientSession.http_headers`: ``Mcp-Session-Id``/``MCP-Protocol-Version`` after the
handshake; ``MCP-Protocol-Version``/``Mcp-Method``/``Mcp-Name`` in 2026-07-28) and an optional
bearer token.

The reply is either one JSON object or an SSE stream.  An SSE stream is read line by line
(``readline(b"\\n")``, so each event is seen as soon as its blank line arrives rather than when a
4 KiB block fills), fed to :class:`mcpfast.core.SseDecoder`, and every event's arrival time is kept
on the request (``Pending.event_times``) for time-to-first-event and inter-event gaps.  Server
requests that arrive on a stream (legacy) are answered by a POST from a separate greenlet.

``hold_stream()`` holds the session's long-lived stream beside its calls, in its own greenlet and
on its own connection, until the session ends: the standalone GET stream (legacy) or a 2026
``subscriptions/listen``.  ``open_get_stream()`` and ``listen()`` are their bounded forms (a GET
stream for a while, a listen until its acknowledgement); ``delete()`` ends the session.
"""

from __future__ import annotations

import ssl
import time
from typing import Any
from urllib.parse import urlsplit

import gevent
from gevent.event import Event as GEvent
from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError

from mcpfast import core
from mcpfast.client.base import McpClient
from mcpfast.client.cookies import Jar
from mcpfast.client.errors import (
    BadSse,
    ConnectionFailure,
    HttpStatusError,
    InvalidJson,
    McpClientError,
    RequestTimeout,
    UnexpectedReply,
    WrongId,
)
from mcpfast.client.oauth import TokenSource
from mcpfast.client.reach import Reach, tls_reason
from mcpfast.client.session import CallResult, ClientSession, Pending
from mcpfast.protocol.http import ACCEPT_BOTH, JSON, SSE

__all__ = ["HttpClient"]

DRAIN_AFTER_REPLY = 0.05  # s to wait for the end of an SSE stream after the reply, to keep the connection
# s: a held stream the server ends, or that cannot be reached, is opened again at most this often
# (a server that ends streams at once does not become a hot loop)
REOPEN_EVERY = 1.0
LISTEN_ACK = "subscriptions/listen:ack"
NO_ACK = "listen stream gave no acknowledgement"


def _network_errors() -> tuple[type[BaseException], ...]:
    import socket

    return (OSError, socket.timeout, HTTPConnectionClosed, HTTPParseError)


class HttpClient(McpClient):
    transport = "http"

    def __init__(
        self,
        url: str,
        session: ClientSession | None = None,
        *,
        token: str | TokenSource | None = None,
        reach: Reach | None = None,
        connection_timeout: float = 10.0,
        network_timeout: float | None = None,
        concurrency: int = 4,
        **kw: Any,
    ) -> None:
        super().__init__(session or ClientSession(), **kw)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url = url
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.token = token
        self.sent_token: str | None = None
        self.connection_timeout = connection_timeout
        self.network_timeout = network_timeout if network_timeout is not None else self.timeout
        self._kw: dict[str, Any] = {
            "connection_timeout": connection_timeout,
            "network_timeout": self.network_timeout,
        }
        self.reach = reach or Reach()
        self._tls = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port or (443 if self._tls else 80)
        self.reach.check_url(self._host, self._port)
        self._fixed = self.reach.fixed_headers(self._host, self._port, self._tls)
        self.jar = Jar(url) if self.reach.cookies else None
        self.retry_wait: float | None = None  # what the last refusal's Retry-After asked for
        self._concurrency = concurrency
        self._http: HTTPClient | None = None  # lazy: never open sockets at import or construction
        self._errors = _network_errors()
        self.get_stream: gevent.Greenlet | None = None
        self.get_stream_events = 0
        self.get_stream_status: int | None = None
        self.held: gevent.Greenlet | None = None  # hold_stream()'s greenlet, and the session it holds for
        self._held_for: str | None = None

    @property
    def http(self) -> HTTPClient:
        if self._http is None:
            self._http = self.reach.http_client(self._host, self._port, self._tls, concurrency=self._concurrency, **self._kw)
        return self._http

    def _headers(self, extra: dict[str, str], accept: str = ACCEPT_BOTH) -> dict[str, str]:
        headers = {"Accept": accept, "Content-Type": JSON, **self._fixed}
        if self.jar is not None and (cookie := self.jar.header()):
            headers["Cookie"] = cookie
        if self.token:
            # a process's OAuth token source hands out the current token of the moment
            self.sent_token = self.token if isinstance(self.token, str) else self.token.access_token
            headers["Authorization"] = f"Bearer {self.sent_token}"
        headers.update(extra)
        return headers

    # -- one POST ------------------------------------------------------------------------------------
    def _post(self, body: bytes, headers: dict[str, str]) -> Any:
        if self.retry_wait is not None:
            wait, self.retry_wait = self.retry_wait, None
            if self.reach.retry_after:
                started = time.perf_counter()
                gevent.sleep(wait)
                self.reporter("Retry-After wait", int((time.perf_counter() - started) * 1_000_000), 0, None)
        try:
            resp = self.http.request("POST", self.path, body=body, headers=headers)
            self._absorb(resp)
            return resp
        except self._errors as exc:
            if "timed out" in str(exc) or exc.__class__.__name__ == "timeout":
                raise RequestTimeout from None
            if isinstance(exc, ssl.SSLError):
                raise ConnectionFailure(f"tls handshake failed: {tls_reason(exc, self._host)}", str(exc)[:200]) from None
            raise ConnectionFailure("connection error", str(exc)[:200]) from None

    def _roundtrip(self, pending: Pending, stream: bool = False) -> CallResult:
        try:
            return self._exchange(pending)
        except RequestTimeout:
            # 2026-07-28: the closed stream is the cancellation; legacy: notifications/cancelled
            if self.session.era == "handshake" and pending.method != "initialize":
                gevent.spawn(self._post_quiet, self.session.cancel(pending, "timeout"))
            raise RequestTimeout(pending.method) from None

    def _exchange(self, pending: Pending) -> CallResult:
        session = self.session
        if pending.method in ("initialize", "server/discover") and self.reach.new_connection == "session":
            self.close_request_connection()  # a new connection for every session
        resp = self._post(pending.data, self._headers(session.http_headers(pending)))
        try:
            status = resp.status_code
            if pending.method == "initialize" and status == 200:
                sid = resp.get("mcp-session-id")
                if isinstance(sid, str) and sid:
                    session.session_id = sid
            ctype = (resp.get("content-type") or "").split(";")[0].strip().lower()
            if ctype == SSE and status == 200:
                return self._read_sse(resp, pending)
            try:
                body = resp.read()
            except self._errors as exc:
                raise self._read_error(exc) from None
            if status == 200 and ctype == JSON:
                return self._single(body, pending)
            if status in (400, 401, 403, 404, 405, 409, 422, 500) and body[:1] == b"{":
                # modern servers answer protocol errors with a 4xx and a JSON-RPC error body
                try:
                    rid, is_error, _code = core.scan_reply(body)
                except core.JsonRpcError:
                    rid, is_error = None, False
                if is_error and rid == pending.id:
                    return self._single(body, pending)
            if status == 404 and session.session_id is not None and session.era == "handshake":
                session.initialized = False  # session expired: the client must re-initialize
            if status == 200:
                raise UnexpectedReply("unexpected content type", ctype)
            raise self._refused(resp, body)
        finally:
            resp.release()

    def _absorb(self, resp: Any) -> None:
        """Keep the cookies a reply sets (the user's jar)."""
        if self.jar is not None:
            values = resp.info().getlist("set-cookie")
            if values:
                self.jar.absorb(values)

    def _refused(self, resp: Any, body: bytes = b"") -> HttpStatusError:
        """The error of a refused request, named by its cause; keeps its Retry-After wait."""
        status = resp.status_code
        www, retry = resp.get("www-authenticate"), resp.get("retry-after")
        reason, wait = core.refusal(
            status,
            None if www is None else (", ".join(www) if isinstance(www, list) else www).encode("latin-1", "replace"),
            None if retry is None else str(retry).encode("latin-1", "replace"),
            time.time(),
        )
        if wait is not None:
            self.retry_wait = wait
        if status == 401 and reason.endswith(" invalid_token") and isinstance(self.token, TokenSource) and self.sent_token:
            self.token.invalidate(self.sent_token)
        return HttpStatusError(status, body[:2000], reason, wait)

    def _read_error(self, exc: BaseException) -> McpClientError:
        if "timed out" in str(exc) or exc.__class__.__name__ == "timeout":
            return RequestTimeout()
        return ConnectionFailure("connection error", str(exc)[:200])

    def _single(self, body: bytes, pending: Pending) -> CallResult:
        event = self.session.receive(body)
        if event.kind != "reply" or event.reply is None:
            raise UnexpectedReply("JSON body is not a reply")
        if event.reply.id != pending.id:
            # a reply to some other request of ours: give it back, this one is still unanswered
            raise WrongId(event.reply.id, pending.id)
        return event.reply

    def _read_sse(self, resp: Any, pending: Pending) -> CallResult:
        session = self.session
        decoder = core.SseDecoder()
        times = pending.event_times
        reply: CallResult | None = None
        try:
            while reply is None:
                try:
                    line = resp.readline(b"\n")
                except self._errors as exc:
                    raise self._read_error(exc) from None
                if not line:
                    for item in decoder.close():
                        if isinstance(item, core.FrameTooLarge):
                            raise BadSse("SSE event too large")
                    break
                now = time.perf_counter()
                for item in decoder.feed(line):
                    if isinstance(item, core.FrameTooLarge):
                        raise BadSse("SSE event too large")
                    if not item.data:
                        continue  # priming event / keep-alive
                    times.append(now)
                    try:
                        event = session.receive(item.data.encode("utf-8"), now)
                    except InvalidJson as exc:
                        raise BadSse("SSE event is not JSON-RPC", exc.detail) from None
                    if event.kind == "reply":
                        assert event.reply is not None
                        if event.reply.id != pending.id:
                            raise WrongId(event.reply.id, pending.id)
                        reply = event.reply
                    elif event.kind == "server-request" and event.response is not None:
                        gevent.spawn(self._post_quiet, event.response)
            if reply is None:
                raise BadSse("SSE stream ended without the reply")
            if not resp.message_complete:
                with gevent.Timeout(DRAIN_AFTER_REPLY, False):
                    while resp.readline(b"\n"):
                        pass
            return reply
        finally:
            resp.release()

    def _post_quiet(self, body: bytes) -> None:
        try:
            resp = self._post(body, self._headers(self.session.http_headers()))
            resp.read()
            resp.release()
        except McpClientError:
            pass
        except self._errors:
            pass

    def _send_notification(self, data: bytes, method: str) -> None:
        session = self.session
        headers = session.http_headers(method=method)
        resp = self._post(data, self._headers(headers))
        try:
            status = resp.status_code
            try:
                body = resp.read()
            except self._errors as exc:
                raise self._read_error(exc) from None
            if status not in (200, 202, 204):
                raise self._refused(resp, body)
        finally:
            resp.release()

    def _report_stream(self, pending: Pending, intended: float) -> None:
        super()._report_stream(pending, intended)
        self._report_times("sse", pending.event_times, intended)

    def on_legacy_fallback(self) -> None:
        self.session.session_id = None

    # -- session end ------------------------------------------------------------------------------------
    def delete(self) -> bool:
        """DELETE the session; True when the server ended it (2xx). 405 counts as 'not offered'.

        The session's held stream ends first: its end is then not the server's doing.
        """
        self.release_stream()
        session = self.session
        if session.session_id is None:
            return False
        intended = self.pace()
        exc: BaseException | None = None
        name = "DELETE"
        ended = False
        try:
            resp = self.http.request("DELETE", self.path, headers=self._headers(session.http_headers()))
            self._absorb(resp)
            try:
                resp.read()
                if resp.status_code == 405:
                    name = "DELETE:405"
                elif not 200 <= resp.status_code < 300:
                    exc = self._refused(resp)
                else:
                    ended = True
            finally:
                resp.release()
        except self._errors as error:
            exc = self._read_error(error)
        session.reset()
        self._finish(name, intended, 0, exc)
        return ended

    # -- long-lived streams -------------------------------------------------------------------------------
    def hold_stream(self) -> None:
        """Hold the session's long-lived stream beside its calls, until the session ends.

        In its own greenlet and on its own connection: the standalone GET stream (handshake era,
        ``GET:open``, ``GET:event``, ``GET:405``) or a 2026 ``subscriptions/listen``
        (``subscriptions/listen:ack``).  Called again for the same session it does nothing; for
        a new session it replaces the old one's stream.  A stream the server ends, or that cannot
        be reached, is opened again at most once per ``REOPEN_EVERY`` seconds; one the server
        refuses (a status other than 200, 405 included, or a listen answered without its
        acknowledgement) is not asked for again in this session.  ``release_stream()``,
        ``delete()`` and ``close()`` end it, which is not a failure.
        """
        key = self._session_key()
        if self.held is not None and self._held_for == key:
            return
        self.release_stream()
        self._held_for = key
        self.held = gevent.spawn(self._hold, key)

    def release_stream(self) -> None:
        """End the held stream (its greenlet and its connection) now; nothing is reported."""
        held, self.held, self._held_for = self.held, None, None
        if held is not None:
            held.kill(block=True, timeout=1.0)

    def _session_key(self) -> str | None:
        return "stateless" if self.session.stateless else self.session.session_id

    def _holds(self, key: str | None) -> bool:
        """The session ``key`` is still this client's, and open."""
        return self._session_key() == key and not self.session.needs_handshake

    def _hold(self, key: str | None) -> None:
        opened: float | None = None
        while self._holds(key):
            if opened is not None:
                gevent.sleep(max(0.0, opened + REOPEN_EVERY - time.perf_counter()))
                if not self._holds(key):
                    return
            opened = time.perf_counter()
            # no read timeout: the stream lasts as long as the session, which ends it
            http = self.reach.http_client(
                self._host, self._port, self._tls, concurrency=1, connection_timeout=self.connection_timeout, network_timeout=None
            )
            try:
                if self.session.stateless:
                    refused = self._listen_once(http)
                else:
                    status = self._get_once(http, None)
                    refused = status is not None and status != 200
            finally:
                http.close()
            if refused:
                return

    def open_get_stream(self, duration: float = 1.0, on_event: Any = None) -> GEvent:
        """Legacy GET stream in its own greenlet and connection, for at most ``duration`` seconds.

        Reports ``GET:open`` (time to the response headers) and ``GET:event`` (gap since the
        previous event or the open). Returns an Event set when the stream greenlet ends.
        """
        done = GEvent()
        self.get_stream = gevent.spawn(self._get_stream, duration, on_event, done)
        return done

    def _get_stream(self, duration: float, on_event: Any, done: GEvent) -> None:
        http = self.reach.http_client(self._host, self._port, self._tls, concurrency=1, **self._kw)
        try:
            with gevent.Timeout(duration, False):
                self._get_once(http, on_event)
        finally:
            http.close()
            done.set()

    def _get_once(self, http: HTTPClient, on_event: Any) -> int | None:
        """One GET stream on ``http``, read until the server ends it (``GET:open``, ``GET:event``,
        ``GET:405``); its status, or None when it got no answer."""
        session = self.session
        intended = time.perf_counter()
        try:
            resp = http.request("GET", self.path, headers=self._headers(session.http_headers(), SSE))
            self._absorb(resp)
        except self._errors as exc:
            self._finish("GET:open", intended, 0, self._read_error(exc))
            return None
        try:
            status = self.get_stream_status = resp.status_code
            if status == 405:
                self._finish("GET:405", intended, 0, None)
                return status
            if status != 200:
                resp.read()
                self._finish("GET:open", intended, 0, self._refused(resp))
                return status
            self._finish("GET:open", intended, 0, None)
            decoder = core.SseDecoder()
            last = time.perf_counter()
            while True:
                line = resp.readline(b"\n")
                if not line:
                    return status
                for item in decoder.feed(line):
                    if isinstance(item, core.FrameTooLarge) or not item.data:
                        continue
                    now = time.perf_counter()
                    self.reporter("GET:event", int((now - last) * 1_000_000), len(item.data), None)
                    last = now
                    self.get_stream_events += 1
                    try:
                        event = session.receive(item.data.encode("utf-8"), now)
                    except McpClientError:
                        continue
                    if event.kind == "server-request" and event.response is not None:
                        gevent.spawn(self._post_quiet, event.response)
                    if on_event is not None:
                        on_event(event)
        except self._errors:
            return status  # the stream broke: as if the server had ended it
        finally:
            resp.release()

    def listen(self, duration: float = 1.0, notifications: dict[str, Any] | None = None) -> bool:
        """2026 ``subscriptions/listen`` for at most ``duration`` s: reports the time to the
        ``notifications/subscriptions/acknowledged`` event as ``subscriptions/listen:ack``."""
        session = self.session
        intended = self.pace()
        pending = session.request("subscriptions/listen", {"notifications": notifications or {"toolsListChanged": True}})
        try:
            resp = self._post(pending.data, self._headers(session.http_headers(pending)))
        except McpClientError as error:
            session.forget(pending)
            self._finish(LISTEN_ACK, intended, 0, error)
            return False
        acked, exc = False, None
        try:
            with gevent.Timeout(duration, False):
                acked, exc, _refused = self._listened(resp, intended, hold=False)
        finally:
            session.forget(pending)
            resp.release()  # closing the stream ends the subscription
        if not acked:
            self._finish(LISTEN_ACK, intended, 0, exc or BadSse(NO_ACK))
        return acked

    def _listen_once(self, http: HTTPClient) -> bool:
        """One held ``subscriptions/listen`` on ``http``, read until the server ends it; True when
        the server refused it (``subscriptions/listen:ack`` failed, not to be asked again)."""
        session = self.session
        intended = time.perf_counter()  # not self.pace(): the open model's arrivals are the calls'
        pending = session.request("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        try:
            try:
                resp = http.request("POST", self.path, body=pending.data, headers=self._headers(session.http_headers(pending)))
                self._absorb(resp)
            except self._errors as error:
                self._finish(LISTEN_ACK, intended, 0, self._read_error(error))
                return False
            try:
                acked, exc, refused = self._listened(resp, intended, hold=True)
            finally:
                resp.release()
        finally:
            session.forget(pending)
        if not acked:
            self._finish(LISTEN_ACK, intended, 0, exc or BadSse(NO_ACK))
        return refused

    def _listened(self, resp: Any, intended: float, hold: bool) -> tuple[bool, BaseException | None, bool]:
        """Read a listen's reply up to its acknowledgement (reported then, as
        ``subscriptions/listen:ack``), and on to the end of the stream when ``hold``.

        Returns (acknowledged, the failure if not, whether the server refused the listen).
        """
        session = self.session
        acked = False
        try:
            ctype = (resp.get("content-type") or "").split(";")[0].strip().lower()
            if resp.status_code != 200 or ctype != SSE:
                body = resp.read()
                if resp.status_code != 200:
                    return False, self._refused(resp, body), True
                return False, BadSse("listen did not answer with an event stream", ctype), True
            decoder = core.SseDecoder()
            while True:
                line = resp.readline(b"\n")
                if not line:
                    return acked, None, False
                for item in decoder.feed(line):
                    if isinstance(item, core.FrameTooLarge) or not item.data:
                        continue
                    try:
                        event = session.receive(item.data.encode("utf-8"))
                    except McpClientError as error:
                        if acked:
                            continue
                        return False, error, True
                    if acked:
                        continue
                    if (
                        event.kind == "notification"
                        and event.message is not None
                        and event.message.method == "notifications/subscriptions/acknowledged"
                    ):
                        acked = True
                        self._finish(LISTEN_ACK, intended, 0, None)
                        if not hold:
                            return True, None, False
                    elif event.kind == "reply":
                        return False, BadSse(NO_ACK), True
        except self._errors as error:
            return acked, None if acked else self._read_error(error), False

    def close_request_connection(self) -> None:
        """Close the connection requests are sent on (the next request opens a new one); the
        streams keep theirs.  A client that only holds its GET stream frees a socket this way."""
        if self._http is not None:
            self._http.close()
            self._http = None

    def close(self) -> None:
        self.release_stream()
        if self.get_stream is not None:
            self.get_stream.kill(block=False)
            self.get_stream = None
        self.close_request_connection()
