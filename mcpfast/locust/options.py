"""Command-line options of the mcpfast Locust swarm.

All ``--mcp-*`` flags are registered by :func:`add_arguments`, the single
``init_command_line_parser`` listener (wired up by :mod:`mcpfast.locust.stats`).  Future MCP
client options (tool name, arguments, token, stream length, protocol version, ...) belong in
the same function so ``locust --help`` shows them in one group.

Values arrive as ``environment.parsed_options.mcp_<name>``.  With ``--processes`` or
``--master``/``--worker`` Locust forwards these non-default options from the master to the
workers in every spawn message.
"""

from __future__ import annotations

from typing import Any

from mcpfast.client import reach as _reach
from mcpfast.client.reach import Reach
from mcpfast.locust.argtypes import int_at_least, listen_address, rate, share

_non_negative_int = int_at_least(0)

__all__ = ["DEFAULTS", "add_arguments", "engine", "native_available", "option", "reach"]

# Defaults, also used when an Environment has no parsed_options (tests, library use).
DEFAULTS: dict[str, Any] = {
    "mcp_engine": None,  # None -> "native" when mcpfast._core has NativeEngine, else "python"
    "mcp_engine_threads": 1,
    "mcp_stdio_inflight": 1,
    "mcp_histogram_out": None,  # None -> the --csv prefix if given, else "mcpfast"
    "mcp_rate": 0.0,
    "mcp_validate_share": 0.01,
    # MCP client (mcpfast.locust.users)
    "mcp_protocol_version": "2025-11-25",
    "mcp_command": None,  # stdio server command; None -> Streamable HTTP at --host
    "mcp_tool": "echo",
    "mcp_tool_args": '{"text":"hello"}',
    "mcp_token": None,
    # reaching a deployed server (mcpfast.client.reach)
    "mcp_ca_file": None,
    "mcp_client_cert": None,
    "mcp_client_key": None,
    "mcp_insecure": False,
    "mcp_header": None,
    "mcp_token_file": None,
    "mcp_connect_to": None,
    "mcp_new_connection": "keep",
    "mcp_no_cookie_jar": False,
    "mcp_retry_after": False,
    "mcp_oauth_client_id": None,
    "mcp_oauth_client_secret": None,
    "mcp_oauth_private_key": None,
    "mcp_oauth_scope": None,
    "mcp_stream_tool": "stream",
    "mcp_stream_count": 10,
    "mcp_server_pid": 0,
    "mcp_timeout": 30.0,
    "mcp_churn_delete_share": 1.0,
    # the hold family (its options are loadtests/hold.py's; the native engine reads them here)
    "mcp_hold_per_user": 1,
    "mcp_hold_trigger": None,
    "mcp_hold_trigger_every": 5.0,
    "mcp_tasks_cancel_share": 0.0,  # loadtests/tasks.py's
    "mcp_client_capabilities": '{"elicitation":{},"roots":{},"sampling":{}}',
    # workloads and gates (mcpfast.locust.scenario, mcpfast.locust.thresholds)
    "mcp_stream_args": None,  # None -> {"n": --mcp-stream-count}
    "mcp_scenario": None,
    "mcp_discover": False,
    "mcp_discover_skip": None,
    "mcp_scenario_dump": False,
    "mcp_threshold": None,
    # Prometheus export (mcpfast.locust.prometheus)
    "mcp_prometheus_port": None,  # None: no endpoint
    "mcp_prometheus_linger": 15.0,  # Prometheus' default scrape interval
    "mcp_testid": None,  # None: an id made at start (logged)
}


