//! `hold` with streams (`hold_streams` > 0): each user opens that many sessions (initialize +
//! initialized on its own keep-alive connection, closed once they are all open) and holds one
//! GET stream per session, each on a connection of its own, until the user is retired or the
//! engine stops. Rows: `initialize`, `notifications/initialized`, `GET:open` (time to the
//! stream's head), `GET:event` (the gap before each event with data).
//!
//! The fan-out (`hold_trigger`): once every stream of the engine is open (and a second more, for
//! the server to settle), and then every `hold_trigger_every`, one extra session (on thread 0) calls the trigger tool, which makes
//! the server notify every session. Each held stream that receives a
//! `notifications/*/list_changed` records `hold:fanout`, from the trigger's send to the
//! arrival (both read on CLOCK_MONOTONIC where they happen: the send just before the request
//! is written, the arrival as soon as its bytes are read); `hold:fanout-all` is the time to
//! the round's last held stream (failed, at the next round, when some stream missed it).
//! With `hold_clock` the rounds (number, send time) go through a file, so that engines in
//! several processes of one host measure against one trigger.

use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mcpfast_core::sse::{SseDecoder, SseItem};
use serde_json::Value;
use tokio::task::JoinSet;

use crate::context::{Ctx, BACKOFF, TICK};
use crate::http::{Conn, ResponseParser};
use crate::http_families::{connect_held, refusal, HttpSession, REOPEN_EVERY};
use crate::rows::{trigger_name, FixedRow};
use crate::shared::lock;
use crate::shared::{Counters, Fanout};
use crate::templates::Template;

/// How often a user that holds all its streams, and the trigger waiting for every stream,
/// look at their targets (retired, stopped, every stream open).
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The trigger's first call waits this long once every stream is open (the server settles; a
/// memory sample of it taken then sees the held streams alone).
const SETTLE: Duration = Duration::from_secs(1);

/// CLOCK_MONOTONIC in ns: one clock for every process of the host.
pub fn mono_ns() -> u64 {
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
fn arrival(ctx: &Ctx, now: Instant, now_ns: u64) {
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

/// A held stream while this lives (counted in `held`, and in flight).
struct Holding<'a>(&'a Counters);

impl<'a> Holding<'a> {
    fn new(counters: &'a Counters) -> Holding<'a> {
        counters.held.fetch_add(1, Ordering::Relaxed);
        counters.inflight.fetch_add(1, Ordering::Relaxed);
        Holding(counters)
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::Relaxed);
        self.0.inflight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A `notifications/<list>/list_changed` message.
fn list_changed(message: &[u8]) -> bool {
    crate::check::string_member(message, "method")
        .is_some_and(|m| m.starts_with("notifications/") && m.ends_with("/list_changed"))
}

/// One user: `hold_streams` sessions, each with its held GET stream, until retired or
/// stopped; then the streams are dropped and (`hold_delete`) the sessions DELETEd while the
/// stop's grace lasts.
pub(crate) async fn hold_streams(ctx: &Rc<Ctx>, slot: usize) {
    let k = ctx.cfg().hold_streams;
    let mut s = HttpSession::new(ctx);
    let mut streams = JoinSet::new();
    let mut sessions = Vec::with_capacity(k.min(4096));
    ctx.counters().sessions_open.fetch_add(1, Ordering::Relaxed);
    while ctx.keep(slot) {
        if sessions.len() >= k {
            // every stream opened: the POST connection is not needed while they are held
            s.conn.close();
            ctx.pause(LOOK_EVERY).await;
            continue;
        }
        if !ctx.shared.take_iteration() {
            ctx.pause(TICK).await;
            continue;
        }
        if s.open(ctx, Instant::now(), true).await {
            if let Some(session) = s.session.take() {
                let mut request = Vec::with_capacity(256);
                ctx.proto.head(&mut request, "GET", Some(&session));
                request.extend_from_slice(&s.own_headers);
                request.extend_from_slice(b"\r\n");
                streams.spawn_local(listen(Rc::clone(ctx), request));
                sessions.push(session);
            }
        } else {
            ctx.pause(BACKOFF).await;
        }
        ctx.iteration_done();
    }
    streams.abort_all();
    while streams.join_next().await.is_some() {}
    if ctx.cfg().hold_delete {
        for session in sessions {
            if ctx.shared.past_deadline() {
                break;
            }
            s.session = Some(session);
            s.delete(ctx).await;
        }
    }
    ctx.tally(&s.conn);
    ctx.counters().sessions_open.fetch_sub(1, Ordering::Relaxed);
}

/// A session's held GET stream: opened, read until the server ends it, opened again (at most
/// once per [`REOPEN_EVERY`]) unless the server refused it.
async fn listen(ctx: Rc<Ctx>, request: Vec<u8>) {
    let mut conn = Conn::new(ctx.endpoint());
    conn.set_max_body(ctx.cfg().max_reply_bytes);
    let mut last_open: Option<Instant> = None;
    loop {
        if let Some(due) = last_open.map(|at| at + REOPEN_EVERY) {
            if due > Instant::now() {
                tokio::time::sleep_until(due.into()).await;
            }
        }
        last_open = Some(Instant::now());
        if !listen_once(&ctx, &mut conn, &request).await {
            break;
        }
    }
    ctx.tally(&conn);
}

/// Open the stream once, on a new connection, and read it until it ends; false when the
/// server refused it (not opened again).
async fn listen_once(ctx: &Ctx, conn: &mut Conn, request: &[u8]) -> bool {
    let Some(t0) = connect_held(ctx, conn, FixedRow::GetOpen).await else {
        return true;
    };
    ctx.counters().sent.fetch_add(1, Ordering::Relaxed);
    let mut decoder = SseDecoder::new(
        ctx.cfg()
            .max_reply_bytes
            .min(mcpfast_core::DEFAULT_MAX_EVENT),
    );
    let mut holding: Option<Holding<'_>> = None;
    let mut last = t0;
    let r = conn
        .stream(request, &mut |p: &ResponseParser, chunk: &[u8]| {
            if p.status != 200 {
                return; // a refusal: judged once it has ended
            }
            let now = Instant::now();
            if holding.is_none() {
                holding = Some(Holding::new(ctx.counters()));
                ctx.record(FixedRow::GetOpen, t0, now, None, 0);
                last = now;
            }
            if chunk.is_empty() {
                return;
            }
            let now_ns = mono_ns();
            decoder.feed(chunk, |item| {
                if let SseItem::Event { data, .. } = item {
                    if data.is_empty() {
                        return;
                    }
                    ctx.record(FixedRow::GetEvent, last, now, None, 0);
                    last = now;
                    if list_changed(data.as_bytes()) {
                        arrival(ctx, now, now_ns);
                    }
                }
            });
        })
        .await;
    let end = Instant::now();
    conn.close();
    if holding.is_some() {
        return true; // the server ended a stream it had opened: not a failure
    }
    let p = &conn.parser;
    let (reason, again) = match &r {
        Ok(()) => (refusal(p).0, false),
        Err(e) => (e.kind(), true),
    };
    if !again {
        ctx.sample(FixedRow::GetOpen, &reason, conn);
    }
    ctx.record(FixedRow::GetOpen, t0, end, Some(&reason), 0);
    again
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
        if s.session.is_none() && !s.open(&ctx, Instant::now(), false).await {
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
                s.session = None;
            }
        }
    }
    if !shared.past_deadline() {
        s.delete(&ctx).await;
    }
    ctx.tally(&s.conn);
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
