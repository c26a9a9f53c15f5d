"""Hold family: long-lived GET streams by the thousand, the fan-out latency of one server event to
every listener, and the server's memory per held stream.

Each user opens ``--mcp-hold-per-user K`` sessions (initialize + initialized), closes their POST
connection and keeps one GET stream per session open until the test stops: ``-u 100
--mcp-hold-per-user 100`` holds 10,000 streams in one Locust process (one socket each).
Rows: ``initialize``, ``notifications/initialized``, ``GET:open`` (time to the stream's
headers), ``GET:event`` (every event on a held stream).

Fan-out (``--mcp-hold-trigger TOOL``): once every stream of the process is open, and then every
``--mcp-hold-trigger-every`` seconds, one extra session calls TOOL (a tool that makes the server
notify every session, e.g. ``broadcast`` of ``loadtests/_broadcast_server.py``); each listener
that receives a ``notifications/*/list_changed`` reports ``hold:fanout`` (from the trigger's
send to its arrival), and ``hold:fanout-all`` is the time until the last held stream had it.
With ``--mcp-server-pid`` the server's VmRSS before the first stream and with every stream open
gives ``server_rss_kib_per_stream`` (in ``<prefix>_hold.json`` and the log).  HTTP only, handshake
era (a GET stream belongs to a session); on the Python users.
"""

import locust  # noqa: F401, I001 - first

import json
import logging
import time
from typing import Any

import gevent
from locust import events, task
from _common import McpUser, named_only

from mcpfast.client.base import rss_kib
from mcpfast.locust.options import option
from mcpfast.locust.stats import output_prefix

logger = logging.getLogger("mcpfast.loadtests.hold")


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    group = parser.add_argument_group("mcpfast hold", "the hold family (loadtests/hold.py)")
    group.add_argument(
        "--mcp-hold-per-user",
        dest="mcp_hold_per_user",
        type=int,
        default=1,
        metavar="K",
        help="GET streams (sessions) each user holds (default 1)",
    )
    group.add_argument(
        "--mcp-hold-trigger",
        dest="mcp_hold_trigger",
        default=None,
        metavar="TOOL",
        help="tool whose call makes the server notify every session (fan-out latency)",
    )
    group.add_argument(
        "--mcp-hold-trigger-every",
        dest="mcp_hold_trigger_every",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds between fan-out triggers once every stream is open (default 5)",
    )


class HoldState:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.target = 0
        self.opened = 0
        self.held = 0
        self.failed = 0
        self.pid = 0
        self.rss_start: int | None = None
        self.rss_held: int | None = None
        self.held_at: float | None = None
        self.trigger_sent: float | None = None
        self.trigger_seen = 0
        self.triggers = 0
        self.fanout_complete: list[int] = []
        self.trigger_greenlet: Any = None

    def summary(self) -> dict[str, Any]:
        per = None
        if self.rss_start is not None and self.rss_held is not None and self.held:
            per = round((self.rss_held - self.rss_start) / self.held, 2)
        return {
            "streams_target": self.target,
            "streams_opened": self.opened,
            "streams_held": self.held,
            "streams_failed": self.failed,
            "all_held_after_s": self.held_at,
            "triggers": self.triggers,
            "fanout_all_us": self.fanout_complete,
            "server_pid": self.pid or None,
            "server_rss_kib_start": self.rss_start,
            "server_rss_kib_held": self.rss_held,
            "server_rss_kib_per_stream": per,
        }


HOLD = HoldState()
_STARTED = {"t": 0.0}


@events.test_start.add_listener
def _hold_start(environment: Any, **_kw: Any) -> None:
    HOLD.reset()
    _STARTED["t"] = time.time()
    HOLD.pid = int(option(environment, "mcp_server_pid") or 0)
    if HOLD.pid:
        HOLD.rss_start = rss_kib(HOLD.pid)


