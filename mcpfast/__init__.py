"""mcpfast: measure and serve the Model Context Protocol, fast and truthfully."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcpfast._version import __version__

if TYPE_CHECKING:
    from mcpfast.server import Context, McpError, Server

__all__ = ["Context", "McpError", "Server", "__version__"]

_LAZY = {"Server": "mcpfast.server", "Context": "mcpfast.server", "McpError": "mcpfast.server"}


def __getattr__(name: str) -> Any:
    # Lazy so that `import mcpfast` (e.g. by the Locust swarm) does not load the server stack.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcpfast' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
