//! The open model: a pacer per engine thread generates the thread's share of the arrivals
//! (uniform or Poisson gaps) into a queue, by the wall clock from when the schedule began, and
//! the sessions take them from it (`Ctx::arrival`). It sleeps on a µs-resolution [`Timer`].

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::config::Arrivals;
use crate::context::{Ctx, TICK};

/// A monotonic timer with µs resolution (timerfd): tokio's timer has ms granularity.
pub struct Timer {
    fd: Option<tokio::io::unix::AsyncFd<TimerFdRaw>>,
}

struct TimerFdRaw(nix::sys::timerfd::TimerFd);

impl AsRawFd for TimerFdRaw {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl Default for Timer {
    fn default() -> Self {
        Self::new()
    }
}

impl Timer {
    pub fn new() -> Timer {
        use nix::sys::timerfd::{ClockId, TimerFd, TimerFlags};
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .ok()
        .and_then(|t| {
            // the fd is owned by the value AsyncFd holds, so it outlives the registration
            #[allow(deprecated)]
            let fd = tokio::io::unix::AsyncFd::new(TimerFdRaw(t));
            fd.ok()
        });
        Timer { fd }
    }

    /// Sleep `d` (µs resolution); falls back to tokio's timer if no timerfd could be made.
    pub async fn sleep(&self, d: Duration) {
        use nix::sys::time::TimeSpec;
        use nix::sys::timerfd::{Expiration, TimerSetTimeFlags};
        let Some(fd) = &self.fd else {
            tokio::time::sleep(d).await;
            return;
        };
        let d = d.max(Duration::from_micros(1));
        if fd
            .get_ref()
            .0
            .set(
                Expiration::OneShot(TimeSpec::from_duration(d)),
                TimerSetTimeFlags::empty(),
            )
            .is_err()
        {
            tokio::time::sleep(d).await;
            return;
        }
        // bounded: the timer fires after `d`; the outer timeout only guards a lost wakeup
        let _ = tokio::time::timeout(d + Duration::from_millis(50), async {
            loop {
                match fd.readable().await {
                    Ok(mut guard) => {
                        let mut buf = [0u8; 8];
                        match nix::unistd::read(guard.get_inner().0.as_fd(), &mut buf) {
                            Ok(_) => return,
                            Err(nix::errno::Errno::EAGAIN) => guard.clear_ready(),
                            Err(_) => return,
                        }
                    }
                    Err(_) => return,
                }
            }
        })
        .await;
    }
}

/// Open model: generate this thread's intended send times and queue them for the sessions.
pub(crate) async fn pacer(ctx: Rc<Ctx>) {
    let timer = Timer::new();
    // the next arrival's intended time, and the schedule it belongs to
    let mut next: Option<Instant> = None;
    let mut since: Option<Instant> = None;
    while !ctx.shared.stopping() {
        let Some(rate) = ctx.shared.thread_rate() else {
            next = None;
            ctx.clear_arrivals();
            tokio::time::sleep(TICK).await;
            continue;
        };
        let now = Instant::now();
        let open_since = ctx.shared.open_since();
        if next.is_none() || open_since != since {
            // a new schedule runs from when it was asked for, not from when this thread ran;
            // what the previous one queued and no session took is not sent
            if next.is_some() {
                ctx.clear_arrivals();
            }
            since = open_since;
            next = Some(ctx.shared.first_arrival(ctx.idx, open_since.unwrap_or(now)));
        }
        let at = emit(&ctx, rate, next.unwrap_or(now), now);
        next = Some(at);
        let wait = at.saturating_duration_since(Instant::now()).min(TICK * 2);
        if wait.is_zero() {
            tokio::task::yield_now().await;
        } else {
            timer.sleep(wait).await;
        }
    }
    // the arrivals due before `stop` was called, whenever this thread saw it: queued (no
    // session takes them now) or dropped, as any other
    if let (Some(rate), Some(at), Some(end)) =
        (ctx.shared.thread_rate(), next, ctx.shared.stopped_at())
    {
        emit(&ctx, rate, at, end);
    }
}

/// How late the pacer may queue an arrival before it counts as `behind`: a thread that wakes
/// this long after an arrival was due did not get to run (its own work, or a starved CPU), so
/// the generator, not the server, set the pace there. Well above a timer's wake-up delay.
pub(crate) const PACER_BEHIND: Duration = Duration::from_millis(10);

/// Queue (or drop, past `max_inflight`) every arrival from `at` up to `until`; the next one's
/// intended time. At most 100,000 a call, so a long stall never blocks the thread.
fn emit(ctx: &Ctx, rate: f64, mut at: Instant, until: Instant) -> Instant {
    let max_queue = ctx.cfg().max_inflight;
    let mut due = 0u32;
    // arrivals due before this are queued late by the pacer itself
    let late_before = until.checked_sub(PACER_BEHIND);
    let mut behind = 0u64;
    while at <= until && due < 100_000 {
        if late_before.is_some_and(|t| at < t) {
            behind += 1;
        }
        ctx.offer_arrival(at, max_queue);
        let gap = match ctx.cfg().arrivals {
            Arrivals::Uniform => 1.0 / rate,
            Arrivals::Poisson => -ctx.unit().ln() / rate,
        };
        at += Duration::from_secs_f64(gap.min(3600.0));
        due += 1;
    }
    if behind > 0 {
        ctx.counters().behind.fetch_add(behind, Ordering::Relaxed);
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Arrivals, Settings};
    use crate::shared::Shared;
    use crate::testing;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    fn shared(settings: Settings) -> Arc<Shared> {
        let cfg = settings.build().expect("valid settings");
        Arc::new(Shared::new(cfg).expect("engine state"))
    }

    fn open(rate: f64, threads: usize, worker_index: usize, worker_count: usize) -> Settings {
        Settings {
            url: Some("http://127.0.0.1:9/mcp".into()),
            rate: Some(rate),
            threads,
            worker_index,
            worker_count,
            ..Settings::default()
        }
    }

    /// Where `at` falls in a period of `period_ns`, on the system clock as `s` reads it.
    fn phase(s: &Shared, at: Instant, period_ns: u128) -> u128 {
        s.clock.wall_ns(at) % period_ns
    }

    /// How far phase `p` is from `want` around a period of `period_ns`.
    fn off(p: u128, want: u128, period_ns: u128) -> u128 {
        let d = (p + period_ns - want % period_ns) % period_ns;
        d.min(period_ns - d)
    }

    #[test]
    fn uniform_streams_of_threads_and_workers_interleave() {
        // (each process reads the system clock for itself: a phase is exact on its own reading)
        const MS: u128 = 1_000_000;
        // two workers at 1,000/s each, one thread each: a period of 1 ms, half a period apart
        let w0 = shared(open(1000.0, 1, 0, 2));
        let w1 = shared(open(1000.0, 1, 1, 2));
        let since = Instant::now();
        let (a, b) = (w0.first_arrival(0, since), w1.first_arrival(0, since));
        for at in [a, b] {
            assert!(
                at >= since && at < since + Duration::from_millis(1),
                "{at:?} vs {since:?}"
            );
        }
        assert!(off(phase(&w0, a, MS), 0, MS) <= 1, "worker 0 on the grid");
        assert!(
            off(phase(&w1, b, MS), MS / 2, MS) <= 1,
            "worker 1 half a period on"
        );
        // one process, four threads at 4,000/s in all: each at 1,000/s, a quarter apart
        let one = shared(open(4000.0, 4, 0, 1));
        let since = Instant::now();
        let phases: Vec<u128> = (0..4)
            .map(|idx| phase(&one, one.first_arrival(idx, since), MS))
            .collect();
        for (idx, p) in phases.iter().enumerate() {
            assert!(off(*p, idx as u128 * MS / 4, MS) <= 1, "{phases:?}");
        }
        // two workers of two threads each: the four streams at 0, 1/4, 1/2 and 3/4 of the period
        for (worker, idx, want) in [(0, 0, 0), (1, 0, 1), (0, 1, 2), (1, 1, 3)] {
            let s = shared(open(2000.0, 2, worker, 2));
            let p = phase(&s, s.first_arrival(idx, Instant::now()), MS);
            assert!(
                off(p, want * MS / 4, MS) <= 1,
                "worker {worker} thread {idx}: {p}"
            );
        }
    }

    #[test]
    fn arrivals_the_pacer_queues_late_count_as_behind() {
        let ctx = testing::ctx(open(1000.0, 1, 0, 1));
        let now = Instant::now();
        // on time: every arrival due within the last few ms
        emit(&ctx, 1000.0, now - Duration::from_millis(5), now);
        assert_eq!(ctx.counters().behind.load(Ordering::Relaxed), 0);
        // woken 50 ms late: the 40 arrivals due more than 10 ms ago are behind, the rest not
        let later = now + Duration::from_millis(50);
        emit(&ctx, 1000.0, now + Duration::from_millis(1), later);
        let behind = ctx.counters().behind.load(Ordering::Relaxed);
        assert!((39..=41).contains(&behind), "{behind} behind");
        assert_eq!(queued(&ctx), 6 + 50);
    }

    #[test]
    fn poisson_and_slow_schedules_start_when_asked() {
        let since = Instant::now();
        let poisson = shared(Settings {
            arrivals: Arrivals::Poisson,
            ..open(1000.0, 1, 1, 2)
        });
        assert_eq!(poisson.first_arrival(0, since), since);
        let slow = shared(open(0.5, 1, 1, 2));
        assert_eq!(slow.first_arrival(0, since), since);
    }

    /// Every arrival queued now, taken out.
    fn queued(ctx: &Ctx) -> usize {
        std::iter::from_fn(|| ctx.try_arrival()).count()
    }

    #[test]
    fn a_new_rate_is_a_schedule_of_its_own() {
        let ctx = testing::ctx(Settings {
            url: Some("http://127.0.0.1:9/mcp".into()),
            rate: Some(2000.0),
            ..Settings::default()
        });
        ctx.shared.begin_open_schedule();
        testing::run(async {
            let running = tokio::task::spawn_local(pacer(ctx.clone()));
            // no session takes them: the first rate's arrivals pile up
            tokio::time::sleep(Duration::from_millis(100)).await;
            ctx.shared.set_rate(Some(10.0));
            tokio::time::sleep(Duration::from_millis(140)).await;
            // the backlog is gone; the new schedule's first arrival is due within one period
            // (100 ms) of its start, where its grid puts it, and the next one a period later
            let counted = ctx.counters().queued.load(Ordering::Relaxed);
            let left = queued(&ctx);
            assert_eq!(counted, left as u64, "the queued count follows the queue");
            assert_eq!(ctx.counters().queued.load(Ordering::Relaxed), 0);
            assert!(
                (1..=2).contains(&left),
                "{left} arrivals queued after the new rate"
            );
            ctx.shared.request_stop(Duration::ZERO);
            running.await.expect("the pacer ends");
        });
    }
}
