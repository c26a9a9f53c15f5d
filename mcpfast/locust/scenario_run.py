"""The scenario family in a Locust run (``loadtests/scenario.py``): the mix of a workload file
(``--mcp-scenario FILE``) or of what the server lists (``--mcp-discover``), on either engine.

Before any load is sent, every process reads the file, asks the server for its tools, resources,
templates and prompts, and checks the mix against them (:mod:`mcpfast.locust.scenario`); an
error names the file, the line and what is wrong, and the run exits with code 2.
``--mcp-scenario-dump`` prints the mix the run would send and exits 0.

Each user class of the scenario has its own weighted mix; the k-th user started in a process
gets a class by smooth weighted round robin of the classes' weights.  On the native engine each
class is one engine (family ``mixed``, its ``mix`` carrying every operation kind: tools/call,
stream calls with a progress token, resources/read, prompts/get, completion/complete and the
list calls); on the Python engine the user picks an operation by weight each task.

The locustfile subclasses :class:`ScenarioUserBase` with its one task and calls :func:`register`.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import sys
from typing import TYPE_CHECKING, Any

import locust  # first: Locust's import gevent-patches the stdlib

from mcpfast import core
from mcpfast.locust import native
from mcpfast.locust import scenario as sc
from mcpfast.locust.options import option
from mcpfast.locust.users import McpUser, Preflight

if TYPE_CHECKING:
    from mcpfast._core import EngineConfig

__all__ = ["ScenarioDriver", "ScenarioUserBase", "build", "register"]

logger = logging.getLogger("mcpfast.loadtests.scenario")

_PLAN: dict[str, sc.Scenario | None] = {"scenario": None}
_PREFLIGHT = Preflight()
_STARTED = {"n": 0}  # this process's scenario users, in the order they started


def build(environment: Any) -> sc.Scenario:
    """The run's mix, checked against the server (:class:`~mcpfast.locust.scenario.ScenarioError`
    names what is wrong)."""
    path = option(environment, "mcp_scenario")
    discovering = bool(option(environment, "mcp_discover"))
    if path and discovering:
        raise sc.ScenarioError("give --mcp-scenario FILE or --mcp-discover, not both")
    if not path and not discovering:
        raise sc.ScenarioError("loadtests/scenario.py needs --mcp-scenario FILE or --mcp-discover")
    loaded = sc.load(path) if path else None  # the file alone first: no server needed for its errors
    # the probe client declares no capabilities: a tool that needs sampling, elicitation or roots
    # (which the native engine does not answer) fails its probe and stays out of a discovered mix
    client = sc.make_client(environment, environment.host, capabilities={} if discovering else None)
    try:
        info = sc.fetch_server_info(client)
        if loaded is not None:
            return sc.resolve(loaded, info)
        return sc.discover(client, info, skip=tuple(option(environment, "mcp_discover_skip") or ()))
    finally:
        sc.close_probe(client)


def _load_scenario(environment: Any, **_kw: Any) -> None:
    classes = environment.user_classes or []
    if not any(getattr(u, "uses_scenario", False) for u in classes):
        return
    if not option(environment, "mcp_scenario") and not option(environment, "mcp_discover"):
        others = [u for u in classes if not getattr(u, "uses_scenario", False)]
        if others:  # `locust -f loadtests/` without a scenario: the other families run, this one sits out
            classes[:] = others
            return
    with _PREFLIGHT:
        try:
            _PLAN["scenario"] = plan = build(environment)
        except sc.ScenarioError as exc:
            logger.error("mcpfast scenario: %s", exc)
            print(f"mcpfast scenario error: {exc}", file=sys.stderr, flush=True)
            sys.exit(2)
    if option(environment, "mcp_scenario_dump"):
        print(json.dumps(plan.to_dict(), indent=2), flush=True)
        sys.exit(0)
    ops = sum(len(u.ops) for u in plan.users)
    logger.info("mcpfast scenario %s: %d user class(es), %d operation(s)", plan.source, len(plan.users), ops)
    for item in plan.excluded:
        logger.info("mcpfast scenario: left out %s (%s)", item["op"], item["reason"])


class ScenarioDriver(native.NativeDriver):
    """One engine per user class: family ``mixed`` with the class's mix."""

    user_class: sc.UserClass

    def config(self) -> EngineConfig:
        core.require_native_engine()  # before the mix's items are made
        mix = [core.MixItem(**item) for item in sc.native_mix(self.user_class)]
        return native.config_for(self.environment, "mixed", self.host, mix=mix)


class ScenarioUserBase(McpUser):
    """A scenario user: its class of the plan picked at start; :meth:`one_operation` is its one task."""

    abstract = True
    native_family = "mixed"
    uses_scenario = True
    preflight = _PREFLIGHT
    user_class: sc.UserClass | None = None

    @classmethod
    def plan_names(cls) -> set[str]:
        """Every request name the loaded plan's operations report (empty before it is loaded)."""
        plan = _PLAN["scenario"]
        return {op.stat_name() for u in plan.users for op in u.ops} if plan is not None else set()

    def _class(self) -> sc.UserClass:
        if self.user_class is None:
            plan = _PLAN["scenario"]
            if plan is None:
                raise RuntimeError("no scenario loaded (--mcp-scenario FILE or --mcp-discover)")
            self.user_class = sc.pick_class(plan.users, _STARTED["n"])
            _STARTED["n"] += 1
        return self.user_class

    def native_driver(self) -> Any:
        uc = self._class()

        def make(environment: Any, family: str, host: Any) -> ScenarioDriver:
            d = ScenarioDriver(environment, family, host)
            d.user_class = uc
            return d

        return native.driver(self.environment, "mixed", self.host, key=f"scenario:{uc.name}", factory=make)

    def on_start(self) -> None:
        uc = self._class()
        self._ops = [o for o in uc.ops if o.weight]
        self._weights = [o.weight for o in self._ops]
        super().on_start()

    def one_operation(self) -> None:
        """One operation of the class's mix, picked by weight."""
        if not self.ready():
            return
        op = random.choices(self._ops, self._weights)[0]
        self.mcp.call(op.method, op.params(), stream=op.stream)


@functools.cache  # once per process
def register() -> None:
    """Load and check the plan at ``init`` (a listener on Locust's global events)."""
    locust.events.init.add_listener(_load_scenario)
