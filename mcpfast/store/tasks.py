"""The task-store interface: where the tasks extension keeps its tasks (memory now, shared later).

A ``TaskRecord`` is everything ``tasks/get`` answers from: status, timestamps, the final result
or error, the input a waiting task asks for, and the answers given so far. Keeping it behind
``TaskStore`` means a shared store (Redis) lets any process answer ``tasks/get``, ``tasks/update``
and ``tasks/cancel`` for a task another process runs: the running process re-reads the record
while it waits for input and before it writes an outcome, so an answer or a cancel recorded
elsewhere reaches it.

The store owns the counting limits (a shared store must count across processes): ``create``
refuses a task over ``max_total`` kept tasks (finished ones count until they are swept) or over
``max_per_owner`` unfinished tasks of one owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import orjson

__all__ = ["TERMINAL", "MemoryTaskStore", "TaskRecord", "TaskStore"]

WORKING: Final = "working"
INPUT_REQUIRED: Final = "input_required"
COMPLETED: Final = "completed"
FAILED: Final = "failed"
CANCELLED: Final = "cancelled"
TERMINAL: Final = frozenset({COMPLETED, FAILED, CANCELLED})
"""Statuses a task never leaves."""


@dataclass(slots=True)
class TaskRecord:
    """One task as every process sees it (times are ``time.time()`` seconds).

    Attributes:
        id: the server-minted task id.
        owner: who may see it (a connection, or an authenticated principal over HTTP).
        status: ``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``.
        created: when it was made.
        updated: when its status last changed.
        ttl: seconds it is kept, counted from ``created``.
        poll: the poll interval suggested to the client, in seconds.
        message: ``statusMessage``.
        result: the tool result of a ``completed`` task.
        error: the JSON-RPC error object of a ``failed`` task.
        input_requests: the still unanswered ``inputRequests`` of an ``input_required`` task.
        answers: every input answer received so far (key -> response).
    """

    id: str
    owner: str
    status: str
    created: float
    updated: float
    ttl: float
    poll: float
    message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None
    answers: dict[str, Any] = field(default_factory=dict)

    @property
    def expires(self) -> float:
        return self.created + self.ttl

    def encode(self) -> bytes:
        """The record as bytes (what a shared store keeps)."""
        return orjson.dumps(
            {"o": self.owner, "s": self.status, "c": self.created, "u": self.updated, "t": self.ttl, "p": self.poll,
             "m": self.message, "r": self.result, "e": self.error, "i": self.input_requests, "a": self.answers}
        )  # fmt: skip

    @classmethod
    def decode(cls, task_id: str, data: bytes) -> TaskRecord:
        d = orjson.loads(data)
        return cls(task_id, d["o"], d["s"], d["c"], d["u"], d["t"], d["p"], d["m"], d["r"], d["e"], d["i"], d["a"])


class TaskStore(Protocol):
    """Where tasks are kept (``MemoryTaskStore``; a shared store implements the same calls).

    Attributes:
        shared: other processes see these tasks.
    """

    shared: bool

    async def create(self, record: TaskRecord, max_total: int, max_per_owner: int) -> str | None:
        """Keep ``record``; returns ``None``, or which limit refused it (``"total"``: records kept,
        ``"owner"``: unfinished records of ``record.owner``)."""
        ...

    async def load(self, task_id: str) -> TaskRecord | None:
        """A copy of the record, or ``None`` (never made, or expired and swept)."""
        ...

    async def save(self, record: TaskRecord) -> None:
        """Replace the record (a swept one is not brought back)."""
        ...

    async def sweep(self, now: float) -> list[str]:
        """Drop every record whose TTL has passed; returns their ids."""
        ...

    async def count(self, owner: str | None = None) -> int:
        """Records kept (``owner=None``), or unfinished records of ``owner``."""
        ...


class MemoryTaskStore:
    """Tasks in this process only (a dict of encoded records, so callers never share a copy)."""

    shared = False

    def __init__(self) -> None:
        self._records: dict[str, bytes] = {}
        self._expiry: dict[str, float] = {}
        self._live: dict[str, set[str]] = {}  # owner -> ids of its unfinished records

    async def create(self, record: TaskRecord, max_total: int, max_per_owner: int) -> str | None:
        if len(self._records) >= max_total:
            return "total"
        live = self._live.get(record.owner)
        if live is not None and len(live) >= max_per_owner:
            return "owner"
        self._records[record.id] = record.encode()
        self._expiry[record.id] = record.expires
        if record.status not in TERMINAL:
            self._live.setdefault(record.owner, set()).add(record.id)
        return None

    async def load(self, task_id: str) -> TaskRecord | None:
        data = self._records.get(task_id)
        return None if data is None else TaskRecord.decode(task_id, data)

    async def save(self, record: TaskRecord) -> None:
        if record.id in self._records:
            self._records[record.id] = record.encode()
            if record.status in TERMINAL:
                self._finished(record.owner, record.id)

    def _finished(self, owner: str, task_id: str) -> None:
        live = self._live.get(owner)
        if live is not None:
            live.discard(task_id)
            if not live:
                del self._live[owner]

    async def sweep(self, now: float) -> list[str]:
        gone = [t for t, expires in self._expiry.items() if expires <= now]
        for task_id in gone:
            record = TaskRecord.decode(task_id, self._records.pop(task_id))
            del self._expiry[task_id]
            self._finished(record.owner, task_id)
        return gone

    async def count(self, owner: str | None = None) -> int:
        if owner is None:
            return len(self._records)
        return len(self._live.get(owner, ()))
