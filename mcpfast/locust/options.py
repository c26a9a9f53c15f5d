"""Command-line options of the mcpfast Locust swarm, declared as data.

Every ``--mcp-*`` flag is one :class:`Opt` row of a :class:`Group` table; :func:`add_group`
registers a table on Locust's (ConfigArgParse-based) parser with one loop, and :data:`DEFAULTS`
is read off the same rows.  :data:`SWARM` (the ``mcpfast`` group) is registered for every run by
:func:`add_arguments`, the ``init_command_line_parser`` listener :mod:`mcpfast.locust.stats`
wires up; a family's own group (:data:`HOLD`, :data:`TASKS`) only by its locustfile, so ``locust
--help`` lists it when that family is loaded.  A new option is a new row.

Values arrive as ``environment.parsed_options.mcp_<name>``.  With ``--processes`` or
``--master``/``--worker`` Locust forwards these non-default options from the master to the
workers in every spawn message.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcpfast.client import reach as _reach
from mcpfast.client.reach import Reach
from mcpfast.locust.argtypes import int_at_least, listen_address, rate, share
from mcpfast.locust.thresholds import argument_type as _threshold

__all__ = [
    "AGENTS",
    "DEFAULTS",
    "GROUPS",
    "HOLD",
    "SWARM",
    "TASKS",
    "Group",
    "Opt",
    "add_arguments",
    "add_group",
    "engine",
    "native_available",
    "option",
    "reach",
    "stream_arguments",
]


def _version(text: str) -> str:
    if text == "auto":
        return text
    from mcpfast.protocol.versions import SUPPORTED_VERSIONS

    if text not in SUPPORTED_VERSIONS:
        raise argparse.ArgumentTypeError(f"must be 'auto' or one of {', '.join(SUPPORTED_VERSIONS)}; got {text!r}")
    return text


def _json_object(text: str) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not JSON: {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return text


_non_negative_int = int_at_least(0)
_positive_int = int_at_least(1)


@dataclass(frozen=True)
class Opt:
    """One ``--mcp-*`` flag: what ``add_argument`` is given, and the value used when an
    environment has no parsed options (tests, library use)."""

    flag: str
    default: Any
    help: str
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    action: str | None = None  # "store_true" (a switch), "append" (repeatable)
    env: bool = True  # also read from LOCUST_MCP_<NAME>

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def env_var(self) -> str | None:
        return f"LOCUST_{self.dest.upper()}" if self.env else None

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``add_argument`` (only those this row sets)."""
        kw: dict[str, Any] = {"dest": self.dest}
        for name in ("metavar", "action", "type", "choices"):
            value = getattr(self, name)
            if value is not None:
                kw[name] = value
        kw["default"] = self.default
        if self.env_var is not None:
            kw["env_var"] = self.env_var
        kw["help"] = self.help
        return kw


@dataclass(frozen=True)
class Group:
    """A titled group of options in ``locust --help``."""

    title: str
    description: str
    options: tuple[Opt, ...]


