"""Open-model pacing: a global arrival schedule shared by all users of a runner.

Closed-loop users (Locust's default) stop sending exactly when the server stalls, so the stall is
under-sampled (coordinated omission).  Here sends follow a fixed schedule instead, and latency is
measured from each send's *intended* time, so a stall shows up as the queue it really causes.

Global schedule: the target rate ``R`` (arrivals per second across all users of all workers) is
split evenly over ``N`` runners (workers / ``--processes`` children; 1 for a local run).  Runner
``k`` owns slots ``j = 0, 1, 2, ...`` at::

    intended(j) = start + (j * N + k) / R

so the union over runners is one evenly spaced stream at rate ``R`` (each runner at ``R/N``,
phase-shifted by ``k/R``).  ``start`` is anchored at the runner's first claim (so a slow ramp-up of
users does not start the test with a backlog).

Within a runner, every user asks the shared schedule for the next slot, sleeps until it, sends, and
reports ``completion - intended``.  A send that starts more than ``late_tolerance`` after its slot
is *late* (still sent, latency includes the wait).  Slots more than ``max_lag`` in the past when a
user comes to claim one are *dropped* (skipped, counted) so the schedule catches up instead of
firing an unbounded burst.  Enough users are needed: at least rate × latency per runner (Little's
law); otherwise late and dropped counts grow, which is the signal to add users.

:class:`OpenModelSchedule` is sans-IO (you pass the clock value in); :class:`Pacer` is the thin
gevent adapter.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from mcpfast.locust.histogram import Histogram

__all__ = ["OpenModelSchedule", "Pacer", "split_rate"]

DEFAULT_LATE_TOLERANCE = 0.002  # s; gevent/libev timers are good to about a millisecond
DEFAULT_MAX_LAG = 1.0  # s


def split_rate(rate: float, worker_index: int, worker_count: int) -> tuple[float, float, float]:
    """``(per_runner_rate, interval, phase)`` in per-second / seconds for runner ``worker_index``."""
    if rate < 0 or not math.isfinite(rate):
        raise ValueError(f"rate must be finite and >= 0, got {rate!r}")
    count = max(int(worker_count), 1)
    index = int(worker_index) % count if worker_index >= 0 else 0
    if rate == 0:
        return 0.0, math.inf, 0.0
    return rate / count, count / rate, index / rate


class OpenModelSchedule:
    """Pure arrival-schedule state machine; all times are seconds on the caller's clock.

    ``claim(now)`` hands out the next intended send time (dropping stale slots first);
    ``started(intended, now)`` records when the send actually began.  Counters: ``claimed``
    (slots handed out), ``sent`` (sends started; a user killed while waiting for its slot claims
    but never sends), ``late``, ``dropped``, ``behind`` (the native engine's arrivals its own
    pacer queued late: the generator behind its schedule; this pacer's users claim their slots
    themselves, so it counts none); ``lag`` is a µs histogram of ``start - intended`` (0 counted
    as 1 µs).
    """

    __slots__ = (
        "_interval",
        "_next",
        "_phase",
        "_start",
        "behind",
        "claimed",
        "dropped",
        "lag",
        "late",
        "late_tolerance",
        "max_lag",
        "rate",
        "sent",
        "worker_count",
        "worker_index",
    )

    def __init__(
        self,
        rate: float,
        worker_index: int = 0,
        worker_count: int = 1,
        *,
        late_tolerance: float = DEFAULT_LATE_TOLERANCE,
        max_lag: float = DEFAULT_MAX_LAG,
        start: float | None = None,
    ) -> None:
        if late_tolerance < 0 or max_lag <= 0:
            raise ValueError("late_tolerance must be >= 0 and max_lag > 0")
        self.late_tolerance = float(late_tolerance)
        self.max_lag = float(max_lag)
        self.claimed = 0
        self.sent = 0
        self.late = 0
        self.dropped = 0
        self.behind = 0
        self.lag = Histogram()
        self.rate = 0.0
        self.worker_index = 0
        self.worker_count = 1
        self._interval = math.inf
        self._phase = 0.0
        self._start: float | None = None
        self._next = 0
        self.configure(rate, worker_index, worker_count, start=start)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    @property
    def runner_rate(self) -> float:
        """This runner's share of the target rate (arrivals per second)."""
        return self.rate / self.worker_count if self.rate else 0.0

    def configure(self, rate: float, worker_index: int = 0, worker_count: int = 1, *, start: float | None = None) -> None:
        """Set the target rate and this runner's place; restarts the schedule (counters kept)."""
        _, self._interval, self._phase = split_rate(rate, worker_index, worker_count)
        self.rate = float(rate)
        self.worker_count = max(int(worker_count), 1)
        self.worker_index = int(worker_index) % self.worker_count if worker_index >= 0 else 0
        self.restart(start)

    def restart(self, start: float | None = None) -> None:
        """Begin a new schedule; ``start=None`` anchors it at the next claim."""
        self._start = start
        self._next = 0

    def reset_counters(self) -> None:
        self.claimed = self.sent = self.late = self.dropped = self.behind = 0
        self.lag.reset()

    def intended(self, slot: int) -> float:
        """Intended time of this runner's slot number ``slot``."""
        assert self._start is not None
        return self._start + self._phase + slot * self._interval

    def claim(self, now: float) -> float:
        """Take the next slot not more than ``max_lag`` behind ``now``; return its intended time."""
        if not self.rate:
            raise RuntimeError("closed model (rate 0): nothing to schedule")
        if self._start is None:
            self._start = now  # anchor: this runner's first slot is due at now + phase
        slot = self._next
        due = self._start + self._phase + slot * self._interval
        if now - due > self.max_lag:
            # first slot with due >= now - max_lag
            first = math.ceil((now - self.max_lag - self._start - self._phase) / self._interval)
            if first <= slot:  # float rounding guard
                first = slot + 1
            self.dropped += first - slot
            slot = first
            due = self._start + self._phase + slot * self._interval
        self._next = slot + 1
        self.claimed += 1
        return due

    def started(self, intended: float, now: float) -> bool:
        """Record that the send for ``intended`` began at ``now``; True if it counts as late."""
        self.sent += 1
        lag = now - intended
        us = int(lag * 1_000_000.0) if lag > 0 else 0
        self.lag.record(us)
        if lag > self.late_tolerance:
            self.late += 1
            return True
        return False

    def counters(self) -> dict[str, int]:
        return {"claimed": self.claimed, "sent": self.sent, "late": self.late, "dropped": self.dropped, "behind": self.behind}


class Pacer:
    """gevent adapter: ``intended = pacer.wait()`` before each send.

    Closed model (rate 0): returns the current clock immediately, so callers can always
    compute ``latency = clock() - intended``.  The clock defaults to ``time.perf_counter``; use
    the same clock for the completion time.
    """

    __slots__ = ("_sleep", "clock", "schedule")

    def __init__(
        self,
        schedule: OpenModelSchedule | None = None,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        self.schedule = schedule if schedule is not None else OpenModelSchedule(0.0)
        self.clock = clock
        if sleep is None:
            import gevent  # deferred: keep the module importable without gevent for sans-IO use

            sleep = gevent.sleep
        self._sleep = sleep

    @property
    def enabled(self) -> bool:
        return self.schedule.enabled

    def wait(self) -> float:
        """Block this greenlet until its slot; return the intended send time (clock seconds)."""
        schedule = self.schedule
        if not schedule.rate:
            return self.clock()
        now = self.clock()
        intended = schedule.claim(now)
        if intended > now:
            self._sleep(intended - now)
            now = self.clock()
        schedule.started(intended, now)
        return intended
