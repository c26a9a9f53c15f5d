"""Workload files and thresholds without a server: parsing, the errors (file, line, what is
wrong), arguments generated from schemas, threshold grammar and evaluation on real histograms."""

from __future__ import annotations

import json
import re

import pytest

from mcpfast.locust import scenario as sc
from mcpfast.locust import thresholds as th
from mcpfast.locust.histogram import Histogram

GOOD_TOML = """\
[[users]]
name = "agent"
weight = 3

[[users.ops]]
op = "tools/call"
tool = "echo"
arguments = {text = "hi"}
weight = 10

[[users.ops]]
op = "stream"
tool = "stream"
arguments = {n = 4}

[[users]]
name = "reader"

[[users.ops]]
op = "resources/read"
template = "demo://greeting/{name}"
vars = {name = "ada lovelace"}

[[users.ops]]
op = "completion/complete"
prompt = "summarise"
argument = "text"
value = "a"

[[users.ops]]
op = "tools/list"
"""


def test_toml_scenario_parses_into_ops_with_their_lines() -> None:
    s = sc.load_text("w.toml", GOOD_TOML)
    assert [u.name for u in s.users] == ["agent", "reader"]
    agent, reader = s.users
    assert agent.weight == 3 and reader.weight == 1
    assert [o.kind for o in agent.ops] == ["tools/call", "stream"]
    assert [o.where for o in agent.ops + reader.ops] == ["w.toml:6", "w.toml:12", "w.toml:20", "w.toml:25", "w.toml:31"]
    assert agent.ops[1].params() == {"name": "stream", "arguments": {"n": 4}} and agent.ops[1].stream
    assert reader.ops[0].params() == {"uri": "demo://greeting/ada%20lovelace"}
    assert reader.ops[1].params() == {"ref": {"type": "ref/prompt", "name": "summarise"}, "argument": {"name": "text", "value": "a"}}
    mix = sc.native_mix(agent)
    assert mix == [
        {"method": "tools/call", "weight": 10, "params": {"name": "echo", "arguments": {"text": "hi"}}},
        {"method": "tools/call", "weight": 1, "params": {"name": "stream", "arguments": {"n": 4}}, "stream": True},
    ]
    assert sc.native_mix(reader)[2] == {"method": "tools/list", "weight": 1}


def test_json_and_top_level_ops() -> None:
    text = json.dumps({"ops": [{"op": "ping"}, {"op": "prompts/get", "prompt": "p", "arguments": {"a": "1"}}]})
    s = sc.load_text("w.json", text)
    assert len(s.users) == 1 and [o.kind for o in s.users[0].ops] == ["ping", "prompts/get"]
    assert s.users[0].ops[1].params() == {"name": "p", "arguments": {"a": "1"}}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[[ops]]\nop = "tools/call"\ntool = "echo"\n\n[[ops]]\nop = "tools/cal"\n', "w.toml:6: unknown operation 'tools/cal'"),
        ('[[ops]]\nop = "tools/call"\n', "w.toml:2: tools/call needs 'tool'"),
        ('[[ops]]\nop = "tools/call"\ntool = "echo"\nargs = {}\n', "w.toml:2: tools/call: unknown field(s) args"),
        ('[[ops]]\nop = "tools/call"\ntool = "e"\narguments = {}\ngenerate = true\n', "not both"),
        ('[[ops]]\nop = "resources/read"\n', "w.toml:2: resources/read needs exactly one of 'uri' or 'template'"),
        ('[[ops]]\nop = "ping"\nweight = -1\n', "w.toml:2: weight must be a non-negative integer"),
        ('[[ops]]\nop = "ping"\nweight = 0\n', "every operation has weight 0"),
        ('[[ops]\nop = "ping"\n', "w.toml: not valid TOML"),
        ('[[ops]]\nop = "prompts/get"\nprompt = "p"\narguments = {a = 1}\n', "prompt arguments must be"),
        ("flavour = 1\n", "unknown top-level key(s) flavour"),
    ],
)
def test_bad_files_name_the_line_and_the_problem(text: str, expected: str) -> None:
    with pytest.raises(sc.ScenarioError) as err:
        sc.load_text("w.toml", text)
    assert expected in str(err.value)


def test_bad_json_names_its_line_and_unknown_format() -> None:
    with pytest.raises(sc.ScenarioError, match=r"w.json:3: not valid JSON"):
        sc.load_text("w.json", '{"ops": [\n {"op": "ping"},\n ]}')
    with pytest.raises(sc.ScenarioError, match=re.escape("unknown scenario format '.ini'")):
        sc.load_text("w.ini", "")
    with pytest.raises(sc.ScenarioError, match="cannot read the scenario"):
        sc.load("/nonexistent/w.toml")


