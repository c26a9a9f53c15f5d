//! The HTTP families: one task per user, with its own keep-alive connection and session
//! (`tools_call`, `mixed`, `sse_streaming`: a session looping over requests; `handshake`,
//! `session_churn`: a fresh session each iteration; `hold`: sessions opened and kept).
//! An `sse_streaming` user also holds its session's long-lived stream, on a connection of its
//! own, in a future joined with its calls in the same task ([`held_stream`]).

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mcpfast_core::sse::{SseDecoder, SseItem};
use tokio::sync::watch;

use crate::check::{SseCheck, Verdict, Want};
use crate::config::{Family, NewConnection};
use crate::context::{Ctx, BACKOFF, TICK};
use crate::http::{Conn, ContentType, ExchangeError, ResponseParser};
use crate::mcp::{Problem, Session};
use crate::rows::FixedRow;
use crate::templates::Template;

/// A held stream the server ended, or that could not be reached, is opened again at most this
/// often per user (a server that ends streams at once does not become a hot loop).
pub(crate) const REOPEN_EVERY: Duration = Duration::from_secs(1);

/// The acknowledgement a 2026-07-28 `subscriptions/listen` stream starts with.
const LISTEN_ACK: &str = "notifications/subscriptions/acknowledged";

/// What opens a session's held stream, as the session last built it: published by the user's
/// calls, read by its [`held_stream`].
struct HeldRequest {
    /// The session it belongs to (counted per user): a new session replaces the stream; new
    /// header lines for the same session (a refreshed token, new cookies) are sent from the
    /// stream's next opening on.
    session: u64,
    /// The whole request: the GET, or the `subscriptions/listen` POST.
    bytes: Vec<u8>,
    /// 2026-07-28: the id of the `subscriptions/listen` (None: the standalone GET stream).
    listen: Option<i64>,
}

/// The session's side of its held stream: the request to hold now, None while it holds none.
type HeldSender = watch::Sender<Option<Rc<HeldRequest>>>;

/// What one HTTP session keeps.
pub(crate) struct HttpSession {
    pub(crate) conn: Conn,
    sse: SseCheck,
    req: Vec<u8>,
    /// `POST` head up to the per-request headers (no Content-Length yet).
    head: Vec<u8>,
    pub(crate) session: Option<Session>,
    next_id: i64,
    delete_acc: f64,
    /// The server forgot the session (404): the next open is a re-initialization.
    lost: bool,
    /// The era the session opens in: 2026-07-28 (`server/discover`) or the handshake
    /// (`discover` alternates them).
    stateless: bool,
    /// `sse_streaming` (`hold_stream`): where the session publishes its held stream's request,
    /// the sessions it held one for, whether it holds one now, and the id of its 2026-07-28
    /// `subscriptions/listen`.
    held: Option<HeldSender>,
    held_session: u64,
    holding: bool,
    listen_id: i64,
    /// This user's own header lines (its bearer token, its cookies), after the shared ones.
    pub(crate) own_headers: Vec<u8>,
    token_line: Vec<u8>,
    /// This user's turn among the bearer tokens, and the token generation its line was built from.
    token_slot: usize,
    token_gen: u64,
    /// The user's cookie jar (RFC 6265: host, path, expiry), and when its `Cookie` line was
    /// last built (expiry is looked at again a second later).
    jar: Option<cookie_store::CookieStore>,
    cookies_at: Instant,
    /// The wait the last refusal's `Retry-After` asked for (`retry_after` on).
    retry_wait: Option<Duration>,
    /// Time the last exchange spent opening a connection (kept out of its latency).
    spent: Duration,
}

/// The `Authorization` line of token slot `slot` now (empty without tokens), and the token
/// generation it was built from.
fn token_line(ctx: &Ctx, slot: usize) -> (u64, Vec<u8>) {
    let shared = &ctx.shared;
    let gen = shared.bearer_gen();
    let tokens = shared.bearer_tokens();
    let mut line = Vec::new();
    if !tokens.is_empty() {
        line.extend_from_slice(b"Authorization: Bearer ");
        line.extend_from_slice(tokens[slot % tokens.len()].as_bytes());
        line.extend_from_slice(b"\r\n");
    }
    (gen, line)
}

