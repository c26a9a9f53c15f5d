"""The swarm's locustfiles (``locust -f loadtests/``, or ``locust -f "$(mcpfast locustfiles)"``
after ``pip install``).

A package so that the locustfiles import their shared setup by one name,
``mcpfast.loadtests._common``, whether Locust loads them from a checkout or from an installed
mcpfast, and so that mypy checks them.  Locust skips this file (its name starts with ``_``) and
loads each locustfile by its path; the families' logic lives in :mod:`mcpfast.locust`.
"""
