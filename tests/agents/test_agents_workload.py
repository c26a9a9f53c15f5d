"""Agent workload files (``loadtests/agents.py --mcp-scenario FILE``): the agent keys and the
values a step takes from an earlier step, as the engine gets them; errors that name the line and
what is wrong; arguments made from what a schema, and its descriptions, offer."""

from __future__ import annotations

from typing import Any

import pytest

from mcpfast.locust import scenario as sc

CHAINED = """\
think = {dist = "lognormal", median = 2, p90 = 8}
idle = 5
hold_stream = 0.25

[[users]]
name = "builder"
abandon = 0.1

[[users.ops]]
name = "create"
op = "tools/call"
tool = "create"
arguments = {title = "t"}

[[users.ops]]
op = "tools/call"
tool = "get"
arguments = {id = {from = "create", pointer = "/id"}, deep = {k = [1, {from = "create", regex = 'id: (\\w+)'}]}}

[[users.ops]]
op = "resources/read"
uri = {from = "create", pointer = "/uri"}

[[users]]
name = "browser"
order = "weighted"
steps = [2, 6]
think = {dist = "exponential", mean = 3}
list_tools = false

[[users.ops]]
op = "tools/list"
"""


def test_agent_keys_and_values_taken_from_earlier_steps() -> None:
    s = sc.load_text("a.toml", CHAINED, agent=True)
    builder, browser = s.users
    assert builder.agent is not None and browser.agent is not None
    # the top level is every class's, a class's own keys replace it
    assert (builder.agent.think, builder.agent.idle, builder.agent.hold_stream, builder.agent.abandon) == (
        "lognormal:2:8",
        "constant:5",
        0.25,
        0.1,
    )
    assert (browser.agent.think, browser.agent.order, browser.agent.steps, browser.agent.list_tools) == (
        "exponential:3",
        "weighted",
        (2, 6),
        False,
    )
    assert browser.agent.where["think"] == "a.toml:28"
    steps = sc.agent_steps(builder)
    assert [st["label"] for st in steps] == ["create", "step 2 (tools/call:get)", "step 3 (resources/read)"]
    assert steps[1]["uses"] == [("/arguments/id", 0, "pointer", "/id"), ("/arguments/deep/k/1", 0, "regex", r"id: (\w+)")]
    # the engine puts the value where the reference was
    assert steps[1]["params"] == {"name": "get", "arguments": {"id": None, "deep": {"k": [1, None]}}}
    assert steps[2]["uses"] == [("/uri", 0, "pointer", "/uri")]
    assert "uses" not in steps[0]
    # the dump shows the references as written
    dumped = s.to_dict()["users"][0]
    assert dumped["agent"]["think"] == "lognormal:2:8" and dumped["ops"][0]["name"] == "create"
    assert dumped["ops"][1]["arguments"]["id"] == {"from": "create", "pointer": "/id"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a reference to a step no step is named
        (
            '[[ops]]\nname = "create"\nop = "ping"\n\n[[ops]]\nop = "tools/call"\ntool = "g"\narguments = {id = {from = "crate", pointer = "/id"}}\n',
            r"a\.toml:6: /arguments/id is taken from step 'crate', and no step has that name \(named steps: create\)",
        ),
        (
            '[[ops]]\nop = "tools/call"\ntool = "g"\narguments = {id = {from = "x", pointer = "/id", regex = "y"}}\n',
            r"a\.toml:2: a value from an earlier step is",
        ),
        ('[[ops]]\nname = "a"\nop = "ping"\n\n[[ops]]\nname = "a"\nop = "ping"\n', r"a\.toml:7: step name 'a' is taken \(by a\.toml:3\)"),
        ('think = {dist = "gamma", k = 2}\n\n[[ops]]\nop = "ping"\n', r"a\.toml:1: a distribution of seconds is a number or one of"),
        ('think = {dist = "lognormal", median = 2}\n\n[[ops]]\nop = "ping"\n', r"a\.toml:1: lognormal takes median, p90"),
        ('order = "random"\n\n[[ops]]\nop = "ping"\n', r"a\.toml:1: order is 'sequence' or 'weighted'"),
        ('steps = [1]\n\n[[ops]]\nop = "ping"\n', r"a\.toml:1: steps per session is a number or \[min, max\]"),
        ('abandon = "half"\n\n[[ops]]\nop = "ping"\n', r"a\.toml:1: abandon is a share"),
    ],
)
def test_bad_agent_files_name_the_line_and_the_problem(text: str, expected: str) -> None:
    with pytest.raises(sc.ScenarioError, match=expected):
        sc.load_text("a.toml", text, agent=True)


