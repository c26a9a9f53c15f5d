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

__all__ = ["DEFAULTS", "add_arguments", "option"]

# Defaults, also used when an Environment has no parsed_options (tests, library use).
DEFAULTS: dict[str, Any] = {
    "mcp_histogram_out": None,  # None -> the --csv prefix if given, else "mcpfast"
    "mcp_rate": 0.0,
    "mcp_validate_share": 0.01,
}


def _share(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within 0..1, got {value}")
    return value


def _rate(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0.0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def add_arguments(parser: Any) -> None:
    """Register every mcpfast option on Locust's (ConfigArgParse-based) parser."""
    group = parser.add_argument_group(
        "mcpfast", "MCP swarm options (latencies in µs HDR histograms, open-model pacing, schema checks)"
    )
    group.add_argument(
        "--mcp-histogram-out",
        dest="mcp_histogram_out",
        metavar="PREFIX",
        default=DEFAULTS["mcp_histogram_out"],
        env_var="LOCUST_MCP_HISTOGRAM_OUT",
        help="Write PREFIX_histograms.json at test stop (default: the --csv prefix, else 'mcpfast').",
    )
    group.add_argument(
        "--mcp-rate",
        dest="mcp_rate",
        metavar="PER_SECOND",
        type=_rate,
        default=DEFAULTS["mcp_rate"],
        env_var="LOCUST_MCP_RATE",
        help="Open model: target arrivals per second across all users and workers "
        "(latency measured from the intended send time). 0 = closed model (default).",
    )
    group.add_argument(
        "--mcp-validate-share",
        dest="mcp_validate_share",
        metavar="SHARE",
        type=_share,
        default=DEFAULTS["mcp_validate_share"],
        env_var="LOCUST_MCP_VALIDATE_SHARE",
        help="Share of messages (0..1) validated against the MCP JSON Schema (default 0.01).",
    )


def option(environment: Any, name: str) -> Any:
    """``environment.parsed_options.<name>``, falling back to :data:`DEFAULTS`."""
    parsed = getattr(environment, "parsed_options", None)
    value = getattr(parsed, name, None) if parsed is not None else None
    return DEFAULTS.get(name) if value is None else value
