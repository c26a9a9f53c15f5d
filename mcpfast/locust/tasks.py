"""Tasks family (``loadtests/tasks.py``; ``io.modelcontextprotocol/tasks``, SEP-2663, 2026-07-28):
calls that return a task, polled with ``tasks/get`` until the task ends.

Every user speaks 2026-07-28 and declares ``extensions["io.modelcontextprotocol/tasks"]``; it
calls ``--mcp-tool`` with ``--mcp-tool-args`` (a tool the server may run as a task, e.g.
``slow_compute`` of ``mcpfast serve --app mcpfast.server.conformance:app`` with
``{"seconds": 0.2}``).  A reply with ``resultType: "task"`` is polled with ``tasks/get`` every
``pollIntervalMs`` (the server's hint) until its status is ``completed``, ``failed`` or
``cancelled``; ``--mcp-tasks-cancel-share`` of the tasks get a ``tasks/cancel`` after their
first poll.  Rows: ``tools/call:<tool>`` (the call that made the task), ``tasks/get`` (each poll),
``tasks/cancel``, ``task:completed`` / ``task:cancelled`` (from the call's send to the poll that
saw the end), ``task:failed`` (a failure: status failed, or a completed task with ``isError``),
``task:not-a-task`` (a failure: the server answered plainly).  ``<prefix>_tasks.json`` (and the
log): tasks made, completed, cancelled, failed, polls per task, the cancel share.  Before any
load, one unreported session asks the server (HTTP): a ``server/discover`` that does not offer
the tasks extension, no tool ``--mcp-tool`` in ``tools/list``, a refused call of it, or a call
answered without a task (the server will not run that tool as one) stops the run with exit code
2 and the reason; a probe call that made a task is cancelled.  A refusal under load is a failure
named by its cause (``http 400 unknown tool: echo``, ``JSON-RPC error -32602 on tools/call:
...``), as the native engine names it.  Both engines (the native one by default; ``--mcp-engine
python`` keeps the gevent users); on the native engine the counts come from its rows, ``failed``
including failed polls.

The locustfile subclasses :class:`TaskingUser` with its one task and calls :func:`register`.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import time
from typing import Any

import gevent
import locust  # first: Locust's import gevent-patches the stdlib

from mcpfast.client.http import HttpClient
from mcpfast.client.session import ClientSession
from mcpfast.locust import oauth
from mcpfast.locust import stats as mstats
from mcpfast.locust.families import add_options
from mcpfast.locust.options import TASKS as TASKS_OPTIONS
from mcpfast.locust.options import option, reach
from mcpfast.locust.stats import output_prefix, runner_kind
from mcpfast.locust.users import McpUser

__all__ = ["COUNTS", "EXTENSION", "TaskFailed", "TaskingUser", "check_tasks_extension", "register"]

logger = logging.getLogger("mcpfast.loadtests.tasks")

EXTENSION = "io.modelcontextprotocol/tasks"
VERSION = "2026-07-28"
TERMINAL = ("completed", "failed", "cancelled")
MAX_POLLS = 10_000  # bounded: a task that never ends is a failure, not a hang
MIN_POLL_S, MAX_POLL_S = 0.005, 5.0
MAX_LIST_PAGES = 20  # tools/list pages the check before load reads


class TaskFailed(Exception):
    pass


COUNTS: dict[str, int] = {}
REFUSED: dict[str, str | None] = {"why": None}  # why the run may not start


def _reset() -> None:
    COUNTS.clear()
    COUNTS.update(made=0, completed=0, cancelled=0, failed=0, polls=0, cancels_sent=0, not_a_task=0)


_reset()


def _capabilities(environment: Any) -> dict[str, Any]:
    """The users' capabilities with the tasks extension declared."""
    caps = json.loads(option(environment, "mcp_client_capabilities"))
    caps.setdefault("extensions", {})[EXTENSION] = {}
    return caps


