"""Open-model pacer on a fake clock: intended times, late and dropped sends, rate split."""

from __future__ import annotations

import math

import pytest

from mcpfast.locust.pacing import OpenModelSchedule, Pacer, split_rate


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_intended_times_follow_the_schedule() -> None:
    s = OpenModelSchedule(100.0)
    times = [s.claim(10.0) for _ in range(5)]  # five users claim at the same instant
    assert times == pytest.approx([10.0, 10.01, 10.02, 10.03, 10.04])
    assert s.claimed == 5 and s.dropped == 0


def test_late_sends_are_counted_and_still_sent() -> None:
    s = OpenModelSchedule(1000.0, late_tolerance=0.002)
    t0 = s.claim(0.0)
    assert s.started(t0, 0.0005) is False  # 0.5 ms behind: on time
    t1 = s.claim(0.0005)
    assert s.started(t1, t1 + 0.010) is True  # 10 ms behind: late
    assert (s.sent, s.late, s.dropped) == (2, 1, 0)
    assert s.lag.total_count == 2 and s.lag.max == pytest.approx(10_000, abs=1)


def test_dropped_sends_let_the_schedule_catch_up() -> None:
    s = OpenModelSchedule(1000.0, max_lag=0.5)
    assert s.claim(0.0) == 0.0
    # the only user was stuck for 2 s: slots due before 1.5 s are skipped, not sent in a burst
    t = s.claim(2.0)
    assert t == pytest.approx(1.5)
    assert s.dropped == 1499  # slots 1..1499 (due 0.001 .. 1.499 s)
    assert s.claim(2.0) == pytest.approx(1.501)  # the next user takes the next slot: still within max_lag
    assert s.counters() == {"claimed": 3, "sent": 0, "late": 0, "dropped": 1499, "behind": 0}


def test_rate_split_across_workers_interleaves_into_one_global_stream() -> None:
    assert split_rate(300.0, 1, 3) == pytest.approx((100.0, 0.01, 1 / 300))
    assert split_rate(0.0, 0, 4)[1] == math.inf
    runners = [OpenModelSchedule(300.0, k, 3, start=0.0) for k in range(3)]
    assert [r.runner_rate for r in runners] == pytest.approx([100.0] * 3)
    merged = sorted(r.claim(0.0) for r in runners for _ in range(10))
    assert merged == pytest.approx([j / 300.0 for j in range(30)])
    # an index beyond the count (a reconnected worker) wraps around
    assert OpenModelSchedule(300.0, 4, 3, start=0.0).claim(0.0) == pytest.approx(1 / 300)


def test_pacer_sleeps_until_intended_time_on_a_fake_clock() -> None:
    clock = FakeClock(100.0)
    pacer = Pacer(OpenModelSchedule(50.0), clock=clock, sleep=clock.sleep)
    intended = [pacer.wait() for _ in range(4)]  # one user, sending instantly
    assert intended == pytest.approx([100.0, 100.02, 100.04, 100.06])
    assert clock.sleeps == pytest.approx([0.02, 0.02, 0.02])
    clock.now += 0.5  # a 500 ms stall: the next send is 440 ms late, latency counts from 100.08
    assert pacer.wait() == pytest.approx(100.08)
    assert (pacer.schedule.sent, pacer.schedule.late, pacer.schedule.dropped) == (5, 1, 0)


def test_pacer_closed_model_returns_now() -> None:
    clock = FakeClock(5.0)
    pacer = Pacer(clock=clock, sleep=clock.sleep)
    assert not pacer.enabled
    assert pacer.wait() == 5.0 and clock.sleeps == []
    with pytest.raises(RuntimeError):
        pacer.schedule.claim(5.0)


def test_reconfigure_restarts_the_schedule_and_validates_input() -> None:
    s = OpenModelSchedule(10.0)
    s.claim(1.0)
    s.configure(20.0, 1, 2)
    assert s.claim(7.0) == pytest.approx(7.0 + 1 / 20.0)  # re-anchored at the first claim, plus phase
    with pytest.raises(ValueError):
        OpenModelSchedule(-1.0)
    with pytest.raises(ValueError):
        OpenModelSchedule(1.0, max_lag=0)
