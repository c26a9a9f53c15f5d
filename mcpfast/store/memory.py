"""``MemoryStore``: sessions kept by this process only (the default, today's behaviour)."""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson

from mcpfast.store.base import Message, SessionRecord

__all__ = ["MemoryStore"]


class MemoryStore:
    """The ``SessionStore`` of one process. The transport does not consult it (``shared`` is
    false: its own session table is the store); it exists so that code written against the
    interface runs on one process, and so the interface has a reference implementation."""

    shared = False

    def __init__(self) -> None:
        self.ops = 0
        self.errors = 0
        self._records: dict[str, tuple[SessionRecord, float]] = {}
        self._subscribers: list[Callable[[Message], None]] = []
        self._legacy: dict[str, tuple[str | None, float]] = {}
        self.holder = "memory"
        """This process's name for ``send_to`` (alone: every session is held here)."""

    def _live(self) -> dict[str, tuple[SessionRecord, float]]:
        now = time.monotonic()
        for sid in [s for s, (_, deadline) in self._records.items() if deadline <= now]:
            del self._records[sid]
        return self._records

    async def create(self, record: SessionRecord, max_sessions: int, ttl: float) -> bool:
        self.ops += 1
        records = self._live()
        if len(records) >= max_sessions:
            return False
        records[record.id] = (record, time.monotonic() + ttl)
        return True

    async def load(self, session_id: str) -> SessionRecord | None:
        self.ops += 1
        found = self._live().get(session_id)
        return found[0] if found is not None else None

    async def delete(self, session_id: str) -> bool:
        self.ops += 1
        gone = self._records.pop(session_id, None) is not None
        await self.publish("del", session_id)
        return gone

    async def set_level(self, session_id: str, level: str) -> None:
        self.ops += 1
        found = self._records.get(session_id)
        if found is not None:
            rec, deadline = found
            self._records[session_id] = (
                SessionRecord(rec.id, rec.version, rec.capabilities, rec.client_info, rec.principal, rec.created, level),
                deadline,
            )
        await self.publish("lvl", session_id, level)

    async def set_subscriptions(self, session_id: str, uris: list[str]) -> None:
        self.ops += 1
        found = self._records.get(session_id)
        if found is not None:
            self._records[session_id] = (found[0]._replace(subscriptions=tuple(uris)), found[1])
        await self.publish("subs", session_id, orjson.dumps(uris).decode())

    async def refresh(self, session_ids: list[str], ttl: float) -> list[str]:
        self.ops += 1
        records = self._live()
        deadline = time.monotonic() + ttl
        gone = []
        for sid in session_ids:
            found = records.get(sid)
            if found is None:
                gone.append(sid)
            else:
                records[sid] = (found[0], deadline)
        return gone

    async def publish(self, kind: str, session_id: str, payload: str = "") -> None:
        for callback in list(self._subscribers):
            callback((kind, session_id, payload))

    def subscribe(self, callback: Callable[[Message], None], on_reconnect: Callable[[], None]) -> None:
        self._subscribers.append(callback)

    async def keep_legacy(self, sessions: list[tuple[str, str | None]], ttl: float) -> None:
        self.ops += 1
        deadline = time.monotonic() + ttl
        for sid, principal in sessions:
            self._legacy[sid] = (principal, deadline)

    async def legacy_holder(self, session_id: str) -> tuple[str | None, str] | None:
        self.ops += 1
        found = self._legacy.get(session_id)
        return (found[0], self.holder) if found is not None and found[1] > time.monotonic() else None

    async def listening(self) -> None:
        return None

    async def send_to(self, holder: str, kind: str, session_id: str, payload: str) -> bool:
        if holder != self.holder or not self._subscribers:
            return False
        await self.publish(kind, session_id, payload)
        return True

    async def end_legacy(self, session_id: str) -> None:
        self.ops += 1
        self._legacy.pop(session_id, None)

    async def process_number(self) -> int:
        return 0

    def event_store(self, max_events: int, ttl: float) -> None:
        return None  # the transport's own event store

    def shared_secret(self) -> bytes | None:
        return None

    async def aclose(self) -> None:
        self._subscribers.clear()
