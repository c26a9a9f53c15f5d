"""The swarm's options as data: one row per ``--mcp-*`` flag, registered by one loop; ``DEFAULTS``
read off the same rows; an env var for the rows that have one; the families' groups only where
their locustfile registers them.  (``mcpfast.locust.options`` imports no Locust: tested here.)"""

from __future__ import annotations

import configargparse
import pytest

from mcpfast.locust.options import DEFAULTS, GROUPS, HOLD, SWARM, add_arguments, add_group, option


def _parser(*groups) -> configargparse.ArgumentParser:
    parser = configargparse.ArgumentParser()
    for group in groups:
        add_group(parser, group)
    return parser


def _help(parser: configargparse.ArgumentParser) -> list[str]:
    """The flags and group titles of ``--help``, in order."""
    lines = parser.format_help().splitlines()
    return [line.split()[0] if line.startswith("  ") else line for line in lines if line.startswith(("  --mcp-", "mcpfast"))]


def test_one_row_per_flag_and_the_defaults_are_the_rows() -> None:
    rows = [o for g in GROUPS for o in g.options]
    flags = [o.flag for o in rows]
    assert len(flags) == len(set(flags)) == 48
    assert all(f.startswith("--mcp-") for f in flags)
    assert DEFAULTS == {o.dest: o.default for o in rows}
    assert [o.dest for o in HOLD.options] == ["mcp_hold_per_user", "mcp_hold_trigger", "mcp_hold_trigger_every"]


def test_the_loop_registers_each_row_as_declared() -> None:
    parser = configargparse.ArgumentParser()
    for group in GROUPS:
        actions = add_group(parser, group)
        assert len(actions) == len(group.options)
        for o, a in zip(group.options, actions, strict=True):
            assert (a.option_strings, a.dest, a.default, a.help) == ([o.flag], o.dest, o.default, o.help)
            assert (a.metavar, a.choices, a.type) == (o.metavar, o.choices, o.type)
    assert vars(parser.parse_args([])) == DEFAULTS
    assert _help(parser) == [t for g in GROUPS for t in (g.title + ":", *(o.flag for o in g.options))]


def test_every_run_gets_the_swarm_group_and_a_family_its_own() -> None:
    parser = configargparse.ArgumentParser()
    add_arguments(parser)
    assert _help(parser) == ["mcpfast:", *(o.flag for o in SWARM.options)]  # hold.py / tasks.py add theirs
    assert set(vars(parser.parse_args([]))) == {o.dest for o in SWARM.options}


def test_env_vars_for_the_rows_that_have_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCUST_MCP_RATE", "250")
    monkeypatch.setenv("LOCUST_MCP_TOOL", "add")
    monkeypatch.setenv("LOCUST_MCP_INSECURE", "true")
    monkeypatch.setenv("LOCUST_MCP_THRESHOLD", "p99<5ms")  # a repeatable gate: command line only
    parsed = _parser(SWARM).parse_args([])
    assert (parsed.mcp_rate, parsed.mcp_tool, parsed.mcp_insecure, parsed.mcp_threshold) == (250.0, "add", True, None)
    assert SWARM.options[0].env_var == "LOCUST_MCP_HISTOGRAM_OUT"
    assert [o.flag for o in SWARM.options if o.env_var is None] == [
        "--mcp-header",
        "--mcp-ca-file",
        "--mcp-connect-to",
        "--mcp-discover-skip",
        "--mcp-scenario-dump",
        "--mcp-threshold",
    ]


def test_the_rows_checks_refuse_bad_values() -> None:
    parser = _parser(SWARM, HOLD)
    for bad in (
        ["--mcp-engine", "rust"],
        ["--mcp-engine-threads", "0"],
        ["--mcp-tool-args", "[1]"],
        ["--mcp-protocol-version", "1999-01-01"],
        ["--mcp-new-connection", "never"],
        ["--mcp-threshold", "p99<"],
        ["--mcp-hold-per-user", "many"],
    ):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)
    parsed = parser.parse_args(["--mcp-header", "x-a: 1", "--mcp-header", "x-b: 2", "--mcp-hold-trigger-every", "0.5"])
    assert parsed.mcp_header == ["x-a: 1", "x-b: 2"] and parsed.mcp_hold_trigger_every == 0.5

    class Env:
        parsed_options = parsed

    assert option(Env(), "mcp_hold_per_user") == 1 and option(Env(), "mcp_tasks_cancel_share") == 0.0  # from DEFAULTS