def test_agent_keys_belong_to_agent_workloads() -> None:
    with pytest.raises(sc.ScenarioError, match=r"run it with loadtests/agents\.py"):
        sc.load_text("w.toml", 'think = 2\n\n[[ops]]\nop = "ping"\n')
    with pytest.raises(sc.ScenarioError, match=r"unknown field\(s\) name"):
        sc.load_text("w.toml", '[[ops]]\nname = "x"\nop = "ping"\n')


def _info(tools: dict[str, dict[str, Any]]) -> sc.ServerInfo:
    return sc.ServerInfo({"tools": {}, "resources": {}}, tools, [], [], {})


def test_a_value_taken_from_a_step_is_not_checked_against_the_schema() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}, "required": ["id", "n"]}
    info = _info({"get": {"name": "get", "inputSchema": schema}})
    ok = '[[ops]]\nname = "c"\nop = "ping"\n\n[[ops]]\nop = "tools/call"\ntool = "get"\narguments = {id = {from = "c", pointer = "/id"}, n = 1}\n'
    sc.resolve(sc.load_text("a.toml", ok, agent=True), info)
    # what is not taken from a step still is
    bad = ok.replace("n = 1", 'n = "one"')
    with pytest.raises(sc.ScenarioError, match=r"a\.toml:6: arguments of 'get' fail its inputSchema: n: 'one' is not of type 'integer'"):
        sc.resolve(sc.load_text("a.toml", bad, agent=True), info)


def test_arguments_from_examples_default_enum_format_then_the_description() -> None:
    def one(prop: dict[str, Any]) -> Any:
        return sc.generate_arguments({"type": "object", "properties": {"v": prop}, "required": ["v"]})["v"]

    assert one({"type": "string", "examples": ["x1", "x2"], "default": "d", "enum": ["e"]}) == "x1"
    assert one({"type": "string", "default": "d", "enum": ["e"]}) == "d"
    assert one({"type": "string", "enum": ["e", "f"]}) == "e"
    assert one({"type": "string", "format": "date", "description": "e.g. 'tomorrow'"}) == "2026-01-01"
    # mcp-server-time's schemas give their examples in prose only
    tz = "IANA timezone name (e.g., 'America/New_York', 'Europe/London'). Use 'Etc/UTC' as local timezone if no timezone provided by the user."
    assert one({"type": "string", "description": tz}) == "America/New_York"
    assert one({"type": "string", "description": "Time to convert in 24-hour format (HH:MM)"}) == "12:00"
    assert one({"type": "string", "description": "A date, for example: 2025-03-04"}) == "2025-03-04"
    assert one({"type": "string", "description": "such as `eu-west-1`"}) == "eu-west-1"
    # an example the schema refuses is not taken
    assert one({"type": "string", "description": "e.g. 'abc'", "pattern": "^[0-9]+$"}) == "mcpfast"
    assert one({"type": "string", "description": "no example here"}) == "mcpfast"


def test_the_workload_lines_of_a_tool_left_out() -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "description": "An order code"}}, "required": ["code"]}
    assert sc.workload_lines("lookup", {"code": "mcpfast", "n": {"a": [1, None]}}, schema) == [
        "[[ops]]",
        'op = "tools/call"',
        'tool = "lookup"',
        'arguments = {code = "mcpfast", n = {a = [1, ""]}}',
        "#   code: An order code",
    ]