/// Failure reason and whether the session must be opened again.
pub(crate) struct Failed {
    reason: String,
    pub(crate) lost_session: bool,
    len: usize,
    /// Nothing could be connected: pause before the next attempt (no hot loop on a dead server).
    backoff: bool,
    /// A reply arrived (and failed its check): it is in the parser, for a sample.
    replied: bool,
}

impl HttpSession {
    pub(crate) fn new(ctx: &Ctx) -> HttpSession {
        let mut conn = Conn::new(ctx.endpoint());
        conn.set_max_body(ctx.cfg().max_reply_bytes);
        conn.parser.capture_cookies = ctx.cfg().cookies;
        let token_slot = ctx.shared.next_token_slot();
        let (token_gen, token_line) = token_line(ctx, token_slot);
        HttpSession {
            conn,
            sse: SseCheck::new(
                ctx.cfg()
                    .max_reply_bytes
                    .min(mcpfast_core::DEFAULT_MAX_EVENT),
            ),
            req: Vec::with_capacity(512),
            head: Vec::new(),
            session: None,
            next_id: 1,
            delete_acc: 0.0,
            lost: false,
            stateless: ctx.cfg().stateless(),
            held: None,
            held_session: 0,
            holding: false,
            listen_id: 0,
            own_headers: token_line.clone(),
            token_line,
            token_slot,
            token_gen,
            jar: ctx.cfg().cookies.then(cookie_store::CookieStore::default),
            cookies_at: Instant::now(),
            retry_wait: None,
            spent: Duration::ZERO,
        }
    }

    /// After an exchange on the session's connection: the rows of a connection it opened (the
    /// time spent opening is returned, to move out of the request's latency) and the cookies
    /// its reply set.
    fn settle(&mut self, ctx: &Ctx) -> Duration {
        let spent = ctx.opened(&mut self.conn);
        let stale = self
            .jar
            .as_ref()
            .is_some_and(|j| j.iter_any().next().is_some())
            && self.cookies_at.elapsed() > Duration::from_secs(1);
        if ctx.shared.bearer_gen() != self.token_gen {
            (self.token_gen, self.token_line) = token_line(ctx, self.token_slot);
            self.cookies_changed(ctx);
        }
        if !self.conn.parser.set_cookies.is_empty() || stale {
            if let (Some(jar), Some(url)) = (self.jar.as_mut(), ctx.cookie_url.as_ref()) {
                for v in &self.conn.parser.set_cookies {
                    // a malformed or refused cookie is ignored, as user agents do (RFC 6265 §5.2)
                    if let Ok(text) = std::str::from_utf8(v) {
                        let _ = jar.parse(text, url);
                    }
                }
            }
            self.cookies_changed(ctx);
        }
        spent
    }

    /// Rebuild this user's header lines from its token and the cookies the jar sends now.
    fn cookies_changed(&mut self, ctx: &Ctx) {
        self.own_headers.clear();
        self.own_headers.extend_from_slice(&self.token_line);
        if let (Some(jar), Some(url)) = (self.jar.as_ref(), ctx.cookie_url.as_ref()) {
            let mut first = true;
            for (name, value) in jar.get_request_values(url) {
                self.own_headers
                    .extend_from_slice(if first { b"Cookie: " } else { b"; " });
                first = false;
                self.own_headers.extend_from_slice(name.as_bytes());
                self.own_headers.push(b'=');
                self.own_headers.extend_from_slice(value.as_bytes());
            }
            if !first {
                self.own_headers.extend_from_slice(b"\r\n");
            }
        }
        self.cookies_at = Instant::now();
        self.set_head(ctx);
        self.publish_held(ctx);
    }

    /// The failure reason of the refused reply in the parser; keeps its `Retry-After` wait.
    fn refused(&mut self) -> String {
        let (reason, wait) = refusal(&self.conn.parser);
        if let Some(w) = wait {
            self.retry_wait = Some(Duration::from_secs_f64(w));
        }
        reason
    }

    fn set_head(&mut self, ctx: &Ctx) {
        self.head.clear();
        if !self.stateless {
            ctx.proto
                .head(&mut self.head, "POST", self.session.as_ref());
        } else {
            ctx.proto.head(&mut self.head, "POST", None);
            self.head.extend_from_slice(b"MCP-Protocol-Version: ");
            self.head
                .extend_from_slice(ctx.cfg().stateless_version().as_bytes());
            self.head.extend_from_slice(b"\r\n");
        }
        self.head.extend_from_slice(&self.own_headers);
    }