SWARM = Group(
    "mcpfast",
    "MCP swarm options (latencies in µs HDR histograms, open-model pacing, schema checks)",
    (
        # -- measurement (mcpfast.locust.stats) and who sends (mcpfast.locust.native)
        Opt(
            "--mcp-histogram-out",
            None,  # None -> the --csv prefix if given, else nothing is written
            "Write PREFIX_histograms.json, PREFIX_histograms.hlog and the page PREFIX_report.html at test "
            "stop (default: the --csv prefix; without either nothing is written, the table is only logged).",
            metavar="PREFIX",
        ),
        Opt(
            "--mcp-no-report",
            False,
            "Write no PREFIX_report.html (mcpfast bench and mcpfast capacity write one report.html for the whole run).",
            action="store_true",
        ),
        Opt(
            "--mcp-rate",
            0.0,
            "Open model: target arrivals per second across all users and workers "
            "(latency measured from the intended send time). 0 = closed model (default).",
            metavar="PER_SECOND",
            type=rate,
        ),
        Opt(
            "--mcp-validate-share",
            0.01,
            "Share of messages (0..1) validated against the MCP JSON Schema (default 0.01).",
            metavar="SHARE",
            type=share,
        ),
        Opt(
            "--mcp-engine",
            None,  # None -> "native" when mcpfast._core has NativeEngine, else "python"
            "Who sends the requests: 'native' (the compiled core's engine on its own threads; "
            "the default when it is built) or 'python' (gevent users, for scenarios written in Python).",
            choices=("native", "python"),
        ),
        Opt("--mcp-engine-threads", 1, "Native engine: I/O threads per Locust process (default 1).", metavar="N", type=_positive_int),
        Opt(
            "--mcp-stdio-inflight",
            1,
            "Native engine over stdio: requests in flight per server process (pipelined lines; default 1, what a Python user does).",
            metavar="N",
            type=_positive_int,
        ),
        # -- the MCP client (mcpfast.locust.users)
        Opt(
            "--mcp-protocol-version",
            "2025-11-25",
            "MCP revision the users speak (default 2025-11-25); 'auto' probes server/discover and falls back to initialize.",
            metavar="VERSION",
            type=_version,
        ),
        Opt(
            "--mcp-command",
            None,  # None -> Streamable HTTP at --host
            "Run the users over stdio: one server process per user, started with this command "
            "(shell-style quoting). Without it the users speak Streamable HTTP to --host.",
            metavar="COMMAND",
        ),
        Opt("--mcp-tool", "echo", "Tool for tools/call tasks (default echo).", metavar="NAME"),
        Opt(
            "--mcp-tool-args",
            '{"text":"hello"}',
            'Arguments of --mcp-tool as a JSON object (default {"text":"hello"}).',
            metavar="JSON",
            type=_json_object,
        ),
        Opt("--mcp-token", None, "Bearer token sent on every HTTP request.", metavar="TOKEN"),
        # -- reaching a deployed server (mcpfast.client.reach)
        Opt(
            "--mcp-token-file",
            None,
            "Bearer tokens, one per line (minted beforehand, e.g. by authorization code + PKCE), handed to the users in turn.",
            metavar="FILE",
            type=_reach.checked(_reach.token_file),
        ),
        Opt(
            "--mcp-header",
            None,
            "A header sent on every HTTP request, e.g. 'x-api-key: abc' (repeatable).",
            metavar="'NAME: VALUE'",
            action="append",
            type=_reach.checked(_reach.header),
            env=False,
        ),
        Opt(
            "--mcp-ca-file",
            None,
            "CA certificates trusted beside the system store for https:// (repeatable; SSL_CERT_FILE is honoured).",
            metavar="PEM",
            action="append",
            type=_reach.pem_file,
            env=False,
        ),
        Opt("--mcp-client-cert", None, "mTLS: the client certificate chain (with --mcp-client-key).", metavar="PEM", type=_reach.pem_file),
        Opt("--mcp-client-key", None, "mTLS: the client certificate's private key.", metavar="PEM", type=_reach.pem_file),
        Opt(
            "--mcp-insecure",
            False,
            "Accept any server certificate (staging servers; said in the log and in the summary).",
            action="store_true",
        ),
        Opt(
            "--mcp-connect-to",
            None,
            "Connect to ADDR:PORT where the URL says HOST:PORT (one backend behind a balancer); "
            "the TLS name and Host stay the URL's (repeatable).",
            metavar="HOST:PORT:ADDR:PORT",
            action="append",
            type=_reach.checked(_reach.connect_to),
            env=False,
        ),
        Opt(
            "--mcp-new-connection",
            "keep",
            "keep: one kept-alive connection per user (default); session: a new connection per "
            "session; request: per request (Connection: close), so load spreads over autoscaled backends.",
            choices=_reach.NEW_CONNECTION,
        ),
        Opt(
            "--mcp-no-cookie-jar",
            False,
            "Send no cookies back (by default each user keeps a cookie jar, so balancers that pin "
            "clients with a cookie keep a user's session on one replica).",
            action="store_true",
        ),
        Opt(
            "--mcp-retry-after",
            False,
            "After a 429 or 503 with Retry-After, the user waits that long before its next request "
            "(each wait is a 'Retry-After wait' row). Off: the user goes on at once.",
            action="store_true",
        ),
        Opt(
            "--mcp-oauth-client-id",
            None,
            "OAuth client credentials: the authorization server is found from the server's 401 "
            "(RFC 9728, RFC 8414); one access token per Locust process, shared by its users, refreshed "
            "before it expires (each token request is an 'oauth:token' row).",
            metavar="ID",
        ),
        Opt(
            "--mcp-oauth-client-secret",
            None,
            "The client's secret (client_secret_basic, or client_secret_post if that is all the server takes).",
            metavar="SECRET",
        ),
        Opt(
            "--mcp-oauth-private-key",
            None,
            "Authenticate the client with private_key_jwt signed by this key (RSA, P-256 or Ed25519) instead of a secret.",
            metavar="PEM",
            type=_reach.checked(_reach.pem_file),
        ),
        Opt(
            "--mcp-oauth-scope",
            None,
            "Scopes to ask for (space separated; default: the 401's scope, else the server's scopes_supported).",
            metavar="SCOPES",
        ),
        # -- the families' knobs
        Opt(
            "--mcp-stream-tool",
            "stream",
            'Tool that streams progress notifications (default stream), called with --mcp-stream-args or {"n": N}.',
            metavar="NAME",
        ),
        Opt(
            "--mcp-stream-count",
            10,
            "Progress notifications asked of --mcp-stream-tool (default 10).",
            metavar="N",
            type=_non_negative_int,
        ),
        Opt(
            "--mcp-server-pid",
            0,
            "Server process to sample VmRSS from (session churn: memory per open session).",
            metavar="PID",
            type=_non_negative_int,
        ),
        Opt("--mcp-timeout", 30.0, "Per-request timeout in seconds (default 30).", metavar="SECONDS", type=rate),
        Opt(
            "--mcp-churn-delete-share",
            1.0,
            "Session churn: share (0..1) of sessions ended with DELETE; the rest are abandoned (default 1).",
            metavar="SHARE",
            type=share,
        ),
        Opt(
            "--mcp-client-capabilities",
            '{"elicitation":{},"roots":{},"sampling":{}}',
            "Client capabilities the users declare (default elicitation, roots, sampling). Server requests "
            "(legacy) and 2026 input-required rounds get canned answers: elicitation declined, roots empty, "
            "sampling a fixed text.",
            metavar="JSON",
            type=_json_object,
        ),
        # -- workloads and gates (mcpfast.locust.scenario, mcpfast.locust.thresholds)
        Opt(
            "--mcp-stream-args",
            None,  # None -> {"n": --mcp-stream-count}
            'Arguments of --mcp-stream-tool as a JSON object (replaces {"n": --mcp-stream-count}), e.g. \'{"duration": 0.2, "steps": 4}\'.',
            metavar="JSON",
            type=_json_object,
        ),
        Opt(
            "--mcp-scenario",
            None,
            "Workload file (TOML, JSON or YAML): a weighted mix of operations per user class, checked "
            "against the server before any load (loadtests/scenario.py).",
            metavar="FILE",
        ),
        Opt(
            "--mcp-discover",
            False,
            "Build the mix from what the server lists (tools with arguments from their inputSchema, "
            "resources, templates, prompts, completion, list calls), each probed once first.",
            action="store_true",
        ),
        Opt(
            "--mcp-discover-skip",
            None,
            "--mcp-discover: leave this tool or prompt out (repeatable).",
            metavar="NAME",
            action="append",
            env=False,
        ),
        Opt(
            "--mcp-scenario-dump",
            False,
            "Print the mix the run would send (JSON, after the checks against the server) and exit.",
            action="store_true",
            env=False,
        ),
        Opt(
            "--mcp-threshold",
            None,
            "CI gate checked on the µs histograms at the end of the run, repeatable: "
            "'tools/call:echo p99<5ms', 'fail_ratio<0.001', 'initialize rps>500'. Any failure: exit code 1.",
            metavar="EXPR",
            action="append",
            type=_threshold,
            env=False,
        ),
        # -- Prometheus export (mcpfast.locust.prometheus)
        Opt(
            "--mcp-prometheus-port",
            None,  # None: no endpoint
            "Serve the run's figures in the Prometheus text format on this port (every interface unless "
            "HOST is given): requests, failures and µs latency buckets per row. The master or a run without "
            "workers serves; a worker ignores it. A port it cannot listen on: exit code 2 before any load.",
            metavar="[HOST:]PORT",
            type=listen_address,
        ),
        Opt(
            "--mcp-prometheus-linger",
            15.0,  # Prometheus' default scrape interval
            "After the test, keep serving the final figures this long so a scrape sees them (default 15, "
            "Prometheus' default scrape interval; at least your scrape_interval).",
            metavar="SECONDS",
            type=rate,
        ),
        Opt(
            "--mcp-testid",
            None,  # None: an id made at start (logged)
            "The testid label of the Prometheus samples (default: an id made at start, logged).",
            metavar="ID",
        ),
    ),
)

