//! A session's held stream, beside its requests for as long as its user lives: the standalone
//! GET stream (handshake era) or a 2026-07-28 `subscriptions/listen`, each opening on a
//! connection of its own. The session publishes what to hold ([`crate::session::HttpSession::hold`]); the
//! families that hold one (`sse_streaming`, `agents`) join [`held_stream`] with their user.

use std::sync::atomic::Ordering;
use std::time::Instant;

use mcpfast_core::sse::{SseDecoder, SseItem};

use super::{connect_held, REOPEN_EVERY};
use crate::check::{check_json, string_member, Verdict, Want};
use crate::context::Ctx;
use crate::http::{Conn, ContentType, ExchangeError, ResponseParser};
use crate::mcp::refusal;
use crate::rows::FixedRow;
use crate::session::{HeldReceiver, HeldRequest};
use crate::shared::Counters;

/// The acknowledgement a 2026-07-28 `subscriptions/listen` stream starts with.
const LISTEN_ACK: &str = "notifications/subscriptions/acknowledged";

/// The failure of a `subscriptions/listen` stream that carried no acknowledgement.
const NO_ACK: &str = "listen stream gave no acknowledgement";

/// A request in flight while this lives: a held stream is one request, sent when it opens and
/// in flight until it ends (its future dropped at the end of its session or at the stop too).
struct InFlight<'a>(&'a Counters);

