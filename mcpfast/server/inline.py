"""Run a coroutine where it is started, with no ``asyncio.Task``: ``start(coro)``.

Most ``async def`` tools finish without waiting: they return, or await only what is already
done. Run in a task of its own, each call pays for the task (made, registered, scheduled), a
turn of the event loop before its first step, and the transport's wait for the reply: more CPU
than the rest of the request. ``start`` sends into the coroutine at once instead, as Python
3.12's eager tasks do on a task's first step (3.11 has none), and drives it the same way
from then on, as a task would but with less:

* finished in that first step: the outcome is known when ``start`` returns (no loop turn);
* waiting on a future: the ``InlineTask`` is that future's done callback, and its next step
  runs from there, as a task's wake-up does (no task made or scheduled);
* a bare ``yield`` (``asyncio.sleep(0)``): its next step is scheduled on the loop.

``InlineTask`` keeps a task's rules: while the coroutine runs, ``asyncio.current_task()`` is
the ``InlineTask``, one object from its first step to its last, so what needs a current task,
and the same one on entry and on exit, works (``asyncio.timeout()``, ``asyncio.TaskGroup``,
anyio's cancel scopes and locks, sniffio's detection of the event loop). ``cancel()`` cancels
the future it waits for, or the next step raises ``CancelledError`` in it; ``cancelling()``
and ``uncancel()`` count as a task's do (3.11's rules). Each step runs in the call's own copy
of the context, as a task's steps do: the context variables a tool sets stay its own. The
caller's current task (the task reading stdin, say) is set aside during the first step: a
timeout in a tool must not cancel the reader. Once it waits it is one of the loop's tasks
(``asyncio.all_tasks()``: ``asyncio.run`` cancels it at its end like any other).

What a task has that an ``InlineTask`` has not: a loop's task factory does not make it, and
an exception nobody reads is not logged (``start``'s ``done`` receives every outcome). The
current task is switched, and a waiting coroutine listed, with asyncio's own
``_enter_task``/``_leave_task``/``_register_task``, what a task does (private to asyncio; in
every CPython from 3.11 to 3.14).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
from collections.abc import Callable, Coroutine, Generator
from threading import get_ident
from typing import Any, Final, Generic, TypeVar

__all__ = ["Done", "InlineTask", "running_loop", "start"]

_T = TypeVar("_T")
_S = TypeVar("_S")

Done = Callable[[_S, Any, "BaseException | None"], object]
"""``done(subject, result, exception)``: called once the coroutine has finished, in the step
that finished it: its return value and ``None``, or ``None`` and the exception it raised (a
``CancelledError`` included)."""

# Typed for what they take (any object; typeshed says a Task, the one caller it knows).
_enter_task: Final[Callable[[asyncio.AbstractEventLoop, object], None]] = getattr(asyncio.tasks, "_enter_task")  # noqa: B009
_leave_task: Final[Callable[[asyncio.AbstractEventLoop, object], None]] = getattr(asyncio.tasks, "_leave_task")  # noqa: B009
_register_task: Final[Callable[[object], None]] = getattr(asyncio.tasks, "_register_task")  # noqa: B009
_current_tasks: dict[asyncio.AbstractEventLoop, object] | None = getattr(asyncio.tasks, "_current_tasks", None)
# asyncio.current_task(loop) is a get of this dict behind a Python call; a version without the
# dict has it otherwise.
_current: Final[Callable[[asyncio.AbstractEventLoop], object]] = _current_tasks.get if _current_tasks is not None else asyncio.current_task


_known_loop: tuple[int, asyncio.AbstractEventLoop] | None = None
"""The last loop ``running_loop`` found running, and the thread it runs in."""


def running_loop() -> asyncio.AbstractEventLoop:
    """``asyncio.get_running_loop()``, without its ``getpid()`` system call on every call (its
    check for a forked child, which here forgets the loop instead): the loop last found
    running in this thread, while it runs.

    Raises:
        RuntimeError: no event loop is running in this thread.
    """
    global _known_loop
    known = _known_loop
    if known is not None and known[0] == get_ident() and known[1].is_running():
        return known[1]  # one loop runs in a thread at a time: it is this one
    loop = asyncio.get_running_loop()
    _known_loop = (get_ident(), loop)
    return loop


def _forget_loop() -> None:
    global _known_loop
    _known_loop = None


os.register_at_fork(after_in_child=_forget_loop)  # a child's loop is its own, even one copied running


class _Rare:
    """What an ``InlineTask`` seldom needs (kept apart: every call makes an ``InlineTask``)."""

    __slots__ = ("callbacks", "cancel_message", "cancels", "name")

    def __init__(self) -> None:
        self.cancels = 0
        self.cancel_message: object = None
        self.callbacks: list[tuple[Callable[[Any], object], contextvars.Context | None]] = []
        self.name: str | None = None


class InlineTask(Generic[_T]):
    """One coroutine driven by ``start``: what ``asyncio.current_task()`` is while it runs.

    It has a task's API (``done``, ``result``, ``exception``, ``cancel``, ``cancelled``,
    ``cancelling``, ``uncancel``, ``add_done_callback``, ``get_coro``, ``get_name``...) and
    awaiting it waits for its outcome (a cancelled waiter cancels it, as for a task).
    """

    __slots__ = ("__weakref__", "_context", "_coro", "_done", "_fut_waiter", "_loop", "_must_cancel", "_outcome", "_rare", "_subject")

    def __init__(
        self, coro: Coroutine[Any, Any, _T], loop: asyncio.AbstractEventLoop, context: contextvars.Context,
        done: Done[Any] | None, subject: object,
    ) -> None:  # fmt: skip
        self._coro = coro
        self._loop = loop
        self._context = context
        self._done = done
        self._subject = subject
        self._outcome: tuple[_T | None, BaseException | None] | None = None  # set once it finished
        # The two attributes anyio's cancel scopes read of a task: the future it waits for, and
        # whether its next step is to raise CancelledError.
        self._fut_waiter: Any = None
        self._must_cancel = False
        self._rare: _Rare | None = None

    # ---------------------------------------------------------------- the Task API

    def done(self) -> bool:
        return self._outcome is not None

    def cancelled(self) -> bool:
        return self._outcome is not None and isinstance(self._outcome[1], asyncio.CancelledError)

    def result(self) -> _T:
        outcome = self._outcome
        if outcome is None:
            raise asyncio.InvalidStateError("the coroutine is still running")
        if outcome[1] is not None:
            raise outcome[1]
        return outcome[0]  # type: ignore[return-value]  # what it returned

    def exception(self) -> BaseException | None:
        outcome = self._outcome
        if outcome is None:
            raise asyncio.InvalidStateError("the coroutine is still running")
        if isinstance(outcome[1], asyncio.CancelledError):
            raise outcome[1]
        return outcome[1]

    def finished(self) -> tuple[_T | None, BaseException | None] | None:
        """``(result, None)`` or ``(None, exception)`` once it has finished, else ``None``."""
        return self._outcome

    def when_done(self, done: Done[_S], subject: _S) -> None:
        """Have ``done(subject, result, exception)`` called when it finishes (``start``'s ``done``,
        given once it is known that it waits)."""
        if self._outcome is not None:
            raise asyncio.InvalidStateError("the coroutine has finished")
        self._done = done
        self._subject = subject

    def cancel(self, msg: object = None) -> bool:
        """As a task's: the future it waits for is cancelled, else its next step raises
        ``CancelledError`` in it. ``False`` once it finished."""
        if self._outcome is not None:
            return False
        rare = self._rare_state()
        rare.cancels += 1
        waiter = self._fut_waiter
        if waiter is not None and waiter.cancel(msg=msg):
            return True
        # Running now, or a step is scheduled (a bare yield, a wake-up on its way): that step raises.
        self._must_cancel = True
        rare.cancel_message = msg
        return True

    def cancelling(self) -> int:
        return self._rare.cancels if self._rare is not None else 0

    def uncancel(self) -> int:
        rare = self._rare
        if rare is None:
            return 0
        if rare.cancels > 0:
            rare.cancels -= 1
        return rare.cancels

    def get_coro(self) -> Coroutine[Any, Any, _T]:
        return self._coro

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def get_context(self) -> contextvars.Context:
        return self._context

    def get_name(self) -> str:
        rare = self._rare_state()
        if rare.name is None:
            rare.name = f"inline-{id(self):x}"
        return rare.name

    def set_name(self, value: object) -> None:
        self._rare_state().name = str(value)

    def add_done_callback(self, fn: Callable[[Any], object], *, context: contextvars.Context | None = None) -> None:
        """``fn(self)`` soon after it finished (at once scheduled, if it has)."""
        if self._outcome is not None:
            self._loop.call_soon(fn, self, context=context)
        else:
            self._rare_state().callbacks.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        rare = self._rare
        if rare is None:
            return 0
        kept = [entry for entry in rare.callbacks if entry[0] != fn]
        removed = len(rare.callbacks) - len(kept)
        rare.callbacks = kept
        return removed

    @property
    def _callbacks(self) -> list[tuple[Callable[[Any], object], contextvars.Context | None]]:
        # What anyio reads of a task it finds in asyncio.all_tasks() (its root task's done callbacks).
        return self._rare.callbacks if self._rare is not None else []

    def __await__(self) -> Generator[Any, None, _T]:
        if self._outcome is None:
            waiter: asyncio.Future[None] = self._loop.create_future()
            self.add_done_callback(functools.partial(_release, waiter))
            try:
                yield from waiter.__await__()
            except asyncio.CancelledError:
                self.cancel()  # as awaiting a task: the waiter's cancellation reaches it
                raise
        return self.result()

    def __repr__(self) -> str:
        if self._outcome is not None:
            state = "finished"
        elif self._fut_waiter is not None:
            state = f"waiting for {self._fut_waiter!r}"
        else:
            state = "running"
        return f"<InlineTask {state} coro={self._coro!r}>"

    # ---------------------------------------------------------------- driving

    def _rare_state(self) -> _Rare:
        rare = self._rare
        if rare is None:
            rare = self._rare = _Rare()
        return rare

    def _cancelled_error(self) -> asyncio.CancelledError:
        message = self._rare.cancel_message if self._rare is not None else None
        return asyncio.CancelledError() if message is None else asyncio.CancelledError(message)

    def _step(self, exc: BaseException | None = None) -> None:
        """Run the coroutine to its next wait or its end (in its context: the caller's job)."""
        if self._must_cancel:
            if not isinstance(exc, asyncio.CancelledError):
                exc = self._cancelled_error()
            self._must_cancel = False
        self._fut_waiter = None
        loop = self._loop
        outer = _current(loop)  # None from a loop callback; the task that called ``start``, else
        if outer is not None:
            _leave_task(loop, outer)
        _enter_task(loop, self)
        result: Any = None
        error: BaseException | None = None
        try:
            try:
                waiting = self._coro.send(None) if exc is None else self._coro.throw(exc)
            finally:
                _leave_task(loop, self)
                if outer is not None:
                    _enter_task(loop, outer)
        except StopIteration as stop:
            if self._must_cancel:  # cancelled in its last step, which did not see it: it ends cancelled, as a task
                self._must_cancel = False
                error = self._cancelled_error()
            else:
                result = stop.value
        except (KeyboardInterrupt, SystemExit) as stop:
            self._settle(None, stop)
            raise
        except BaseException as raised:  # its outcome, a CancelledError included
            error = raised
        else:
            self._wait(waiting)
            return
        self._settle(result, error)

    def _wait(self, waiting: Any) -> None:
        """The coroutine yielded ``waiting``: go on when it says, as a task does."""
        blocking = getattr(waiting, "_asyncio_future_blocking", None)
        if blocking is not None:  # a future, awaited
            if blocking and waiting is not self and waiting.get_loop() is self._loop:
                waiting._asyncio_future_blocking = False
                waiting.add_done_callback(self._wakeup, context=self._context)
                self._fut_waiter = waiting
                if self._must_cancel and waiting.cancel(msg=self._rare.cancel_message if self._rare is not None else None):
                    self._must_cancel = False
                return
            problem = RuntimeError(f"{self!r} cannot wait for {waiting!r} (not awaited, of another loop, or itself)")
        elif waiting is None:  # a bare yield: the next step after one turn of the loop
            self._loop.call_soon(self._step, context=self._context)
            return
        else:
            problem = RuntimeError(f"{self!r} got bad yield: {waiting!r}")
        self._loop.call_soon(self._step, problem, context=self._context)

    def _wakeup(self, future: asyncio.Future[Any]) -> None:
        """The future it waited for is done (a callback of it, run in the coroutine's context)."""
        try:
            future.result()
        except BaseException as exc:  # raised in the coroutine where it awaited the future
            self._step(exc)
        else:
            self._step()

    def _settle(self, result: _T | None, error: BaseException | None) -> None:
        if self._outcome is None:  # (else ``start`` has settled it but for the done callbacks)
            self._outcome = (result, error)
            done = self._done
            if done is not None:
                done(self._subject, result, error)
        rare = self._rare
        if rare is not None and rare.callbacks:
            callbacks, rare.callbacks = rare.callbacks, []
            for fn, context in callbacks:
                self._loop.call_soon(fn, self, context=context)


def _release(waiter: asyncio.Future[None], _: object) -> None:
    if not waiter.done():  # not cancelled meanwhile
        waiter.set_result(None)


def start(
    coro: Coroutine[Any, Any, _T], done: Done[_S] | None = None, subject: Any = None, loop: asyncio.AbstractEventLoop | None = None
) -> InlineTask[_T]:
    """Run ``coro`` now, to its first wait or its end, in a copy of the current context, then on
    as a task would (see the module doc).

    ``done(subject, result, exception)`` (``Done``) is called once it finishes, in the step
    that finishes it: in this call when it does not wait. Returns its ``InlineTask``
    (``done()`` says whether it finished here). ``KeyboardInterrupt`` and ``SystemExit`` are
    raised on from the step that raised them, as a task's step raises them.

    Raises:
        RuntimeError: no event loop is running (and none was given).
    """
    if loop is None:
        loop = running_loop()
    context = contextvars.copy_context()
    inline: InlineTask[_T] = InlineTask(coro, loop, context, done, subject)
    # The first step: ``_step`` without what a first step cannot need, the coroutine sent into
    # from here (the hottest line of an async tool call).
    outer = _current(loop)
    if outer is not None:
        _leave_task(loop, outer)
    _enter_task(loop, inline)
    try:
        try:
            waiting = context.run(coro.send, None)
        finally:
            _leave_task(loop, inline)
            if outer is not None:
                _enter_task(loop, outer)
    except StopIteration as stop:
        if inline._must_cancel:  # it cancelled itself and did not wait again: it ends cancelled, as a task
            inline._must_cancel = False
            inline._settle(None, inline._cancelled_error())
            return inline
        result = stop.value
    except (KeyboardInterrupt, SystemExit) as stop:
        inline._settle(None, stop)
        raise
    except BaseException as raised:  # its outcome, a CancelledError included
        inline._settle(None, raised)
        return inline
    else:
        # It waits: one of the loop's tasks from now on, for whoever lists them (asyncio.run
        # cancels those left at its end; anyio looks for its root task among them).
        _register_task(inline)
        inline._wait(waiting)
        return inline
    inline._outcome = (result, None)
    if done is not None:
        done(subject, result, None)
    if inline._rare is not None:
        inline._settle(result, None)  # done callbacks added while it ran
    return inline
