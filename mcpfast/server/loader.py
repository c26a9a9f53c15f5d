"""Finding the application to serve: ``module:attribute`` to a ``Server`` (used by the CLI and the runners)."""

from __future__ import annotations

import importlib

__all__ = ["load_app"]


def load_app(spec: str) -> object:
    """Import ``module:attribute`` (or ``module``, meaning its ``app``) and return it: a Server, or an
    app of a framework ``mcpfast.adapters.servable`` adapts.

    Raises:
        SystemExit: the module or attribute cannot be found.
    """
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemExit(f"mcpfast: cannot import {module_name!r}: {exc}") from exc
    obj: object = module
    for part in (attr or "app").split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SystemExit(f"mcpfast: {module_name!r} has no attribute {attr or 'app'!r}") from None
    return obj
