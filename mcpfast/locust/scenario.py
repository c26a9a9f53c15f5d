"""Workload files (``--mcp-scenario FILE``) and discovered mixes (``--mcp-discover``).

A scenario is a weighted mix of MCP operations per user class, in TOML (``tomllib``), JSON, or
YAML (PyYAML, when installed)::

    [[users]]                 # one user class; "weight" is its share of the users
    name = "agent"
    weight = 3

    [[users.ops]]
    op = "tools/call"         # literal arguments
    tool = "echo"
    arguments = {message = "hi"}
    weight = 10

    [[users.ops]]
    op = "tools/call"         # arguments generated from the tool's inputSchema
    tool = "get-sum"
    generate = true

    [[users.ops]]
    op = "stream"             # a tool that reports progress, any arguments
    tool = "trigger-long-running-operation"
    arguments = {duration = 0.2, steps = 4}

    [[users.ops]]
    op = "resources/read"     # by URI, or template = "demo://item/{id}" with vars = {id = "1"}
    uri = "demo://resource/static/document/architecture.md"

    [[users.ops]]
    op = "prompts/get"
    prompt = "args-prompt"
    arguments = {city = "Paris"}

    [[users.ops]]
    op = "completion/complete"   # prompt = NAME or template = URI_TEMPLATE; argument; value
    prompt = "completable-prompt"
    argument = "department"
    value = "E"

    [[users.ops]]
    op = "tools/list"         # also resources/list, resources/templates/list, prompts/list, ping

A file with a top-level ``ops`` list (no ``users``) is one user class.  Agent workloads
(``loadtests/agents.py``, :func:`load` with ``agent=True``) add, per user class or at the top
level for every class: ``think`` and ``idle`` (distributions of seconds: a number, ``{dist =
"lognormal", median = 2, p90 = 8}``, ``{dist = "exponential", mean = 3}``, ``{dist = "uniform",
min = 1, max = 3}``, ``{dist = "constant", value = 1}``), ``order`` (``sequence`` or ``weighted``),
``steps`` (weighted: per session, ``5`` or ``[2, 6]``), ``hold_stream`` and ``abandon`` (shares of
the agents and of the sessions) and ``list_tools``; an operation's ``name``, and in its
``arguments`` (or a ``resources/read``'s ``uri``) a value taken from an earlier step's result,
``{from = "create", pointer = "/id"}`` (a JSON pointer into its ``structuredContent``) or
``{from = "create", regex = "id: (\\w+)"}`` (on its text).  Checks run in two steps,
both before any load is sent: :func:`load` (the file alone: syntax, unknown operations and
fields, types - each error names the file, the line of the operation and what is wrong), then
:func:`resolve` against what the server lists (:func:`fetch_server_info`): a tool, prompt or
resource the server does not list, arguments that fail the tool's ``inputSchema``, a prompt
missing a required argument.  The resolved mix is a list of :class:`Op`, the same for both
engines: the Python users call :meth:`Op.params`, the native engine gets :func:`native_mix`.

``--mcp-discover`` (:func:`discover`) asks the server for its tools, resources, templates and
prompts, generates arguments from each schema, probes every candidate once (a tool that fails,
needs what the swarm cannot give, or takes longer than :data:`PROBE_TIMEOUT` stays out, and the
dump says why) and builds a mix from the rest.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("mcpfast.locust")

__all__ = [
    "AGENT_FIELDS",
    "LIST_OPS",
    "OPS",
    "AgentPlan",
    "Op",
    "Ref",
    "Scenario",
    "ScenarioError",
    "ServerInfo",
    "UserClass",
    "agent_steps",
    "close_probe",
    "default_agent",
    "discover",
    "fetch_server_info",
    "generate_arguments",
    "listed",
    "load",
    "native_mix",
    "probe",
    "resolve",
    "workload_lines",
]

LIST_OPS = ("tools/list", "resources/list", "resources/templates/list", "prompts/list", "ping")
OPS = ("tools/call", "stream", "resources/read", "prompts/get", "completion/complete") + LIST_OPS
FIELDS: dict[str, tuple[str, ...]] = {
    "tools/call": ("tool", "arguments", "generate"),
    "stream": ("tool", "arguments", "generate"),
    "resources/read": ("uri", "template", "vars"),
    "prompts/get": ("prompt", "arguments"),
    "completion/complete": ("prompt", "template", "argument", "value"),
    **dict.fromkeys(LIST_OPS, ()),
}
COMMON_FIELDS = ("op", "weight")
USER_FIELDS = ("name", "weight", "ops")
# agent workloads only: what each agent does around its steps (per user class, or at the top level)
AGENT_FIELDS = ("think", "idle", "order", "steps", "hold_stream", "abandon", "list_tools")
THINK_FORMS = {"constant": ("value",), "uniform": ("min", "max"), "exponential": ("mean",), "lognormal": ("median", "p90")}
REF_READS = ("pointer", "regex")
PROBE_TIMEOUT = 3.0  # s: a discovered tool slower than this stays out of the mix
DISCOVER_WEIGHTS = {"tools/call": 10, "resources/read": 5, "prompts/get": 3, "completion/complete": 1, "list": 1}
MAX_DISCOVERED_RESOURCES = 8
_TEMPLATE_VAR = re.compile(r"\{[+#./;?&]?([A-Za-z0-9_]+)(?:\*|:\d+)?(?:,[A-Za-z0-9_]+)*\}")


class ScenarioError(ValueError):
    """A scenario that cannot run; the message names the file, the line and what is wrong."""


@dataclass
class Op:
    kind: str  # one of OPS
    weight: int = 1
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    generate: bool = False
    uri: str | None = None
    template: str | None = None
    vars: dict[str, str] | None = None
    prompt: str | None = None
    argument: str | None = None
    value: str = ""
    where: str = ""  # "file:line" for errors
    note: str = ""  # how it was made (discover: "generated from inputSchema", ...)
    name: str | None = None  # agents: the step's name, for the steps that read its result
    refs: list[Ref] = field(default_factory=list)  # agents: values taken from earlier steps' results

    @property
    def method(self) -> str:
        return "tools/call" if self.kind == "stream" else self.kind

    @property
    def stream(self) -> bool:
        return self.kind == "stream"

    def read_uri(self) -> str:
        """The URI a ``resources/read`` reads: its own, or its template expanded with its vars."""
        return self.uri if self.uri is not None else expand_template(self.template or "", self.vars or {})

    def params(self) -> dict[str, Any] | None:
        """The request's params (no ``_meta``: the client adds it)."""
        k = self.kind
        if k in ("tools/call", "stream"):
            return {"name": self.tool, "arguments": self.arguments or {}}
        if k == "resources/read":
            return {"uri": self.read_uri()}
        if k == "prompts/get":
            p: dict[str, Any] = {"name": self.prompt}
            if self.arguments:
                p["arguments"] = self.arguments
            return p
        if k == "completion/complete":
            ref = {"type": "ref/prompt", "name": self.prompt} if self.prompt is not None else {"type": "ref/resource", "uri": self.template}
            return {"ref": ref, "argument": {"name": self.argument, "value": self.value}}
        return None

    def stat_name(self) -> str:
        """As the client reports it: ``tools/call:echo``, ``prompts/get:greet``, ``resources/read``."""
        if self.method == "tools/call":
            return f"tools/call:{self.tool}"
        if self.kind == "prompts/get":
            return f"prompts/get:{self.prompt}"
        return self.method

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.kind, "weight": self.weight}
        if self.name is not None:
            out["name"] = self.name
        for key in FIELDS[self.kind]:
            value = getattr(self, key)
            if key == "generate":
                continue
            if value not in (None, "") or (key == "value" and self.argument is not None):
                out[key] = value
        if self.kind == "resources/read" and self.uri is None:
            out["uri"] = self.read_uri()
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class Ref:
    """A value of a step taken from an earlier step's result in the same session."""

    at: str  # a JSON pointer into the request's params: /arguments/id, /uri
    source: str  # the name of the step read
    read: str  # "pointer" (into its structuredContent) or "regex" (on its text)
    expression: str

    def to_dict(self) -> dict[str, str]:
        return {"from": self.source, self.read: self.expression}