impl<'a> InFlight<'a> {
    fn new(ctx: &'a Ctx) -> InFlight<'a> {
        let counters = ctx.counters();
        counters.sent.fetch_add(1, Ordering::Relaxed);
        counters.inflight.fetch_add(1, Ordering::Relaxed);
        InFlight(counters)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.inflight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How one opening of a held stream ended.
enum Held {
    /// The server ended the stream, or it could not be reached: open it again.
    Ended,
    /// The server refused it (a status other than 200, no event stream, a reply instead of the
    /// acknowledgement): not opened again for this session.
    Refused,
}

/// How the held stream's wait on its session ended.
enum Watched {
    Done(Held),
    /// The session ended or was replaced: the stream is dropped (not a failure).
    Replaced,
    /// The user stopped.
    Stopped,
}

/// The user's held stream, beside its calls for as long as the user lives. It
/// holds the stream of the session the calls published ([`crate::session::HttpSession::hold`]) on its own
/// connection: opened once the session is open, kept while it lives, dropped when it ends (a
/// session lost or replaced, the user retired, the engine stopping: not a failure). A stream
/// the server ends, or that cannot be reached, is opened again (at most once per
/// [`REOPEN_EVERY`]); one the server refuses waits for the next session.
pub(crate) async fn held_stream(ctx: &Ctx, mut rx: HeldReceiver) {
    let mut conn = Conn::new(ctx.endpoint());
    conn.set_max_body(ctx.cfg().max_reply_bytes);
    let mut last_open: Option<Instant> = None;
    let mut refused: Option<u64> = None;
    loop {
        let current = rx.borrow_and_update().clone();
        let Some(held) = current.filter(|h| refused != Some(h.session)) else {
            if rx.changed().await.is_err() {
                break;
            }
            continue;
        };
        if let Some(due) = last_open.map(|at| at + REOPEN_EVERY) {
            if due > Instant::now() {
                tokio::select! {
                    biased;
                    changed = rx.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        continue;
                    }
                    () = tokio::time::sleep_until(due.into()) => {}
                }
            }
        }
        last_open = Some(Instant::now());
        let watched = {
            let once = hold_once(ctx, &mut conn, &held);
            tokio::pin!(once);
            loop {
                tokio::select! {
                    biased;
                    changed = rx.changed() => {
                        if changed.is_err() {
                            break Watched::Stopped;
                        }
                        if rx.borrow().as_ref().is_none_or(|h| h.session != held.session) {
                            break Watched::Replaced;
                        }
                    }
                    ended = &mut once => break Watched::Done(ended),
                }
            }
        };
        // a stream dropped mid-response leaves its connection unusable; an ended one is not reused
        conn.close();
        match watched {
            Watched::Done(Held::Ended) | Watched::Replaced => {}
            Watched::Done(Held::Refused) => refused = Some(held.session),
            Watched::Stopped => break,
        }
    }
    ctx.tally(&conn);
}

/// Open the held stream once, on a new connection, and read it until the server ends it. The
/// GET stream: `GET:open` (time to its first bytes: the priming event, or else the first event),
/// `GET:event` (the gap before each event with data), `GET:405` (the server offers none); a
/// refusal or an error fails `GET:open`. `subscriptions/listen`: `subscriptions/listen:ack`
/// (time to the acknowledgement), failed by a refusal, an error, or a stream without it.
async fn hold_once(ctx: &Ctx, conn: &mut Conn, held: &HeldRequest) -> Held {
    let _inflight = InFlight::new(ctx);
    let row = if held.listen.is_some() {
        FixedRow::ListenAck
    } else {
        FixedRow::GetOpen
    };
    let Some(t0) = connect_held(ctx, conn, row).await else {
        return Held::Ended;
    };
    let mut decoder = SseDecoder::new(
        ctx.cfg()
            .max_reply_bytes
            .min(mcpfast_core::DEFAULT_MAX_EVENT),
    );
    let mut last: Option<Instant> = None;
    let mut acked = false;
    // the listen's reply (an error, or a result) where its acknowledgement should be
    let mut answered: Option<String> = None;
    let r = conn
        .stream(&held.bytes, &mut |p: &ResponseParser, chunk: &[u8]| {
            if p.status != 200 || chunk.is_empty() {
                return; // a refusal (judged once it has ended), or only the head so far
            }
            let now = Instant::now();
            match held.listen {
                None => {
                    if last.is_none() {
                        ctx.record(FixedRow::GetOpen, t0, now, None, 0);
                        last = Some(now);
                    }
                    decoder.feed(chunk, |item| {
                        if let SseItem::Event { data, .. } = item {
                            if !data.is_empty() {
                                ctx.record(FixedRow::GetEvent, last.unwrap_or(t0), now, None, 0);
                                last = Some(now);
                            }
                        }
                    });
                }
                Some(id) => {
                    if p.content_type != ContentType::EventStream {
                        return;
                    }
                    decoder.feed(chunk, |item| {
                        let SseItem::Event { data, .. } = item else {
                            return;
                        };
                        if acked || answered.is_some() || data.is_empty() {
                            return;
                        }
                        let message = data.as_bytes();
                        if string_member(message, "method").as_deref() == Some(LISTEN_ACK) {
                            acked = true;
                            ctx.record(FixedRow::ListenAck, t0, now, None, 0);
                            return;
                        }
                        match check_json(message, id, Want::Plain).verdict() {
                            Verdict::NotAReply => {}
                            Verdict::Ok => answered = Some(NO_ACK.into()),
                            v => answered = Some(v.describe()),
                        }
                    });
                }
            }
        })
        .await;
    let end = Instant::now();
    let p = &conn.parser;
    let (reason, refused) = if p.status == 200 {
        match held.listen {
            None => match &r {
                Err(e) if last.is_none() => (e.kind(), false),
                // the server ended a stream it had opened: not a failure
                _ => return Held::Ended,
            },
            Some(_) if acked => return Held::Ended,
            Some(_) if p.content_type != ContentType::EventStream => {
                ("listen did not answer with an event stream".into(), true)
            }
            Some(_) => match answered {
                Some(reply) => (reply, true),
                None => (
                    r.as_ref()
                        .err()
                        .map_or_else(|| NO_ACK.into(), ExchangeError::kind),
                    false,
                ),
            },
        }
    } else if p.status == 405 && held.listen.is_none() {
        ctx.record(FixedRow::Get405, t0, end, None, 0);
        return Held::Refused;
    } else {
        match &r {
            Ok(()) => (refusal(p).0, true),
            Err(e) => (e.kind(), false),
        }
    };
    if refused {
        ctx.sample(row, &reason, conn);
    }
    ctx.record(row, t0, end, Some(&reason), 0);
    if refused {
        Held::Refused
    } else {
        Held::Ended
    }
}
