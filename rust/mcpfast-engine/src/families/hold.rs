//! `hold`: each user keeps the sessions it opens. Without streams (`hold_streams` 0), one
//! keep-alive connection opens a session per iteration while the iterations last and keeps it.
//! With streams, each user opens `hold_streams` sessions (initialize + initialized on its own
//! keep-alive connection, closed once they are all open) and holds one GET stream per session,
//! each on a connection of its own. Until the user is retired or the engine stops; then the
//! sessions are DELETEd (`hold_delete`, while the stop's grace lasts). Rows: `initialize`,
//! `notifications/initialized`, `GET:open` (time to the stream's head), `GET:event` (the gap
//! before each event with data), `DELETE`; a list change on a held stream is a fan-out arrival
//! ([`crate::fanout`]).

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use mcpfast_core::sse::{SseDecoder, SseItem};
use tokio::task::JoinSet;

use super::{connect_held, REOPEN_EVERY};
use crate::context::{Ctx, BACKOFF, TICK};
use crate::fanout::{self, list_changed, mono_ns, LOOK_EVERY};
use crate::http::{Conn, ResponseParser};
use crate::mcp::{refusal, Session};
use crate::rows::FixedRow;
use crate::session::HttpSession;
use crate::shared::Counters;

/// One `hold` user (the runtime's entry into this family).
pub(crate) async fn run(ctx: &Rc<Ctx>, slot: usize) {
    if ctx.cfg().hold_streams > 0 {
        hold_streams(ctx, slot).await;
    } else {
        hold_sessions(ctx, slot).await;
    }
}

/// `hold`: one keep-alive connection that opens sessions (one per iteration, while the
/// iterations last) and keeps them until the user is retired or the engine stops; then
/// DELETEs them (`hold_delete`, while the stop's grace lasts).
async fn hold_sessions(ctx: &Ctx, slot: usize) {
    let mut s = HttpSession::new(ctx);
    let mut held: Vec<Session> = Vec::new();
    ctx.counters().sessions_open.fetch_add(1, Ordering::Relaxed);
    while ctx.keep(slot) {
        if !ctx.shared.take_iteration() {
            ctx.pause(TICK).await;
            continue;
        }
        if s.open(ctx, Instant::now(), true).await {
            if let Some(session) = s.take_session() {
                held.push(session);
                ctx.counters().held.fetch_add(1, Ordering::Relaxed);
            }
        }
        ctx.iteration_done();
    }
    let n = held.len() as u64;
    if ctx.cfg().hold_delete {
        for session in held {
            if ctx.shared.past_deadline() {
                break;
            }
            s.delete_kept(ctx, session).await;
        }
    }
    ctx.counters().held.fetch_sub(n, Ordering::Relaxed);
    ctx.tally(s.conn());
    ctx.counters().sessions_open.fetch_sub(1, Ordering::Relaxed);
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

/// One user: `hold_streams` sessions, each with its held GET stream, until retired or
/// stopped; then the streams are dropped and (`hold_delete`) the sessions DELETEd while the
/// stop's grace lasts.
async fn hold_streams(ctx: &Rc<Ctx>, slot: usize) {
    let k = ctx.cfg().hold_streams;
    let mut s = HttpSession::new(ctx);
    let mut streams = JoinSet::new();
    let mut sessions = Vec::with_capacity(k.min(4096));
    ctx.counters().sessions_open.fetch_add(1, Ordering::Relaxed);
    while ctx.keep(slot) {
        if sessions.len() >= k {
            // every stream opened: the POST connection is not needed while they are held
            s.close_connection();
            ctx.pause(LOOK_EVERY).await;
            continue;
        }
        if !ctx.shared.take_iteration() {
            ctx.pause(TICK).await;
            continue;
        }
        if s.open(ctx, Instant::now(), true).await {
            if let Some(session) = s.take_session() {
                let request = s.get_stream_request(ctx, &session);
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
            s.delete_kept(ctx, session).await;
        }
    }
    ctx.tally(s.conn());
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
                        fanout::arrival(ctx, now, now_ns);
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
