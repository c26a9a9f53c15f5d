"""The fixture the official conformance suite's server scenarios call (docs: CONFORMANCE.md).

Names, arguments and results follow the "Fixture contract" exactly; change both together.
"""

from __future__ import annotations

import asyncio
import struct
import zlib

from mcpfast.protocol.errors import INTERNAL_ERROR, McpError
from mcpfast.server.app import Server
from mcpfast.server.content import ToolResult, audio, embedded_resource, image, text
from mcpfast.server.context import Context
from mcpfast.server.types import JSONObject, JSONValue

__all__ = ["PNG_1X1", "WAV_SILENCE", "app"]


def _png_1x1() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)  # 1x1, 8-bit RGBA
    pixels = zlib.compress(b"\x00\xff\x00\x00\xff")  # filter byte + one red pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_silence(samples: int = 8, rate: int = 8000) -> bytes:
    data = b"\x00\x00" * samples  # 16-bit mono silence
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(data))
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )


PNG_1X1 = _png_1x1()
WAV_SILENCE = _wav_silence()

app = Server("mcpfast-conformance", title="mcpfast conformance fixture")


@app.tool()
def test_simple_text() -> str:
    """Returns a simple text block."""
    return "This is a simple text response for testing."


@app.tool()
def test_image_content() -> JSONObject:
    """Returns a 1x1 PNG image block."""
    return image(PNG_1X1, "image/png")


@app.tool()
def test_audio_content() -> JSONObject:
    """Returns a short WAV audio block."""
    return audio(WAV_SILENCE, "audio/wav")


@app.tool()
def test_embedded_resource() -> JSONObject:
    """Returns an embedded text resource."""
    return embedded_resource("test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain")


@app.tool()
def test_multiple_content_types() -> ToolResult:
    """Returns text, image and resource blocks."""
    return ToolResult(
        [
            text("Multiple content types test:"),
            image(PNG_1X1, "image/png"),
            embedded_resource("test://mixed-content-resource", text='{"test": "data", "value": 123}', mime_type="application/json"),
        ]
    )


@app.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log notifications while it runs."""
    for i, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if i:
            await asyncio.sleep(0.05)
        ctx.info(message)
    return "Tool with logging executed successfully"


@app.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    for i, value in enumerate((0, 50, 100)):
        if i:
            await asyncio.sleep(0.05)
        ctx.report_progress(value, 100, f"Completed step {i + 1} of 3")
    return "Progress test completed"


@app.tool()
def test_error_handling() -> str:
    """Always fails, as a tool-execution error."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@app.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's LLM to answer the prompt."""
    result = await ctx.sample(prompt, max_tokens=100)
    content = result.get("content") if isinstance(result, dict) else None
    if isinstance(content, list):
        content = content[0] if content else None
    answer = content.get("text") if isinstance(content, dict) else None
    return f"LLM response: {answer if answer is not None else content}"


@app.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a username and an email."""
    result = await ctx.elicit(
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    return f"User response: action={result.get('action')}, content={result.get('content')}"


@app.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits a form whose fields all carry defaults (SEP-1034)."""
    result = await ctx.elicit(
        "Please review and update the form fields with defaults",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": True},
            },
        },
    )
    return f"Elicitation completed: action={result.get('action')}, content={result.get('content')}"


@app.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits a form with every enum variant (SEP-1330)."""
    result = await ctx.elicit(
        "Please select options from the enum fields",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {
                    "type": "string",
                    "description": "Select one option with titles",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Select one option (legacy)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Select multiple options",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Select multiple options with titles",
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
        },
    )
    return f"Elicitation completed: action={result.get('action')}, content={result.get('content')}"


@app.tool(
    input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": False,
    }
)
def json_schema_2020_12_tool(name: str | None = None, address: JSONObject | None = None) -> str:
    """Declares a JSON Schema 2020-12 inputSchema ($schema, $defs, $ref) to be listed verbatim."""
    return f"name={name}, address={address}"


# ------------------------------------------------- 2026-07-28 (pre-release suite) fixtures

_NAME_SCHEMA: JSONObject = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _content_of(answer: JSONValue, field: str) -> JSONValue:
    """``content[field]`` of an ``ElicitResult`` (None when declined or absent)."""
    content = answer.get("content") if isinstance(answer, dict) else None
    return content.get(field) if isinstance(content, dict) else None


def _sampled_text(answer: JSONValue) -> JSONValue:
    """The text of a ``CreateMessageResult`` (its content is a block or a list of blocks)."""
    content = answer.get("content") if isinstance(answer, dict) else None
    if isinstance(content, list):
        content = content[0] if content else None
    return content.get("text") if isinstance(content, dict) else content


@app.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks for the user's name (one elicitation, key user_name), then greets them."""
    answer = await ctx.elicit("What is your name?", _NAME_SCHEMA, key="user_name")
    return f"Hello, {_content_of(answer, 'name')}!"