def check_tasks_extension(environment: Any) -> str | None:
    """Why the run may not start, found before any load with one unreported session of the
    users' own kind: the server's ``server/discover`` does not offer the tasks extension, it
    lists no tool ``--mcp-tool``, it refuses a call of it (the refusal's reason named), or it
    answers the call without making a task (it will not run that tool as one); None when the
    call made a task (then cancelled) or the server cannot be reached before the run (over
    stdio, where the native engine has no tasks family, the users find out)."""
    if option(environment, "mcp_command") or not environment.host:
        return None
    tool, arguments = str(option(environment, "mcp_tool")), json.loads(option(environment, "mcp_tool_args"))
    seen: list[BaseException] = []

    def keep(_name: str, _us: int, _length: int, exc: BaseException | None) -> None:
        if exc is not None:
            seen.append(exc)

    how = reach(environment)
    token = oauth.source(environment) if how.oauth is not None else (how.token(0) if how.tokens else None)
    session = ClientSession(VERSION, capabilities=_capabilities(environment))
    client = HttpClient(environment.host, session, token=token, reach=how, timeout=float(option(environment, "mcp_timeout")), reporter=keep)
    try:
        if not client.initialize():
            return f"cannot ask the server for the tasks extension: server/discover failed ({str(seen[-1]) if seen else client.last_error})"
        offered = (client.session.server_capabilities or {}).get("extensions") or {}
        if EXTENSION not in offered:
            return f"the server does not offer the tasks extension ({EXTENSION} is not in server/discover's capabilities.extensions)"
        tools = _tool_names(client)
        if tools is not None and tool not in tools:
            listed = ", ".join(sorted(tools)[:12]) + (", ..." if len(tools) > 12 else "") or "none"
            return f"the server lists no tool {tool!r} (its tools: {listed}); name one it runs as a task with --mcp-tool"
        reply = client.call_tool(tool, arguments)
        if reply is None or reply.is_error:
            why = str(seen[-1]) if seen else "no reply"
            return f"the server refused tools/call:{tool} before any load: {why}"
        result = reply.result or {}
        if result.get("isError"):
            said = " ".join(str(c.get("text", "")) for c in result.get("content") or [] if isinstance(c, dict))
            return f"the server refused tools/call:{tool} before any load: its result is an error: {' '.join(said.split())[:200]}"
        if result.get("resultType") != "task" or not isinstance(result.get("taskId"), str):
            return (
                f"the server ran {tool!r} without making a task (resultType {result.get('resultType')!r}): it will not run "
                f"that tool as a task; name one it does with --mcp-tool (and its --mcp-tool-args)"
            )
        client.call("tasks/cancel", {"taskId": result["taskId"]})  # the probe's task: not left to run
    finally:
        client.close()
    return None


def _tool_names(client: HttpClient) -> set[str] | None:
    """Every tool the server lists (its pages followed, at most :data:`MAX_LIST_PAGES`); None
    when it does not answer ``tools/list`` (then the call finds out)."""
    names: set[str] = set()
    cursor = None
    for _ in range(MAX_LIST_PAGES):
        reply = client.list_tools(cursor)
        if reply is None or reply.is_error:
            return None
        result = reply.result or {}
        names.update(str(t.get("name")) for t in result.get("tools") or [] if isinstance(t, dict))
        cursor = result.get("nextCursor")
        if not cursor:
            break
    return names


def _native_counts(environment: Any) -> None:
    """The native engine's counts, from its rows after its final drain."""
    from mcpfast.locust.native import drivers

    for d in drivers(environment):
        if d.family != "tasks":
            continue
        call = f"tools/call:{option(environment, 'mcp_tool')}"
        not_a_task = d.failed("task:not-a-task")
        COUNTS.update(
            made=d.succeeded(call) - not_a_task,
            completed=d.succeeded("task:completed"),
            cancelled=d.succeeded("task:cancelled"),
            failed=d.failed("task:failed") + d.failed("tasks/get"),
            polls=d.succeeded("tasks/get") + d.failed("tasks/get"),
            cancels_sent=d.succeeded("tasks/cancel") + d.failed("tasks/cancel"),
            not_a_task=not_a_task,
        )


