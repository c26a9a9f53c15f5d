"""Hold family (``loadtests/hold.py``): long-lived GET streams by the thousand, the fan-out latency
of one server event to every listener, and the server's memory per held stream.

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
era (a GET stream belongs to a session).  A trigger tool the server does not list (one
``tools/list`` at the start) stops the run before any load, with exit code 2.

On the native engine (the default; ``--mcp-engine python`` keeps the gevent users) the engine's
threads hold the streams and time the fan-out: the trigger's send and each arrival are read where
they happen (µs-true); one engine trigger per run, in the first worker with ``--processes N``,
whose rounds reach the other workers' engines through a file, so that every listener measures
against the one trigger; the master merges the workers' figures into ``<prefix>_hold.json``
(``fanout_all_us``: per round, the slowest process's last listener).

The locustfile subclasses :class:`HoldingUser` with its one task and calls :func:`register`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import tempfile
import time
from typing import Any

import gevent
import locust  # first: Locust's import gevent-patches the stdlib

from mcpfast.client.base import rss_kib
from mcpfast.client.http import HttpClient
from mcpfast.locust import stats as mstats
from mcpfast.locust.families import add_options
from mcpfast.locust.options import HOLD as HOLD_OPTIONS
from mcpfast.locust.options import engine, option
from mcpfast.locust.stats import output_prefix, runner_kind
from mcpfast.locust.users import McpHttpUser, McpUser

__all__ = ["HOLD", "HoldState", "HoldingUser", "check_trigger", "merge", "register"]

logger = logging.getLogger("mcpfast.loadtests.hold")

HOLD_MESSAGE = "mcpfast_hold"  # worker -> master: the worker's hold figures at its test_stop
REQUEST_TYPE = "mcp-http"  # HTTP only


class HoldState:
    """One process's streams, fan-out rounds and server memory samples."""

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
        self.started = 0.0
        self.trigger_sent: float | None = None
        self.trigger_seen = 0
        self.triggers = 0
        self.round = 0
        self.fanout_complete: list[int] = []
        self.rounds: list[tuple[int, int]] = []  # (round, µs to the last listener)
        self.trigger_greenlet: Any = None
        self.watch_greenlet: Any = None
        self.refused: str | None = None  # why the run may not start (a trigger tool the server lacks)

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
            "rounds": [list(r) for r in self.rounds],
            "server_pid": self.pid or None,
            "server_rss_kib_start": self.rss_start,
            "server_rss_kib_held": self.rss_held,
            "server_rss_kib_per_stream": per,
        }


HOLD = HoldState()
MERGED: dict[str, dict[str, Any]] = {}  # master: each worker's figures


def merge(workers: list[dict[str, Any]]) -> dict[str, Any]:
    """The workers' figures as one run's: counts summed; a round's ``fanout_all_us`` is the slowest
    worker's (a round counts when every worker holding streams had it on all of them); the
    server's memory per stream from the earliest start sample and the latest held one."""
    out: dict[str, Any] = {
        k: sum(int(w.get(k) or 0) for w in workers)
        for k in ("streams_target", "streams_opened", "streams_held", "streams_failed", "triggers")
    }
    holding = [w for w in workers if w.get("streams_held")]
    per_round: dict[int, list[int]] = {}
    for w in holding:
        for r, us in w.get("rounds") or []:
            per_round.setdefault(int(r), []).append(int(us))
    rounds = [[r, max(v)] for r, v in sorted(per_round.items()) if len(v) == len(holding)]
    starts = [w["server_rss_kib_start"] for w in workers if w.get("server_rss_kib_start") is not None]
    helds = [w["server_rss_kib_held"] for w in workers if w.get("server_rss_kib_held") is not None]
    start, held = (min(starts) if starts else None), (max(helds) if helds else None)
    per = round((held - start) / out["streams_held"], 2) if start is not None and held is not None and out["streams_held"] else None
    times = [w["all_held_after_s"] for w in workers if w.get("all_held_after_s") is not None]
    out.update(
        all_held_after_s=max(times) if len(times) == len(holding) and times else None,
        fanout_all_us=[us for _, us in rounds],
        rounds=rounds,
        server_pid=next((w["server_pid"] for w in workers if w.get("server_pid")), None),
        server_rss_kib_start=start,
        server_rss_kib_held=held,
        server_rss_kib_per_stream=per,
        workers=len(workers),
        per_worker=[{k: w.get(k) for k in ("streams_held", "triggers", "fanout_all_us")} for w in workers],
    )
    return out


def check_trigger(environment: Any) -> str | None:
    """Why the run may not start: ``--mcp-hold-trigger`` names a tool the server does not list
    (one session and one ``tools/list`` walk, unreported), or the server cannot be asked; None when
    there is no trigger or the server lists it."""
    tool = option(environment, "mcp_hold_trigger")
    if not tool or option(environment, "mcp_command"):
        return None
    from mcpfast.locust.scenario import ScenarioError, listed, make_client

    try:
        client = make_client(environment, environment.host)
    except Exception as exc:  # no --host, a bad URL: the users report it as they start
        logger.debug("mcpfast hold: no trigger check: %s", exc)
        return None
    try:
        if not client.initialize():
            return f"cannot check --mcp-hold-trigger {tool!r}: no session with the server ({client.last_error})"
        try:
            names = [t["name"] for t in listed(client, "tools/list", "tools") if isinstance(t.get("name"), str)]
        except ScenarioError as exc:
            return f"cannot check --mcp-hold-trigger {tool!r}: {exc}"
    finally:
        client.close()
    if tool in names:
        return None
    return f"--mcp-hold-trigger {tool!r}: the server does not list that tool (tools/list: {', '.join(sorted(names)) or 'none'})"


