"""Locust users that speak MCP: :class:`McpUser` (transport from the options), :class:`McpHttpUser`
(Streamable HTTP at ``--host``) and :class:`McpStdioUser` (one ``--mcp-command`` process per user).

All three are ``abstract = True``; a locustfile subclasses one and adds tasks that use
``self.mcp`` (an :class:`mcpfast.client.base.McpClient`): ``initialize()`` (handshake, or
``server/discover`` in 2026-07-28, or the auto probe), ``call_tool(name, arguments)``,
``list_tools()``, ``list_resources()``, ``read_resource(uri)``, ``list_prompts()``,
``get_prompt(name, args)``, ``complete(ref, argument)``, ``delete()``.

Every call is reported through :meth:`mcpfast.locust.stats.McpStats.report` with the transport as
request type (``"mcp-http"`` / ``"mcp-stdio"``) and a low-cardinality name (``tools/call:echo``,
``initialize``, ``notifications/initialized``, ``DELETE``, ``sse:first-event``, ``sse:gap``,
``progress:first-event``, ...).  Latency is integer µs from the pacer's intended send time
(``--mcp-rate`` > 0: open model) or the actual send time (closed model).  Failures are the
exception classes of :mod:`mcpfast.client.errors` (connection, HTTP status, JSON-RPC error code,
wrong id, bad SSE, invalid JSON, timeout, tool error) or
:class:`mcpfast.client.validate.SchemaViolation` for the sampled schema check.

Nothing is spawned or connected at import or construction: the client is built in ``on_start``
(so ``--processes`` forks first) and closed in ``on_stop``.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import gevent
import gevent.event
import locust  # noqa: F401 - first: Locust's import gevent-patches the stdlib
from locust import User

from mcpfast.client.base import McpClient
from mcpfast.client.oauth import TokenSource
from mcpfast.client.session import ClientSession
from mcpfast.locust import oauth
from mcpfast.locust import stats as mstats
from mcpfast.locust.options import engine, option, reach

__all__ = ["LEGACY_SSE_VERSION", "REQUEST_TYPES", "McpHttpUser", "McpStdioUser", "McpUser", "Preflight"]

REQUEST_TYPES = {"http": "mcp-http", "stdio": "mcp-stdio"}
LEGACY_SSE_VERSION = "2024-11-05"  # --mcp-protocol-version 2024-11-05 over HTTP: the HTTP+SSE transport
CANNED_SAMPLING = {  # the answer to sampling/createMessage (legacy request or 2026 input-required round)
    "role": "assistant",
    "content": {"type": "text", "text": "canned reply from the mcpfast swarm"},
    "model": "mcpfast-swarm",
    "stopReason": "endTurn",
}
PYTHON_ONLY_VERSIONS = ("auto", LEGACY_SSE_VERSION)  # not spoken by the native engine
FAILED_START_BACKOFF = 0.1  # s: a user whose server refuses the handshake does not spin
_USER_NUMBERS = itertools.count()  # this process's users, in the order they start


class Preflight:
    """A family's checks before load in one process, run at Locust's ``init``. A worker's message
    loop runs while they wait on the server, so the master's spawn can start this process's
    users before they end; the users wait for them (:meth:`McpUser.run`) instead of finding no
    plan. A check that fails ends the process (exit 2), its users with it."""

    __slots__ = ("_done",)

    def __init__(self) -> None:
        self._done = gevent.event.Event()
        self._done.set()  # nothing to wait for until a check begins

    def __enter__(self) -> Preflight:
        """The checks begin (``with``: they end when the block does, however it ends)."""
        self._done.clear()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._done.set()

    def wait(self) -> None:
        self._done.wait()


class McpUser(User):
    """Base MCP user: stdio when ``--mcp-command`` is given, else Streamable HTTP at ``--host``."""

    abstract = True
    transport: str | None = None  # None: from the options; "http" / "stdio" forces one
    auto_initialize = True  # initialize (or discover) in on_start and again after a lost session
    # the native engine's family for this user's scenario (mcpfast.locust.native); None: a scenario
    # written in Python, which always runs on the gevent users
    native_family: str | None = None
    preflight: Preflight | None = None  # the family's checks before load, waited for before anything is sent

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.mcp: McpClient = None  # type: ignore[assignment]  # built in on_start
        self.request_type = "mcp"

    # -- options ---------------------------------------------------------------------------------
    def opt(self, name: str) -> Any:
        return option(self.environment, name)

    @property
    def tool(self) -> str:
        return str(self.opt("mcp_tool"))

    @property
    def tool_args(self) -> dict[str, Any]:
        args = getattr(self, "_tool_args", None)
        if args is None:
            args = self._tool_args = json.loads(self.opt("mcp_tool_args"))
        return args

    @property
    def stream_tool(self) -> str:
        return str(self.opt("mcp_stream_tool"))

    @property
    def stream_count(self) -> int:
        return int(self.opt("mcp_stream_count"))

    @property
    def stream_args(self) -> dict[str, Any]:
        """``--mcp-stream-args``, else ``{"n": --mcp-stream-count}``."""
        from mcpfast.locust.options import stream_arguments

        return stream_arguments(self.environment)

    @property
    def is_stdio(self) -> bool:
        return self.resolved_transport() == "stdio"

    @property
    def session_is_connection(self) -> bool:
        """stdio (a session is a process) and 2024-11-05 HTTP+SSE (a session is the GET stream):
        a new session means a new connection, and there is no DELETE."""
        return bool(getattr(self.mcp, "session_is_connection", False))

    def resolved_transport(self) -> str:
        if self.transport is not None:
            return self.transport
        return "stdio" if self.opt("mcp_command") else "http"

    # -- client ------------------------------------------------------------------------------------
    def new_session(self) -> ClientSession:
        capabilities = json.loads(self.opt("mcp_client_capabilities"))
        replies = {"sampling/createMessage": CANNED_SAMPLING} if "sampling" in capabilities else None
        return ClientSession(str(self.opt("mcp_protocol_version")), capabilities=capabilities, server_replies=replies)

    def make_client(self) -> McpClient:
        stats = mstats.get(self.environment)
        kind = self.resolved_transport()
        request_type = self.request_type = REQUEST_TYPES[kind]
        report = stats.report

        def reporter(name: str, elapsed_us: int, length: int, exc: BaseException | None) -> None:
            report(request_type, name, elapsed_us, length, exc)

        kw: dict[str, Any] = {
            "reporter": reporter,
            "pace": stats.pacer.wait,
            "validator": stats.validator,
            "timeout": float(self.opt("mcp_timeout")),
        }
        if kind == "stdio":
            from mcpfast.client.stdio import StdioClient

            command = self.opt("mcp_command")
            if not command:
                raise ValueError("McpStdioUser needs --mcp-command")
            return StdioClient(command, self.new_session(), **kw)
        if not self.host:
            raise ValueError("McpHttpUser needs --host (the MCP endpoint URL, e.g. http://127.0.0.1:8000/mcp)")
        session = self.new_session()
        if session.requested_version == LEGACY_SSE_VERSION:
            # 2024-11-05 speaks the HTTP+SSE transport: GET the sibling /sse, POST to its endpoint event
            from mcpfast.client.legacy_sse import LegacySseClient

            return LegacySseClient(self.host, session, token=self.token(), reach=reach(self.environment), **kw)
        from mcpfast.client.http import HttpClient

        return HttpClient(self.host, session, token=self.token(), reach=reach(self.environment), **kw)

    def token(self) -> str | TokenSource | None:
        """This user's bearer token: the process's OAuth token source, or the tokens in turn
        (the users of a process take them in turn, each worker starting at its own index)."""
        how = reach(self.environment)
        if how.oauth is not None:
            return oauth.source(self.environment)
        if not how.tokens:
            return None
        worker = getattr(mstats.get(self.environment), "worker_index", None) or 0
        return how.token(worker + next(_USER_NUMBERS))

    def ready(self) -> bool:
        """Make sure the connection is initialised (again after a lost session); False on failure."""
        s = self.mcp.session
        mcp: Any = self.mcp  # only the stdio client has `dead` and `restart`
        if getattr(mcp, "dead", None) is not None and mcp.dead != "closed":
            mcp.restart()  # stdio: the server process died; the spec says restart it
        if (s.era is None or s.needs_handshake) and not self.mcp.initialize():
            gevent.sleep(FAILED_START_BACKOFF)
            return False
        return True

    # -- native engine -----------------------------------------------------------------------------
    def uses_native_engine(self) -> bool:
        if self.native_family is None or engine(self.environment) != "native":
            return False
        # native by default only: the auto probe and HTTP+SSE stay on the Python users
        return not (self.opt("mcp_engine") is None and str(self.opt("mcp_protocol_version")) in PYTHON_ONLY_VERSIONS)

    def refused(self) -> str | None:
        """Why the run may not start (a family's check before load failed, the run is quitting);
        None: it may.  A refused user sends nothing on either engine."""
        return None

    def run(self) -> None:  # type: ignore[misc]  # Locust marks it final; the native engine replaces the task loop
        """Python engine: Locust's task loop.  Native engine: this user is one unit of the
        engine's concurrency for as long as it lives; it waits (killable at once, no task to
        finish) while the engine's threads send."""
        if self.preflight is not None:
            self.preflight.wait()
        if self.refused() is not None:
            gevent.sleep(3600)  # killed when the run quits
            return
        if not self.uses_native_engine():
            return super().run()
        from locust.exception import StopTest, StopUser
        from locust.user.users import LOCUST_STATE_WAITING

        self._state = LOCUST_STATE_WAITING  # a graceful stop kills an idle user at once
        if self.resolved_transport() == "http" and not self.host:
            raise ValueError("McpHttpUser needs --host (the MCP endpoint URL, e.g. http://127.0.0.1:8000/mcp)")
        drv = self.native_driver()
        added = drv.add_user()
        try:
            while True:
                gevent.sleep(3600)
        except (gevent.GreenletExit, StopUser, StopTest):
            pass
        finally:
            if added:
                drv.remove_user()

    def native_driver(self) -> Any:
        """The engine this user is a unit of (a scenario user overrides it: one per user class)."""
        from mcpfast.locust import native

        assert self.native_family is not None  # uses_native_engine() said so
        return native.driver(self.environment, self.native_family, self.host)

    def on_start(self) -> None:
        self.mcp = self.make_client()
        if self.auto_initialize and not self.mcp.initialize():  # 2026-07-28: server/discover
            gevent.sleep(FAILED_START_BACKOFF)

    def on_stop(self) -> None:
        if self.mcp is not None:
            try:
                if not self.session_is_connection and self.auto_initialize:
                    self.mcp.delete()
            finally:
                self.mcp.close()


class McpHttpUser(McpUser):
    """MCP over Streamable HTTP at ``--host`` (request type ``mcp-http``)."""

    abstract = True
    transport = "http"


class McpStdioUser(McpUser):
    """MCP over stdio: one ``--mcp-command`` server process per user (request type ``mcp-stdio``)."""

    abstract = True
    transport = "stdio"
