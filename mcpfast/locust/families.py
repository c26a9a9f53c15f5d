"""Pieces the locustfiles' families share: a session's start and end as the handshake and session
churn families time them, and :func:`named_only` for the families that run only when named.

Every family runs over Streamable HTTP (``--host http://127.0.0.1:PORT/mcp``) or, with
``--mcp-command "..."``, over stdio (one server process per user); steps with no stdio form
(DELETE, the GET stream) are skipped there.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import gevent
import locust  # noqa: F401 - first: Locust's import gevent-patches the stdlib
from locust import events

from mcpfast.client.legacy_sse import LegacySseClient
from mcpfast.client.stdio import StdioClient
from mcpfast.locust.options import Group, add_group
from mcpfast.locust.users import FAILED_START_BACKOFF, McpUser

__all__ = ["add_options", "close_session", "first_call_name", "named_only", "open_session"]


def add_options(group: Group) -> None:
    """A family's own options (their ``locust --help`` group) on the parser Locust builds; a
    locustfile's family adds them, so they are listed when that family is loaded."""
    events.init_command_line_parser.add_listener(functools.partial(add_group, group=group))


def first_call_name(tool: str) -> str:
    """The row of a session's first call (the native engine names it the same)."""
    return f"tools/call:{tool} (first)"


def open_session(user: McpUser) -> bool:
    """A fresh connection: new HTTP session (or new stdio process), handshake, first call.

    Each phase is its own stats name: ``initialize`` (stdio: includes the process start),
    ``notifications/initialized`` (or ``server/discover`` in 2026-07-28), ``tools/call:<tool> (first)``.
    """
    mcp = user.mcp
    if isinstance(mcp, StdioClient | LegacySseClient):
        mcp.restart()  # a stdio "session" is a process; a 2024-11-05 HTTP+SSE one is the GET stream
    else:
        mcp.session.reset()
    if not mcp.initialize():
        gevent.sleep(FAILED_START_BACKOFF)  # a refused handshake must not become a hot loop
        return False
    pending = mcp.session.request("tools/call", {"name": user.tool, "arguments": user.tool_args})
    reply = mcp.call("tools/call", pending=pending, name=first_call_name(user.tool))
    return reply is not None and not reply.is_error


def close_session(user: McpUser, delete: bool = True) -> bool:
    """End the session: DELETE over HTTP (when ``delete``), nothing over stdio / HTTP+SSE (the next
    ``open_session`` ends the process / closes the stream); True if DELETEd."""
    if user.session_is_connection:
        return False
    if delete:
        return user.mcp.delete()
    user.mcp.session.reset()  # abandoned: the server keeps it until its own timeout
    return False


def named_only(user_class: type, path: str) -> None:
    """``user_class`` runs only when its locustfile is named with ``-f`` (``-f loadtests/hold.py``),
    not with the whole directory (``-f loadtests/``): a family whose load is of another kind (held
    streams, tasks, alternating eras) is asked for by name."""
    here = os.path.realpath(path)

    @events.init.add_listener
    def _named_only(environment: Any, **_kw: Any) -> None:
        given = str(getattr(getattr(environment, "parsed_options", None), "locustfile", "") or "")
        if given in ("", "-"):
            return  # a worker with the master's files, or library use: the master decides
        named = {os.path.realpath(p.strip()) for p in given.split(",") if p.strip()}
        classes = environment.user_classes
        if here not in named and user_class in classes and len(classes) > 1:
            classes.remove(user_class)