def add_arguments(parser: Any) -> None:
    """Register every mcpfast option on Locust's (ConfigArgParse-based) parser."""
    group = parser.add_argument_group("mcpfast", "MCP swarm options (latencies in µs HDR histograms, open-model pacing, schema checks)")
    group.add_argument(
        "--mcp-histogram-out",
        dest="mcp_histogram_out",
        metavar="PREFIX",
        default=DEFAULTS["mcp_histogram_out"],
        env_var="LOCUST_MCP_HISTOGRAM_OUT",
        help="Write PREFIX_histograms.json and PREFIX_histograms.hlog at test stop (default: the --csv "
        "prefix; without either nothing is written, the table is only logged).",
    )
    group.add_argument(
        "--mcp-rate",
        dest="mcp_rate",
        metavar="PER_SECOND",
        type=rate,
        default=DEFAULTS["mcp_rate"],
        env_var="LOCUST_MCP_RATE",
        help="Open model: target arrivals per second across all users and workers "
        "(latency measured from the intended send time). 0 = closed model (default).",
    )
    group.add_argument(
        "--mcp-validate-share",
        dest="mcp_validate_share",
        metavar="SHARE",
        type=share,
        default=DEFAULTS["mcp_validate_share"],
        env_var="LOCUST_MCP_VALIDATE_SHARE",
        help="Share of messages (0..1) validated against the MCP JSON Schema (default 0.01).",
    )
    group.add_argument(
        "--mcp-engine",
        dest="mcp_engine",
        choices=("native", "python"),
        default=DEFAULTS["mcp_engine"],
        env_var="LOCUST_MCP_ENGINE",
        help="Who sends the requests: 'native' (the compiled core's engine on its own threads; "
        "the default when it is built) or 'python' (gevent users, for scenarios written in Python).",
    )
    group.add_argument(
        "--mcp-engine-threads",
        dest="mcp_engine_threads",
        metavar="N",
        type=int_at_least(1),
        default=DEFAULTS["mcp_engine_threads"],
        env_var="LOCUST_MCP_ENGINE_THREADS",
        help="Native engine: I/O threads per Locust process (default 1).",
    )
    group.add_argument(
        "--mcp-stdio-inflight",
        dest="mcp_stdio_inflight",
        metavar="N",
        type=int_at_least(1),
        default=DEFAULTS["mcp_stdio_inflight"],
        env_var="LOCUST_MCP_STDIO_INFLIGHT",
        help="Native engine over stdio: requests in flight per server process (pipelined lines; default 1, what a Python user does).",
    )
    _add_client_arguments(group)
    _add_export_arguments(group)


def _add_export_arguments(group: Any) -> None:
    group.add_argument(
        "--mcp-prometheus-port",
        dest="mcp_prometheus_port",
        metavar="[HOST:]PORT",
        type=listen_address,
        default=DEFAULTS["mcp_prometheus_port"],
        env_var="LOCUST_MCP_PROMETHEUS_PORT",
        help="Serve the run's figures in the Prometheus text format on this port (every interface unless "
        "HOST is given): requests, failures and µs latency buckets per row. The master or a run without "
        "workers serves; a worker ignores it. A port it cannot listen on: exit code 2 before any load.",
    )
    group.add_argument(
        "--mcp-prometheus-linger",
        dest="mcp_prometheus_linger",
        metavar="SECONDS",
        type=rate,
        default=DEFAULTS["mcp_prometheus_linger"],
        env_var="LOCUST_MCP_PROMETHEUS_LINGER",
        help="After the test, keep serving the final figures this long so a scrape sees them (default 15, "
        "Prometheus' default scrape interval; at least your scrape_interval).",
    )
    group.add_argument(
        "--mcp-testid",
        dest="mcp_testid",
        metavar="ID",
        default=DEFAULTS["mcp_testid"],
        env_var="LOCUST_MCP_TESTID",
        help="The testid label of the Prometheus samples (default: an id made at start, logged).",
    )


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


def _version(text: str) -> str:
    import argparse

    if text == "auto":
        return text
    from mcpfast.protocol.versions import SUPPORTED_VERSIONS

    if text not in SUPPORTED_VERSIONS:
        raise argparse.ArgumentTypeError(f"must be 'auto' or one of {', '.join(SUPPORTED_VERSIONS)}; got {text!r}")
    return text


