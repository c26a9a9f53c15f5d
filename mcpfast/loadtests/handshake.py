"""Handshake family: a fresh session per iteration, each phase timed under its own name:
``initialize``, ``notifications/initialized`` (2026-07-28: ``server/discover``),
``tools/call:<tool> (first)``, ``DELETE`` (HTTP only)."""

import locust  # noqa: F401, I001 - first

from locust import task

from mcpfast.loadtests._common import McpUser, close_session, open_session


class HandshakeUser(McpUser):
    native_family = "handshake"
    auto_initialize = False

    @task
    def handshake(self) -> None:
        if open_session(self):
            close_session(self)