@app.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's LLM one question (key capital_question) and returns its answer."""
    answer = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"LLM response: {_sampled_text(answer)}"


@app.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks for the client's roots (key client_roots) and lists them."""
    roots = await ctx.list_roots(key="client_roots")
    return "Client roots: " + ", ".join(str(r.get("uri")) for r in roots if isinstance(r, dict))


@app.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation (key confirm) with sealed requestState; "state-ok" once the state was verified."""
    answer = await ctx.elicit(
        "Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}, key="confirm"
    )
    verdict = "state-ok" if ctx.resumed else "state-missing"
    return f"{verdict}: confirmed={_content_of(answer, 'ok')}"


@app.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks for an elicitation, a sampling and the roots in one round."""
    answers = await ctx.ask({
        "user_name": ("elicitation/create", {"message": "What is your name?", "requestedSchema": _NAME_SCHEMA}),
        "greeting": ("sampling/createMessage", {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}], "maxTokens": 50,
        }),
        "client_roots": ("roots/list", {}),
    })  # fmt: skip
    roots = answers["client_roots"].get("roots") if isinstance(answers["client_roots"], dict) else None
    return (
        f"name={_content_of(answers['user_name'], 'name')}, greeting={_sampled_text(answers['greeting'])}, "
        f"roots={len(roots) if isinstance(roots, list) else 0}"
    )


@app.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two rounds of questions (step1 then step2); the first answer travels in requestState."""
    first = await ctx.elicit("Step 1: What is your name?", _NAME_SCHEMA, key="step1")
    second = await ctx.elicit(
        "Step 2: What is your favorite color?",
        {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        key="step2",
    )
    return f"name={_content_of(first, 'name')}, color={_content_of(second, 'color')}"


@app.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """One question with HMAC-sealed requestState: a retry with an altered state gets -32602."""
    answer = await ctx.elicit("Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="confirm")
    return f"confirmed={_content_of(answer, 'ok')}"


@app.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what the client declared (sampling and/or elicitation, in the request's _meta)."""
    declared = ctx.request.client_capabilities
    wanted: dict[str, tuple[str, JSONObject | None]] = {}
    if "sampling" in declared:
        wanted["sample"] = ("sampling/createMessage", {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Say hello"}}], "maxTokens": 20,
        })  # fmt: skip
    if "elicitation" in declared:
        wanted["ask_user"] = ("elicitation/create", {"message": "What is your name?", "requestedSchema": _NAME_SCHEMA})
    if not wanted:
        return "the client declared neither sampling nor elicitation: nothing to ask"
    answers = await ctx.ask(wanted)
    return "answered: " + ", ".join(sorted(answers))