def _write(environment: Any, data: dict[str, Any]) -> None:
    prefix = output_prefix(environment)
    where = "(not written: no --csv / --mcp-histogram-out)"
    if prefix is not None:
        where = prefix + "_hold.json"
        with open(where, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
    logger.info("mcpfast hold: %s -> %s", json.dumps(data), where)


def _report(environment: Any, name: str, us: int, exception: BaseException | None = None) -> None:
    mstats.get(environment).report(REQUEST_TYPE, name, us, 0, exception)


# -- the native engine ---------------------------------------------------------------------------------
def _driver(environment: Any) -> Any:
    from mcpfast.locust.native import drivers

    return next((d for d in drivers(environment) if d.family == "hold"), None)


def _watch_native(environment: Any) -> None:
    """Native engine: the streams held (the engine's ``held``) against this process's target
    (users x per user); when they are all open and every user has started: the time and the
    server's memory sample."""
    from locust.runners import STATE_RUNNING

    per_user = int(option(environment, "mcp_hold_per_user"))
    while True:
        gevent.sleep(0.2)
        d = _driver(environment)
        if d is None or d.engine is None:
            continue
        held = int(d.engine.status()["held"])
        HOLD.target = max(HOLD.target, d.users * per_user)
        HOLD.held = max(HOLD.held, held)
        spawned = getattr(environment.runner, "state", None) == STATE_RUNNING  # not while users still start
        if HOLD.held_at is None and spawned and d.users and held >= d.users * per_user:
            HOLD.held_at = round(time.time() - HOLD.started, 3)
            if HOLD.pid:  # before the engine's first trigger (a second after the last stream opened)
                HOLD.rss_held = rss_kib(HOLD.pid)
            logger.info("mcpfast hold: %d streams held after %.1f s", held, HOLD.held_at)


def _native_figures(environment: Any) -> None:
    """The engine's counts, after its final drain: streams opened and failed, fan-out rounds."""
    d = _driver(environment)
    if d is None:
        return
    HOLD.opened = d.succeeded("GET:open")
    HOLD.failed = d.failed("GET:open") + d.failed("initialize") + d.failed("notifications/initialized")
    HOLD.triggers = int(d.fanout.get("triggers") or 0)
    HOLD.rounds = [(int(r), int(us)) for r, us in d.fanout.get("rounds") or []]
    HOLD.fanout_complete = [us for _, us in HOLD.rounds]


# -- the Python users' fan-out trigger ------------------------------------------------------------------
def _all_held(environment: Any) -> None:
    HOLD.held_at = round(time.time() - HOLD.started, 3)
    if HOLD.pid:
        gevent.sleep(1.0)  # let the server settle its buffers before the memory sample
        HOLD.rss_held = rss_kib(HOLD.pid)
    logger.info("mcpfast hold: %d streams held after %.1f s", HOLD.held, HOLD.held_at)
    tool = option(environment, "mcp_hold_trigger")
    if tool and HOLD.trigger_greenlet is None:
        HOLD.trigger_greenlet = gevent.spawn(_trigger_loop, environment, str(tool))


def _trigger_loop(environment: Any, tool: str) -> None:
    user = McpHttpUser.__new__(McpHttpUser)  # a plain client with the users' options, not a Locust user
    McpUser.__init__(user, environment)
    user.host = environment.host
    client = user.make_client()
    try:
        if not client.initialize():
            return
        every = float(option(environment, "mcp_hold_trigger_every"))
        while True:
            if HOLD.trigger_sent is not None and HOLD.trigger_seen < HOLD.held:
                _report(
                    environment,
                    "hold:fanout-all",
                    int((time.perf_counter() - HOLD.trigger_sent) * 1e6),
                    TimeoutError(f"{HOLD.held - HOLD.trigger_seen} of {HOLD.held} streams missed the event"),
                )
            HOLD.trigger_seen = 0
            HOLD.trigger_sent = time.perf_counter()
            HOLD.triggers += 1
            HOLD.round = HOLD.triggers
            client.call_tool(tool, {})
            gevent.sleep(every)
    finally:
        client.close()


# -- the users -------------------------------------------------------------------------------------------
class HoldingUser(McpUser):
    """A hold user: :meth:`hold_streams` is its one task (on the native engine the engine holds)."""

    abstract = True
    auto_initialize = False
    native_family = "hold"

    def refused(self) -> str | None:
        return HOLD.refused

    def on_start(self) -> None:
        self.streams: list[HttpClient] = []
        self.mcp = None  # type: ignore[assignment]  # no session of its own: one client per held stream

    def on_stop(self) -> None:
        for c in self.streams:
            c.close()
        self.streams = []

    def hold_streams(self) -> None:
        """Open ``--mcp-hold-per-user`` sessions, each holding its GET stream, then wait."""
        k = int(self.opt("mcp_hold_per_user"))
        if self.streams:
            gevent.sleep(3600)
            return
        HOLD.target += k
        for _ in range(k):
            client = self.make_client()
            if not isinstance(client, HttpClient):
                raise TypeError("the hold family holds Streamable HTTP GET streams (no --mcp-command, no 2024-11-05)")
            if not client.initialize():
                HOLD.failed += 1
                client.close()
                continue
            client.close_request_connection()  # the POST connection is not needed while the stream is held
            client.open_get_stream(10**6, on_event=self._on_event)
            self.streams.append(client)
            HOLD.opened += 1
            gevent.spawn(self._await_open, client)
        gevent.sleep(3600)

    def _on_event(self, event: Any) -> None:
        message = getattr(event, "message", None)
        method = (getattr(message, "method", None) or "") if event.kind == "notification" else ""
        sent = HOLD.trigger_sent
        if sent is None or not method.endswith("/list_changed"):
            return
        now = time.perf_counter()
        _report(self.environment, "hold:fanout", int((now - sent) * 1e6))
        HOLD.trigger_seen += 1
        if HOLD.trigger_seen == HOLD.held:
            HOLD.fanout_complete.append(int((now - sent) * 1e6))
            HOLD.rounds.append((HOLD.round, int((now - sent) * 1e6)))
            _report(self.environment, "hold:fanout-all", int((now - sent) * 1e6))

    def _await_open(self, client: HttpClient) -> None:
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


# -- wiring ----------------------------------------------------------------------------------------------
class _Family:
    """The listeners of one locustfile's hold user class."""

    def __init__(self, user_class: type[HoldingUser]) -> None:
        self.user_class = user_class
        # the native engines' shared trigger clock: named when the locustfile is imported, so that
        # the processes --processes forks after importing the locustfiles all name the same file
        self.clock_path = os.path.join(tempfile.gettempdir(), f"mcpfast-hold-{os.getpid()}-{time.time_ns()}.clock")

    def native(self, environment: Any) -> bool:
        return self.user_class.native_family is not None and engine(environment) == "native"

    def forget_clock(self, **_kw: Any) -> None:
        # the engines are stopped: the clock file they shared goes with the run (each process tries)
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.clock_path)

    def on_init(self, environment: Any, **_kw: Any) -> None:
        from mcpfast.locust.native import HOLD_CLOCK_ATTR

        setattr(environment, HOLD_CLOCK_ATTR, self.clock_path)
        runner = environment.runner
        if runner_kind(runner) == "master" and HOLD_MESSAGE not in runner.custom_messages:

            def on_worker(environment: Any, msg: Any, **_kw: Any) -> None:
                MERGED[msg.node_id] = msg.data
                _write(environment, merge(list(MERGED.values())))

            runner.register_message(HOLD_MESSAGE, on_worker)

    def on_test_start(self, environment: Any, **_kw: Any) -> None:
        HOLD.reset()
        MERGED.clear()
        HOLD.started = time.time()
        HOLD.pid = int(option(environment, "mcp_server_pid") or 0)
        if HOLD.pid:
            HOLD.rss_start = rss_kib(HOLD.pid)
        if runner_kind(environment.runner) == "master" or self.user_class not in environment.user_classes:
            return  # the workers check; a run of other families (-f loadtests/) holds nothing
        HOLD.refused = check_trigger(environment)
        if HOLD.refused is not None:
            logger.error("mcpfast hold: %s", HOLD.refused)
            environment.process_exit_code = 2
            gevent.spawn(environment.runner.quit)
            return
        if self.native(environment):
            HOLD.watch_greenlet = gevent.spawn(_watch_native, environment)

    def on_test_stop(self, environment: Any, **_kw: Any) -> None:
        if HOLD.watch_greenlet is not None:
            HOLD.watch_greenlet.kill(block=False)
            HOLD.watch_greenlet = None
        if HOLD.trigger_greenlet is not None:
            HOLD.trigger_greenlet.kill(block=False)
        kind = runner_kind(environment.runner)
        if self.native(environment) and kind != "master":
            mstats.get(environment).finish_engines()  # the engine's final drain first
            _native_figures(environment)
        if not HOLD.target:
            return
        data = HOLD.summary()
        if kind == "worker":
            environment.runner.send_message(HOLD_MESSAGE, data)
            return
        _write(environment, data)


@functools.cache  # once per process
def register(user_class: type[HoldingUser]) -> None:
    """The hold family's options (``locust --help``'s ``mcpfast hold`` group) and listeners on
    Locust's global events, for the locustfile's user class."""
    family = _Family(user_class)
    events = locust.events
    add_options(HOLD_OPTIONS)
    events.quitting.add_listener(family.forget_clock)
    events.init.add_listener(family.on_init)
    events.test_start.add_listener(family.on_test_start)
    events.test_stop.add_listener(family.on_test_stop)
