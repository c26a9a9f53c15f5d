"""The error an app that cannot be served as it is raises at load."""

from __future__ import annotations

__all__ = ["UnsupportedApp"]


class UnsupportedApp(ValueError):
    """The object is not a servable app, its framework version is not supported, or it uses a
    feature the adapter does not carry; the message says which and what to do."""
