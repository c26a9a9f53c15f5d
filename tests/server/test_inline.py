"""``mcpfast.server.inline``: coroutines driven where they start, with a task's rules.

Every test runs on asyncio's loop and on uvloop (``mcpfast serve``'s). What each holds:
no task is made (a coroutine that does not wait is finished when ``start`` returns); the
current task is the ``InlineTask``, the same object before and after a wait, and never the
caller's; ``asyncio.timeout``, ``TaskGroup``, anyio's cancel scopes and locks work across
waits; cancellation, context variables, exceptions and odd yields behave as in a task.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from typing import Any

import anyio
import anyio.to_thread
import pytest

from mcpfast.server import inline

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


@pytest.fixture(
    params=[pytest.param(("asyncio", {"use_uvloop": False}), id="asyncio"), pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop")]
)
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


class Outcomes:
    """A ``done`` hook that keeps what it was given."""

    def __init__(self) -> None:
        self.got: list[tuple[object, Any, BaseException | None]] = []

    def __call__(self, subject: object, result: Any, exc: BaseException | None) -> None:
        self.got.append((subject, result, exc))


async def test_a_coroutine_that_does_not_wait_is_finished_when_start_returns() -> None:
    seen: list[object] = []

    async def tool(x: int) -> int:
        seen.append(asyncio.current_task())
        return x + 1

    before = asyncio.all_tasks()
    outcomes = Outcomes()
    running = inline.start(tool(1), outcomes, "subject")
    assert running.done() and running.result() == 2 and not running.cancelled()
    assert outcomes.got == [("subject", 2, None)]  # called in the step that finished it
    assert seen == [running]  # the tool's current task is its InlineTask...
    assert asyncio.current_task() is not running  # ...and the caller's is back once it returns
    assert asyncio.all_tasks() == before  # no task was made


async def test_the_callers_task_is_set_aside_and_restored() -> None:
    caller = asyncio.current_task()
    seen: list[object] = []

    async def tool() -> None:
        seen.append(asyncio.current_task())
        await asyncio.sleep(0)
        seen.append(asyncio.current_task())

    running = inline.start(tool())
    assert asyncio.current_task() is caller
    await running
    assert seen == [running, running] and caller not in seen


async def test_a_waiting_coroutine_goes_on_from_the_future_it_waits_for() -> None:
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    outcomes = Outcomes()

    async def tool() -> str:
        value = await future
        return value.upper()

    running = inline.start(tool(), outcomes, 7)
    assert not running.done() and outcomes.got == []
    assert running._fut_waiter is future  # what anyio reads of a task
    future.set_result("ok")
    assert await running == "OK"
    assert outcomes.got == [(7, "OK", None)]


async def test_a_bare_yield_goes_on_after_one_turn_of_the_loop() -> None:
    steps: list[str] = []

    async def tool() -> None:
        steps.append("first")
        await asyncio.sleep(0)
        steps.append("second")

    running = inline.start(tool())
    assert steps == ["first"]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert steps == ["first", "second"] and running.done()


async def times_out() -> str:
    """A coroutine whose wait outlasts its ``asyncio.timeout``."""
    try:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(5)
    except TimeoutError:
        return "timed out"
    return "not timed out"


async def test_asyncio_timeout_works_without_waiting_and_across_waits() -> None:
    async def quick() -> str:
        async with asyncio.timeout(5):
            return "quick"

    async def in_time() -> str:
        async with asyncio.timeout(5):
            await asyncio.sleep(0.001)
        return "in time"

    assert inline.start(quick()).result() == "quick"
    assert await inline.start(times_out()) == "timed out"
    assert await inline.start(in_time()) == "in time"


async def test_a_timeout_in_the_coroutine_never_cancels_the_caller() -> None:
    # Started from a task (as the stdio reader starts handlers): the timeout is the tool's.
    running = inline.start(times_out())
    await asyncio.sleep(0.05)  # the caller is cancelled here if the timeout took it for the tool's task
    assert running.result() == "timed out"
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_task_group_works_and_a_failing_child_cancels_its_parent() -> None:
    async def gather_two() -> list[int]:
        async with asyncio.TaskGroup() as group:
            a = group.create_task(asyncio.sleep(0.001, 1))
            b = group.create_task(asyncio.sleep(0.002, 2))
        return [a.result(), b.result()]

    async def fails() -> str:
        async def boom() -> None:
            raise ValueError("child")

        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(boom())
                await asyncio.sleep(5)  # cancelled by the failing child
        except ExceptionGroup as group_error:
            return f"child failed: {group_error.exceptions[0]}"
        return "no"

    assert await inline.start(gather_two()) == [1, 2]
    assert await inline.start(fails()) == "child failed: child"


async def test_anyio_cancel_scopes_and_locks_work_across_waits() -> None:
    lock = anyio.Lock()

    async def tool() -> tuple[bool, bool, object, object]:
        task = anyio.get_current_task()
        with anyio.move_on_after(0.01) as scope:
            await anyio.sleep(5)
        with anyio.fail_after(5):
            await anyio.sleep(0)
        async with lock:  # held across a wait: released by the same task
            await anyio.sleep(0)
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.sleep, 0)
        return scope.cancelled_caught, lock.locked(), task.id, anyio.get_current_task().id

    caught, locked, first, last = await inline.start(tool())
    assert caught and not locked and first == last


async def test_cancel_while_waiting_cancels_the_future_and_raises_where_it_waits() -> None:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    outcomes = Outcomes()
    cleaned: list[str] = []

    async def tool() -> None:
        try:
            await future
        finally:
            cleaned.append("finally")

    running = inline.start(tool(), outcomes)
    assert running.cancel("bye") and running.cancelling() == 1
    assert future.cancelled()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert running.cancelled() and cleaned == ["finally"]
    ((_, result, exc),) = outcomes.got
    assert result is None and isinstance(exc, asyncio.CancelledError)
    assert not running.cancel()  # finished: nothing more to cancel


async def test_a_coroutine_may_catch_its_cancellation_and_return() -> None:
    async def tool() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            return "stopped cleanly"
        return "slept"

    running = inline.start(tool())
    await asyncio.sleep(0)
    running.cancel()
    assert await running == "stopped cleanly"
    assert not running.cancelled() and running.cancelling() == 0


async def test_a_cancel_asked_in_the_first_step_is_raised_at_the_first_wait() -> None:
    async def waits() -> str:
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            return "raised at the wait"
        return "not raised"

    async def does_not_wait() -> str:
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        return "returned"

    assert await inline.start(waits()) == "raised at the wait"
    ended = inline.start(does_not_wait())  # a task that asks and returns without waiting ends cancelled
    assert ended.done() and ended.cancelled()


async def test_context_variables_are_the_coroutines_own() -> None:
    VAR.set("caller")
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def tool() -> tuple[str, str]:
        seen = VAR.get()  # the caller's value at the start
        VAR.set("tool")
        await future
        return seen, VAR.get()  # its own value across the wait

    running = inline.start(tool())
    assert VAR.get() == "caller"  # not leaked to the caller
    future.set_result(None)
    assert await running == ("caller", "tool")
    assert running.get_context()[VAR] == "tool"


async def test_exceptions_are_the_outcome_before_and_after_a_wait() -> None:
    async def at_once() -> None:
        raise ValueError("now")

    async def later() -> None:
        await asyncio.sleep(0)
        raise KeyError("later")

    outcomes = Outcomes()
    first = inline.start(at_once(), outcomes)
    assert isinstance(first.exception(), ValueError)
    second = inline.start(later(), outcomes)
    with pytest.raises(KeyError):
        await second
    assert [type(exc) for _, _, exc in outcomes.got] == [ValueError, KeyError]


async def test_keyboard_interrupt_is_raised_on() -> None:
    async def tool() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        inline.start(tool())


async def test_a_bad_yield_is_an_error_in_the_coroutine() -> None:
    class Bad:
        def __await__(self) -> Any:
            yield "not a future"

    async def tool() -> str:
        try:
            await Bad()
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    assert "bad yield" in await inline.start(tool())


async def test_a_waiter_cancelled_while_awaiting_cancels_the_coroutine() -> None:
    async def tool() -> None:
        await asyncio.sleep(5)

    running = inline.start(tool())
    waiter = asyncio.ensure_future(_await(running))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.sleep(0)
    assert running.cancelled()


async def test_done_callbacks_run_soon_after_it_finishes() -> None:
    called: list[object] = []

    async def tool() -> int:
        asyncio.current_task().add_done_callback(called.append)  # type: ignore[union-attr]
        await asyncio.sleep(0)
        return 1

    running = inline.start(tool())
    await running
    await asyncio.sleep(0)
    assert called == [running]
    running.add_done_callback(called.append)  # once finished: scheduled at once
    await asyncio.sleep(0)
    assert called == [running, running]


async def _await(running: inline.InlineTask[Any]) -> Any:
    return await running


async def test_running_loop_is_the_loop_running_in_this_thread() -> None:
    loop = asyncio.get_running_loop()
    assert inline.running_loop() is loop
    assert inline.running_loop() is loop  # known: no look-up

    seen: list[object] = []

    def elsewhere() -> None:  # another thread, its own loop, while this one runs
        async def ask() -> None:
            seen.append((inline.running_loop(), asyncio.get_running_loop()))

        asyncio.run(ask())

    await asyncio.to_thread(elsewhere)
    ((theirs, expected),) = seen
    assert theirs is expected and theirs is not loop
    assert inline.running_loop() is loop


def test_running_loop_outside_a_loop_raises_and_a_new_loop_is_found() -> None:
    async def ask() -> tuple[object, object]:
        return inline.running_loop(), asyncio.get_running_loop()

    first = asyncio.run(ask())
    with pytest.raises(RuntimeError):
        inline.running_loop()  # the loop it knew has stopped
    second = asyncio.run(ask())
    assert first[0] is first[1] and second[0] is second[1] and first[0] is not second[0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
async def test_a_forked_child_finds_its_own_loop() -> None:
    # The parent's loop, copied into the child while it runs, looks running there: the child
    # must not take it for its own.
    assert inline.running_loop() is asyncio.get_running_loop()
    pid = os.fork()
    if pid == 0:  # the child: a loop of its own
        code = 1
        try:

            async def ask() -> bool:
                return inline.running_loop() is asyncio.get_running_loop()

            code = 0 if asyncio.new_event_loop().run_until_complete(ask()) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


async def test_a_waiting_coroutine_is_one_of_the_loops_tasks() -> None:
    async def quick() -> None:
        return None

    async def waits() -> None:
        await asyncio.sleep(5)

    finished = inline.start(quick())
    running = inline.start(waits())
    tasks = asyncio.all_tasks()
    assert running in tasks and finished not in tasks
    running.cancel()
    await asyncio.sleep(0)
    assert running not in asyncio.all_tasks()  # done: no longer listed


def test_asyncio_run_cancels_the_coroutines_left_waiting_at_its_end() -> None:
    stopped: list[str] = []

    async def tool() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            stopped.append("cancelled in the loop")
            raise

    async def main() -> None:
        inline.start(tool())
        await asyncio.sleep(0)  # returns with the tool still waiting

    asyncio.run(main())
    assert stopped == ["cancelled in the loop"]


async def test_anyio_finds_its_root_task_among_the_loops_tasks() -> None:
    # anyio's thread hop looks through asyncio.all_tasks() for the loop's root task (reading
    # each one's done callbacks): a waiting InlineTask among them must not trip it.
    async def waits() -> None:
        await asyncio.sleep(5)

    running = inline.start(waits())

    async def hop() -> int:
        return await anyio.to_thread.run_sync(lambda: 7)

    assert await inline.start(hop()) == 7
    running.cancel()
