"""The locustfiles' common setup (private: the leading underscore keeps ``locust -f loadtests/``
from loading it as a locustfile).

The locustfiles import it as ``mcpfast.loadtests._common``: the same module whether Locust loads
them from a checkout or from an installed mcpfast, and one copy however many of them a run loads.
The families' logic lives in :mod:`mcpfast.locust`; this file names what the locustfiles use and
sets up what every run shares.

Every family runs over Streamable HTTP (``--host http://127.0.0.1:PORT/mcp``) or, with
``--mcp-command "..."``, over stdio (one server process per user); steps with no stdio form
(DELETE, the GET stream) are skipped there.  Without ``--mcp-protocol-version`` the swarm speaks
2025-11-25; ``auto`` probes ``server/discover`` and falls back to ``initialize``.
"""

from __future__ import annotations

import locust  # noqa: F401 - first: Locust's import gevent-patches the stdlib

from mcpfast.locust import churn, webui
from mcpfast.locust.churn import CHURN
from mcpfast.locust.families import close_session, named_only, open_session
from mcpfast.locust.users import McpUser

__all__ = ["CHURN", "McpUser", "close_session", "named_only", "open_session"]

# every run counts its sessions opened and ended (the handshake and churn families' users), merged
# on a master from its workers into <prefix>_churn.json
churn.register()
# with the web UI, the MCP tab: the run's µs figures live (mcpfast.locust.webui)
webui.register()