    fn build(&mut self, t: &Template, id: i64) {
        self.req.clear();
        post(&mut self.req, &self.head, t, id);
    }

    /// The session is open: hold its stream from now on, in place of the previous session's.
    fn hold(&mut self, ctx: &Ctx) {
        if self.held.is_none() {
            return;
        }
        self.holding = true;
        self.held_session += 1;
        if ctx.cfg().stateless() {
            self.listen_id = self.next_id;
            self.next_id += 1;
        }
        self.publish_held(ctx);
    }

    /// The session ended (lost, or the user stops): its held stream is dropped.
    fn unhold(&mut self) {
        self.holding = false;
        if let Some(tx) = &self.held {
            tx.send_replace(None);
        }
    }

    /// Publish the held stream's request with the session's header lines as they are now.
    fn publish_held(&self, ctx: &Ctx) {
        let (Some(tx), true, Some(session)) = (&self.held, self.holding, self.session.as_ref())
        else {
            return;
        };
        let mut bytes = Vec::with_capacity(512);
        let listen = ctx.cfg().stateless().then_some(self.listen_id);
        if let Some(id) = listen {
            post(&mut bytes, &self.head, &ctx.listen, id);
        } else {
            ctx.proto.head(&mut bytes, "GET", Some(session));
            bytes.extend_from_slice(&self.own_headers);
            bytes.extend_from_slice(b"\r\n");
        }
        tx.send_replace(Some(Rc::new(HeldRequest {
            session: self.held_session,
            bytes,
            listen,
        })));
    }

    /// Send a request and check the reply; Ok(reply length) or the failure. `events` gets the
    /// arrival times of SSE events and of server messages (progress) for streaming rows.
    async fn request(
        &mut self,
        ctx: &Ctx,
        t: &Template,
        capture_session: bool,
        mut times: Option<&mut (Vec<Instant>, Vec<Instant>)>,
    ) -> Result<(usize, Option<String>), Failed> {
        let id = self.next_id;
        self.next_id += 1;
        self.build(t, id);
        ctx.counters().sent.fetch_add(1, Ordering::Relaxed);
        ctx.counters().inflight.fetch_add(1, Ordering::Relaxed);
        let want = if capture_session {
            Want::Initialize
        } else {
            t.want
        };
        self.sse.reset(id, want);
        let sse = &mut self.sse;
        let mut streaming = false;
        let mut observe = |chunk: &[u8]| {
            if let Some(times) = times.as_deref_mut() {
                streaming = true;
                let before = sse.out.other_messages;
                let n = sse.feed(chunk);
                let now = Instant::now();
                for _ in 0..n {
                    times.0.push(now);
                }
                for _ in before..sse.out.other_messages {
                    times.1.push(now);
                }
            }
        };
        let r = self
            .conn
            .exchange_observed(&self.req, capture_session, ctx.cfg().timeout, &mut observe)
            .await;
        self.spent = self.settle(ctx);
        ctx.counters().inflight.fetch_sub(1, Ordering::Relaxed);
        if let Err(e) = r {
            let backoff = e.is_connect();
            if backoff {
                ctx.connect_error(format!("{}: {}", ctx.cfg().url, e.kind()));
            }
            return Err(Failed {
                reason: Problem::Exchange(e).reason(),
                lost_session: false,
                len: 0,
                backoff,
                replied: false,
            });
        }
        let p = &self.conn.parser;
        let len = p.body.len();
        if p.status != 200 {
            let lost_session =
                p.status == 404 && self.session.as_ref().is_some_and(|s| s.id.is_some());
            return Err(Failed {
                reason: self.refused(),
                lost_session,
                len,
                backoff: false,
                replied: true,
            });
        }
        let checked = match p.content_type {
            ContentType::Json => crate::check::check_json(&p.body, id, want),
            ContentType::EventStream => {
                if !streaming {
                    self.sse.feed(&p.body);
                }
                self.sse.finish()
            }
            _ => {
                return Err(Failed {
                    reason: Problem::ContentType.reason(),
                    lost_session: false,
                    len,
                    backoff: false,
                    replied: true,
                })
            }
        };
        self.conn.sse_other_messages += u64::from(checked.other_messages);
        match checked.verdict() {
            Verdict::Ok if checked.tool_error => Err(Failed {
                reason: Problem::ToolError.reason(),
                lost_session: false,
                len,
                backoff: false,
                replied: true,
            }),
            Verdict::Ok => Ok((len, checked.version)),
            v => Err(Failed {
                reason: v.describe(),
                lost_session: false,
                len,
                backoff: false,
                replied: true,
            }),
        }
    }

