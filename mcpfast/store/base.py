"""The session-store interface: what a transport asks of the place sessions are kept.

A handshake-era session is a ``SessionRecord`` once ``initialize`` has been answered: what was
negotiated, who it is bound to, when it began. Records do not change afterwards except the log
level (``logging/setLevel``), the resource subscriptions and the last-seen time, which stores batch (``refresh``). A store
also carries small messages between the processes that share it (``publish``/``subscribe``):
a session ended, a client's reply for a request another process sent, a notification for a
GET stream another process holds, a 2024-11-05 POST for the process holding its SSE stream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, Protocol

import orjson

__all__ = ["Message", "SessionRecord", "SessionStore", "SharedEvents", "StoreUnavailable"]


class StoreUnavailable(Exception):
    """The store cannot be reached (the transport answers 503)."""


class SessionRecord(NamedTuple):
    """One session as every process sees it (a tuple: immutable, and made once per handshake
    at the cost of one tuple)."""

    id: str
    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    principal: str | None
    created: float
    log_level: str | None = None
    subscriptions: tuple[str, ...] = ()
    """The resource URIs it subscribed to (``resources/subscribe``), on any process."""

    def encode(self) -> bytes:
        return orjson.dumps(
            {"v": self.version, "c": self.capabilities, "i": self.client_info, "p": self.principal, "t": self.created, "l": self.log_level}
        )

    @classmethod
    def decode(cls, session_id: str, data: bytes) -> SessionRecord:
        d = orjson.loads(data)
        subs = d.get("s") or ()  # Lua's cjson writes an empty list as {}
        return cls(session_id, d["v"], d["c"], d["i"], d["p"], d["t"], d.get("l"), tuple(subs))


class SharedEvents(Protocol):
    """SSE events kept where every process of a store reads them (``RedisEvents``), so a stream
    resumes on any process. ``append``, ``replay`` and ``forget`` are what an HTTP transport's
    event store does; the rest is what reading another process's events needs."""

    def append(self, session: str, stream: str, data: bytes) -> str:
        """Keep one event of ``stream``; returns its id (the write may land later)."""
        ...

    def replay(self, session: str, last_event_id: str) -> tuple[str, list[tuple[str, bytes]]] | None:
        """The stream of ``last_event_id`` and its events after it, as ``prefetch`` fetched them."""
        ...

    def forget(self, session: str) -> None:
        """This process stops serving the session (the events stay for the others)."""
        ...

    async def prefetch(self, session: str, last_event_id: str) -> None:
        """Fetch what ``replay(session, last_event_id)`` will return (raises ``StoreUnavailable``)."""
        ...

    async def after(self, session: str, stream: str, last_event_id: str) -> list[tuple[str, bytes]] | None:
        """The events kept after ``last_event_id`` on ``stream`` (``None``: an id that cannot be placed)."""
        ...

    def forwarded(self, data: bytes, eid: str) -> None:
        """``data`` came from another process, already kept as ``eid``: ``append`` must not keep it again."""
        ...

    def landed(self) -> Awaitable[None] | None:
        """``None`` when every event appended so far is kept; else what to await until they are."""
        ...


Message = tuple[str, str, str]
"""``(kind, session id, payload)`` sent between the processes of one store (``del`` may name
several sessions, their ids separated by spaces)."""


class SessionStore(Protocol):
    """Where sessions are kept (``MemoryStore``, ``RedisStore``).

    Attributes:
        shared: other processes see these sessions (``False``: this process only, and the
            transport keeps to its in-process table without asking the store).
        ops: round trips made to the store so far (one pipeline or script counts once).
        errors: round trips that failed.
    """

    shared: bool

    @property
    def ops(self) -> int: ...

    @property
    def errors(self) -> int: ...

    def create(self, record: SessionRecord, max_sessions: int, ttl: float) -> Awaitable[bool]:
        """Keep ``record`` for ``ttl`` idle seconds; ``False`` when ``max_sessions`` are open
        (a future is best: the transport then answers from its callback, with no task)."""
        ...

    async def load(self, session_id: str) -> SessionRecord | None:
        """The record, or ``None`` (never made, ended, or expired)."""
        ...

    def delete(self, session_id: str) -> Awaitable[bool]:
        """End the session everywhere (every process is told); ``False`` if it was not kept (a
        future is best, as for ``create``)."""
        ...

    async def set_level(self, session_id: str, level: str) -> None:
        """Record a ``logging/setLevel`` (every process is told)."""
        ...

    async def set_subscriptions(self, session_id: str, uris: list[str]) -> None:
        """Record the session's resource subscriptions (every process is told)."""
        ...

    async def refresh(self, session_ids: list[str], ttl: float) -> list[str]:
        """Seen again: push each idle expiry ``ttl`` further (one batch); returns the ids gone."""
        ...

    async def publish(self, kind: str, session_id: str, payload: str = "") -> None:
        """Send a message to every process of this store (this one included)."""
        ...

    async def keep_legacy(self, sessions: list[tuple[str, str | None]], ttl: float) -> None:
        """2024-11-05 HTTP+SSE sessions ``(id, principal)`` this process holds, for ``ttl`` more
        seconds: their answers go out on the ``/sse`` stream open here, so the other processes
        only need to know who holds them (``legacy_holder``) to pass their POSTs on
        (``send_to``)."""
        ...

    async def listening(self) -> None:
        """Returns once this process can be sent to (``send_to``); ``StoreUnavailable`` if it
        cannot be soon."""
        ...

    async def legacy_holder(self, session_id: str) -> tuple[str | None, str] | None:
        """``(principal, holder)`` of a 2024-11-05 session some process holds, or ``None``."""
        ...

    async def send_to(self, holder: str, kind: str, session_id: str, payload: str) -> bool:
        """Send a message to the one process ``holder`` names; ``False`` when no process of
        that name listens any more (it died: nothing was delivered)."""
        ...

    async def end_legacy(self, session_id: str) -> None:
        """A 2024-11-05 session's stream ended (its session with it)."""
        ...

    def subscribe(self, callback: Callable[[Message], None], on_reconnect: Callable[[], None]) -> None:
        """Call ``callback`` for every message; ``on_reconnect`` after a lost subscription came back."""
        ...

    async def process_number(self) -> int:
        """A number no other process of this store was given (``MemoryStore``: 0, alone)."""
        ...

    def event_store(self, max_events: int, ttl: float) -> SharedEvents | None:
        """Events every process of this store reads (``None``: keep the transport's own)."""
        ...

    def shared_secret(self) -> bytes | None:
        """A key every process of this store shares (sealing 2026 ``requestState``); ``None``: none."""
        ...

    async def aclose(self) -> None: ...
