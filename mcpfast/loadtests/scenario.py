"""Scenario family: the mix of a workload file (``--mcp-scenario FILE``) or of what the server
lists (``--mcp-discover``), on either engine, checked against the server before any load
(:mod:`mcpfast.locust.scenario_run` says how).  Without either option it sits out of ``-f
loadtests/``."""

import locust  # noqa: F401, I001 - first

from locust import task

import mcpfast.loadtests._common  # noqa: F401 - the locustfiles' common setup
from mcpfast.locust.scenario_run import ScenarioUserBase, register


class ScenarioUser(ScenarioUserBase):
    @task
    def operate(self) -> None:
        self.one_operation()


register()