@events.test_stop.add_listener
def _hold_stop(environment: Any, **_kw: Any) -> None:
    if not HOLD.target:
        return
    if HOLD.trigger_greenlet is not None:
        HOLD.trigger_greenlet.kill(block=False)
    data = HOLD.summary()
    prefix = output_prefix(environment)
    where = "(not written: no --csv / --mcp-histogram-out)"
    if prefix is not None:
        where = prefix + "_hold.json"
        with open(where, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
    logger.info("mcpfast hold: %s -> %s", json.dumps(data), where)


def _all_held(environment: Any) -> None:
    HOLD.held_at = round(time.time() - _STARTED["t"], 3)
    if HOLD.pid:
        gevent.sleep(1.0)  # let the server settle its buffers before the memory sample
        HOLD.rss_held = rss_kib(HOLD.pid)
    logger.info("mcpfast hold: %d streams held after %.1f s", HOLD.held, HOLD.held_at)
    tool = option(environment, "mcp_hold_trigger")
    if tool and HOLD.trigger_greenlet is None:
        HOLD.trigger_greenlet = gevent.spawn(_trigger_loop, environment, tool)


def _trigger_loop(environment: Any, tool: str) -> None:
    from mcpfast.locust import stats as mstats
    from mcpfast.locust.users import McpHttpUser

    user = McpHttpUser.__new__(McpHttpUser)  # a plain client with the users' options, not a Locust user
    McpUser.__init__(user, environment)
    user.host = environment.host
    client = user.make_client()
    report = mstats.get(environment).report
    try:
        if not client.initialize():
            return
        every = float(option(environment, "mcp_hold_trigger_every"))
        while True:
            if HOLD.trigger_sent is not None and HOLD.trigger_seen < HOLD.held:
                report(
                    "mcp-http",
                    "hold:fanout-all",
                    int((time.perf_counter() - HOLD.trigger_sent) * 1e6),
                    0,
                    TimeoutError(f"{HOLD.held - HOLD.trigger_seen} of {HOLD.held} streams missed the event"),
                )
            HOLD.trigger_seen = 0
            HOLD.trigger_sent = time.perf_counter()
            HOLD.triggers += 1
            client.call_tool(tool, {})
            gevent.sleep(every)
    finally:
        client.close()


class HoldUser(McpUser):
    auto_initialize = False

    def on_start(self) -> None:
        self.streams: list[Any] = []
        self.mcp = None  # type: ignore[assignment]

    def on_stop(self) -> None:
        for c in self.streams:
            c.close()
        self.streams = []

    def _on_event(self, event: Any) -> None:
        message = getattr(event, "message", None)
        method = (getattr(message, "method", None) or "") if event.kind == "notification" else ""
        sent = HOLD.trigger_sent
        if sent is None or not method.endswith("/list_changed"):
            return
        now = time.perf_counter()
        self.report("hold:fanout", int((now - sent) * 1e6))
        HOLD.trigger_seen += 1
        if HOLD.trigger_seen == HOLD.held:
            HOLD.fanout_complete.append(int((now - sent) * 1e6))
            self.report("hold:fanout-all", int((now - sent) * 1e6))

    def report(self, name: str, us: int) -> None:
        from mcpfast.locust import stats as mstats

        mstats.get(self.environment).report("mcp-http", name, us, 0, None)

    @task
    def hold(self) -> None:
        k = int(self.opt("mcp_hold_per_user"))
        if self.streams:
            gevent.sleep(3600)
            return
        HOLD.target += k
        for _ in range(k):
            client = self.make_client()
            if not client.initialize():
                HOLD.failed += 1
                client.close()
                continue
            if client._http is not None:  # the POST connection is not needed while the stream is held
                client._http.close()
                client._http = None
            client.open_get_stream(10**6, on_event=self._on_event)
            self.streams.append(client)
            HOLD.opened += 1
            gevent.spawn(self._await_open, client)
        gevent.sleep(3600)

    def _await_open(self, client: Any) -> None:
        for _ in range(600):
            if client.get_stream_status is not None:
                break
            gevent.sleep(0.05)
        if client.get_stream_status == 200:
            HOLD.held += 1
            if HOLD.held == HOLD.target and HOLD.held_at is None:
                _all_held(self.environment)
        else:
            HOLD.failed += 1


named_only(HoldUser, __file__)
