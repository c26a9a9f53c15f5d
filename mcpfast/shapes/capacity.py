"""The capacity search as a Locust shape: beside one family's locustfile,
``locust -f loadtests/tools_call.py,shapes/capacity.py --headless --host URL --mcp-slo 'tools/call:echo p99 < 5ms'``
finds the highest open-model rate the server holds within the SLO (:mod:`mcpfast.locust.capacity_shape`
says how; ``mcpfast capacity`` runs it and draws the curve)."""

import locust  # noqa: F401 - first

from mcpfast.locust.capacity_shape import CapacityShape, register

__all__ = ["CapacityShape"]

register()
