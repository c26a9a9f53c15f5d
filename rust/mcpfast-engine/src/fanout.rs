//! The `hold` fan-out (`hold_trigger`, `hold` with streams): once every stream of the engine is
//! open (and a second more, for the server to settle), and then every `hold_trigger_every`, one
//! extra session (on thread 0) calls the trigger tool, which makes the server notify every
//! session. Each held stream that receives a `notifications/*/list_changed` records
//! `hold:fanout`, from the trigger's send to the arrival (both read on CLOCK_MONOTONIC where
//! they happen: the send just before the request is written, the arrival as soon as its bytes
//! are read); `hold:fanout-all` is the time to the round's last held stream (failed, at the next
//! round, when some stream missed it). With `hold_clock` the rounds (number, send time) go
//! through a file, so that engines in several processes of one host measure against one
//! trigger. The held streams themselves are the `hold` family's.

use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::check::string_member;
use crate::context::{Ctx, BACKOFF};
use crate::rows::{trigger_name, FixedRow};
use crate::session::HttpSession;
use crate::shared::{lock, Fanout};
use crate::templates::Template;

/// How often a user that holds all its streams, and the trigger waiting for every stream,
/// look at their targets (retired, stopped, every stream open).
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The trigger's first call waits this long once every stream is open (the server settles; a
/// memory sample of it taken then sees the held streams alone).
const SETTLE: Duration = Duration::from_secs(1);

/// CLOCK_MONOTONIC in ns: one clock for every process of the host.
pub(crate) fn mono_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    })
}

/// `now` moved back by the ns between `sent_ns` and `now_ns` (both CLOCK_MONOTONIC).
fn since(now: Instant, now_ns: u64, sent_ns: u64) -> Instant {
    now.checked_sub(Duration::from_nanos(now_ns.saturating_sub(sent_ns)))
        .unwrap_or(now)
}

/// Start round `round` sent at `sent_ns`; the round before it fails `hold:fanout-all` if some
/// stream missed its event.
fn begin_round(ctx: &Ctx, f: &mut Fanout, round: u64, sent_ns: u64) {
    if f.round != 0 && f.seen < f.expected {
        let now = Instant::now();
        let from = since(now, mono_ns(), f.sent_ns);
        let reason = format!(
            "{} of {} streams missed the event",
            f.expected - f.seen,
            f.expected
        );
        ctx.record(FixedRow::HoldFanoutAll, from, now, Some(&reason), 0);
    }
    f.round = round;
    f.sent_ns = sent_ns;
    f.seen = 0;
    f.expected = ctx.shared.streams_open();
}

/// The trigger is about to send: a new round, from now.
fn trigger_round(ctx: &Ctx) {
    let shared = &ctx.shared;
    let mut f = lock(&shared.fanout);
    let round = f.round.max(shared.round_now(&f).0) + 1;
    let sent_ns = mono_ns();
    if let Some(file) = &shared.hold_clock {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&round.to_le_bytes());
        b[8..].copy_from_slice(&sent_ns.to_le_bytes());
        if let Err(e) = file.write_all_at(&b, 0) {
            shared.event("fatal", format!("hold_clock: cannot write: {e}"));
        }
    }
    begin_round(ctx, &mut f, round, sent_ns);
    f.triggers += 1;
}

/// A list change arrived on a held stream at `now` (`now_ns` on CLOCK_MONOTONIC).
pub(crate) fn arrival(ctx: &Ctx, now: Instant, now_ns: u64) {
    let shared = &ctx.shared;
    let mut f = lock(&shared.fanout);
    let (round, sent_ns) = shared.round_now(&f);
    if round == 0 {
        return; // no trigger yet: a change the server made of its own accord
    }
    if round > f.round {
        begin_round(ctx, &mut f, round, sent_ns);
    }
    let from = since(now, now_ns, f.sent_ns);
    ctx.record(FixedRow::HoldFanout, from, now, None, 0);
    f.seen += 1;
    if f.seen == f.expected {
        let us = now.saturating_duration_since(from).as_micros() as u64;
        let round = f.round;
        f.complete.push((round, us));
        ctx.record(FixedRow::HoldFanoutAll, from, now, None, 0);
    }
}

/// A `notifications/<list>/list_changed` message.
pub(crate) fn list_changed(message: &[u8]) -> bool {
    string_member(message, "method")
        .is_some_and(|m| m.starts_with("notifications/") && m.ends_with("/list_changed"))
}

/// The fan-out trigger (thread 0, `hold_trigger`): waits until every stream of the engine is
/// open, then calls the tool on a session of its own, [`SETTLE`] later and every
/// `hold_trigger_every`.
pub(crate) async fn trigger(ctx: Rc<Ctx>) {
    let Some(tool) = ctx.cfg().hold_trigger.clone() else {
        return;
    };
    let shared = ctx.shared.clone();
    let per_user = ctx.cfg().hold_streams as u64;
    loop {
        if shared.stopping() {
            return;
        }
        let target = shared.users() as u64 * per_user;
        if target > 0 && shared.streams_open() >= target {
            break;
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
    let row = shared.name_id(&trigger_name(&tool));
    let params = format!(
        r#"{{"name":{},"arguments":{{}}}}"#,
        Value::String(tool.clone())
    );
    let t = Template::new(
        false,
        ctx.cfg(),
        "tools/call",
        Some(&params),
        Some(&tool),
        row,
        false,
    );
    let every = ctx.cfg().hold_trigger_every;
    let mut s = HttpSession::new(&ctx);
    let mut next = Instant::now() + SETTLE;
    while !shared.stopping() {
        if !s.is_open() && !s.open(&ctx, Instant::now(), false).await {
            ctx.pause(BACKOFF).await;
            continue;
        }
        let now = Instant::now();
        if next > now {
            tokio::time::sleep((next - now).min(LOOK_EVERY)).await;
            continue;
        }
        next = (next + every).max(now);
        trigger_round(&ctx);
        if let Err(f) = s.one(&ctx, &t, Instant::now(), row, None).await {
            if f.lost_session {
                s.forget();
            }
        }
    }
    if !shared.past_deadline() {
        s.delete(&ctx).await;
    }
    ctx.tally(s.conn());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_list_changes_are_fanout_events() {
        for (message, yes) in [
            (
                r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":{}}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"method":"x/list_changed"}}"#,
                false,
            ),
            ("not json", false),
        ] {
            assert_eq!(list_changed(message.as_bytes()), yes, "{message}");
        }
    }

    #[test]
    fn a_time_on_the_monotonic_clock_moves_an_instant_back() {
        let now = Instant::now();
        let now_ns = mono_ns();
        assert!(now_ns > 0);
        let from = since(now, now_ns, now_ns - 1_500_000);
        assert_eq!(now.duration_since(from), Duration::from_micros(1500));
        // a send time after the arrival (clock read order) is no time at all, never a panic
        assert_eq!(since(now, now_ns, now_ns + 10), now);
    }
}