def _json_object(text: str) -> str:
    import argparse
    import json

    try:
        value = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not JSON: {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return text


def _add_client_arguments(group: Any) -> None:
    group.add_argument(
        "--mcp-protocol-version",
        dest="mcp_protocol_version",
        metavar="VERSION",
        type=_version,
        default=DEFAULTS["mcp_protocol_version"],
        env_var="LOCUST_MCP_PROTOCOL_VERSION",
        help="MCP revision the users speak (default 2025-11-25); 'auto' probes server/discover and falls back to initialize.",
    )
    group.add_argument(
        "--mcp-command",
        dest="mcp_command",
        metavar="COMMAND",
        default=DEFAULTS["mcp_command"],
        env_var="LOCUST_MCP_COMMAND",
        help="Run the users over stdio: one server process per user, started with this command "
        "(shell-style quoting). Without it the users speak Streamable HTTP to --host.",
    )
    group.add_argument(
        "--mcp-tool",
        dest="mcp_tool",
        metavar="NAME",
        default=DEFAULTS["mcp_tool"],
        env_var="LOCUST_MCP_TOOL",
        help="Tool for tools/call tasks (default echo).",
    )
    group.add_argument(
        "--mcp-tool-args",
        dest="mcp_tool_args",
        metavar="JSON",
        type=_json_object,
        default=DEFAULTS["mcp_tool_args"],
        env_var="LOCUST_MCP_TOOL_ARGS",
        help='Arguments of --mcp-tool as a JSON object (default {"text":"hello"}).',
    )
    group.add_argument(
        "--mcp-token",
        dest="mcp_token",
        metavar="TOKEN",
        default=DEFAULTS["mcp_token"],
        env_var="LOCUST_MCP_TOKEN",
        help="Bearer token sent on every HTTP request.",
    )
    group.add_argument(
        "--mcp-token-file",
        dest="mcp_token_file",
        metavar="FILE",
        type=_reach.checked(_reach.token_file),
        default=DEFAULTS["mcp_token_file"],
        env_var="LOCUST_MCP_TOKEN_FILE",
        help="Bearer tokens, one per line (minted beforehand, e.g. by authorization code + PKCE), handed to the users in turn.",
    )
    group.add_argument(
        "--mcp-header",
        dest="mcp_header",
        metavar="'NAME: VALUE'",
        action="append",
        type=_reach.checked(_reach.header),
        default=DEFAULTS["mcp_header"],
        help="A header sent on every HTTP request, e.g. 'x-api-key: abc' (repeatable).",
    )
    group.add_argument(
        "--mcp-ca-file",
        dest="mcp_ca_file",
        metavar="PEM",
        action="append",
        type=_reach.pem_file,
        default=DEFAULTS["mcp_ca_file"],
        help="CA certificates trusted beside the system store for https:// (repeatable; SSL_CERT_FILE is honoured).",
    )
    group.add_argument(
        "--mcp-client-cert",
        dest="mcp_client_cert",
        metavar="PEM",
        type=_reach.pem_file,
        default=DEFAULTS["mcp_client_cert"],
        env_var="LOCUST_MCP_CLIENT_CERT",
        help="mTLS: the client certificate chain (with --mcp-client-key).",
    )
    group.add_argument(
        "--mcp-client-key",
        dest="mcp_client_key",
        metavar="PEM",
        type=_reach.pem_file,
        default=DEFAULTS["mcp_client_key"],
        env_var="LOCUST_MCP_CLIENT_KEY",
        help="mTLS: the client certificate's private key.",
    )
    group.add_argument(
        "--mcp-insecure",
        dest="mcp_insecure",
        action="store_true",
        default=DEFAULTS["mcp_insecure"],
        env_var="LOCUST_MCP_INSECURE",
        help="Accept any server certificate (staging servers; said in the log and in the summary).",
    )
    group.add_argument(
        "--mcp-connect-to",
        dest="mcp_connect_to",
        metavar="HOST:PORT:ADDR:PORT",
        action="append",
        type=_reach.checked(_reach.connect_to),
        default=DEFAULTS["mcp_connect_to"],
        help="Connect to ADDR:PORT where the URL says HOST:PORT (one backend behind a balancer); "
        "the TLS name and Host stay the URL's (repeatable).",
    )
    group.add_argument(
        "--mcp-new-connection",
        dest="mcp_new_connection",
        choices=_reach.NEW_CONNECTION,
        default=DEFAULTS["mcp_new_connection"],
        env_var="LOCUST_MCP_NEW_CONNECTION",
        help="keep: one kept-alive connection per user (default); session: a new connection per "
        "session; request: per request (Connection: close), so load spreads over autoscaled backends.",
    )
    group.add_argument(
        "--mcp-no-cookie-jar",
        dest="mcp_no_cookie_jar",
        action="store_true",
        default=DEFAULTS["mcp_no_cookie_jar"],
        env_var="LOCUST_MCP_NO_COOKIE_JAR",
        help="Send no cookies back (by default each user keeps a cookie jar, so balancers that pin "
        "clients with a cookie keep a user's session on one replica).",
    )
    group.add_argument(
        "--mcp-retry-after",
        dest="mcp_retry_after",
        action="store_true",
        default=DEFAULTS["mcp_retry_after"],
        env_var="LOCUST_MCP_RETRY_AFTER",
        help="After a 429 or 503 with Retry-After, the user waits that long before its next request "
        "(each wait is a 'Retry-After wait' row). Off: the user goes on at once.",
    )
    group.add_argument(
        "--mcp-oauth-client-id",
        dest="mcp_oauth_client_id",
        metavar="ID",
        default=DEFAULTS["mcp_oauth_client_id"],
        env_var="LOCUST_MCP_OAUTH_CLIENT_ID",
        help="OAuth client credentials: the authorization server is found from the server's 401 "
        "(RFC 9728, RFC 8414); one access token per Locust process, shared by its users, refreshed "
        "before it expires (each token request is an 'oauth:token' row).",
    )
    group.add_argument(
        "--mcp-oauth-client-secret",
        dest="mcp_oauth_client_secret",
        metavar="SECRET",
        default=DEFAULTS["mcp_oauth_client_secret"],
        env_var="LOCUST_MCP_OAUTH_CLIENT_SECRET",
        help="The client's secret (client_secret_basic, or client_secret_post if that is all the server takes).",
    )
    group.add_argument(
        "--mcp-oauth-private-key",
        dest="mcp_oauth_private_key",
        metavar="PEM",
        type=_reach.checked(_reach.pem_file),
        default=DEFAULTS["mcp_oauth_private_key"],
        env_var="LOCUST_MCP_OAUTH_PRIVATE_KEY",
        help="Authenticate the client with private_key_jwt signed by this key (RSA, P-256 or Ed25519) instead of a secret.",
    )
    group.add_argument(
        "--mcp-oauth-scope",
        dest="mcp_oauth_scope",
        metavar="SCOPES",
        default=DEFAULTS["mcp_oauth_scope"],
        env_var="LOCUST_MCP_OAUTH_SCOPE",
        help="Scopes to ask for (space separated; default: the 401's scope, else the server's scopes_supported).",
    )
    group.add_argument(
        "--mcp-stream-tool",
        dest="mcp_stream_tool",
        metavar="NAME",
        default=DEFAULTS["mcp_stream_tool"],
        env_var="LOCUST_MCP_STREAM_TOOL",
        help='Tool that streams progress notifications (default stream), called with --mcp-stream-args or {"n": N}.',
    )
    group.add_argument(
        "--mcp-stream-count",
        dest="mcp_stream_count",
        metavar="N",
        type=_non_negative_int,
        default=DEFAULTS["mcp_stream_count"],
        env_var="LOCUST_MCP_STREAM_COUNT",
        help="Progress notifications asked of --mcp-stream-tool (default 10).",
    )
    group.add_argument(
        "--mcp-server-pid",
        dest="mcp_server_pid",
        metavar="PID",
        type=_non_negative_int,
        default=DEFAULTS["mcp_server_pid"],
        env_var="LOCUST_MCP_SERVER_PID",
        help="Server process to sample VmRSS from (session churn: memory per open session).",
    )
    group.add_argument(
        "--mcp-timeout",
        dest="mcp_timeout",
        metavar="SECONDS",
        type=rate,
        default=DEFAULTS["mcp_timeout"],
        env_var="LOCUST_MCP_TIMEOUT",
        help="Per-request timeout in seconds (default 30).",
    )
    group.add_argument(
        "--mcp-churn-delete-share",
        dest="mcp_churn_delete_share",
        metavar="SHARE",
        type=share,
        default=DEFAULTS["mcp_churn_delete_share"],
        env_var="LOCUST_MCP_CHURN_DELETE_SHARE",
        help="Session churn: share (0..1) of sessions ended with DELETE; the rest are abandoned (default 1).",
    )
    _add_capabilities_argument(group)
    _add_workload_arguments(group)


def _add_workload_arguments(group: Any) -> None:
    from mcpfast.locust.thresholds import argument_type

    group.add_argument(
        "--mcp-stream-args",
        dest="mcp_stream_args",
        metavar="JSON",
        type=_json_object,
        default=DEFAULTS["mcp_stream_args"],
        env_var="LOCUST_MCP_STREAM_ARGS",
        help='Arguments of --mcp-stream-tool as a JSON object (replaces {"n": --mcp-stream-count}), e.g. '
        '\'{"duration": 0.2, "steps": 4}\'.',
    )
    group.add_argument(
        "--mcp-scenario",
        dest="mcp_scenario",
        metavar="FILE",
        default=DEFAULTS["mcp_scenario"],
        env_var="LOCUST_MCP_SCENARIO",
        help="Workload file (TOML, JSON or YAML): a weighted mix of operations per user class, checked "
        "against the server before any load (loadtests/scenario.py).",
    )
    group.add_argument(
        "--mcp-discover",
        dest="mcp_discover",
        action="store_true",
        default=DEFAULTS["mcp_discover"],
        env_var="LOCUST_MCP_DISCOVER",
        help="Build the mix from what the server lists (tools with arguments from their inputSchema, "
        "resources, templates, prompts, completion, list calls), each probed once first.",
    )
    group.add_argument(
        "--mcp-discover-skip",
        dest="mcp_discover_skip",
        metavar="NAME",
        action="append",
        default=DEFAULTS["mcp_discover_skip"],
        help="--mcp-discover: leave this tool or prompt out (repeatable).",
    )
    group.add_argument(
        "--mcp-scenario-dump",
        dest="mcp_scenario_dump",
        action="store_true",
        default=DEFAULTS["mcp_scenario_dump"],
        help="Print the mix the run would send (JSON, after the checks against the server) and exit.",
    )
    group.add_argument(
        "--mcp-threshold",
        dest="mcp_threshold",
        metavar="EXPR",
        action="append",
        type=argument_type,
        default=DEFAULTS["mcp_threshold"],
        help="CI gate checked on the µs histograms at the end of the run, repeatable: "
        "'tools/call:echo p99<5ms', 'fail_ratio<0.001', 'initialize rps>500'. Any failure: exit code 1.",
    )


def stream_arguments(environment: Any) -> dict[str, Any]:
    """The stream tool's arguments: ``--mcp-stream-args``, else ``{"n": --mcp-stream-count}``."""
    import json

    text = option(environment, "mcp_stream_args")
    if text:
        return json.loads(text)
    return {"n": int(option(environment, "mcp_stream_count"))}


def _add_capabilities_argument(group: Any) -> None:
    group.add_argument(
        "--mcp-client-capabilities",
        dest="mcp_client_capabilities",
        metavar="JSON",
        type=_json_object,
        default=DEFAULTS["mcp_client_capabilities"],
        env_var="LOCUST_MCP_CLIENT_CAPABILITIES",
        help="Client capabilities the users declare (default elicitation, roots, sampling). Server requests "
        "(legacy) and 2026 input-required rounds get canned answers: elicitation declined, roots empty, "
        "sampling a fixed text.",
    )


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
