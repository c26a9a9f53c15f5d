"""The tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663, 2026-07-28) in the server.

A tool registered with ``task=`` may answer ``tools/call`` with a ``CreateTaskResult``
(``resultType: "task"``) when the request's client capabilities declare the extension; the
client then polls ``tasks/get``, answers questions with ``tasks/update`` and may
``tasks/cancel``. ``Tasks`` runs those handlers in asyncio tasks of their own (they outlive the
request and its connection), keeps their state in a ``TaskStore`` (``mcpfast.store.tasks``),
enforces the TTL and the count limits, and shapes the wire objects.

A handler that asks for input inside a task (``Context.elicit``/``ask``) parks the task in
``input_required`` with those ``inputRequests``; once every one is answered through
``tasks/update`` it runs again from the start with the answers (the MRTR rule: ask in a
deterministic order). A handler registered with ``defer_task=True`` runs as a plain request
(MRTR rounds included) until it awaits ``Context.start_task()``: that call answers the request
with the ``CreateTaskResult`` and the rest of the handler runs as the task.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from mcpfast.protocol.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    McpError,
)
from mcpfast.protocol.meta import TASKS_EXTENSION
from mcpfast.protocol.schema import SchemaError, validate_result
from mcpfast.protocol.versions import V2026_07_28
from mcpfast.sansio import InboundRequest
from mcpfast.sansio.mrtr import InputRequired
from mcpfast.server.types import JSONObject
from mcpfast.store.tasks import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    TERMINAL,
    WORKING,
    MemoryTaskStore,
    TaskRecord,
    TaskStore,
)

if TYPE_CHECKING:
    from mcpfast.server.connection import Connection

__all__ = ["TASK_SUPPORT", "Tasks", "negotiated", "open_task_store", "tasks_required", "wire_task"]

logger = logging.getLogger("mcpfast.server")

TASK_SUPPORT: Final = frozenset({"optional", "required"})
"""``taskSupport`` values a tool may register with (absent: the tool never becomes a task)."""
_SWEEP_EVERY: Final = 1.0
_owners = itertools.count(1)


def open_task_store(url: str, **options: object) -> TaskStore:
    """The task store named by ``url``: ``memory``, or ``redis://HOST:PORT/DB`` (shared by every process using it)."""
    if url == "memory":
        return MemoryTaskStore()
    if url.startswith(("redis://", "rediss://", "unix://")):
        from mcpfast.store.redis_tasks import RedisTaskStore

        return RedisTaskStore(url, **options)  # type: ignore[arg-type]  # the store's keyword arguments, checked by its call
    raise ValueError(f"unknown task store {url!r}: use 'memory' or 'redis://HOST:PORT/DB'")


def negotiated(request: InboundRequest) -> bool:
    """Whether this request's client capabilities declare the tasks extension (2026 only)."""
    if not request.stateless:
        return False
    extensions = request.client_capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def tasks_required(what: str) -> McpError:
    """-32021 naming the extension a request needs (``data.requiredCapabilities``)."""
    return McpError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{what} needs the {TASKS_EXTENSION} extension in the request's client capabilities",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def _iso(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def wire_task(record: TaskRecord, detailed: bool) -> JSONObject:
    """The ``Task`` object of a record; ``detailed``: the ``tasks/get`` shape (result/error/inputRequests)."""
    out: JSONObject = {
        "taskId": record.id,
        "status": record.status,
        "createdAt": _iso(record.created),
        "lastUpdatedAt": _iso(record.updated),
        "ttlMs": max(1, round(record.ttl * 1000)),
        "pollIntervalMs": max(1, round(record.poll * 1000)),
    }
    if record.message is not None:
        out["statusMessage"] = record.message
    if detailed:
        if record.status == COMPLETED and record.result is not None:
            out["result"] = record.result
        elif record.status == FAILED and record.error is not None:
            out["error"] = record.error
        elif record.status == INPUT_REQUIRED and record.input_requests:
            out["inputRequests"] = record.input_requests
    return out


class _Run:
    """One handler run that is (or may become) a task."""

    __slots__ = ("answered", "created", "owner", "record", "task")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.record: TaskRecord | None = None  # set once the run became a task
        self.created: asyncio.Future[JSONObject] = asyncio.get_running_loop().create_future()
        self.answered = asyncio.Event()
        # The handler's run: the request's result, or None once it became a task (Any: asyncio.wait
        # takes it with ``created``, a future of another result type).
        self.task: asyncio.Task[Any] | None = None