# The families' own groups: registered by their locustfiles; the native engine reads them through
# option() and DEFAULTS whichever locustfiles are loaded.
HOLD = Group(
    "mcpfast hold",
    "the hold family (loadtests/hold.py)",
    (
        Opt("--mcp-hold-per-user", 1, "GET streams (sessions) each user holds (default 1)", metavar="K", type=int, env=False),
        Opt(
            "--mcp-hold-trigger",
            None,
            "tool whose call makes the server notify every session (fan-out latency)",
            metavar="TOOL",
            env=False,
        ),
        Opt(
            "--mcp-hold-trigger-every",
            5.0,
            "seconds between fan-out triggers once every stream is open (default 5)",
            metavar="S",
            type=float,
            env=False,
        ),
    ),
)
TASKS = Group(
    "mcpfast tasks",
    "the tasks family (loadtests/tasks.py)",
    (
        Opt(
            "--mcp-tasks-cancel-share",
            0.0,
            "share (0..1) of tasks cancelled after their first poll (default 0)",
            metavar="SHARE",
            type=float,
            env=False,
        ),
    ),
)
AGENTS = Group(
    "mcpfast agents",
    "the agents family (loadtests/agents.py)",
    (
        Opt(
            "--mcp-source-address",
            None,
            "bind new connections to these local addresses in turn (an address, "
            "a range 127.0.0.2-127.0.0.20, or a comma list; repeatable): each source address has its own "
            "~28,000 ephemeral ports to a server port. An address that is not this host's: exit code 2.",
            metavar="ADDR[-ADDR]",
            action="append",
            env=False,
        ),
        Opt(
            "--mcp-agents-per-user",
            1,
            "agents each Locust user runs on the native engine (default 1): -u 1000 --mcp-agents-per-user 100 "
            "is 100,000 agents for Locust's bookkeeping of 1000 users; the figures count agents",
            metavar="N",
            type=_positive_int,
            env=False,
        ),
        Opt(
            "--mcp-think",
            None,
            "think time before each step for every agent (replaces the workload's): lognormal:MEDIAN:P90, "
            "exponential:MEAN, uniform:MIN:MAX or constant:S, seconds (default agent: lognormal:2:8)",
            metavar="DIST",
            env=False,
        ),
    ),
)
GROUPS = (SWARM, HOLD, TASKS, AGENTS)