    /// A fire-and-forget POST (notifications/initialized): 2xx expected.
    async fn notify(&mut self, ctx: &Ctx, body: &[u8]) -> Result<(), Failed> {
        self.req.clear();
        self.req.extend_from_slice(&self.head);
        self.req.extend_from_slice(b"Content-Length: ");
        self.req
            .extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
        self.req.extend_from_slice(b"\r\n\r\n");
        self.req.extend_from_slice(body);
        ctx.counters().sent.fetch_add(1, Ordering::Relaxed);
        let r = self
            .conn
            .exchange(&self.req, false, ctx.cfg().timeout)
            .await;
        self.spent = self.settle(ctx);
        match r {
            Err(e) => Err(Failed {
                reason: Problem::Exchange(e).reason(),
                lost_session: false,
                len: 0,
                backoff: false,
                replied: false,
            }),
            Ok(()) if (200..300).contains(&self.conn.parser.status) => Ok(()),
            Ok(()) => Err(Failed {
                reason: self.refused(),
                lost_session: false,
                len: self.conn.parser.body.len(),
                backoff: false,
                replied: true,
            }),
        }
    }

    /// Open the session: initialize + notifications/initialized, or server/discover
    /// (2026-07-28). Each phase is its own row; `from` is the first phase's start. `need_id`:
    /// an initialize reply without `Mcp-Session-Id` is a failure (sessions to hold).
    pub(crate) async fn open(&mut self, ctx: &Ctx, from: Instant, need_id: bool) -> bool {
        self.session = None;
        self.set_head(ctx);
        if ctx.cfg().new_connection == NewConnection::Session {
            self.conn.close();
        }
        if self.stateless {
            let r = self.request(ctx, &ctx.discover, false, None).await;
            let end = Instant::now();
            let from = from + self.spent;
            return match r {
                Ok((len, _)) => {
                    ctx.record(FixedRow::Discover, from, end, None, len);
                    ctx.counters().established.fetch_add(1, Ordering::Relaxed);
                    self.session = Some(Session::new(
                        None,
                        ctx.cfg().stateless_version().to_owned(),
                        self.next_id,
                    ));
                    self.set_head(ctx);
                    true
                }
                Err(f) => {
                    ctx.record(FixedRow::Discover, from, end, Some(&f.reason), f.len);
                    false
                }
            };
        }
        // initialize
        let id = self.next_id;
        self.next_id += 1;
        ctx.proto
            .initialize_request(&mut self.req, id, &self.own_headers);
        ctx.counters().sent.fetch_add(1, Ordering::Relaxed);
        let r = self.conn.exchange(&self.req, true, ctx.cfg().timeout).await;
        let end = Instant::now();
        let from = from + self.settle(ctx);
        let mut replied = false;
        let mut other = 0u32;
        let outcome: Result<(usize, String, Option<String>), String> = match r {
            Err(e) => {
                if e.is_connect() {
                    ctx.connect_error(format!("{}: {}", ctx.cfg().url, e.kind()));
                }
                Err(Problem::Exchange(e).reason())
            }
            Ok(()) => {
                replied = true;
                let p = &self.conn.parser;
                let len = p.body.len();
                if p.status != 200 {
                    Err(self.refused())
                } else {
                    let checked = match p.content_type {
                        ContentType::Json => {
                            crate::check::check_json(&p.body, id, Want::Initialize)
                        }
                        ContentType::EventStream => {
                            self.sse.reset(id, Want::Initialize);
                            self.sse.feed(&p.body);
                            self.sse.finish()
                        }
                        _ => crate::check::Checked {
                            verdict: Some(Verdict::NotJsonRpc),
                            ..Default::default()
                        },
                    };
                    other = checked.other_messages;
                    match (checked.verdict(), checked.version) {
                        (Verdict::Ok, Some(v))
                            if mcpfast_core::versions::HANDSHAKE.contains(&v.as_str()) =>
                        {
                            if p.session_id_invalid {
                                Err(Problem::BadSessionId.reason())
                            } else if need_id && p.session_id.is_none() {
                                Err(Problem::NoSessionId.reason())
                            } else {
                                Ok((len, v, p.session_id.clone()))
                            }
                        }
                        (Verdict::Ok, Some(v)) => Err(Problem::Version(v).reason()),
                        (Verdict::Ok, None) => {
                            Err("initialize result without protocolVersion".into())
                        }
                        (v, _) => Err(v.describe()),
                    }
                }
            }
        };
        self.conn.sse_other_messages += u64::from(other);
        let (version, sid) = match outcome {
            Ok((len, v, sid)) => {
                ctx.record(FixedRow::Initialize, from, end, None, len);
                ctx.negotiated(&v);
                (v, sid)
            }
            Err(reason) => {
                if replied {
                    ctx.sample(FixedRow::Initialize, &reason, &self.conn);
                }
                ctx.record(FixedRow::Initialize, from, end, Some(&reason), 0);
                return false;
            }
        };
        self.session = Some(Session::new(sid, version, self.next_id));
        self.set_head(ctx);
        let t0 = Instant::now();
        let r = self
            .notify(
                ctx,
                br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            )
            .await;
        let end = Instant::now();
        let t0 = t0 + self.spent;
        match r {
            Ok(()) => {
                ctx.record(FixedRow::Initialized, t0, end, None, 0);
                ctx.counters().established.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(f) => {
                if f.replied {
                    ctx.sample(FixedRow::Initialized, &f.reason, &self.conn);
                }
                ctx.record(FixedRow::Initialized, t0, end, Some(&f.reason), f.len);
                false
            }
        }
    }

    /// `discover`: one fresh start, the eras in turn (2026-07-28 first): `server/discover`, or
    /// `initialize` + `notifications/initialized`; then the first call; `start:<era>` from
    /// `from` to the call's result (complete starts only). A handshake session is then DELETEd.
    async fn discover_turn(&mut self, ctx: &Ctx, from: Instant) {
        self.stateless = !self.stateless;
        let (call, start) = if self.stateless {
            (&ctx.items[1], FixedRow::StartDiscover)
        } else {
            (&ctx.items[0], FixedRow::StartInitialize)
        };
        if !self.open(ctx, from, false).await {
            ctx.pause(BACKOFF).await;
            return;
        }
        if self
            .one(ctx, call, Instant::now(), call.name, None)
            .await
            .is_ok()
        {
            ctx.record(start, from, Instant::now(), None, 0);
        }
        if self.stateless {
            self.session = None;
        } else {
            self.delete(ctx).await;
        }
    }

    /// DELETE the session (handshake era, when the server minted an id); true when a DELETE
    /// was sent and answered 2xx.
    pub(crate) async fn delete(&mut self, ctx: &Ctx) -> bool {
        let Some(s) = self.session.take() else {
            return false;
        };
        if s.id.is_none() {
            return false;
        }
        let mut req = Vec::with_capacity(256);
        ctx.proto.head(&mut req, "DELETE", Some(&s));
        req.extend_from_slice(&self.own_headers);
        req.extend_from_slice(b"Content-Length: 0\r\n\r\n");
        let t0 = Instant::now();
        ctx.counters().sent.fetch_add(1, Ordering::Relaxed);
        let r = self.conn.exchange(&req, false, ctx.cfg().timeout).await;
        let end = Instant::now();
        let t0 = t0 + self.settle(ctx);
        let replied = r.is_ok();
        let failure = match r {
            Err(e) => Some(Problem::Exchange(e).reason()),
            Ok(()) if (200..300).contains(&self.conn.parser.status) => None,
            Ok(()) => Some(self.refused()),
        };
        if let (Some(reason), true) = (&failure, replied) {
            ctx.sample(FixedRow::Delete, reason, &self.conn);
        }
        ctx.record(FixedRow::Delete, t0, end, failure.as_deref(), 0);
        failure.is_none()
    }

    /// One request of the family, recorded under its name. `open`: (intended, actual) send
    /// time of the arrival in the open model (`from` is then the intended time, or the call's
    /// start when the arrival first opened the session).
    pub(crate) async fn one(
        &mut self,
        ctx: &Ctx,
        t: &Template,
        from: Instant,
        name: usize,
        open: Option<(Instant, Instant)>,
    ) -> Result<(), Failed> {
        let streaming = t.progress;
        let mut times = (Vec::new(), Vec::new());
        let r = self
            .request(ctx, t, false, streaming.then_some(&mut times))
            .await;
        let end = Instant::now();
        // the time spent opening a connection is its own row, not this request's
        let start = from + self.spent;
        match &r {
            Ok((len, _)) => ctx.record(name, start, end, None, *len),
            Err(f) => {
                if f.replied {
                    ctx.sample(name, &f.reason, &self.conn);
                }
                ctx.record(name, start, end, Some(&f.reason), f.len)
            }
        }
        if let Some((intended, sent)) = open {
            // the service time runs from the call's own send (after a handshake: `from`)
            ctx.record_open(
                name,
                sent.saturating_duration_since(intended),
                end.saturating_duration_since(sent.max(from) + self.spent),
            );
        }
        if streaming {
            // the final reply is an SSE event too: the gaps are between every event
            report_times(ctx, FixedRow::SseFirst, FixedRow::SseGap, &times.0, start);
            report_times(
                ctx,
                FixedRow::ProgressFirst,
                FixedRow::ProgressGap,
                &times.1,
                start,
            );
        }
        r.map(|_| ())
    }
}

/// Append to `out` a POST of template `t` with id `id`: `head` (up to the per-request headers),
/// the template's own headers, the length and the body.
fn post(out: &mut Vec<u8>, head: &[u8], t: &Template, id: i64) {
    out.extend_from_slice(head);
    out.extend_from_slice(&t.headers);
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(t.body_len(id)).as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    t.body(id, out);
}

/// A request in flight while this lives: a held stream is one request, sent when it opens and
/// in flight until it ends (its future dropped at the end of its session or at the stop too).
struct InFlight<'a>(&'a crate::shared::Counters);

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