class TaskingUser(McpUser):
    """A tasks user: :meth:`run_one_task` is its one task."""

    abstract = True
    native_family = "tasks"

    def refused(self) -> str | None:
        return REFUSED["why"]

    def new_session(self) -> ClientSession:
        return ClientSession(VERSION, capabilities=_capabilities(self.environment))

    def _report(self, name: str, started: float, exc: BaseException | None = None) -> None:
        mstats.get(self.environment).report(self.request_type, name, int((time.perf_counter() - started) * 1e6), 0, exc)

    def run_one_task(self) -> None:
        """Call the tool, then poll the task it made until it ends (cancelling a share of them)."""
        if not self.ready():
            return
        started = time.perf_counter()
        reply = self.mcp.call_tool(self.tool, self.tool_args)
        if reply is None or reply.is_error:
            return
        result = reply.result or {}
        if result.get("resultType") != "task" or not isinstance(result.get("taskId"), str):
            COUNTS["not_a_task"] += 1
            self._report("task:not-a-task", started, TaskFailed("the server answered without a task"))
            return
        COUNTS["made"] += 1
        task_id = result["taskId"]
        status = result.get("status")
        cancel = random.random() < float(self.opt("mcp_tasks_cancel_share"))
        for polls in range(MAX_POLLS):
            if status in TERMINAL:
                break
            interval = (result.get("pollIntervalMs") or 100) / 1000.0
            gevent.sleep(min(max(interval, MIN_POLL_S), MAX_POLL_S))
            got = self.mcp.call("tasks/get", {"taskId": task_id}, name="tasks/get")
            COUNTS["polls"] += 1
            if got is None or got.is_error:
                COUNTS["failed"] += 1
                return  # the failed tasks/get is its own failure row
            result = got.result or {}
            status = result.get("status")
            if cancel and polls == 0 and status not in TERMINAL:
                COUNTS["cancels_sent"] += 1
                self.mcp.call("tasks/cancel", {"taskId": task_id}, name="tasks/cancel")
        else:
            COUNTS["failed"] += 1
            self._report("task:failed", started, TaskFailed(f"still {status} after {MAX_POLLS} polls"))
            return
        if status == "completed" and not (result.get("result") or {}).get("isError"):
            COUNTS["completed"] += 1
            self._report("task:completed", started)
        elif status == "cancelled":
            COUNTS["cancelled"] += 1
            self._report("task:cancelled", started)
        else:
            COUNTS["failed"] += 1
            self._report("task:failed", started, TaskFailed(f"task {status}" + (" with isError" if status == "completed" else "")))


class _Family:
    """The listeners of one locustfile's tasks user class."""

    def __init__(self, user_class: type[TaskingUser]) -> None:
        self.user_class = user_class

    def on_test_start(self, environment: Any, **_kw: Any) -> None:
        _reset()
        REFUSED["why"] = None
        if runner_kind(environment.runner) == "master" or self.user_class not in environment.user_classes:
            return  # the workers check; a run of other families (-f loadtests/) is not asked about tasks
        why = check_tasks_extension(environment)
        if why is not None:
            REFUSED["why"] = why
            logger.error("mcpfast tasks: %s", why)
            environment.process_exit_code = 2
            gevent.spawn(environment.runner.quit)

    def on_test_stop(self, environment: Any, **_kw: Any) -> None:
        mstats.get(environment).finish_engines()  # the engine's final drain first
        _native_counts(environment)
        if not COUNTS["made"] and not COUNTS["not_a_task"]:
            return
        ended = COUNTS["completed"] + COUNTS["cancelled"] + COUNTS["failed"]
        data = dict(
            COUNTS,
            polls_per_task=round(COUNTS["polls"] / ended, 3) if ended else None,
            cancel_share=round(COUNTS["cancelled"] / ended, 4) if ended else None,
        )
        prefix = output_prefix(environment)
        where = "(not written: no --csv / --mcp-histogram-out)"
        if prefix is not None:
            where = prefix + "_tasks.json"
            with open(where, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
        logger.info("mcpfast tasks: %s -> %s", json.dumps(data), where)


@functools.cache  # once per process
def register(user_class: type[TaskingUser]) -> None:
    """The tasks family's options (``locust --help``'s ``mcpfast tasks`` group) and listeners on
    Locust's global events, for the locustfile's user class."""
    family = _Family(user_class)
    events = locust.events
    add_options(TASKS_OPTIONS)
    events.test_start.add_listener(family.on_test_start)
    events.test_stop.add_listener(family.on_test_stop)