# Defaults, also used when an Environment has no parsed_options (tests, library use).
DEFAULTS: dict[str, Any] = {o.dest: o.default for group in GROUPS for o in group.options}


def add_group(parser: Any, group: Group) -> list[argparse.Action]:
    """Register one table of options on Locust's parser, as one ``--help`` group; returns the
    parser's actions, row by row."""
    section = parser.add_argument_group(group.title, group.description)
    return [section.add_argument(opt.flag, **opt.arguments()) for opt in group.options]


def add_arguments(parser: Any) -> None:
    """The ``init_command_line_parser`` listener: every run's options (:data:`SWARM`)."""
    add_group(parser, SWARM)


def native_available() -> bool:
    """True when the compiled core is in use (not ``MCPFAST_CORE=python``) and has the native
    load engine."""
    try:
        from mcpfast import core
    except Exception:
        return False
    return bool(getattr(core, "HAS_NATIVE_ENGINE", False))


def engine(environment: Any) -> str:
    """The resolved ``--mcp-engine``: ``native`` or ``python``."""
    chosen = option(environment, "mcp_engine")
    if chosen:
        return str(chosen)
    return "native" if native_available() else "python"


def stream_arguments(environment: Any) -> dict[str, Any]:
    """The stream tool's arguments: ``--mcp-stream-args``, else ``{"n": --mcp-stream-count}``."""
    text = option(environment, "mcp_stream_args")
    if text:
        return json.loads(text)
    return {"n": int(option(environment, "mcp_stream_count"))}


def reach(environment: Any) -> Reach:
    """The process's :class:`~mcpfast.client.reach.Reach` (built once; ``ValueError`` names a
    bad combination of options)."""
    cached = getattr(environment, "mcpfast_reach", None)
    if isinstance(cached, Reach):
        return cached
    built = Reach.from_options(lambda name: option(environment, name))
    try:
        environment.mcpfast_reach = built
    except AttributeError:
        pass
    return built


def option(environment: Any, name: str) -> Any:
    """``environment.parsed_options.<name>``, falling back to :data:`DEFAULTS`."""
    parsed = getattr(environment, "parsed_options", None)
    value = getattr(parsed, name, None) if parsed is not None else None
    return DEFAULTS.get(name) if value is None else value
