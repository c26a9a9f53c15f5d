"""Agents family (``loadtests/agents.py``): MCP sessions as production agents open them, by the
hundred thousand, on the native engine (the engine's ``agents`` family, rust/mcpfast-engine).

Each agent arrives after an idle gap, opens a session (``initialize``, or the 2026-07-28 start),
lists the tools, then takes its steps, each after a think time: in the order the workload gives
or sampled by weight; a step may send a value taken from an earlier step's result.  It ends the
session with DELETE or abandons it (``abandon``, a share), rests an idle gap and starts again; a
share of the agents (``hold_stream``) holds a stream for each session's life.

The steps: a workload file (``--mcp-scenario FILE``, :mod:`mcpfast.locust.scenario` with its agent
keys, checked against the server's listing before any load), or without one the default agent:
every tool the server lists, called with arguments made from its ``inputSchema`` (its examples,
default, enum, format, then its description's own examples), each probed once; a tool that
still fails is left out, and the log says which workload file lines would give it arguments.
Think time by default log-normal, median 2 s and p90 8 s (``--mcp-think`` replaces any).

Before any load, every process checks the plan (a distribution that makes no sense, a value
taken from a step that does not exist, a source address that is not this host's: exit code 2,
naming it), raises its open-file limit for its agents (or says which limit stops it and what
number is needed) and checks that the connections fit the ephemeral ports of their source
addresses (``--mcp-source-address``).

``-u`` is the number of agents, or with ``--mcp-agents-per-user N`` the number of Locust users
each running N agents (Locust's bookkeeping per user is heavy; the engine's per agent is not):
the figures count agents.  They are written beside the histograms, under ``agents`` in
``<prefix>_histograms.json`` and merged over the workers (:class:`AgentFigures`): session length,
steps per session, time to the first tool result, think and idle times as rested (ms; steps a
count), with a Little's-law check (session arrivals per second x time in a session = sessions
open at once, against the measured mean) and the generator's memory per agent.  The requests'
rows (``initialize``, ``tools/list``, each step's ``tools/call:<tool>``, ``DELETE``, ...) are
Locust's own, as for every family.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import sys
import time
from typing import Any

import gevent
import locust  # first: Locust's import gevent-patches the stdlib

from mcpfast import core
from mcpfast.client.base import rss_kib
from mcpfast.locust import native
from mcpfast.locust import scenario as sc
from mcpfast.locust import stats as mstats
from mcpfast.locust.families import add_options
from mcpfast.locust.histogram import HistogramSet
from mcpfast.locust.options import AGENTS as AGENT_OPTIONS
from mcpfast.locust.options import engine, option
from mcpfast.locust.stats import runner_kind, summary
from mcpfast.locust.users import McpUser, Preflight

__all__ = ["AgentDriver", "AgentFigures", "AgentUserBase", "build", "register"]

logger = logging.getLogger("mcpfast.loadtests.agents")

MAX_AGENTS = 10_000_000  # the engine's bound on its units (``max_sessions``)
FD_MARGIN = 256  # open files a process needs besides its agents' connections
PART = "agents"  # the block of <prefix>_histograms.json
# the engine's rows that are figures, not requests: kept out of Locust's tables
FIGURE_ROWS = {
    "agent:think": "think",
    "agent:idle": "idle",
    "agent:session": "session",
    "agent:steps": "steps",
    "agent:first-result": "first_result",
}
COUNTS = ("steps",)  # figures that are counts (the others are times, kept in ms)
STEADY_CYCLES = 10  # a run this many agent cycles long is near its steady state (Little's law)
SAMPLE_EVERY = 0.1  # s between samples of the sessions open (a few µs each: the engines' status)

_PLAN: dict[str, sc.Scenario | None] = {"scenario": None}
_PREFLIGHT = Preflight()
_STARTED = {"n": 0}  # this process's agent users, in the order they started


# -- the plan -------------------------------------------------------------------------------------------
def build(environment: Any) -> sc.Scenario:
    """The run's agent classes: the workload file's, checked against the server, or the default
    agent's; ``--mcp-think`` replaces every class's think time.

    Raises:
        ScenarioError: what is wrong with the file, or what the server does not offer.
    """
    path = option(environment, "mcp_scenario")
    if option(environment, "mcp_discover"):
        raise sc.ScenarioError(
            "agents take their steps from a workload file (--mcp-scenario FILE) or, without one, from every tool the server lists"
        )
    loaded = sc.load(path, agent=True) if path else None  # the file alone first: no server needed for its errors
    client = sc.make_client(environment, environment.host, capabilities={} if loaded is None else None)
    try:
        info = sc.fetch_server_info(client)
        plan = sc.resolve(loaded, info) if loaded is not None else sc.default_agent(client, info)
    finally:
        sc.close_probe(client)
    think = option(environment, "mcp_think")
    for user in plan.users:
        assert user.agent is not None  # an agent workload's classes all have one
        if think:
            user.agent.think = str(think)
            user.agent.where["think"] = "--mcp-think"
    return plan


def engine_fields(plan: sc.AgentPlan) -> dict[str, Any]:
    """An agent class's fields of the engine's config."""
    return {
        "think": plan.think,
        "idle": plan.idle,
        "agent_order": plan.order,
        "agent_steps": plan.steps,
        "agent_list_tools": plan.list_tools,
        "agent_hold_stream": plan.hold_stream,
        "agent_abandon": plan.abandon,
        "max_sessions": MAX_AGENTS,
    }


def _config(environment: Any, user: sc.UserClass) -> Any:
    """The engine config of an agent class (ValueError naming the field)."""
    assert user.agent is not None
    mix = [core.MixItem(**step) for step in sc.agent_steps(user)]
    return native.config_for(environment, "agents", environment.host, mix=mix, **engine_fields(user.agent))


_FIELD = re.compile(r"^engine config: (?:mix\[(\d+)\]|(think|idle|agent_hold_stream|agent_abandon|agent_steps|source_addresses))")


def _where(user: sc.UserClass, message: str) -> str:
    """The place in the workload an engine error comes from (its file line), else the class."""
    m = _FIELD.match(message)
    if m and m.group(1) is not None and int(m.group(1)) < len(user.ops):
        return user.ops[int(m.group(1))].where
    key = (
        {"agent_hold_stream": "hold_stream", "agent_abandon": "abandon", "agent_steps": "steps"}.get(m.group(2), m.group(2))
        if m and m.group(2)
        else None
    )
    assert user.agent is not None
    if key == "source_addresses":
        return "--mcp-source-address"
    return user.agent.where.get(key or "", f"agent class {user.name}")


def _run_size(environment: Any) -> tuple[int, int]:
    """(agents of the whole run, processes on this host sharing them) as the command line says."""
    parsed = getattr(environment, "parsed_options", None)
    users = int(getattr(parsed, "num_users", None) or 1)
    processes = int(getattr(parsed, "processes", None) or 0)
    if processes < 0:
        processes = os.cpu_count() or 1
    return users * int(option(environment, "mcp_agents_per_user")), max(processes, 1)


def check(environment: Any, plan: sc.Scenario) -> None:
    """Before any load: every class's engine config is made (and its engine built, not started:
    the host resolved, the source addresses checked), the open-file limit raised for this
    process's agents and the connections checked against the ephemeral ports.

    Raises:
        ScenarioError: naming what is wrong and where, or the limit and the number needed.
    """
    core.require_native_engine()
    engines = []
    for user in plan.users:
        try:
            engines.append(core.native_engine(_config(environment, user)))
        except ValueError as exc:
            raise sc.ScenarioError(f"{_where(user, str(exc))}: {exc}") from None
    if runner_kind(environment.runner) == "master":
        return  # the workers hold the connections
    agents, processes = _run_size(environment)
    share = max(u.agent.hold_stream for u in plan.users if u.agent is not None)
    connections = math.ceil(agents * (1 + share))
    try:
        limit = core.NativeEngine.raise_open_files_limit(math.ceil(connections / processes) + FD_MARGIN)
    except OSError as exc:
        raise sc.ScenarioError(str(exc)) from None
    capacity = engines[0].port_capacity()
    if capacity is not None and connections > capacity:
        sources = max(engines[0].source_count(), 1)
        need = math.ceil(connections / (capacity / sources))
        raise sc.ScenarioError(
            f"{agents} agents hold about {connections} connections to the server, more than the {capacity} ephemeral "
            f"ports of {sources} source address(es) (net.ipv4.ip_local_port_range): spread them over {need} loopback "
            f"source addresses, e.g. --mcp-source-address 127.0.0.2-127.0.0.{need + 1}"
        )
    logger.info("mcpfast agents: %d agents (%d connections) in %d process(es); open-file limit %d", agents, connections, processes, limit)


def _load_agents(environment: Any, **_kw: Any) -> None:
    classes = environment.user_classes or []
    if not any(getattr(u, "uses_agents", False) for u in classes):
        return
    dump = bool(option(environment, "mcp_scenario_dump"))
    with _PREFLIGHT:
        try:
            if not dump and engine(environment) != "native":
                raise sc.ScenarioError("agents run on the native engine (the compiled core): drop --mcp-engine python")
            if not dump and option(environment, "mcp_command"):
                raise sc.ScenarioError("agents speak Streamable HTTP (--host URL): their sessions are held, ended and abandoned over it")
            plan = build(environment)
            if dump:  # the plan the run would send (any transport can be asked for the server's tools)
                print(json.dumps(plan.to_dict(), indent=2), flush=True)
                sys.exit(0)
            check(environment, plan)
        except sc.ScenarioError as exc:
            logger.error("mcpfast agents: %s", exc)
            print(f"mcpfast agents error: {exc}", file=sys.stderr, flush=True)
            sys.exit(2)
        _PLAN["scenario"] = plan
    for item in plan.excluded:
        logger.warning(
            "mcpfast agents: left out %s (%s); to give it arguments, in a workload file:\n%s", item["op"], item["reason"], item["workload"]
        )
    for user in plan.users:
        assert user.agent is not None
        logger.info(
            "mcpfast agents %s: %d step(s) %s, think %s, idle %s",
            user.name,
            len(user.ops),
            user.agent.order,
            user.agent.think,
            user.agent.idle or user.agent.think,
        )


# -- the figures ---------------------------------------------------------------------------------------------
def _tcp_mem_kib() -> int | None:
    """The kernel's TCP socket buffers, host-wide (``/proc/net/sockstat``: pages)."""
    try:
        with open("/proc/net/sockstat", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("TCP:"):
                    fields = line.split()
                    return int(fields[fields.index("mem") + 1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class AgentFigures:
    """One process's agent figures (a :class:`mcpfast.locust.stats.Part`): the engine's figure
    rows as histograms (ms; steps a count), the agents and their sessions sampled once a second,
    the process's memory; on a master, the workers' merged."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.figures = HistogramSet()
        self.remote: dict[str, dict[str, Any]] = {}
        self.rss_base: int | None = None
        self.tcp_base: int | None = None
        self.sampler: Any = None
        self.reset()

    def reset(self) -> None:
        self.figures.reset()
        self.remote.clear()
        self.open_s = 0.0  # sessions open x seconds, since the reset
        self.sampled_s = 0.0
        self.last: tuple[float, int] | None = None  # (when, sessions open) of the last sample
        self.opened: tuple[int, int] | None = None  # sessions opened by the engines: (at the first sample, now)
        self.agents = 0  # the most agents asked for at once, and the Locust users they were
        self.users = 0
        # the first sample with agents running and the one with the most: (agents, RSS KiB, host TCP buffers KiB)
        self.first: tuple[int, int | None, int | None] | None = None
        self.peak: tuple[int, int | None, int | None] | None = None

    def baseline(self) -> None:
        """Before any agent: the process's memory, and the host's TCP buffers."""
        self.rss_base = rss_kib(os.getpid())
        self.tcp_base = _tcp_mem_kib()

    def take_rows(self, rows: list[Any]) -> list[Any]:
        """The figure rows of a drain into the histograms; the request rows back."""
        rest = []
        for row in rows:
            name = FIGURE_ROWS.get(row.name)
            if name is None:
                rest.append(row)
                continue
            h = self.figures.get("agent", name)
            for us, count in row.buckets:
                h.record(us if name in COUNTS else max(round(us / 1000), 1), count)
        return rest

    def drivers(self) -> list[Any]:
        return [d for d in native.drivers(self.environment) if d.family == "agents"]

    def sample(self) -> None:
        """Sessions open (time-weighted, between samples), agents and memory, now."""
        now = time.monotonic()
        drivers = self.drivers()
        status = [d.engine.status() for d in drivers if d.engine is not None]
        in_session = sum(int(s.get("sessions_open") or 0) for s in status)
        running = sum(int(s.get("agents") or 0) for s in status)
        if status:  # a stopped engine's count is gone with it: the last one stays
            opened = sum(int(s.get("established") or 0) for s in status)
            self.opened = (opened if self.opened is None else self.opened[0], opened)
        if self.last is not None:
            self.open_s += (in_session + self.last[1]) / 2 * (now - self.last[0])
            self.sampled_s += now - self.last[0]
        self.last = (now, in_session)
        asked = sum(d.users * d.per_user for d in drivers)
        if asked > self.agents:
            self.agents, self.users = asked, sum(d.users for d in drivers)
        if running and (self.peak is None or running > self.peak[0]):
            self.peak = (running, rss_kib(os.getpid()), _tcp_mem_kib())
            self.first = self.first or self.peak

    def start_sampling(self) -> None:
        self.stop_sampling()

        def loop() -> None:
            while True:
                self.sample()
                gevent.sleep(SAMPLE_EVERY)

        self.sampler = gevent.spawn(loop)

    def stop_sampling(self) -> None:
        if self.sampler is not None:
            self.sampler.kill(block=False)
            self.sampler = None

    def state(self) -> dict[str, Any]:
        """This process's counts (cumulative since the reset)."""
        return {
            "agents": self.agents,
            "locust_users": self.users,
            "agents_per_user": int(option(self.environment, "mcp_agents_per_user")),
            "sessions_opened": 0 if self.opened is None else self.opened[1] - self.opened[0],
            "open_session_s": self.open_s,
            "sampled_s": self.sampled_s,
            "rss_base_kib": self.rss_base,
            "tcp_mem_base_kib": self.tcp_base,
            "first": self.first,
            "peak": self.peak,
        }

    # -- the Part -----------------------------------------------------------------------------
    def take_delta(self, final: bool) -> dict[str, Any] | None:
        figures = self.figures.take_delta()
        return {"figures": figures, "state": self.state()} if (figures["histograms"] or final or self.drivers()) else None

    def merge(self, client_id: str, data: dict[str, Any]) -> None:
        self.figures.merge(HistogramSet.from_dict(data["figures"]))
        self.remote[client_id] = data["state"]

    def to_dict(self, duration: float | None) -> dict[str, Any]:
        states = list(self.remote.values()) or [self.state()]
        figures = {}
        for (_, name), h in self.figures.items():
            if h.total_count:
                figures[name] = {**h.to_dict(), "unit": "count" if name in COUNTS else "ms", "summary": summary(h)}
        agents = sum(int(s["agents"]) for s in states)
        session = figures.get("session", {}).get("summary") or {}
        idle = figures.get("idle", {}).get("summary") or {}
        sessions = int(session.get("count") or 0)
        # the arrivals: sessions opened over the window the sessions open were sampled in
        window = max((float(s["sampled_s"]) for s in states), default=0.0) or duration
        opened = sum(int(s.get("sessions_opened") or 0) for s in states)
        rate = opened / window if window and opened else None
        mean_s = (session.get("mean") or 0) / 1000 if sessions else None
        idle_s = (idle.get("mean") or 0) / 1000 if idle.get("count") else 0.0
        measured = sum(s["open_session_s"] / s["sampled_s"] for s in states if s["sampled_s"])
        little = {
            "sessions_opened": opened,
            "session_arrivals_per_s": None if rate is None else round(rate, 3),
            "mean_session_s": None if mean_s is None else round(mean_s, 3),
            "predicted_open": None if rate is None or mean_s is None else round(rate * mean_s, 2),
            "measured_open": round(measured, 2),
            "mean_idle_s": round(idle_s, 3),
            "predicted_agents": None if rate is None or mean_s is None else round(rate * (mean_s + idle_s), 1),
            "agents": agents,
            # the law holds in a steady state: over many of an agent's cycles, not the first few
            "window_s": None if not window else round(window, 1),
            "cycles": None if not window or not mean_s else round(window / (mean_s + idle_s), 1),
        }
        memory = _memory(states)
        return {
            "agents": agents,
            "locust_users": sum(int(s["locust_users"]) for s in states),
            "agents_per_user": states[0]["agents_per_user"],
            "processes": len(states),
            "sessions": sessions,
            "figures": figures,
            "littles_law": little,
            "memory": memory,
        }

    def lines(self, data: dict[str, Any]) -> list[str]:
        if not data["agents"] and not data["sessions"]:
            return []
        f = data["figures"]

        def pct(name: str, label: str) -> str:
            s = (f.get(name) or {}).get("summary")
            if not s:
                return f"{label} -"
            if name in COUNTS:
                return f"{label} p50 {s['p50']} p90 {s['p90']}"
            return f"{label} p50 {s['p50'] / 1000:g} s p90 {s['p90'] / 1000:g} s"

        law = data["littles_law"]
        mem = data["memory"]
        plan = _PLAN["scenario"]
        thinks = sorted({u.agent.think for u in plan.users if u.agent is not None}) if plan is not None else []
        out = [
            f"mcpfast agents: {data['agents']} agents ({data['locust_users']} Locust users x {data['agents_per_user']}) "
            f"in {data['processes']} process(es); {data['sessions']} sessions ended",
            f"  {pct('think', 'think')} (configured {', '.join(thinks) or '?'}); {pct('idle', 'idle')}; "
            f"{pct('session', 'session')}; {pct('first_result', 'first tool result')}; {pct('steps', 'steps per session')}",
        ]
        if law["predicted_open"] is not None:
            out.append(
                f"  Little's law: {law['session_arrivals_per_s']:g} sessions/s x {law['mean_session_s']:g} s per session = "
                f"{law['predicted_open']:g} sessions open at once; measured {law['measured_open']:g} "
                f"(with {law['mean_idle_s']:g} s idle between sessions: {law['predicted_agents']:g} agents; run {law['agents']})"
            )
            if law["cycles"] is not None and law["cycles"] < STEADY_CYCLES:
                out.append(
                    f"  (the run lasted {law['cycles']:g} session-and-idle cycles of an agent: not a steady state yet, "
                    f"where the law holds; run for {STEADY_CYCLES} or more)"
                )
        if mem["generator_rss_kib_per_agent"] is not None:
            out.append(
                f"  generator memory: {mem['generator_rss_kib_per_agent']:g} KiB RSS per agent ({mem['how']}; "
                f"RSS grew {mem['generator_rss_growth_kib']} KiB for {mem['agents_at_peak']} agents)"
            )
        return out


def figures(environment: Any) -> AgentFigures:
    """The environment's agent figures (made, and added to its stats' parts, on first use)."""
    stats = mstats.get(environment)
    part = stats.parts.get(PART)
    if not isinstance(part, AgentFigures):
        part = stats.parts[PART] = AgentFigures(environment)
    return part


def _memory(states: list[dict[str, Any]]) -> dict[str, Any]:
    """The generator's memory per agent: the slope of its RSS from the first sample with agents
    running to the one with the most (the engine's own threads and buffers are there in both),
    or, when the agents all came at once, its growth from before the first agent over them."""
    grown = slope = held = added = 0
    tcp = []
    for s in states:
        first, peak, base = s.get("first"), s.get("peak"), s.get("rss_base_kib")
        if not peak or peak[1] is None:
            continue
        held += peak[0]
        grown += peak[1] - (base if base is not None else peak[1])
        if first and first[1] is not None and peak[0] - first[0] >= peak[0] / 2:
            slope += peak[1] - first[1]
            added += peak[0] - first[0]
        if peak[2] is not None and s.get("tcp_mem_base_kib") is not None:
            tcp.append(peak[2] - s["tcp_mem_base_kib"])
    per_agent = slope / added if added else (grown / held if held else None)
    return {
        "agents_at_peak": held,
        "generator_rss_growth_kib": grown,
        "generator_rss_kib_per_agent": None if per_agent is None else round(per_agent, 2),
        "how": "RSS slope from the first agents to the most" if added else "RSS growth from before the first agent",
        # host-wide: both ends of every loopback connection, the server's too
        "host_tcp_buffers_growth_kib": max(tcp) if tcp else None,
    }


# -- the users -----------------------------------------------------------------------------------------------
class AgentDriver(native.NativeDriver):
    """One engine per agent class: family ``agents``, the class's steps, ``per_user`` agents
    for each Locust user."""

    user_class: sc.UserClass

    def config(self) -> Any:
        core.require_native_engine()
        return _config(self.environment, self.user_class)

    def split_rows(self, rows: list[Any]) -> list[Any]:
        return figures(self.environment).take_rows(rows)


class AgentUserBase(McpUser):
    """A Locust user that stands for ``--mcp-agents-per-user`` agents of its class (picked at
    start by the classes' weights) on the native engine."""

    abstract = True
    native_family = "agents"
    uses_agents = True
    preflight = _PREFLIGHT
    user_class: sc.UserClass | None = None

    def refused(self) -> str | None:
        return None if _PLAN["scenario"] is not None else "no agent plan (the checks before load did not pass)"

    def _class(self) -> sc.UserClass:
        if self.user_class is None:
            plan = _PLAN["scenario"]
            if plan is None:
                raise RuntimeError("no agent plan loaded")
            self.user_class = sc.pick_class(plan.users, _STARTED["n"])
            _STARTED["n"] += 1
        return self.user_class

    def native_driver(self) -> Any:
        uc = self._class()

        def make(environment: Any, family: str, host: Any) -> AgentDriver:
            d = AgentDriver(environment, family, host)
            d.user_class = uc
            d.per_user = int(option(environment, "mcp_agents_per_user"))
            return d

        return native.driver(self.environment, "agents", self.host, key=f"agents:{uc.name}", factory=make)


# -- wiring --------------------------------------------------------------------------------------------------
def _on_init(environment: Any, **_kw: Any) -> None:
    figures(environment)  # every process, the master too: it merges the workers' figures


def _on_test_start(environment: Any, **_kw: Any) -> None:
    part = figures(environment)
    if runner_kind(environment.runner) == "master":
        return
    part.baseline()
    part.start_sampling()


def _on_test_stop(environment: Any, **_kw: Any) -> None:
    part = figures(environment)
    if runner_kind(environment.runner) != "master":
        part.sample()  # the last second, before the engines stop
        part.stop_sampling()


@functools.cache  # once per process
def register(user_class: type[AgentUserBase]) -> None:
    """The agents family's options (``locust --help``'s ``mcpfast agents`` group) and listeners
    on Locust's global events, for the locustfile's user class."""
    add_options(AGENT_OPTIONS)
    events = locust.events
    events.init.add_listener(_load_agents)
    events.init.add_listener(_on_init)
    # before the stats' own test_stop listener (registered at init) stops the engines
    events.test_start.add_listener(_on_test_start)
    events.test_stop.add_listener(_on_test_stop)
