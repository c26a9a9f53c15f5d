//! The engine threads: one tokio current-thread runtime each (I/O + time drivers only), and a
//! controller that converges the thread's sessions on its share of the users, picking the family
//! each user runs once, here. Beside the users it runs the open model's pacer ([`crate::pacing`])
//! and, on thread 0, the `hold` fan-out trigger.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Family, Transport};
use crate::context::{Ctx, TICK};
use crate::families;
use crate::fanout;
use crate::shared::Shared;

/// This thread's CPU time in ns (getrusage RUSAGE_THREAD).
fn thread_cpu_ns() -> u64 {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(u) => {
            let t = |tv: nix::sys::time::TimeVal| {
                tv.tv_sec() as u64 * 1_000_000_000 + tv.tv_usec() as u64 * 1000
            };
            t(u.user_time()) + t(u.system_time())
        }
        Err(_) => 0,
    }
}

/// Body of engine thread `idx`.
pub(crate) fn thread_main(shared: Arc<Shared>, idx: usize) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            shared.event(
                "fatal",
                format!("engine thread {idx}: cannot build its runtime: {e}"),
            );
            return;
        }
    };
    let ctx = Rc::new(Ctx::new(shared.clone(), idx));
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, controller(ctx.clone()));
    // past the grace: whatever is still in flight is dropped with the LocalSet
    drop(local);
    shared.counters[idx]
        .sessions_open
        .store(0, Ordering::Relaxed);
    shared.counters[idx].inflight.store(0, Ordering::Relaxed);
    shared.counters[idx]
        .cpu_ns
        .store(thread_cpu_ns(), Ordering::Relaxed);
}

/// The user slots this thread runs: which are running now, and how many.
#[derive(Default)]
struct Slots {
    running: RefCell<Vec<bool>>,
    live: Cell<usize>,
}

async fn controller(ctx: Rc<Ctx>) {
    let shared = ctx.shared.clone();
    let slots = Rc::new(Slots::default());
    tokio::task::spawn_local(crate::pacing::pacer(ctx.clone()));
    if ctx.idx == 0 && ctx.cfg().hold_trigger.is_some() {
        tokio::task::spawn_local(fanout::trigger(ctx.clone()));
    }
    let mut scanned_for = usize::MAX;
    while !shared.stopping() {
        let want = shared.thread_users(ctx.idx);
        ctx.set_target(want);
        // the slots are looked at when the target moved or a slot below it ended, not every
        // tick (a thread may run tens of thousands of agents)
        if want != scanned_for || slots.live.get() < want {
            scanned_for = want;
            let mut running = slots.running.borrow_mut();
            if running.len() < want {
                running.resize(want, false);
            }
            for slot in 0..want {
                if !running[slot] {
                    running[slot] = true;
                    slots.live.set(slots.live.get() + 1);
                    let c = ctx.clone();
                    let s = slots.clone();
                    tokio::task::spawn_local(async move {
                        match (c.cfg().transport, c.cfg().family) {
                            (Transport::Stdio, _) => families::stdio::run(&c, slot).await,
                            (Transport::Http, Family::Hold) => families::hold::run(&c, slot).await,
                            (Transport::Http, Family::Tasks) => {
                                families::tasks::run(&c, slot).await
                            }
                            (Transport::Http, Family::Agents) => {
                                families::agents::run(&c, slot).await
                            }
                            (Transport::Http, _) => families::http::run(&c, slot).await,
                        }
                        s.running.borrow_mut()[slot] = false;
                        s.live.set(s.live.get() - 1);
                    });
                }
            }
        }
        shared.counters[ctx.idx]
            .cpu_ns
            .store(thread_cpu_ns(), Ordering::Relaxed);
        tokio::time::sleep(TICK).await;
    }
    ctx.wake_sessions();
    // stop: sessions finish what is in flight (and DELETE) until the grace runs out
    while slots.live.get() > 0 && !shared.past_deadline() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
