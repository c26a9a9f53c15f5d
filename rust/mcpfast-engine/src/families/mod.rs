//! The families: what one user does, each family behind one entry point (`run`) that the
//! runtime picks. Over HTTP: [`http`] (`tools_call`, `mixed`, `sse_streaming`, `handshake`,
//! `session_churn`, `discover`), [`tasks`], [`hold`] and [`agents`]; over child processes:
//! [`stdio`]. A session's held stream is [`held`]'s, for the families that hold one.
//!
//! This module holds what the HTTP families share: the user loop (the iteration budget, the
//! open model's arrivals, a refusal's `Retry-After`, the DELETE at the end), the per-session
//! iteration (the session opened once, again after the server forgot it, then one call per
//! iteration) and the connection of a held stream.

pub(crate) mod agents;
pub(crate) mod held;
pub(crate) mod hold;
pub(crate) mod http;
pub(crate) mod stdio;
pub(crate) mod tasks;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::context::{Ctx, BACKOFF, TICK};
use crate::http::{Conn, ExchangeError};
use crate::rows::FixedRow;
use crate::session::{Failed, HttpSession};

/// A held stream the server ended, or that could not be reached, is opened again at most this
/// often per user (a server that ends streams at once does not become a hot loop).
const REOPEN_EVERY: Duration = Duration::from_secs(1);

/// One iteration of an HTTP user, once the loop has taken it from the budget: `from` is its
/// start (the arrival's intended time in the open model, now in the closed one).
trait Iteration {
    /// The session lives across iterations, and is DELETEd when the user ends.
    const KEEPS_SESSION: bool;

    async fn iterate(&mut self, ctx: &Ctx, s: &mut HttpSession, from: Instant, open_model: bool);
}

/// An HTTP user's iterations, on its session's connection, until its slot is retired or the
/// engine stops; then (a session kept across iterations) its session is DELETEd while the
/// stop's grace lasts.
async fn user_loop<I: Iteration>(ctx: &Ctx, slot: usize, mut s: HttpSession, mut it: I) {
    ctx.counters().sessions_open.fetch_add(1, Ordering::Relaxed);
    while ctx.keep(slot) {
        if let Some(wait) = s.take_retry_wait() {
            if ctx.cfg().retry_after {
                let t0 = Instant::now();
                ctx.pause(wait).await;
                ctx.record(FixedRow::RetryWait, t0, Instant::now(), None, 0);
            }
        }
        if !ctx.shared.take_iteration() {
            // the iterations are spent: idle until retired or stopped
            ctx.pause(TICK).await;
            continue;
        }
        let open_model = ctx.open_model();
        let from = if open_model {
            match ctx.arrival(slot).await {
                Some(t) => t,
                None => continue,
            }
        } else {
            Instant::now()
        };
        it.iterate(ctx, &mut s, from, open_model).await;
    }
    // the held stream ends before the session: its end is not the server's doing
    s.end_held_stream();
    if I::KEEPS_SESSION && !ctx.shared.past_deadline() {
        s.delete(ctx).await;
    }
    ctx.tally(s.conn());
    ctx.counters().sessions_open.fetch_sub(1, Ordering::Relaxed);
}

/// What a per-session user sends on its open session each iteration. `open`: (intended,
/// actual) send time of the arrival in the open model.
trait Call {
    async fn call(
        &mut self,
        ctx: &Ctx,
        s: &mut HttpSession,
        from: Instant,
        open: Option<(Instant, Instant)>,
    ) -> Result<(), Failed>;
}

/// The per-session iteration: the session is opened once (and again when the server forgot
/// it: a re-initialization), then each iteration is one call on it.
struct PerSession<C> {
    call: C,
    /// The server forgot the session (404): the next open is a re-initialization.
    lost: bool,
}

impl<C: Call> PerSession<C> {
    fn new(call: C) -> PerSession<C> {
        PerSession { call, lost: false }
    }
}

impl<C: Call> Iteration for PerSession<C> {
    const KEEPS_SESSION: bool = true;

    async fn iterate(&mut self, ctx: &Ctx, s: &mut HttpSession, from: Instant, open_model: bool) {
        // the actual send time (open model only: the closed model sends at `from`)
        let sent = if open_model { Instant::now() } else { from };
        let opened = !s.is_open();
        if opened {
            if !s.open(ctx, from, false).await {
                ctx.iteration_done();
                ctx.pause(BACKOFF).await;
                return;
            }
            if self.lost {
                self.lost = false;
                ctx.counters().reinitialized.fetch_add(1, Ordering::Relaxed);
            }
            s.hold(ctx);
        }
        let open = open_model.then_some((from, sent));
        // the handshake had this arrival's intended time; the call starts after it
        let from = if opened { Instant::now() } else { from };
        let r = self.call.call(ctx, s, from, open).await;
        ctx.iteration_done();
        if let Err(f) = r {
            if f.lost_session {
                s.forget();
                self.lost = true;
                s.unhold();
            }
            if f.backoff {
                ctx.pause(BACKOFF / 10).await;
            }
        }
    }
}

/// A new connection for a held stream, each time, so that its opening is timed apart from the
/// stream's: the stream's start, or None when it could not be opened (a failure of `row`).
async fn connect_held(ctx: &Ctx, conn: &mut Conn, row: FixedRow) -> Option<Instant> {
    conn.close();
    let t0 = Instant::now();
    let connected = tokio::time::timeout(ctx.cfg().timeout, conn.connect()).await;
    let t0 = t0 + ctx.opened(conn);
    let failure = match connected {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.kind()),
        Err(_) => Some(ExchangeError::Timeout.kind()),
    };
    if let Some(reason) = failure {
        conn.close();
        ctx.record(row, t0, Instant::now(), Some(&reason), 0);
        return None;
    }
    Some(t0)
}

/// For the families' tests: `n` iterations of `it` by one user, on one session.
#[cfg(test)]
fn iterate<I: Iteration>(ctx: &Ctx, mut it: I, n: usize) {
    crate::testing::run(async {
        let mut s = HttpSession::new(ctx);
        for _ in 0..n {
            it.iterate(ctx, &mut s, Instant::now(), false).await;
        }
    });
}
