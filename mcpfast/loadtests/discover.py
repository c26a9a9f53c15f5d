"""Discover family: a 2026-07-28 client's start (``server/discover``, then the first call) against
the handshake era's (``initialize``, ``notifications/initialized``, the first call, ``DELETE``) on
the same server, alternating in every user, each on its own keep-alive connection.

Rows: ``server/discover``, ``tools/call:<tool> (first after discover)``, ``initialize``,
``notifications/initialized``, ``tools/call:<tool> (first after initialize)``, ``DELETE``, and the
time from a fresh start to the first call's result: ``start:discover`` and ``start:initialize``
(the two to compare; DELETE is not part of the start).  The handshake era speaks
``--mcp-protocol-version`` (2025-11-25 when that is 2026-07-28 or auto).  On the native engine
(the default; ``--mcp-engine python`` keeps the gevent users) each user makes both starts on one
keep-alive connection (the Python user keeps one per era).
"""

import locust  # noqa: F401, I001 - first

import time
from typing import Any

from locust import task

from mcpfast.client.session import ClientSession
from mcpfast.loadtests._common import McpUser, named_only
from mcpfast.locust import stats as mstats

STATELESS = "2026-07-28"


class DiscoverUser(McpUser):
    auto_initialize = False
    native_family = "discover"
    _version = STATELESS

    def new_session(self) -> ClientSession:
        import json

        return ClientSession(self._version, capabilities=json.loads(self.opt("mcp_client_capabilities")))

    def on_start(self) -> None:
        chosen = str(self.opt("mcp_protocol_version"))
        handshake = "2025-11-25" if chosen in (STATELESS, "auto") else chosen
        self.clients = {}
        for era, version in (("discover", STATELESS), ("initialize", handshake)):
            self._version = version
            self.clients[era] = self.make_client()
        self.mcp = self.clients["discover"]
        self.turn = 0

    def on_stop(self) -> None:
        for client in self.clients.values():
            client.close()

    def _report(self, name: str, started: float) -> None:
        mstats.get(self.environment).report(self.request_type, name, int((time.perf_counter() - started) * 1e6), 0, None)

    @task
    def open_and_call(self) -> None:
        era = ("discover", "initialize")[self.turn % 2]
        self.turn += 1
        client: Any = self.clients[era]
        client.session.reset()
        started = time.perf_counter()
        if not client.initialize():
            return
        reply = client.call(
            "tools/call", {"name": self.tool, "arguments": self.tool_args}, name=f"tools/call:{self.tool} (first after {era})"
        )
        if reply is None or reply.is_error:
            return
        self._report(f"start:{era}", started)
        if era == "initialize":
            client.delete()


named_only(DiscoverUser, __file__)
