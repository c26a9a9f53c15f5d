"""The fixture the official conformance suite's server scenarios call (docs: CONFORMANCE.md).

Names, arguments and results follow the "Fixture contract" exactly; change both together.
"""

from __future__ import annotations

import asyncio
import base64
import struct
import zlib
from typing import Any

from mcpfast.server.app import Server
from mcpfast.server.content import ToolResult, audio, embedded_resource, image, text
from mcpfast.server.context import Context

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
    return b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data


PNG_1X1 = _png_1x1()
WAV_SILENCE = _wav_silence()

app = Server("mcpfast-conformance", title="mcpfast conformance fixture")


@app.tool()
def test_simple_text() -> str:
    """Returns a simple text block."""
    return "This is a simple text response for testing."


@app.tool()
def test_image_content() -> dict[str, Any]:
    """Returns a 1x1 PNG image block."""
    return image(PNG_1X1, "image/png")


@app.tool()
def test_audio_content() -> dict[str, Any]:
    """Returns a short WAV audio block."""
    return audio(WAV_SILENCE, "audio/wav")


@app.tool()
def test_embedded_resource() -> dict[str, Any]:
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
def json_schema_2020_12_tool(name: str | None = None, address: dict[str, Any] | None = None) -> str:
    """Declares a JSON Schema 2020-12 inputSchema ($schema, $defs, $ref) to be listed verbatim."""
    return f"name={name}, address={address}"


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
def test_prompt_with_embedded_resource(resourceUri: str) -> list[dict[str, Any]]:  # noqa: N803 - the suite's name
    """A prompt that embeds a resource."""
    return [
        {"role": "user", "content": embedded_resource(resourceUri, text="Embedded resource content for testing.", mime_type="text/plain")},
        {"role": "user", "content": text("Please process the embedded resource above.")},
    ]


@app.prompt()
def test_prompt_with_image() -> list[dict[str, Any]]:
    """A prompt that carries an image."""
    return [
        {"role": "user", "content": image(PNG_1X1, "image/png")},
        {"role": "user", "content": text("Please analyze the image above.")},
    ]


@app.completion()
def complete(ref: dict[str, Any], argument: dict[str, Any], context: dict[str, Any] | None) -> list[str]:
    if ref.get("name") == "test_prompt_with_arguments":
        candidates = {"arg1": ["paris", "park", "party", "test-value"], "arg2": ["value1", "value2"]}.get(argument["name"], [])
        return [c for c in candidates if c.startswith(argument["value"])] or candidates
    return []