def _info() -> sc.ServerInfo:
    tools = {
        "echo": {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        "range": {
            "name": "range",
            "inputSchema": {
                "type": "object",
                "required": ["n", "mode", "tags"],
                "properties": {
                    "n": {"type": "integer", "minimum": 5, "maximum": 9},
                    "mode": {"enum": ["fast", "slow"]},
                    "tags": {"type": "array", "items": {"type": "string", "minLength": 3}, "minItems": 2},
                    "opt": {"type": "boolean"},
                },
            },
        },
    }
    prompts = {"summarise": {"name": "summarise", "arguments": [{"name": "text", "required": True}, {"name": "style"}]}}
    return sc.ServerInfo(
        {"tools": {}, "prompts": {}, "resources": {}}, tools, ["demo://readme"], [{"uriTemplate": "demo://greeting/{name}"}], prompts
    )


def test_generated_arguments_satisfy_the_schema() -> None:
    info = _info()
    for tool in info.tools.values():
        args = sc.generate_arguments(tool["inputSchema"])
        assert sc.schema_errors(tool["inputSchema"], args) == [], args
    assert sc.generate_arguments(info.tools["range"]["inputSchema"]) == {"n": 5, "mode": "fast", "tags": ["mcpfast", "mcpfast1"]}


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ('op = "tools/call"\ntool = "nope"', "w.toml:2: the server does not list tool 'nope' (it lists: echo, range)"),
        (
            'op = "tools/call"\ntool = "echo"\narguments = {text = 5}',
            "w.toml:2: arguments of 'echo' fail its inputSchema: text: 5 is not of type 'string'",
        ),
        ('op = "stream"\ntool = "range"\narguments = {n = 12, mode = "x", tags = []}', "fail its inputSchema"),
        ('op = "prompts/get"\nprompt = "summarise"', "w.toml:2: prompt 'summarise' needs argument(s) text"),
        ('op = "prompts/get"\nprompt = "other"', "does not list prompt 'other'"),
        ('op = "resources/read"\nuri = "demo://nothing"', "lists no resource 'demo://nothing'"),
        ('op = "completion/complete"\nprompt = "summarise"\nargument = "text"', "does not offer completions"),
    ],
)
def test_checks_against_the_server_listing(ops: str, expected: str) -> None:
    s = sc.load_text("w.toml", f"[[ops]]\n{ops}\n")
    with pytest.raises(sc.ScenarioError) as err:
        sc.resolve(s, _info())
    assert expected in str(err.value)


def test_resolve_fills_generated_arguments_and_accepts_template_uris() -> None:
    s = sc.load_text(
        "w.toml",
        '[[ops]]\nop = "tools/call"\ntool = "range"\ngenerate = true\n\n[[ops]]\nop = "resources/read"\nuri = "demo://greeting/bob"\n',
    )
    sc.resolve(s, _info())
    assert s.users[0].ops[0].arguments == {"n": 5, "mode": "fast", "tags": ["mcpfast", "mcpfast1"]}


def test_pick_class_keeps_the_shares() -> None:
    users = [sc.UserClass("a", 3, []), sc.UserClass("b", 1, []), sc.UserClass("off", 0, [])]
    picks = [sc.pick_class(users, i).name for i in range(8)]
    assert picks.count("a") == 6 and picks.count("b") == 2 and "off" not in picks


# -- thresholds -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["", "p99", "tools/call:echo p99 5ms", "p99<5kg", "rps>5ms", "q9<1", "p0<1", "fail_ratio<2", "p101<3ms"])
def test_malformed_thresholds(bad: str) -> None:
    with pytest.raises(th.ThresholdError):
        th.parse(bad)


def _data(ok_us: list[int], failed_us: list[int], name: str = "tools/call:echo", duration: float = 2.0) -> dict:
    ok, failed = Histogram(), Histogram()
    for v in ok_us:
        ok.record(v)
    for v in failed_us:
        failed.record(v)
    entry = lambda h: [{"type": "mcp-http", "name": name, **h.to_dict()}] if h.total_count else []  # noqa: E731
    return {"duration_s": duration, "histograms": entry(ok), "failed_histograms": entry(failed)}


def test_threshold_evaluation_on_histograms() -> None:
    data = _data([1000] * 98 + [9000, 20000], [50000])
    results = {
        r["threshold"]: r
        for r in th.evaluate(
            [
                "tools/call:echo p50<2ms",
                "tools/call:echo p99<5ms",
                "fail_ratio<0.001",
                "fail_ratio<0.02",
                "rps>50",
                "rps>60",
                "requests>=101",
                "failures<=0",
                "max<60ms",
                "initialize rps>1",
            ],
            data,
        )
    }
    assert results["tools/call:echo p50<2ms"]["passed"]
    assert not results["tools/call:echo p99<5ms"]["passed"]  # 9 ms, 20 ms and the 50 ms failure are the top 3 %
    assert results["fail_ratio<0.001"]["measured"] == pytest.approx(1 / 101) and not results["fail_ratio<0.001"]["passed"]
    assert results["fail_ratio<0.02"]["passed"]
    assert results["rps>50"]["measured"] == pytest.approx(50.5) and results["rps>50"]["passed"]
    assert not results["rps>60"]["passed"]
    assert results["requests>=101"]["passed"] and not results["failures<=0"]["passed"]
    assert results["max<60ms"]["passed"]
    assert results["initialize rps>1"]["measured"] is None and not results["initialize rps>1"]["passed"]
    assert "FAIL  tools/call:echo p99<5ms" in th.render(list(results.values()))


def test_yaml_scenario_and_its_error_lines() -> None:
    text = (
        "users:\n  - name: a\n    ops:\n      - op: tools/call\n        tool: echo\n        arguments: {text: hi}\n"
        "      - op: prompts/get\n        prompt: p\n"
    )
    s = sc.load_text("w.yaml", text)
    assert [o.where for o in s.users[0].ops] == ["w.yaml:4", "w.yaml:7"]
    assert s.users[0].ops[0].params() == {"name": "echo", "arguments": {"text": "hi"}}
    with pytest.raises(sc.ScenarioError, match=r"w.yaml:3: unknown operation 'ping!'"):
        sc.load_text("w.yaml", "ops:\n  - op: ping\n  - op: ping!\n")
    with pytest.raises(sc.ScenarioError, match=r"w.yaml:\d+: not valid YAML"):
        sc.load_text("w.yaml", "ops: [\n  {op: ping\n")
