//! The engine threads: one tokio current-thread runtime each (I/O + time drivers only).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::Shared;

/// This thread's CPU time in ns (getrusage RUSAGE_THREAD).
pub fn thread_cpu_ns() -> u64 {
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
pub fn thread_main(shared: Arc<Shared>, idx: usize) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            shared.event("fatal", format!("engine thread {idx}: cannot build its runtime: {e}"));
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        while !shared.stopping() {
            shared.counters[idx]
                .cpu_ns
                .store(thread_cpu_ns(), Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}
