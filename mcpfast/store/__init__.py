"""Where handshake-era HTTP sessions live: this process (``memory``) or a shared Redis.

``open_store("memory")`` is today's behaviour: sessions exist in the process that made them.
``open_store("redis://HOST:PORT/DB")`` lets several ``mcpfast serve --transport http``
processes act as one server: a session made by one is served by every other (see
``mcpfast.store.redis``). The transport talks to either through ``SessionStore``.
"""

from __future__ import annotations

from mcpfast.store.base import (
    SessionRecord,
    SessionStore,
    StoreUnavailable,
)
from mcpfast.store.memory import MemoryStore

__all__ = ["MemoryStore", "SessionRecord", "SessionStore", "StoreUnavailable", "open_store"]


def open_store(url: str, **options: object) -> SessionStore:
    """The store named by ``url``: ``memory`` or ``redis://HOST:PORT/DB`` (``rediss://`` too)."""
    if url == "memory":
        return MemoryStore()
    if url.startswith(("redis://", "rediss://", "unix://")):
        from mcpfast.store.redis import RedisStore

        return RedisStore(url, **options)  # type: ignore[arg-type]
    raise ValueError(f"unknown store {url!r}: use 'memory' or 'redis://HOST:PORT/DB'")
