"""Hold family: long-lived GET streams by the thousand, the fan-out latency of one server event to
every listener, and the server's memory per held stream (``--mcp-hold-per-user``,
``--mcp-hold-trigger``, ``--mcp-hold-trigger-every``; :mod:`mcpfast.locust.hold` says how).
HTTP only; runs only when named (``-f loadtests/hold.py``)."""

import locust  # noqa: F401, I001 - first

from locust import task

from mcpfast.loadtests._common import named_only
from mcpfast.locust.hold import HoldingUser, register


class HoldUser(HoldingUser):
    @task
    def hold(self) -> None:
        self.hold_streams()


register(HoldUser)
named_only(HoldUser, __file__)
