"""Tasks family (``io.modelcontextprotocol/tasks``, 2026-07-28): calls that return a task, polled
with ``tasks/get`` until the task ends, a share of them cancelled (``--mcp-tasks-cancel-share``;
:mod:`mcpfast.locust.tasks` says how).  Runs only when named (``-f loadtests/tasks.py``), with
``--mcp-tool`` a tool the server runs as a task: one it will not is named before any load (exit 2).
"""

import locust  # noqa: F401, I001 - first

from locust import task

from mcpfast.loadtests._common import named_only
from mcpfast.locust.tasks import TaskingUser, register


class TasksUser(TaskingUser):
    @task
    def run_task(self) -> None:
        self.run_one_task()


register(TasksUser)
named_only(TasksUser, __file__)
