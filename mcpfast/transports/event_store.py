"""Event stores for resumable SSE streams (Streamable HTTP, 2025-03-26 … 2025-11-25).

Every event sent on a resumable stream is recorded under an id that names its stream
(``<stream>-<seq>``), so a client that lost the connection can ``GET`` with ``Last-Event-ID``
and receive what it missed on *that* stream only. The transport talks to the store through
the ``EventStore`` protocol; ``MemoryEventStore`` keeps a bounded number of events in memory.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable
from typing import Protocol, runtime_checkable

__all__ = ["EventStore", "MemoryEventStore", "WritesBehind"]


@runtime_checkable
class EventStore(Protocol):
    """Where SSE events are kept for replay."""

    def append(self, session: str, stream: str, data: bytes) -> str:
        """Record one event of ``stream`` in ``session``; returns its event id."""
        ...

    def replay(self, session: str, last_event_id: str) -> tuple[str, list[tuple[str, bytes]]] | None:
        """The stream an event id belongs to and the events recorded after it.

        Returns ``None`` when the id is unknown (malformed, foreign, or evicted).
        """
        ...

    def forget(self, session: str) -> None:
        """Drop everything recorded for a session (it ended)."""
        ...


@runtime_checkable
class WritesBehind(Protocol):
    """An event store whose ``append`` names the event at once and keeps it later (a network
    store). The transport sends no event to its client before the event is kept: a process that
    dies after sending must not leave the client an id the other processes cannot resume from."""

    def landed(self) -> Awaitable[None] | None:
        """``None`` when every event appended so far is kept; else what to await until they are
        (kept, or given up on when the store cannot be reached)."""
        ...


class _StreamLog:
    __slots__ = ("events", "next_seq")

    def __init__(self) -> None:
        self.next_seq = 0
        self.events: deque[tuple[int, bytes]] = deque()


class MemoryEventStore:
    """An in-memory ``EventStore`` holding at most ``max_events`` events in total.

    The oldest events (of any stream) are evicted first; a ``Last-Event-ID`` older than what
    is kept cannot be resumed (``replay`` returns ``None``), nor can any id of a stream whose
    events were all evicted (the stream is forgotten).
    """

    def __init__(self, max_events: int = 10_000) -> None:
        if max_events < 1:
            raise ValueError("max_events must be at least 1")
        self.max_events = max_events
        self._logs: dict[tuple[str, str], _StreamLog] = {}
        self._by_session: dict[str, set[str]] = {}
        self._order: deque[tuple[str, str]] = deque()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def streams(self) -> int:
        """Streams recorded (each with events kept, or still being written)."""
        return len(self._logs)

    def append(self, session: str, stream: str, data: bytes) -> str:
        key = (session, stream)
        log = self._logs.get(key)
        if log is None:
            log = self._logs[key] = _StreamLog()
            self._by_session.setdefault(session, set()).add(stream)
        seq = log.next_seq
        log.next_seq = seq + 1
        log.events.append((seq, data))
        self._order.append(key)
        self._count += 1
        while self._count > self.max_events:
            oldest = self._order.popleft()
            old = self._logs.get(oldest)
            if old is not None and old.events:
                old.events.popleft()
                self._count -= 1
                if not old.events and oldest != key:
                    self._drop(oldest)
        return f"{stream}-{seq}"

    def _drop(self, key: tuple[str, str]) -> None:
        """Forget a stream whose every event was evicted: a session that opens stream after
        stream (one per SSE reply) would otherwise keep a record of each until it ends."""
        del self._logs[key]
        session, stream = key
        streams = self._by_session.get(session)
        if streams is not None:
            streams.discard(stream)
            if not streams:
                del self._by_session[session]

    def replay(self, session: str, last_event_id: str) -> tuple[str, list[tuple[str, bytes]]] | None:
        stream, sep, seq_text = last_event_id.rpartition("-")
        if not sep or not seq_text.isdigit():
            return None
        log = self._logs.get((session, stream))
        if log is None:
            return None
        seq = int(seq_text)
        if seq >= log.next_seq or (log.events and log.events[0][0] > seq + 1):
            return None  # from the future, or events after it were already evicted
        return stream, [(f"{stream}-{s}", data) for s, data in log.events if s > seq]

    def forget(self, session: str) -> None:
        for stream in self._by_session.pop(session, ()):
            log = self._logs.pop((session, stream), None)
            if log is not None:
                self._count -= len(log.events)
        if not self._logs:
            self._order.clear()
        elif len(self._order) > 4 * self.max_events:
            self._order = deque(k for k in self._order if k in self._logs)