@dataclass
class AgentPlan:
    """What each agent of a user class does around its steps (the engine's ``think``/``idle``
    spelling of a distribution: ``lognormal:2:8``)."""

    think: str = "lognormal:2:8"
    idle: str | None = None  # None: as think
    order: str = "sequence"
    steps: tuple[int, int] = (1, 1)
    hold_stream: float = 0.0
    abandon: float = 0.0
    list_tools: bool = True
    where: dict[str, str] = field(default_factory=dict)  # field -> "file:line", for the engine's errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "think": self.think,
            "idle": self.idle or self.think,
            "order": self.order,
            "steps": list(self.steps),
            "hold_stream": self.hold_stream,
            "abandon": self.abandon,
            "list_tools": self.list_tools,
        }


@dataclass
class UserClass:
    name: str
    weight: int
    ops: list[Op]
    agent: AgentPlan | None = None


@dataclass
class Scenario:
    source: str
    users: list[UserClass]
    excluded: list[dict[str, str]] = field(default_factory=list)  # discover: what was left out and why

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "users": [
                {
                    "name": u.name,
                    "weight": u.weight,
                    **({"agent": u.agent.to_dict()} if u.agent else {}),
                    "ops": [o.to_dict() for o in u.ops],
                }
                for u in self.users
            ],
        }
        if self.excluded:
            out["excluded"] = self.excluded
        return out


