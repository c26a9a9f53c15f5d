"""Worker threads for a framework's plain ``def`` handlers, at a few µs a call.

The frameworks hand each sync tool call to ``anyio.to_thread.run_sync``: a capacity limiter, a
cancel scope, a checkpoint, one worker's own queue and one wake-up of the event loop per call,
about 29 µs of CPU on this project's machines. The pool here keeps what that gives a tool (its
own thread, so a blocking tool does not stall the loop; as many at once as anyio's default
thread limiter allows (40 unless the app changed its ``total_tokens``); the caller's context
variables; ``anyio.from_thread`` working inside, since each worker is started
as an anyio worker thread) and pays less: jobs go through one C queue, and the results of calls
that end together reach the loop in one wake-up. About 2 µs a call.

What differs from anyio's own hop: a cancelled caller stops waiting at once (the call runs on to
its end in its thread, its result dropped), where anyio waits for the thread first; and
``anyio.from_thread.check_cancelled`` does not see the caller's cancellation.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

__all__ = ["WorkerThreads"]

_END = None

MAX_THREADS = 40
"""anyio's default thread limit, which a pool follows unless given its own."""

IDLE_SECONDS = 10.0
"""A worker with nothing to do for this long ends (as anyio's own)."""


class _Inbox:
    """The results bound for one event loop, handed over in one wake-up per batch."""

    __slots__ = ("done", "lock", "loop", "scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.lock = threading.Lock()
        self.done: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = collections.deque()
        self.scheduled = False

    def post(self, future: asyncio.Future[Any], ok: bool, value: Any) -> None:
        with self.lock:
            self.done.append((future, ok, value))
            if self.scheduled:
                return
            self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self.deliver)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def deliver(self) -> None:
        with self.lock:
            done = self.done
            self.done = collections.deque()
            self.scheduled = False
        for future, ok, value in done:
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


class WorkerThreads:
    """A pool of worker threads for sync calls made from one process's event loops."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        """At most this many calls run at once, more wait their turn; ``None``: the
        ``total_tokens`` of anyio's default thread limiter on the caller's loop, read when a
        thread more would start (so an app that raised it in its lifespan gets as many)."""
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0  # started, not ended
        self._waiting = 0  # blocked on the queue
        self._pending = 0  # queued, not taken
        self._inboxes: dict[asyncio.AbstractEventLoop, _Inbox] = {}
        self._starters: set[asyncio.Task[None]] = set()
        # A weak reference: the fork hooks live as long as the interpreter, a pool need not.
        os.register_at_fork(after_in_child=functools.partial(_forget, weakref.ref(self)))

    def _forget(self) -> None:
        # A forked child has none of the parent's threads, nor its loops.
        self._jobs = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = self._waiting = self._pending = 0
        self._inboxes = {}
        self._starters = set()

    @property
    def threads(self) -> int:
        """Workers started and not ended."""
        return self._threads

    async def run(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a worker thread, in a copy of the caller's context."""
        loop = asyncio.get_running_loop()
        inbox = self._inboxes.get(loop)
        if inbox is None:
            inbox = self._inboxes[loop] = _Inbox(loop)
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            self._pending += 1
            start = self._pending > self._waiting and self._threads < (self.limit if self.limit is not None else _default_limit())
            if start:
                self._threads += 1
        self._jobs.put((inbox, future, contextvars.copy_context(), fn, args, kwargs))
        if start:
            self._start(loop)
        return await future

    def caller(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """An async function calling ``fn`` in this pool, with ``fn``'s name, signature and
        annotations (a framework that reads them off the function it runs sees ``fn``'s)."""

        @functools.wraps(fn)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self.run(fn, *args, **kwargs)

        return call

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        # Started through anyio, so the thread is one of its workers for the code it runs
        # (``anyio.from_thread.run`` finds its way back to the loop); the limiter is the pool's
        # own, so the framework's other sync calls keep all of anyio's default tokens.
        work = anyio.to_thread.run_sync(self._work, abandon_on_cancel=True, limiter=anyio.CapacityLimiter(1))
        task = loop.create_task(work)
        self._starters.add(task)
        task.add_done_callback(self._started_done)

    def _started_done(self, task: asyncio.Task[None]) -> None:
        self._starters.discard(task)
        if task.cancelled():  # the loop is going away with the worker still there: let it end
            self._jobs.put(_END)

    def stop(self) -> None:
        """End every worker once the calls queued before now are done; a later call starts anew."""
        with self._lock:
            threads = self._threads
        for _ in range(threads):
            self._jobs.put(_END)

    def _work(self) -> None:
        jobs, lock = self._jobs, self._lock
        while True:
            with lock:
                self._waiting += 1
            try:
                job = jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with lock:
                    self._waiting -= 1
                    if self._pending > self._waiting:  # queued just now, for this one
                        continue
                    self._threads -= 1
                return
            with lock:
                self._waiting -= 1
                if job is _END:
                    # A call queued after the end, that no waiting worker will take, keeps this one.
                    if self._pending > self._waiting:
                        continue
                    self._threads -= 1
                    return
                self._pending -= 1
            inbox, future, context, fn, args, kwargs = job
            if future.cancelled():
                continue
            try:
                value = context.run(fn, *args, **kwargs)
            except BaseException as exc:
                inbox.post(future, False, _as_raisable(exc))
            else:
                inbox.post(future, True, value)
            del job, inbox, future, context, fn, args, kwargs


def _default_limit() -> float:
    """anyio's default thread limit on the running loop (an int, or ``math.inf``)."""
    return anyio.to_thread.current_default_thread_limiter().total_tokens


def _forget(pool: weakref.ref[WorkerThreads]) -> None:
    alive = pool()
    if alive is not None:
        alive._forget()


def _as_raisable(exc: BaseException) -> BaseException:
    # A StopIteration cannot travel through a future (asyncio refuses it), as anyio says too.
    if isinstance(exc, StopIteration):
        error = RuntimeError("a sync handler raised StopIteration")
        error.__cause__ = exc
        return error
    return exc
