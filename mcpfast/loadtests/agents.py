"""Agents family: MCP sessions as production agents open them (initialize, tools/list, steps with
think times between them, DELETE or abandon, an idle gap, again), by the hundred thousand, on the
native engine: ``-u`` agents (``--mcp-agents-per-user N`` for N per Locust user), the steps of a
workload file (``--mcp-scenario FILE``) or of the tools the server lists; checked before any load
(:mod:`mcpfast.locust.agents` says how).  HTTP only; runs only when named
(``-f loadtests/agents.py``)."""

import locust  # noqa: F401, I001 - first

from locust import task

from mcpfast.loadtests._common import named_only
from mcpfast.locust.agents import AgentUserBase, register


class AgentUser(AgentUserBase):
    @task
    def act(self) -> None:
        """Never run: the native engine's threads are the agents (a refused run sends nothing)."""


named_only(AgentUser, __file__)  # first: in `-f loadtests/` the class leaves before the plan is built
register(AgentUser)