class Tasks:
    """The tasks of one ``Server``.

    Args:
        store: where records live (a fresh ``MemoryTaskStore`` by default).
        ttl: seconds a task is kept from its creation; a handler still running then is
            cancelled and the record dropped (``ttlMs`` on the wire).
        poll_interval: seconds suggested between polls (``pollIntervalMs``).
        max_tasks: tasks kept at once in the whole server (running, and finished until swept).
        max_tasks_per_session: unfinished tasks at once for one owner: a stdio connection, or
            over HTTP the authenticated principal (unauthenticated callers count as one owner).
    """

    def __init__(
        self,
        store: TaskStore | None = None,
        *,
        ttl: float = 600.0,
        poll_interval: float = 0.5,
        max_tasks: int = 10_000,
        max_tasks_per_session: int = 100,
    ) -> None:
        if ttl <= 0 or poll_interval <= 0 or max_tasks < 1 or max_tasks_per_session < 1:
            raise ValueError("task ttl and poll_interval must be > 0, max_tasks and max_tasks_per_session >= 1")
        self.store: TaskStore = store if store is not None else MemoryTaskStore()
        self.ttl = ttl
        self.poll_interval = poll_interval
        self.max_tasks = max_tasks
        self.max_tasks_per_session = max_tasks_per_session
        self._runs: dict[str, _Run] = {}  # task id -> run in this process
        self._last_sweep = 0.0

    @staticmethod
    def owner_of(conn: Connection) -> str:
        """Who owns the tasks a connection creates (``conn.task_owner``; one per connection by default)."""
        owner = getattr(conn, "task_owner", None)
        if owner is None:
            owner = conn.task_owner = f"connection-{next(_owners)}"
        return owner

    # ------------------------------------------------------------------ running

    async def run(
        self,
        owner: str,
        immediate: bool,
        invoke: Callable[[_Run, JSONObject], Awaitable[object]],
        finish: Callable[[object], JSONObject],
        failed: Callable[[Exception], JSONObject],
        ask: Callable[[JSONObject, InputRequired], JSONObject],
    ) -> JSONObject:
        """Run a handler that may become a task; the request's result.

        Args:
            owner: ``owner_of`` the requesting connection.
            immediate: the call becomes a task before the handler starts (else when it awaits
                ``Context.start_task``).
            invoke: ``invoke(run, answers)`` runs the handler once with these input answers.
            finish: shapes the handler's value into the tool result.
            failed: the tool result of a handler exception (``isError``).
            ask: the ``InputRequiredResult`` of a question asked before the call became a task.
        """
        run = _Run(owner)
        if immediate:
            await self.start(run)
        run.task = asyncio.get_running_loop().create_task(self._drive(run, invoke, finish, failed, ask))
        try:
            await asyncio.wait({run.task, run.created}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if run.record is None:  # the request was cancelled before it became a task
                run.task.cancel()
            raise
        if run.created.done():
            run.task.add_done_callback(_log_crash)
            return run.created.result()
        return run.task.result()  # finished (or raised McpError) as a plain request

    async def start(self, run: _Run) -> str:
        """Make ``run`` a task (once): store its record, answer the request; returns the task id."""
        if run.record is not None:
            return run.record.id
        await self._sweep()
        now = time.time()
        record = TaskRecord(secrets.token_urlsafe(16), run.owner, WORKING, now, now, self.ttl, self.poll_interval)
        refused = await self.store.create(record, self.max_tasks, self.max_tasks_per_session)
        if refused == "total":
            raise McpError(INVALID_REQUEST, f"too many tasks: the server keeps at most {self.max_tasks} (max_tasks)",
                           {"limit": "max_tasks", "max": self.max_tasks})  # fmt: skip
        if refused == "owner":
            raise McpError(
                INVALID_REQUEST,
                f"too many tasks: one session keeps at most {self.max_tasks_per_session} (max_tasks_per_session)",
                {"limit": "max_tasks_per_session", "max": self.max_tasks_per_session},
            )
        run.record = record
        self._runs[record.id] = run
        run.created.set_result({"resultType": "task", **wire_task(record, detailed=False)})
        return record.id

    async def _drive(
        self,
        run: _Run,
        invoke: Callable[[_Run, JSONObject], Awaitable[object]],
        finish: Callable[[object], JSONObject],
        failed: Callable[[Exception], JSONObject],
        ask: Callable[[JSONObject, InputRequired], JSONObject],
    ) -> JSONObject | None:
        answers: JSONObject = {}
        try:
            while True:
                try:
                    value = await invoke(run, answers)
                except InputRequired as need:
                    if run.record is None:
                        return ask(answers, need)
                    answers = await self._wait_for_input(run, need.requests)
                    continue
                except McpError as exc:
                    if run.record is None:
                        raise
                    await self._settle(run, FAILED, error=_error_object(exc))
                    return None
                except Exception as exc:  # a tool failure: a result the model can see
                    outcome = failed(exc)
                else:
                    outcome = finish(value)
                if run.record is None:
                    return outcome
                await self._settle(run, COMPLETED, result=outcome)
                return None
        except McpError as exc:  # finish() refused the output (e.g. outputSchema)
            if run.record is None:
                raise
            await self._settle(run, FAILED, error=_error_object(exc))
            return None
        except asyncio.CancelledError:
            if run.record is not None:
                await self._settle(run, CANCELLED, message="cancelled")
            raise
        finally:
            if run.record is not None:
                self._runs.pop(run.record.id, None)

    async def _wait_for_input(self, run: _Run, requests: JSONObject) -> JSONObject:
        """Park the task until every request is answered (here or in another process); the answers."""
        assert run.record is not None
        record = await self.store.load(run.record.id)
        if record is None:
            raise asyncio.CancelledError
        pending = {k: v for k, v in requests.items() if k not in record.answers}
        if pending:
            record.status, record.input_requests, record.updated = INPUT_REQUIRED, pending, time.time()
            await self.store.save(record)
        while pending:
            run.answered.clear()
            try:
                await asyncio.wait_for(run.answered.wait(), self.poll_interval)
            except TimeoutError:
                pass  # an answer may have come through another process: read the record again
            record = await self.store.load(run.record.id)
            if record is None or record.status in TERMINAL:
                raise asyncio.CancelledError
            pending = {k: v for k, v in requests.items() if k not in record.answers}
        if record.status != WORKING:
            record.status, record.input_requests, record.updated = WORKING, None, time.time()
            await self.store.save(record)
        return dict(record.answers)

    async def _settle(
        self,
        run: _Run,
        status: str,
        *,
        result: JSONObject | None = None,
        error: JSONObject | None = None,
        message: str | None = None,
    ) -> None:
        assert run.record is not None
        record = await self.store.load(run.record.id)
        if record is None or record.status in TERMINAL:
            return  # swept, or cancelled elsewhere meanwhile: the first terminal status stands
        record.status, record.result, record.error, record.input_requests = status, result, error, None
        record.message, record.updated = message, time.time()
        await self.store.save(record)

    # ------------------------------------------------------------ the methods

    async def _find(self, owner: str, params: JSONObject) -> TaskRecord:
        task_id = params.get("taskId")
        if not isinstance(task_id, str):
            raise McpError(INVALID_PARAMS, "taskId must be a string")
        await self._sweep()
        record = await self.store.load(task_id)
        if record is None or record.owner != owner:  # another owner's task is not revealed
            raise McpError(INVALID_PARAMS, f"unknown task: {task_id}")
        return record

    async def get(self, owner: str, params: JSONObject) -> JSONObject:
        """``tasks/get``: the ``DetailedTask`` (-32602 for an unknown id)."""
        return wire_task(await self._find(owner, params), detailed=True)

    async def update(self, owner: str, params: JSONObject) -> JSONObject:
        """``tasks/update``: record the answers to outstanding input requests; an empty ack.

        Answers to keys that are not outstanding are ignored, and so is an update to a task that
        is not waiting for input; an answer that is not a valid result of its request is -32602.
        """
        given = params.get("inputResponses")
        if not isinstance(given, dict):
            raise McpError(INVALID_PARAMS, "inputResponses must be an object")
        record = await self._find(owner, params)
        if record.status == INPUT_REQUIRED and record.input_requests:
            taken = {k: v for k, v in given.items() if k in record.input_requests}
            for key, answer in taken.items():  # checked here, so a bad answer fails the update, not the task
                method = record.input_requests[key].get("method")
                try:
                    validate_result(answer, method, V2026_07_28)
                except SchemaError as exc:
                    raise McpError(INVALID_PARAMS, f"inputResponses[{key!r}] is not a valid {method} result: {exc}") from None
            if taken:
                record.answers.update(taken)
                record.input_requests = {k: v for k, v in record.input_requests.items() if k not in taken}
                record.updated = time.time()
                if not record.input_requests:
                    record.status, record.input_requests = WORKING, None
                await self.store.save(record)
                run = self._runs.get(record.id)
                if run is not None:
                    run.answered.set()
        return {}

    async def cancel(self, owner: str, params: JSONObject) -> JSONObject:
        """``tasks/cancel``: stop the handler and mark the task ``cancelled``; an empty ack (a finished task stays as it is)."""
        record = await self._find(owner, params)
        if record.status not in TERMINAL:
            record.status, record.input_requests, record.message, record.updated = CANCELLED, None, "cancelled by the client", time.time()
            await self.store.save(record)
            self._stop(record.id)
        return {}

    def _stop(self, task_id: str) -> None:
        run = self._runs.pop(task_id, None)
        if run is not None and run.task is not None:
            run.task.cancel()

    async def _sweep(self) -> None:
        now = time.time()
        if now - self._last_sweep < _SWEEP_EVERY:
            return
        self._last_sweep = now
        for task_id in await self.store.sweep(now):
            self._stop(task_id)  # its TTL passed while it still ran

    def running(self) -> int:
        """Handlers running as tasks in this process."""
        return len(self._runs)

    async def aclose(self) -> None:
        """Cancel every task handler of this process and wait for them (server shutdown)."""
        running = [run.task for run in self._runs.values() if run.task is not None]
        for task_id in list(self._runs):
            self._stop(task_id)
        await asyncio.gather(*running, return_exceptions=True)


def _error_object(exc: McpError) -> JSONObject:
    error: JSONObject = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return error


def _log_crash(task: asyncio.Task[object]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("task handler crashed", exc_info=task.exception())
