"""The apps ``benchmarks.server_deployed`` serves (``mcpfast serve --app benchmarks.deployed_apps:NAME``).

* ``plain``: ``echo`` is a plain ``def``;
* ``async_echo``: ``echo`` is an ``async def`` that does not wait (as most tools that call
  nothing slow are written).

Both have ``echo_context`` too, the same tool with a ``Context`` parameter: a tool that takes the
context is always served by the session machine (the full path), never by the short path, so a
run of it shows what the full path counts.
"""

from __future__ import annotations

from mcpfast import Context, Server

__all__ = ["async_echo", "plain"]

plain = Server("deployed-plain")
async_echo = Server("deployed-async")


@plain.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@async_echo.tool(name="echo")
async def echo_async(text: str) -> str:
    """Return the text unchanged."""
    return text


@plain.tool()
@async_echo.tool(name="echo_context")
def echo_context(text: str, ctx: Context) -> str:
    """Return the text unchanged (a tool that takes the context: served by the full path)."""
    return text
