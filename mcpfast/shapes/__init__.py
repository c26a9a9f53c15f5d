"""Locust load shapes of the swarm, kept outside ``loadtests/``: Locust uses the first shape any
loaded locustfile holds, so a shape is opted into by naming it (``-f loadtests/tools_call.py,shapes/capacity.py``)."""