/// `sse_streaming`: the user's held stream, beside its calls for as long as the user lives. It
/// holds the stream of the session the calls published ([`HttpSession::hold`]) on its own
/// connection: opened once the session is open, kept while it lives, dropped when it ends (a
/// session lost or replaced, the user retired, the engine stopping: not a failure). A stream
/// the server ends, or that cannot be reached, is opened again (at most once per
/// [`REOPEN_EVERY`]); one the server refuses waits for the next session.
async fn held_stream(ctx: &Ctx, mut rx: watch::Receiver<Option<Rc<HeldRequest>>>) {
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
                        if crate::check::string_member(message, "method").as_deref()
                            == Some(LISTEN_ACK)
                        {
                            acked = true;
                            ctx.record(FixedRow::ListenAck, t0, now, None, 0);
                            return;
                        }
                        match crate::check::check_json(message, id, Want::Plain).verdict() {
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

/// A new connection for a held stream, each time, so that its opening is timed apart from the
/// stream's: the stream's start, or None when it could not be opened (a failure of `row`).
pub(crate) async fn connect_held(ctx: &Ctx, conn: &mut Conn, row: FixedRow) -> Option<Instant> {
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

/// The failure of a `subscriptions/listen` stream that carried no acknowledgement.
const NO_ACK: &str = "listen stream gave no acknowledgement";

/// The failure reason of a refused reply (`http 401 invalid_token`, `http 429 rate limited
/// (Retry-After 2 s)`) and the wait its `Retry-After` asks for.
pub(crate) fn refusal(p: &crate::http::ResponseParser) -> (String, Option<f64>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    mcpfast_core::refused::refusal(
        p.status,
        p.www_authenticate.as_deref(),
        p.retry_after.as_deref(),
        now,
    )
}

fn report_times(ctx: &Ctx, first: FixedRow, gap: FixedRow, times: &[Instant], from: Instant) {
    let Some(&t0) = times.first() else { return };
    ctx.record(first, from, t0, None, 0);
    for w in times.windows(2) {
        ctx.record(gap, w[0], w[1], None, 0);
    }
}

/// One HTTP user: its own keep-alive connection and session, looping over the family until
/// its slot is retired or the engine stops.
pub(crate) async fn http_session(ctx: &Rc<Ctx>, slot: usize) {
    let family = ctx.cfg().family;
    if family == Family::Hold {
        if ctx.cfg().hold_streams > 0 {
            return crate::hold::hold_streams(ctx, slot).await;
        }
        return hold_session(ctx, slot).await;
    }
    let mut s = HttpSession::new(ctx);
    if family == Family::SseStreaming && ctx.cfg().hold_stream {
        let (tx, rx) = watch::channel(None);
        s.held = Some(tx);
        tokio::join!(user_loop(ctx, slot, s), held_stream(ctx, rx));
    } else {
        user_loop(ctx, slot, s).await;
    }
}

/// The user's requests, on its session's connection, until its slot is retired or the engine
/// stops; then its session is DELETEd (while the stop's grace lasts).
async fn user_loop(ctx: &Ctx, slot: usize, mut s: HttpSession) {
    let family = ctx.cfg().family;
    let per_session = matches!(
        family,
        Family::ToolsCall | Family::Mixed | Family::SseStreaming | Family::Tasks
    );
    ctx.counters().sessions_open.fetch_add(1, Ordering::Relaxed);
    while ctx.keep(slot) {
        if let Some(wait) = s.retry_wait.take() {
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
        if per_session {
            // the actual send time (open model only: the closed model sends at `from`)
            let sent = if open_model { Instant::now() } else { from };
            let opened = s.session.is_none();
            if opened {
                if !s.open(ctx, from, false).await {
                    ctx.iteration_done();
                    ctx.pause(BACKOFF).await;
                    continue;
                }
                if s.lost {
                    s.lost = false;
                    ctx.counters().reinitialized.fetch_add(1, Ordering::Relaxed);
                }
                s.hold(ctx);
            }
            let t = ctx.pick();
            let open = open_model.then_some((from, sent));
            // the handshake had this arrival's intended time; the call starts after it
            let from = if opened { Instant::now() } else { from };
            let r = if family == Family::Tasks {
                crate::tasks::run_task(&mut s, ctx, from).await
            } else {
                s.one(ctx, t, from, t.name, open).await
            };
            ctx.iteration_done();
            if let Err(f) = r {
                if f.lost_session {
                    s.session = None;
                    s.lost = true;
                    s.unhold();
                }
                if f.backoff {
                    ctx.pause(BACKOFF / 10).await;
                }
            }
            continue;
        }
        if family == Family::Discover {
            s.discover_turn(ctx, from).await;
            ctx.iteration_done();
            continue;
        }
        // handshake / session_churn: a fresh session each iteration
        if !s.open(ctx, from, false).await {
            ctx.iteration_done();
            ctx.pause(BACKOFF).await;
            continue;
        }
        let call_ok = if ctx.cfg().handshake_call {
            let t = &ctx.items[0];
            s.one(ctx, t, Instant::now(), FixedRow::First.id(), None)
                .await
                .is_ok()
        } else {
            true
        };
        let delete = match family {
            Family::SessionChurn => {
                s.delete_acc += ctx.cfg().churn_delete_share;
                if s.delete_acc >= 1.0 {
                    s.delete_acc -= 1.0;
                    true
                } else {
                    false
                }
            }
            _ => true,
        };
        let complete = if delete {
            s.delete(ctx).await && call_ok
        } else {
            s.session = None; // abandoned: the server keeps it until its own timeout
            call_ok
        };
        if complete && ctx.cfg().cycle_latency {
            ctx.record(FixedRow::Cycle, from, Instant::now(), None, 0);
        }
        ctx.iteration_done();
    }
    // the held stream ends before the session: its end is not the server's doing
    s.unhold();
    s.held = None;
    if per_session && !ctx.shared.past_deadline() {
        s.delete(ctx).await;
    }
    ctx.tally(&s.conn);
    ctx.counters().sessions_open.fetch_sub(1, Ordering::Relaxed);
}

/// `hold`: one keep-alive connection that opens sessions (one per iteration, while the
/// iterations last) and keeps them until the user is retired or the engine stops; then
/// DELETEs them (`hold_delete`, while the stop's grace lasts).
async fn hold_session(ctx: &Ctx, slot: usize) {
    let mut s = HttpSession::new(ctx);
    let mut held: Vec<Session> = Vec::new();
    ctx.counters().sessions_open.fetch_add(1, Ordering::Relaxed);
    while ctx.keep(slot) {
        if !ctx.shared.take_iteration() {
            ctx.pause(TICK).await;
            continue;
        }
        if s.open(ctx, Instant::now(), true).await {
            if let Some(session) = s.session.take() {
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
            s.session = Some(session);
            s.delete(ctx).await;
        }
    }
    ctx.counters().held.fetch_sub(n, Ordering::Relaxed);
    ctx.tally(&s.conn);
    ctx.counters().sessions_open.fetch_sub(1, Ordering::Relaxed);
}