@app.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[JSONObject]:
    """A prompt that first asks the user for context (key user_context)."""
    answer = await ctx.elicit(
        "What context should the prompt use?",
        {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
        key="user_context",
    )
    return [{"role": "user", "content": text(f"Answer with this context in mind: {_content_of(answer, 'context')}")}]


@app.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs sampling: a client that did not declare it gets -32021 (MissingRequiredClientCapability)."""
    answer = await ctx.sample("Say hello", max_tokens=20)
    return f"LLM response: {_sampled_text(answer)}"


@app.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Reports progress, then asks the user (2026: an InputRequiredResult, never a request on the stream)."""
    ctx.report_progress(0, 1, "asking the user")
    answer = await ctx.elicit("What is your name?", _NAME_SCHEMA, key="user_name")
    return f"Hello, {_content_of(answer, 'name')}!"


@app.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs at info and debug; the messages go out only when the request set a log level."""
    ctx.info("test_logging_tool started")
    ctx.log("debug", {"step": "working"})
    return "logging done"


@app.tool()
def test_trigger_tool_change() -> str:
    """Adds (or removes) the tool test_dynamic_tool and notifies list-changed listeners."""
    return _toggle("tools", "test_dynamic_tool")


@app.tool()
def test_trigger_prompt_change() -> str:
    """Adds (or removes) the prompt test_dynamic_prompt and notifies list-changed listeners."""
    return _toggle("prompts", "test_dynamic_prompt")


def _toggle(kind: str, name: str) -> str:
    """Take ``name`` away when it is there, else register it; then tell the listeners."""
    tools = kind == "tools"
    if (app.remove_tool if tools else app.remove_prompt)(name):
        changed = "removed"
    else:
        register = app.tool if tools else app.prompt
        register(name=name, description=f"Appears and disappears with test_trigger_{kind[:-1]}_change")(_dynamic)
        changed = "added"
    app.notify_list_changed(kind)
    return f"{name} {changed}"


def _dynamic() -> str:
    return "a dynamic entry"


@app.tool(
    input_schema={
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region", "description": "Sent again as the Mcp-Param-Region header"},
            "query": {"type": "string"},
        },
        "required": ["region"],
    }
)
def test_param_headers(region: str, query: str | None = None) -> str:
    """A tool whose region argument is mirrored in the Mcp-Param-Region header (SEP-2243)."""
    return f"region={region}, query={query}"


@app.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@app.resource("test://static-binary", name="static-binary", description="A static binary resource", mime_type="image/png")
def static_binary() -> bytes:
    return PNG_1X1


@app.resource("test://template/{id}/data", name="template-data", description="Data for any id", mime_type="application/json")
def template_data(id: str) -> str:
    return f'{{"id": "{id}", "templateTest": true, "data": "Data for ID: {id}"}}'


@app.resource("test://watched-resource", name="watched-resource", description="A resource to subscribe to", mime_type="text/plain")
def watched_resource() -> str:
    return "Watched resource content"


@app.prompt()
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@app.prompt(arguments={"arg1": "First test argument", "arg2": "Second test argument"})
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@app.prompt(arguments={"resourceUri": "URI of the resource to embed"})
def test_prompt_with_embedded_resource(resourceUri: str) -> list[JSONObject]:  # the suite's name
    """A prompt that embeds a resource."""
    return [
        {"role": "user", "content": embedded_resource(resourceUri, text="Embedded resource content for testing.", mime_type="text/plain")},
        {"role": "user", "content": text("Please process the embedded resource above.")},
    ]


@app.prompt()
def test_prompt_with_image() -> list[JSONObject]:
    """A prompt that carries an image."""
    return [
        {"role": "user", "content": image(PNG_1X1, "image/png")},
        {"role": "user", "content": text("Please analyze the image above.")},
    ]


@app.completion()
def complete(ref: JSONObject, argument: JSONObject, context: JSONObject | None) -> list[str]:
    if ref.get("name") == "test_prompt_with_arguments":
        candidates = {"arg1": ["paris", "park", "party", "test-value"], "arg2": ["value1", "value2"]}.get(argument["name"], [])
        return [c for c in candidates if c.startswith(argument["value"])] or candidates
    return []


# ------------------------------------------------ the tasks extension (SEP-2663, tasks-* scenarios)

_CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


@app.tool()
def greet(name: str) -> str:
    """Sync only (never a task): says hello."""
    return f"Hello, {name}!"


@app.tool(task=True)
async def slow_compute(seconds: float, label: str | None = None) -> str:
    """A task: sleeps ``seconds`` then answers (tasks/cancel stops the sleep: status cancelled)."""
    await asyncio.sleep(seconds)
    return f"computed {label or 'result'} after {seconds} s"


@app.tool(task="required")
async def failing_job() -> str:
    """A task only (-32021 without the extension) whose tool fails after about a second (completed, isError)."""
    await asyncio.sleep(1.0)
    raise RuntimeError("failing_job failed, as it always does")


@app.tool(task=True)
async def protocol_error_job() -> str:
    """A task that ends in a protocol error (status failed with an inlined JSON-RPC error)."""
    await asyncio.sleep(0.1)
    raise McpError(INTERNAL_ERROR, "protocol_error_job: internal failure")


@app.tool(task=True)
async def confirm_delete(filename: str, ctx: Context) -> str:
    """A task that asks one confirmation (input_required until tasks/update answers it)."""
    answer = await ctx.elicit(f"Delete {filename}?", _CONFIRM_SCHEMA, key="confirm")
    return f"deleted {filename}" if _content_of(answer, "confirm") else f"kept {filename}"


@app.tool(task=True)
async def multi_input(ctx: Context) -> str:
    """A task that asks two questions at once (both pending until each is answered)."""
    answers = await ctx.ask({
        "first": ("elicitation/create", {"message": "First name?", "requestedSchema": _NAME_SCHEMA}),
        "second": ("elicitation/create", {"message": "Confirm?", "requestedSchema": _CONFIRM_SCHEMA}),
    })  # fmt: skip
    return "answered: " + ", ".join(sorted(answers))


@app.tool(task="required", defer_task=True)
async def test_tool_with_task(ctx: Context) -> str:
    """Asks user_name as a plain MRTR round, then becomes a task whose result greets that name."""
    answer = await ctx.elicit("What is your name?", _NAME_SCHEMA, key="user_name")
    await ctx.start_task()
    await asyncio.sleep(0.2)
    return f"Hello, {_content_of(answer, 'name')}! (from a task)"