# -- parsing -------------------------------------------------------------------------------------------
def _parse_text(path: str, text: str) -> Any:
    ext = os.path.splitext(path)[1].lower()
    if ext == ".toml":
        import tomllib

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    if ext == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScenarioError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    if ext in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ScenarioError(f"{path}: YAML scenarios need PyYAML (pip install pyyaml), or use TOML/JSON") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            raise ScenarioError(f"{path}{line}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    raise ScenarioError(f"{path}: unknown scenario format {ext or '(no extension)'!r}: use .toml, .json, .yaml or .yml")


_OP_KEY = re.compile(r"""(?:^|[\s{,\[])["']?op["']?\s*[=:]""", re.M)


def _op_lines(text: str) -> list[int]:
    """Line (1-based) of every ``op`` key, in document order (= the order of the operations)."""
    return [text.count("\n", 0, m.end()) + 1 for m in _OP_KEY.finditer(text)]


def _weight(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScenarioError(f"{where}: weight must be a non-negative integer, got {value!r}")
    return value


def _str_map(value: Any, where: str, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ScenarioError(f"{where}: {what} must be a table/object of strings, got {value!r}")
    return value


def _op(raw: Any, where: str, agent: bool = False) -> Op:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: an operation must be a table/object with 'op', got {raw!r}")
    kind = raw.get("op")
    if kind not in OPS:
        raise ScenarioError(f"{where}: unknown operation {kind!r} (one of {', '.join(OPS)})")
    allowed = COMMON_FIELDS + (("name",) if agent else ()) + FIELDS[kind]
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise ScenarioError(f"{where}: {kind}: unknown field(s) {', '.join(unknown)} (allowed: {', '.join(allowed)})")
    op = Op(kind=kind, weight=_weight(raw.get("weight", 1), where), where=where)
    if "name" in raw:
        if not isinstance(raw["name"], str) or not raw["name"]:
            raise ScenarioError(f"{where}: name must be a non-empty string (the step's name)")
        op.name = raw["name"]
    if kind in ("tools/call", "stream"):
        op.tool = raw.get("tool")
        if not isinstance(op.tool, str) or not op.tool:
            raise ScenarioError(f"{where}: {kind} needs 'tool' (a tool name)")
        args, op.generate = raw.get("arguments"), raw.get("generate", False)
        if not isinstance(op.generate, bool):
            raise ScenarioError(f"{where}: generate must be true or false")
        if args is not None and op.generate:
            raise ScenarioError(f"{where}: give 'arguments' or 'generate = true', not both")
        if args is not None and not isinstance(args, dict):
            raise ScenarioError(f"{where}: arguments must be a table/object, got {args!r}")
        op.arguments = args
        if agent and args is not None:
            op.refs = [Ref("/arguments" + at, *ref) for at, ref in _refs(args, where)]
    elif kind == "resources/read":
        op.uri, op.template = raw.get("uri"), raw.get("template")
        if (op.uri is None) == (op.template is None):
            raise ScenarioError(f"{where}: resources/read needs exactly one of 'uri' or 'template'")
        ref = _ref(op.uri, where) if agent else None
        if ref is not None:
            op.refs.append(Ref("/uri", *ref))
            op.uri = ""
        elif not isinstance(op.uri or op.template, str):
            raise ScenarioError(f"{where}: uri/template must be a string")
        if "vars" in raw:
            if op.template is None:
                raise ScenarioError(f"{where}: 'vars' goes with 'template'")
            op.vars = _str_map(raw["vars"], where, "vars")
    elif kind == "prompts/get":
        op.prompt = raw.get("prompt")
        if not isinstance(op.prompt, str) or not op.prompt:
            raise ScenarioError(f"{where}: prompts/get needs 'prompt' (a prompt name)")
        if "arguments" in raw:
            given = raw["arguments"]
            op.refs = [Ref("/arguments" + at, *ref) for at, ref in _refs(given, where)] if agent and isinstance(given, dict) else []
            plain = {k: v for k, v in given.items() if not any(r.at == "/arguments/" + _escape(k) for r in op.refs)} if op.refs else given
            _str_map(plain, where, "prompt arguments")
            op.arguments = given
    elif kind == "completion/complete":
        op.prompt, op.template = raw.get("prompt"), raw.get("template")
        if (op.prompt is None) == (op.template is None):
            raise ScenarioError(f"{where}: completion/complete needs exactly one of 'prompt' or 'template'")
        op.argument = raw.get("argument")
        if not isinstance(op.argument, str) or not op.argument:
            raise ScenarioError(f"{where}: completion/complete needs 'argument' (the argument's name)")
        value = raw.get("value", "")
        if not isinstance(value, str):
            raise ScenarioError(f"{where}: value must be a string")
        op.value = value
    return op


def _escape(key: str) -> str:
    """A key as a JSON pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def _ref(value: Any, where: str) -> tuple[str, str, str] | None:
    """``(step, read, expression)`` of a value taken from an earlier step (``{from = "create",
    pointer = "/id"}`` or ``{from = ..., regex = ...}``); None for any other value."""
    if not isinstance(value, dict) or "from" not in value:
        return None
    reads = [k for k in REF_READS if k in value]
    extra = sorted(set(value) - {"from", *REF_READS})
    source = value["from"]
    if len(reads) != 1 or extra or not isinstance(source, str) or not isinstance(value[reads[0]], str):
        raise ScenarioError(
            f'{where}: a value from an earlier step is {{from = STEP, pointer = "/json/pointer"}} or '
            f'{{from = STEP, regex = "..."}}, got {value!r}'
        )
    return source, reads[0], value[reads[0]]


def _refs(value: Any, where: str, at: str = "") -> list[tuple[str, tuple[str, str, str]]]:
    """Every value taken from an earlier step inside ``value``: (its JSON pointer, the reference)."""
    ref = _ref(value, where)
    if ref is not None:
        return [(at, ref)]
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in _refs(v, where, f"{at}/{_escape(str(k))}")]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in _refs(v, where, f"{at}/{i}")]
    return []


def _think(value: Any, where: str) -> str:
    """A distribution as the engine spells it (``lognormal:2:8``): from a number (constant), the
    engine's own spelling, or a table ``{dist = "lognormal", median = 2, p90 = 8}``.  Whether its
    numbers make sense (negative, p90 below the median) the engine checks."""
    if isinstance(value, bool):
        raise ScenarioError(f"{where}: a distribution of seconds, got {value!r}")
    if isinstance(value, int | float):
        return f"constant:{value}"
    if isinstance(value, str):
        return value
    if not isinstance(value, dict) or value.get("dist") not in THINK_FORMS:
        forms = ", ".join(f"{{dist = {k!r}, {', '.join(f'{a} = S' for a in v)}}}" for k, v in THINK_FORMS.items())
        raise ScenarioError(f"{where}: a distribution of seconds is a number or one of {forms}; got {value!r}")
    names = THINK_FORMS[value["dist"]]
    extra = sorted(set(value) - {"dist", *names})
    numbers = [value.get(n) for n in names]
    if extra or any(isinstance(x, bool) or not isinstance(x, int | float) for x in numbers):
        raise ScenarioError(f"{where}: {value['dist']} takes {', '.join(names)} (seconds, numbers); got {value!r}")
    return ":".join([value["dist"], *(str(x) for x in numbers)])


def _agent_plan(raw: dict[str, Any], base: AgentPlan | None, where: str, lines: dict[str, list[int]], path: str) -> AgentPlan:
    """The agent keys of a user class over ``base`` (the top level's)."""
    plan = AgentPlan() if base is None else AgentPlan(**{**base.__dict__, "where": dict(base.where)})
    for key in AGENT_FIELDS:
        if key not in raw:
            continue
        value = raw[key]
        at = lines.get(key) or []
        line = at.pop(0) if at else None
        here = f"{path}:{line}" if line else f"{where}: {key}"
        plan.where[key] = here
        if key in ("think", "idle"):
            setattr(plan, key, _think(value, here))
        elif key == "order":
            if value not in ("sequence", "weighted"):
                raise ScenarioError(f"{here}: order is 'sequence' or 'weighted', got {value!r}")
            plan.order = value
        elif key == "steps":
            pair = [value, value] if isinstance(value, int) else value
            if not isinstance(pair, list) or len(pair) != 2 or any(isinstance(x, bool) or not isinstance(x, int) for x in pair):
                raise ScenarioError(f"{here}: steps per session is a number or [min, max], got {value!r}")
            plan.steps = (pair[0], pair[1])
        elif key in ("hold_stream", "abandon"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ScenarioError(f"{here}: {key} is a share, 0 to 1, got {value!r}")
            setattr(plan, key, float(value))
        elif key == "list_tools":
            if not isinstance(value, bool):
                raise ScenarioError(f"{here}: list_tools is true or false, got {value!r}")
            plan.list_tools = value
    return plan


def _key_lines(text: str, keys: tuple[str, ...]) -> dict[str, list[int]]:
    """Line (1-based) of every occurrence of each key, in document order."""
    out: dict[str, list[int]] = {}
    for key in keys:
        pattern = re.compile(rf"""(?:^|[\s{{,\[])["']?{key}["']?\s*[=:]""", re.M)
        out[key] = [text.count("\n", 0, m.end()) + 1 for m in pattern.finditer(text)]
    return out


def _check_names(user: UserClass, path: str) -> None:
    """An agent class's step names are distinct, and every value taken from a step names one."""
    names: dict[str, Op] = {}
    for op in user.ops:
        if op.name is not None:
            if op.name in names:
                raise ScenarioError(f"{op.where}: step name {op.name!r} is taken (by {names[op.name].where})")
            names[op.name] = op
    for op in user.ops:
        for ref in op.refs:
            if ref.source not in names:
                known = ", ".join(sorted(names)) or "none: give the step a name"
                raise ScenarioError(
                    f"{op.where}: {ref.at} is taken from step {ref.source!r}, and no step has that name (named steps: {known})"
                )


def load_text(path: str, text: str, agent: bool = False) -> Scenario:
    """Parse and check a scenario file's text (no server needed)."""
    data = _parse_text(path, text)
    lines = _op_lines(text)
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: the top level must be a table/object with 'users' or 'ops'")
    top = ("users", "ops", *AGENT_FIELDS) if agent else ("users", "ops")
    unknown = sorted(set(data) - set(top))
    if unknown:
        also = (
            ""
            if agent
            else (
                " - think, steps, ... are an agent workload's: run it with loadtests/agents.py" if set(unknown) & set(AGENT_FIELDS) else ""
            )
        )
        raise ScenarioError(f"{path}: unknown top-level key(s) {', '.join(unknown)} (allowed: {', '.join(top)}){also}")
    key_lines = _key_lines(text, AGENT_FIELDS) if agent else {}
    base = _agent_plan(data, None, path, key_lines, path) if agent else None
    if "users" in data and "ops" in data:
        raise ScenarioError(f"{path}: give 'users' (user classes) or 'ops' (one user class), not both")
    raw_users = data.get("users")
    if raw_users is None:
        raw_users = [{"name": "default", "ops": data.get("ops")}]
    if not isinstance(raw_users, list) or not raw_users:
        raise ScenarioError(f"{path}: 'users' must be a non-empty list of user classes")
    users: list[UserClass] = []
    counter = 0
    for i, raw in enumerate(raw_users):
        label = f"{path}: users[{i}]"
        if not isinstance(raw, dict):
            raise ScenarioError(f"{label}: must be a table/object")
        fields = USER_FIELDS + (AGENT_FIELDS if agent else ())
        bad = sorted(set(raw) - set(fields))
        if bad:
            raise ScenarioError(f"{label}: unknown field(s) {', '.join(bad)} (allowed: {', '.join(fields)})")
        name = raw.get("name", f"users{i}")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ScenarioError(f"{label}: name must be letters, digits, '_', '.', '-', got {name!r}")
        ops_raw = raw.get("ops")
        if not isinstance(ops_raw, list) or not ops_raw:
            raise ScenarioError(f"{label} ({name}): 'ops' must be a non-empty list of operations")
        ops = []
        for j, raw_op in enumerate(ops_raw):
            line = lines[counter] if counter < len(lines) else None
            counter += 1
            where = f"{path}:{line}" if line else f"{path}: users[{i}].ops[{j}]"
            ops.append(_op(raw_op, where, agent))
        if not any(o.weight for o in ops):
            raise ScenarioError(f"{label} ({name}): every operation has weight 0")
        plan = _agent_plan(raw, base, label, key_lines, path) if base is not None else None
        users.append(UserClass(name, _weight(raw.get("weight", 1), label), ops, plan))
        if plan is not None:
            _check_names(users[-1], path)
    if len({u.name for u in users}) != len(users):
        raise ScenarioError(f"{path}: user class names must be distinct")
    if not any(u.weight for u in users):
        raise ScenarioError(f"{path}: every user class has weight 0")
    return Scenario(path, users)


def load(path: str, agent: bool = False) -> Scenario:
    """The scenario file at ``path`` (``agent``: an agent workload, its agent keys allowed)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the scenario: {exc.strerror or exc}") from None
    return load_text(path, text, agent)


# -- what the server offers -------------------------------------------------------------------------------
@dataclass
class ServerInfo:
    capabilities: dict[str, Any]
    tools: dict[str, dict[str, Any]]
    resources: list[str]
    templates: list[dict[str, Any]]
    prompts: dict[str, dict[str, Any]]


def close_probe(client: Any) -> None:
    """End a probe client's session (DELETE, where the transport has sessions) and close it: a
    probe before the run leaves no session behind on the server for its idle timeout to reap."""
    try:
        client.delete()
    except Exception:  # the session may be gone with a refused probe; closing is what remains
        logger.debug("mcpfast: the probe's session could not be ended", exc_info=True)
    finally:
        client.close()


def make_client(environment: Any, host: str | None, capabilities: dict[str, Any] | None = None) -> Any:
    """A plain (unreported) client for the server the run targets, from the ``--mcp-*`` options."""
    from mcpfast.client.session import ClientSession
    from mcpfast.locust.options import option

    version = str(option(environment, "mcp_protocol_version"))
    if version == "auto":
        version = "2025-11-25"
    caps = json.loads(option(environment, "mcp_client_capabilities")) if capabilities is None else capabilities
    session = ClientSession(version, capabilities=caps)
    timeout = float(option(environment, "mcp_timeout"))
    command = option(environment, "mcp_command")
    if command:
        from mcpfast.client.stdio import StdioClient

        return StdioClient(command, session, timeout=timeout)
    if not host:
        raise ScenarioError("the scenario needs --host (the MCP endpoint URL) or --mcp-command")
    from mcpfast.client.http import HttpClient

    return HttpClient(host, session, token=option(environment, "mcp_token"), timeout=timeout)


def listed(client: Any, method: str, key: str) -> list[dict[str, Any]]:
    """Every item under ``key`` of a paginated list ``method`` (at most 100 pages).

    Raises:
        ScenarioError: the server did not answer a page.
    """
    items: list[dict[str, Any]] = []
    cursor = None
    for _page in range(100):  # bounded: a server that pages forever is cut at 100 pages
        reply = client.call(method, {"cursor": cursor} if cursor else None)
        if reply is None or reply.is_error:
            reason = client.last_error or (reply.error if reply is not None else "no reply")
            raise ScenarioError(f"the server did not answer {method}: {reason}")
        result = reply.result or {}
        items.extend(x for x in result.get(key) or [] if isinstance(x, dict))
        cursor = result.get("nextCursor")
        if not cursor:
            break
    return items


def fetch_server_info(client: Any) -> ServerInfo:
    if not client.initialize():
        raise ScenarioError(f"cannot open a session with the server: {client.last_error}")
    caps = client.session.server_capabilities or {}
    tools = {t["name"]: t for t in listed(client, "tools/list", "tools") if isinstance(t.get("name"), str)} if "tools" in caps else {}
    resources, templates = [], []
    if "resources" in caps:
        resources = [r["uri"] for r in listed(client, "resources/list", "resources") if isinstance(r.get("uri"), str)]
        try:
            templates = listed(client, "resources/templates/list", "resourceTemplates")
        except ScenarioError:
            templates = []
    prompts = (
        {p["name"]: p for p in listed(client, "prompts/list", "prompts") if isinstance(p.get("name"), str)} if "prompts" in caps else {}
    )
    return ServerInfo(caps, tools, resources, templates, prompts)


# -- arguments from a JSON Schema ------------------------------------------------------------------------------
def generate_arguments(schema: dict[str, Any] | None, seed: int = 0) -> dict[str, Any]:
    """Arguments that satisfy ``schema`` (a tool's inputSchema): every required property, and
    the optional ones that have a ``default`` are left to the server."""
    value = _sample(schema or {"type": "object"}, seed, schema or {}, 0)
    return value if isinstance(value, dict) else {}


def _sample(s: Any, seed: int, root: dict[str, Any], depth: int) -> Any:
    if not isinstance(s, dict) or depth > 8:
        return None
    if "$ref" in s and isinstance(s["$ref"], str) and s["$ref"].startswith("#/"):
        target: Any = root
        for part in s["$ref"][2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _sample(target, seed, root, depth + 1)
    if "const" in s:
        return s["const"]
    # what the schema itself offers: its examples, its default, its choices
    if isinstance(s.get("examples"), list) and s["examples"]:
        return s["examples"][seed % len(s["examples"])]
    if "default" in s:
        return s["default"]
    if isinstance(s.get("enum"), list) and s["enum"]:
        return s["enum"][seed % len(s["enum"])]
    for key in ("anyOf", "oneOf"):
        if isinstance(s.get(key), list) and s[key]:
            return _sample(s[key][0], seed, root, depth + 1)
    if isinstance(s.get("allOf"), list):
        merged: dict[str, Any] = {}
        for part in s["allOf"]:
            if isinstance(part, dict):
                merged.update(part)
        return _sample(merged, seed, root, depth + 1)
    t = s.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t is None:
        t = "object" if "properties" in s else "string"
    if t == "object":
        props = s.get("properties") or {}
        return {k: _sample(props.get(k, {}), seed, root, depth + 1) for k in s.get("required") or []}
    if t == "array":
        n = int(s.get("minItems") or 0)
        return [_sample(s.get("items") or {}, seed + i, root, depth + 1) for i in range(n)]
    if t in ("integer", "number"):
        lo = s.get("minimum", s.get("exclusiveMinimum"))
        hi = s.get("maximum", s.get("exclusiveMaximum"))
        v: float = 1 + seed
        if lo is not None:
            v = lo + (1 if "exclusiveMinimum" in s and "minimum" not in s else 0) + seed
        if hi is not None and v > hi:
            v = hi - (1 if "exclusiveMaximum" in s and "maximum" not in s else 0)
        return int(v) if t == "integer" else float(v)
    if t == "boolean":
        return seed % 2 == 0
    if t == "null":
        return None
    fmt = s.get("format")
    text = FORMAT_SAMPLES.get(fmt or "") or described_example(s) or (f"mcpfast{seed}" if seed else "mcpfast")
    n = int(s.get("minLength") or 0)
    if len(text) < n:
        text = text + "x" * (n - len(text))
    if s.get("maxLength") is not None:
        text = text[: int(s["maxLength"])]
    return text


FORMAT_SAMPLES = {
    "uri": "data:text/plain,mcpfast",
    "url": "data:text/plain,mcpfast",
    "email": "swarm@example.com",
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "12:00:00",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "127.0.0.1",
    "hostname": "example.com",
}
# a description's own example: "(e.g., 'America/New_York', ...)", "for example: x", "such as `x`"
_EXAMPLE = re.compile(
    r"""(?:\be\.?\s?g\.?,?|\bfor\s+example[:,]?|\bsuch\s+as|\bexamples?\s*:)\s*"""
    r"""(?:'([^']+)'|"([^"]+)"|`([^`]+)`|([^\s,;()'"`]+[^\s,;()'"`.]))""",
    re.I,
)
# the formats a description names in words: "in 24-hour format (HH:MM)"
_DESCRIBED_FORMATS = (
    (re.compile(r"\bYYYY-MM-DD[T ]HH:MM(?::SS)?", re.I), "2026-01-01T12:00:00"),
    (re.compile(r"\bISO[ -]?8601\b", re.I), "2026-01-01T12:00:00Z"),
    (re.compile(r"\bYYYY-MM-DD\b", re.I), "2026-01-01"),
    (re.compile(r"\bHH:MM:SS\b", re.I), "12:00:00"),
    (re.compile(r"\bHH:MM\b", re.I), "12:00"),
)


def described_example(schema: dict[str, Any]) -> str | None:
    """A string the schema's description gives as an example, or the format it names in words
    (``HH:MM``, ``YYYY-MM-DD``, ISO 8601) as a sample of it; None when it gives neither, or the
    schema refuses what it gives (its pattern, its lengths)."""
    description = schema.get("description")
    if not isinstance(description, str):
        return None
    candidates = [next(g for g in m.groups() if g) for m in _EXAMPLE.finditer(description)]
    candidates += [sample for pattern, sample in _DESCRIBED_FORMATS if pattern.search(description)]
    for candidate in candidates:
        if not schema_errors({**schema, "type": "string"}, candidate):
            return candidate
    return None


def schema_errors(schema: dict[str, Any] | None, arguments: Any, skip: list[str] | None = None) -> list[str]:
    """Why ``arguments`` fail ``schema`` (empty: they pass); errors at or under the JSON pointer
    tokens of ``skip`` (``id``, ``deep/k``: values known only at run time) are left out."""
    if not isinstance(schema, dict):
        return []
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - a dependency of the swarm
        return []
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    except Exception:  # a schema the library cannot use: the server decides
        return []
    out = []
    skipped = [tuple(t.replace("~1", "/").replace("~0", "~") for t in p.split("/")) for p in skip or []]
    for err in sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path)):
        path = tuple(str(p) for p in err.absolute_path)
        if any(path[: len(s)] == s for s in skipped):
            continue
        at = "/".join(path) or "(top level)"
        out.append(f"{at}: {err.message}")
    return out


def template_vars(template: str) -> list[str]:
    return _TEMPLATE_VAR.findall(template)


def expand_template(template: str, values: dict[str, str]) -> str:
    from urllib.parse import quote

    return _TEMPLATE_VAR.sub(lambda m: quote(str(values.get(m.group(1), "1")), safe=""), template)


# -- resolving against the server -------------------------------------------------------------------------------
def resolve(scenario: Scenario, info: ServerInfo) -> Scenario:
    """Check every operation against what the server lists; fill generated arguments."""
    for user in scenario.users:
        for op in user.ops:
            _resolve_op(op, info)
    return scenario


def _resolve_op(op: Op, info: ServerInfo) -> None:
    where = op.where
    if op.kind in ("tools/call", "stream"):
        tool = info.tools.get(op.tool or "")
        if tool is None:
            names = ", ".join(sorted(info.tools)) or "none"
            raise ScenarioError(f"{where}: the server does not list tool {op.tool!r} (it lists: {names})")
        schema = tool.get("inputSchema")
        if op.generate:
            op.arguments = generate_arguments(schema)
            op.note = op.note or "arguments generated from inputSchema"
        # a value taken from an earlier step is only known at run time: its place is not checked
        taken = [r.at.removeprefix("/arguments/") for r in op.refs if r.at.startswith("/arguments/")]
        errors = schema_errors(schema, op.arguments or {}, skip=taken)
        if errors:
            raise ScenarioError(f"{where}: arguments of {op.tool!r} fail its inputSchema: {'; '.join(errors)}")
    elif op.kind == "prompts/get":
        prompt = info.prompts.get(op.prompt or "")
        if prompt is None:
            names = ", ".join(sorted(info.prompts)) or "none"
            raise ScenarioError(f"{where}: the server does not list prompt {op.prompt!r} (it lists: {names})")
        declared = {a.get("name"): a for a in prompt.get("arguments") or [] if isinstance(a, dict)}
        given = op.arguments or {}
        missing = [n for n, a in declared.items() if a.get("required") and n not in given]
        if missing:
            raise ScenarioError(f"{where}: prompt {op.prompt!r} needs argument(s) {', '.join(map(str, missing))}")
        extra = [n for n in given if n not in declared]
        if extra:
            raise ScenarioError(f"{where}: prompt {op.prompt!r} has no argument(s) {', '.join(map(str, extra))}")
    elif op.kind == "resources/read":
        if any(r.at == "/uri" for r in op.refs):
            pass  # the uri is taken from an earlier step's result at run time
        elif op.uri is not None:
            if op.uri not in info.resources and not any(_matches(t.get("uriTemplate", ""), op.uri) for t in info.templates):
                raise ScenarioError(f"{where}: the server lists no resource {op.uri!r} (nor a template matching it)")
        else:
            if op.template not in {t.get("uriTemplate") for t in info.templates}:
                raise ScenarioError(f"{where}: the server lists no resource template {op.template!r}")
            missing = [v for v in template_vars(op.template or "") if v not in (op.vars or {})]
            if missing and op.vars is not None:
                raise ScenarioError(f"{where}: template {op.template!r} needs vars {', '.join(map(str, missing))}")
    elif op.kind == "completion/complete":
        if "completions" not in info.capabilities:
            raise ScenarioError(f"{where}: the server does not offer completions (no 'completions' capability)")
        if op.prompt is not None and op.prompt not in info.prompts:
            raise ScenarioError(f"{where}: the server does not list prompt {op.prompt!r}")
        if op.template is not None and op.template not in {t.get("uriTemplate") for t in info.templates}:
            raise ScenarioError(f"{where}: the server lists no resource template {op.template!r}")
    elif op.kind in LIST_OPS and op.kind != "ping":
        cap = op.kind.split("/")[0]
        if cap not in info.capabilities:
            raise ScenarioError(f"{where}: the server does not offer {cap} (no {cap!r} capability)")


def _matches(template: str, uri: str) -> bool:
    if not template:
        return False
    pieces = re.split(r"\{[^}]*\}", template)
    pattern = ".+".join(re.escape(p) for p in pieces)
    return re.fullmatch(pattern, uri) is not None


# -- discovery ----------------------------------------------------------------------------------------------------
def probe(client: Any, op: Op) -> str | None:
    """One call of ``op``; None when it worked, else why it stays out."""
    import time

    started = time.perf_counter()
    saved = client.timeout
    client.timeout = PROBE_TIMEOUT
    try:
        reply = client.call(op.method, op.params(), stream=op.stream)
    finally:
        client.timeout = saved
    took = time.perf_counter() - started
    if reply is None:
        return f"probe failed: {client.last_error}"
    exc = reply.exception()
    if exc is not None:
        return f"probe failed: {exc}"
    if took > PROBE_TIMEOUT:
        return f"probe took {took:.1f} s (> {PROBE_TIMEOUT:g} s)"
    return None


def discover(client: Any, info: ServerInfo, source: str = "--mcp-discover", skip: tuple[str, ...] = ()) -> Scenario:
    """A mix of everything the server lists that answers a probe call."""
    candidates: list[Op] = []
    for name, tool in sorted(info.tools.items()):
        candidates.append(
            Op(
                "tools/call",
                DISCOVER_WEIGHTS["tools/call"],
                tool=name,
                arguments=generate_arguments(tool.get("inputSchema")),
                where=f"tool {name}",
                note="arguments generated from inputSchema",
            )
        )
    for uri in info.resources[:MAX_DISCOVERED_RESOURCES]:
        candidates.append(Op("resources/read", DISCOVER_WEIGHTS["resources/read"], uri=uri, where=f"resource {uri}"))
    for t in info.templates[:MAX_DISCOVERED_RESOURCES]:
        tpl = t.get("uriTemplate")
        if isinstance(tpl, str):
            candidates.append(
                Op(
                    "resources/read",
                    DISCOVER_WEIGHTS["resources/read"],
                    template=tpl,
                    vars=dict.fromkeys(template_vars(tpl), "1"),
                    where=f"template {tpl}",
                    note="template variables set to '1'",
                )
            )
    for name, prompt in sorted(info.prompts.items()):
        declared = [a for a in prompt.get("arguments") or [] if isinstance(a, dict) and isinstance(a.get("name"), str)]
        args = {a["name"]: "1" for a in declared if a.get("required")}
        candidates.append(
            Op(
                "prompts/get",
                DISCOVER_WEIGHTS["prompts/get"],
                prompt=name,
                arguments=args or None,
                where=f"prompt {name}",
                note="required arguments set to '1'" if args else "",
            )
        )
        if "completions" in info.capabilities and declared:
            candidates.append(
                Op(
                    "completion/complete",
                    DISCOVER_WEIGHTS["completion/complete"],
                    prompt=name,
                    argument=declared[0]["name"],
                    value="",
                    where=f"completion of prompt {name}",
                )
            )
    for kind, cap in (("tools/list", "tools"), ("resources/list", "resources"), ("prompts/list", "prompts")):
        if cap in info.capabilities:
            candidates.append(Op(kind, DISCOVER_WEIGHTS["list"], where=kind))
    ops, excluded = [], []
    for op in candidates:
        label = op.stat_name() if op.kind != "resources/read" else f"resources/read {op.read_uri()}"
        if any(s and (s == op.tool or s == op.prompt or s == label) for s in skip):
            excluded.append({"op": label, "reason": "--mcp-discover-skip"})
            continue
        why = probe(client, op)
        if why is None:
            ops.append(op)
        else:
            excluded.append({"op": label, "reason": why})
    if not ops:
        raise ScenarioError(f"{source}: nothing the server lists answered a probe: {excluded}")
    return Scenario(source, [UserClass("discovered", 1, ops)], excluded)


# -- the default agent -------------------------------------------------------------------------------------
DEFAULT_THINK = "lognormal:2:8"
DEFAULT_STEPS = (2, 6)  # the default agent: tool calls per session, drawn uniformly


def _toml(value: Any) -> str:
    """A JSON value as a TOML inline value (a null as an empty string: TOML has none)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k if re.fullmatch(r'[A-Za-z0-9_-]+', k) else json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if value is None:
        return '""'
    return json.dumps(value)


def workload_lines(tool: str, arguments: dict[str, Any], schema: dict[str, Any] | None) -> list[str]:
    """The lines of a workload file that call ``tool``, with the arguments that were sent in
    place of the ones to write, and what the schema says of each (its description)."""
    props = (schema or {}).get("properties") or {}
    lines = ["[[ops]]", 'op = "tools/call"', f"tool = {json.dumps(tool)}", f"arguments = {_toml(arguments)}"]
    for name in arguments:
        about = props.get(name, {}).get("description") if isinstance(props.get(name), dict) else None
        if about:
            lines.append(f"#   {name}: {about}")
    return lines


def default_agent(client: Any, info: ServerInfo) -> Scenario:
    """Every tool the server lists, with arguments from its schema and its description's
    examples, each probed once; the ones that answer make the default agent's steps (sampled by
    weight, a few per session).

    Raises:
        ScenarioError: the server lists no tool, or none answered its probe (the message shows
            the workload file lines that would give them arguments).
    """
    if not info.tools:
        raise ScenarioError("the server lists no tools: give the agents their steps in a workload file (--mcp-scenario FILE)")
    ops, excluded = [], []
    for name, tool in sorted(info.tools.items()):
        schema = tool.get("inputSchema")
        op = Op(
            "tools/call",
            1,
            tool=name,
            arguments=generate_arguments(schema),
            where=f"tool {name}",
            note="arguments from the inputSchema (examples, default, enum, format, the description's examples)",
        )
        why = probe(client, op)
        if why is None:
            ops.append(op)
        else:
            excluded.append({"op": op.stat_name(), "reason": why, "workload": "\n".join(workload_lines(name, op.arguments or {}, schema))})
    if not ops:
        shown = "\n\n".join(f"{e['op']}: {e['reason']}; in a workload file (--mcp-scenario FILE):\n{e['workload']}" for e in excluded)
        raise ScenarioError(f"no tool the server lists answered its probe call:\n\n{shown}")
    plan = AgentPlan(think=DEFAULT_THINK, order="weighted", steps=DEFAULT_STEPS)
    return Scenario("the default agent (the tools the server lists)", [UserClass("agent", 1, ops, plan)], excluded)


# -- the native engine --------------------------------------------------------------------------------------------
def native_mix(user: UserClass) -> list[dict[str, Any]]:
    """The engine's ``mix`` for one user class (every operation kind as method + params)."""
    out = []
    for op in user.ops:
        if not op.weight:
            continue
        item: dict[str, Any] = {"method": op.method, "weight": op.weight}
        params = op.params()
        if params is not None:
            item["params"] = params
        if op.stream:
            item["stream"] = True
        out.append(item)
    return out


def _without_refs(value: Any) -> Any:
    """``value`` with each value taken from an earlier step replaced by null (the engine puts the
    step's value in its place)."""
    if isinstance(value, dict):
        if "from" in value and any(k in value for k in REF_READS):
            return None
        return {k: _without_refs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_refs(v) for v in value]
    return value


def agent_steps(user: UserClass) -> list[dict[str, Any]]:
    """The engine's ``mix`` for an agent class: its steps in order (every operation kind as
    method + params), each with its name and the values it takes from earlier steps
    (``uses``: at, the step's index, pointer or regex, the expression)."""
    index = {op.name: i for i, op in enumerate(user.ops) if op.name is not None}
    out = []
    for i, op in enumerate(user.ops):
        item: dict[str, Any] = {"method": op.method, "weight": op.weight, "label": op.name or f"step {i + 1} ({op.stat_name()})"}
        params = _without_refs(op.params())
        if params is not None:
            item["params"] = params
        if op.stream:
            item["stream"] = True
        if op.refs:
            item["uses"] = [(r.at, index[r.source], r.read, r.expression) for r in op.refs]
        out.append(item)
    return out


def pick_class(users: list[UserClass], index: int) -> UserClass:
    """Smooth weighted round robin: the ``index``-th user of a process gets this class (so 3:1
    classes give users 0..3 as a, a, b, a - the shares hold for any user count)."""
    live = [u for u in users if u.weight]
    total = sum(u.weight for u in live)
    current = [0] * len(live)
    chosen = 0
    for _ in range(index + 1):
        for i, u in enumerate(live):
            current[i] += u.weight
        chosen = max(range(len(live)), key=lambda i: current[i])
        current[chosen] -= total
    return live[chosen]
