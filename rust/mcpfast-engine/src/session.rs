//! One HTTP user's session: its keep-alive connection, its MCP session (opened by
//! `initialize` + `notifications/initialized`, or `server/discover` in 2026-07-28), its header
//! lines (bearer token, cookies) and the exchanges on it, each checked and recorded under its
//! row: open, one request, a notification, DELETE. A session that holds a long-lived stream
//! (`sse_streaming`) publishes the request that opens it ([`HeldRequest`]) for the stream's
//! task. The families drive it; it knows no family.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mcpfast_core::versions;
use tokio::sync::watch;

use crate::check::{check_json, Checked, SseCheck, Verdict, Want};
use crate::config::NewConnection;
use crate::context::Ctx;
use crate::http::{Conn, ContentType};
use crate::mcp::{refusal, Problem, Session};
use crate::rows::FixedRow;
use crate::templates::Template;

/// What opens a session's held stream, as the session last built it: published by the user's
/// calls, read by its held stream's task.
pub(crate) struct HeldRequest {
    /// The session it belongs to (counted per user): a new session replaces the stream; new
    /// header lines for the same session (a refreshed token, new cookies) are sent from the
    /// stream's next opening on.
    pub(crate) session: u64,
    /// The whole request: the GET, or the `subscriptions/listen` POST.
    pub(crate) bytes: Vec<u8>,
    /// 2026-07-28: the id of the `subscriptions/listen` (None: the standalone GET stream).
    pub(crate) listen: Option<i64>,
}

/// The session's side of its held stream: the request to hold now, None while it holds none.
type HeldSender = watch::Sender<Option<Rc<HeldRequest>>>;

/// The held stream's side: the request to hold now, None while the session holds none.
pub(crate) type HeldReceiver = watch::Receiver<Option<Rc<HeldRequest>>>;

/// What one HTTP session keeps.
pub(crate) struct HttpSession {
    conn: Conn,
    sse: SseCheck,
    req: Vec<u8>,
    /// `POST` head up to the per-request headers (no Content-Length yet).
    head: Vec<u8>,
    session: Option<Session>,
    next_id: i64,
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
    own_headers: Vec<u8>,
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
    /// `agents`: the values of the next request's uses (JSON texts), set by the agent.
    pub(crate) fill: Vec<String>,
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
    pub(crate) reason: String,
    pub(crate) lost_session: bool,
    len: usize,
    /// Nothing could be connected: pause before the next attempt (no hot loop on a dead server).
    pub(crate) backoff: bool,
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
            req: Vec::new(),
            head: Vec::new(),
            session: None,
            next_id: 1,
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
            fill: Vec::new(),
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

    /// Before a request: a token replaced since the last one (`set_bearer_tokens`) goes out
    /// with this request already.
    fn fresh_token(&mut self, ctx: &Ctx) {
        if ctx.shared.bearer_gen() != self.token_gen {
            (self.token_gen, self.token_line) = token_line(ctx, self.token_slot);
            self.cookies_changed(ctx);
        }
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
        post(&mut self.req, &self.head, t, id, &self.fill);
    }

    /// Whether the session is open (its requests can go out).
    pub(crate) fn is_open(&self) -> bool {
        self.session.is_some()
    }

    /// Forget the session without a DELETE (abandoned, or lost: the server forgot it).
    pub(crate) fn forget(&mut self) {
        self.session = None;
    }

    /// Take the open session out, to keep it aside (`hold`); the next open makes a new one.
    pub(crate) fn take_session(&mut self) -> Option<Session> {
        self.session.take()
    }

    /// DELETE a session kept aside ([`HttpSession::take_session`]) on this connection.
    pub(crate) async fn delete_kept(&mut self, ctx: &Ctx, session: Session) -> bool {
        self.session = Some(session);
        self.delete(ctx).await
    }

    /// The next session opens in the other era; true when that is 2026-07-28 (`discover`).
    pub(crate) fn switch_era(&mut self) -> bool {
        self.stateless = !self.stateless;
        self.stateless
    }

    /// The session's connection (its counts go to the thread's when the user is done).
    pub(crate) fn conn(&self) -> &Conn {
        &self.conn
    }

    /// Close the session's connection (the next exchange opens a new one).
    pub(crate) fn close_connection(&mut self) {
        self.conn.close();
    }

    /// The body of the last reply.
    pub(crate) fn reply_body(&self) -> &[u8] {
        &self.conn.parser.body
    }

    /// The `result` of the last request's reply (JSON, or found among the events of an SSE
    /// reply), for reading values out of it.
    pub(crate) fn last_result(&self) -> Option<Vec<u8>> {
        let p = &self.conn.parser;
        crate::check::reply_result(
            &p.body,
            p.content_type == ContentType::EventStream,
            self.next_id - 1,
        )
    }

    /// Give the buffers back while the session sits idle between requests (an agent thinking):
    /// the connection and the session stay.
    pub(crate) fn shrink(&mut self) {
        self.conn.shrink();
        self.req = Vec::new();
        self.fill = Vec::new();
    }

    /// The wait the last refusal's `Retry-After` asked for, once.
    pub(crate) fn take_retry_wait(&mut self) -> Option<Duration> {
        self.retry_wait.take()
    }

    /// The standalone GET stream of `session`, with this user's header lines.
    pub(crate) fn get_stream_request(&self, ctx: &Ctx, session: &Session) -> Vec<u8> {
        let mut request = Vec::with_capacity(512);
        ctx.proto.head(&mut request, "GET", Some(session));
        request.extend_from_slice(&self.own_headers);
        request.extend_from_slice(b"\r\n");
        request
    }

    /// `sse_streaming`: the session publishes the request of its held stream from now on; the
    /// stream's task reads it from the receiver.
    pub(crate) fn publish_held_stream(&mut self) -> HeldReceiver {
        let (tx, rx) = watch::channel(None);
        self.held = Some(tx);
        rx
    }

    /// The user ends: its held stream ends before its session (not the server's doing).
    pub(crate) fn end_held_stream(&mut self) {
        self.unhold();
        self.held = None;
    }

    /// The session is open: hold its stream from now on, in place of the previous session's.
    pub(crate) fn hold(&mut self, ctx: &Ctx) {
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
    pub(crate) fn unhold(&mut self) {
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
        let listen = ctx.cfg().stateless().then_some(self.listen_id);
        let bytes = match listen {
            Some(id) => {
                let mut bytes = Vec::with_capacity(512);
                post(&mut bytes, &self.head, &ctx.listen, id, &[]);
                bytes
            }
            None => self.get_stream_request(ctx, session),
        };
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
        self.fresh_token(ctx);
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
            ContentType::Json => check_json(&p.body, id, want),
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
        self.fresh_token(ctx);
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
        // a token replaced while the last open was refused goes with this one
        self.fresh_token(ctx);
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
                    self.session =
                        Some(Session::new(None, ctx.cfg().stateless_version().to_owned()));
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
                        ContentType::Json => check_json(&p.body, id, Want::Initialize),
                        ContentType::EventStream => {
                            self.sse.reset(id, Want::Initialize);
                            self.sse.feed(&p.body);
                            self.sse.finish()
                        }
                        _ => Checked {
                            verdict: Some(Verdict::NotJsonRpc),
                            ..Default::default()
                        },
                    };
                    other = checked.other_messages;
                    match (checked.verdict(), checked.version) {
                        (Verdict::Ok, Some(v)) if versions::HANDSHAKE.contains(&v.as_str()) => {
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
        self.session = Some(Session::new(sid, version));
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

    /// DELETE the session (handshake era, when the server minted an id); true when a DELETE
    /// was sent and answered 2xx.
    pub(crate) async fn delete(&mut self, ctx: &Ctx) -> bool {
        let Some(s) = self.session.take() else {
            return false;
        };
        if s.id.is_none() {
            return false;
        }
        self.fresh_token(ctx);
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

/// Append to `out` a POST of template `t` with id `id` (and `values` for an `agents` step's
/// uses): `head` (up to the per-request headers), the template's own headers, the length and
/// the body.
fn post(out: &mut Vec<u8>, head: &[u8], t: &Template, id: i64, values: &[String]) {
    out.extend_from_slice(head);
    out.extend_from_slice(&t.headers);
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(
        itoa::Buffer::new()
            .format(t.body_len(id, values))
            .as_bytes(),
    );
    out.extend_from_slice(b"\r\n\r\n");
    t.body(id, values, out);
}

fn report_times(ctx: &Ctx, first: FixedRow, gap: FixedRow, times: &[Instant], from: Instant) {
    let Some(&t0) = times.first() else { return };
    ctx.record(first, from, t0, None, 0);
    for w in times.windows(2) {
        ctx.record(gap, w[0], w[1], None, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::testing::{self, count, mcp, reasons, response, settings, Answer, Server};

    #[test]
    fn a_session_opens_calls_and_is_deleted_on_one_connection() {
        let server = Server::start(|seen| mcp(seen, "s-1"));
        let ctx = testing::ctx(settings(&server));
        testing::run(async {
            let mut s = HttpSession::new(&ctx);
            assert!(!s.is_open());
            assert!(s.open(&ctx, Instant::now(), false).await);
            assert!(s.is_open());
            let call = &ctx.items[0];
            assert!(s
                .one(&ctx, call, Instant::now(), call.name, None)
                .await
                .is_ok());
            assert!(s.delete(&ctx).await);
            assert!(!s.is_open());
            // nothing left to delete
            assert!(!s.delete(&ctx).await);
            assert_eq!(s.conn().connects, 1);
        });
        let seen = server.seen();
        let whats: Vec<String> = seen.iter().map(testing::Seen::what).collect();
        assert_eq!(
            whats,
            [
                "initialize",
                "notifications/initialized",
                "tools/call",
                "DELETE"
            ]
        );
        assert!(
            seen.iter().all(|r| r.conn == 0),
            "one keep-alive connection"
        );
        assert_eq!(seen[0].header("Mcp-Session-Id"), None);
        for r in &seen[1..] {
            assert_eq!(r.header("Mcp-Session-Id"), Some("s-1"), "{}", r.what());
            assert_eq!(r.header("MCP-Protocol-Version"), Some("2025-11-25"));
        }
        assert_eq!((seen[0].id(), seen[2].id()), (1.into(), 2.into()));
        let rows = testing::rows(&ctx);
        for name in [
            "initialize",
            "notifications/initialized",
            "tools/call:echo",
            "DELETE",
        ] {
            assert_eq!(count(&rows, name), (1, 0), "{name}");
        }
        let c = ctx.counters();
        assert_eq!(c.established.load(Ordering::Relaxed), 1);
        assert_eq!(c.sent.load(Ordering::Relaxed), 4);
        assert_eq!(
            lock_versions(&ctx),
            vec![("2025-11-25".to_string(), 1)],
            "the negotiated version is kept"
        );
    }

    fn lock_versions(ctx: &Ctx) -> Vec<(String, u64)> {
        crate::shared::lock(&ctx.shared.stats[ctx.idx])
            .versions
            .clone()
    }

    /// How the server answers, whether a session id is needed, the row that fails, its reason.
    type Case = (
        Box<dyn Fn(&testing::Seen) -> Answer + Send>,
        bool,
        &'static str,
        &'static str,
    );

    #[test]
    fn an_open_that_fails_names_why() {
        let cases: Vec<Case> = vec![
            (
                Box::new(|seen| {
                    let body = testing::result(
                        seen,
                        serde_json::json!({"protocolVersion": "1999-01-01", "capabilities": {}}),
                    );
                    Answer::Reply(response(200, "Mcp-Session-Id: s\r\n", &body))
                }),
                false,
                "initialize",
                "server chose unknown protocol version \"1999-01-01\"",
            ),
            (
                Box::new(|seen| mcp(seen, "")),
                true,
                "initialize",
                "no Mcp-Session-Id in the reply",
            ),
            (
                Box::new(|seen| mcp(seen, "bad id")),
                false,
                "initialize",
                "invalid Mcp-Session-Id",
            ),
            (
                Box::new(|_| {
                    Answer::Reply(response(
                        401,
                        "WWW-Authenticate: Bearer error=\"invalid_token\"\r\n",
                        "",
                    ))
                }),
                false,
                "initialize",
                "http 401 invalid_token",
            ),
            (
                Box::new(|seen| {
                    let body = serde_json::json!({"jsonrpc": "2.0", "id": seen.id(), "error": {"code": -32602, "message": "no"}});
                    Answer::Reply(response(200, "", &body.to_string()))
                }),
                false,
                "initialize",
                "jsonrpc error -32602",
            ),
            (
                Box::new(|_| Answer::Close),
                false,
                "initialize",
                "connection closed by server",
            ),
            (
                Box::new(|seen| {
                    if seen.what() == "initialize" {
                        mcp(seen, "s")
                    } else {
                        Answer::Reply(response(400, "", ""))
                    }
                }),
                false,
                "notifications/initialized",
                "http 400",
            ),
        ];
        for (answer, need_id, row, reason) in cases {
            let server = Server::start(answer);
            let ctx = testing::ctx(settings(&server));
            let opened = testing::run(async {
                let mut s = HttpSession::new(&ctx);
                let opened = s.open(&ctx, Instant::now(), need_id).await;
                (opened, s.is_open() && row == "initialize")
            });
            assert_eq!(opened, (false, false), "{reason}");
            let rows = testing::rows(&ctx);
            assert_eq!(count(&rows, row), (1, 1), "{reason}: {rows:?}");
            assert_eq!(reasons(&rows, row), [reason]);
            assert_eq!(
                ctx.counters().established.load(Ordering::Relaxed),
                0,
                "{reason}"
            );
        }
    }

    #[test]
    fn refusals_name_their_cause_and_a_404_loses_the_session() {
        let server = Server::start(|seen| {
            let n = seen.id().as_i64().unwrap_or(0);
            match (seen.what().as_str(), n) {
                ("tools/call", 2) => Answer::Reply(response(429, "Retry-After: 2\r\n", "")),
                ("tools/call", 3) => Answer::Reply(response(
                    403,
                    "WWW-Authenticate: Bearer error=\"insufficient_scope\"\r\n",
                    "",
                )),
                ("tools/call", 4) => Answer::Reply(response(404, "", "")),
                _ => mcp(seen, "s-1"),
            }
        });
        let ctx = testing::ctx(settings(&server));
        let failures = testing::run(async {
            let mut s = HttpSession::new(&ctx);
            assert!(s.open(&ctx, Instant::now(), false).await);
            let call = &ctx.items[0];
            let mut out = Vec::new();
            for _ in 0..3 {
                let f = s
                    .one(&ctx, call, Instant::now(), call.name, None)
                    .await
                    .expect_err("refused");
                out.push((f.reason, f.lost_session, f.backoff, s.take_retry_wait()));
            }
            // the wait is taken once
            assert_eq!(s.take_retry_wait(), None);
            out
        });
        assert_eq!(
            failures,
            [
                (
                    "http 429 rate limited (Retry-After 2 s)".to_string(),
                    false,
                    false,
                    Some(Duration::from_secs(2))
                ),
                (
                    "http 403 insufficient_scope".to_string(),
                    false,
                    false,
                    None
                ),
                ("http 404".to_string(), true, false, None),
            ]
        );
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "tools/call:echo"), (3, 3));
        // the first reply of each (row, reason) is kept as a sample
        let samples = crate::shared::lock(&ctx.shared.stats[0]).samples.clone();
        assert_eq!(samples.len(), 3, "{samples:?}");
        assert!(samples[0].2.starts_with("HTTP 429 "), "{samples:?}");
    }

    #[test]
    fn a_connection_the_server_closes_is_opened_again() {
        let server = Server::start(|seen| match (seen.what().as_str(), seen.conn) {
            // a graceful close after the reply, then a close without one
            ("tools/call", 0) => match mcp(seen, "s-1") {
                Answer::Reply(bytes) => Answer::ReplyClose(
                    String::from_utf8_lossy(&bytes)
                        .replacen(
                            "HTTP/1.1 200 X\r\n",
                            "HTTP/1.1 200 X\r\nConnection: close\r\n",
                            1,
                        )
                        .into_bytes(),
                ),
                other => other,
            },
            ("tools/call", 1) => Answer::Close,
            _ => mcp(seen, "s-1"),
        });
        let ctx = testing::ctx(settings(&server));
        let results = testing::run(async {
            let mut s = HttpSession::new(&ctx);
            assert!(s.open(&ctx, Instant::now(), false).await);
            let call = &ctx.items[0];
            let mut out = Vec::new();
            for _ in 0..3 {
                let r = s.one(&ctx, call, Instant::now(), call.name, None).await;
                out.push(r.map_err(|f| (f.reason, f.lost_session, f.backoff)));
            }
            assert!(s.is_open(), "a lost connection is not a lost session");
            (out, s.conn().connects, s.conn().server_closes)
        });
        assert_eq!(
            results.0,
            [
                Ok(()),
                Err(("connection closed by server".to_string(), false, false)),
                Ok(())
            ]
        );
        // connections: the first (closed after its reply), the second (closed unanswered), a third
        assert_eq!((results.1, results.2), (3, 2));
        let conns: Vec<(String, usize)> =
            server.seen().iter().map(|r| (r.what(), r.conn)).collect();
        assert_eq!(
            conns,
            [
                ("initialize".to_string(), 0),
                ("notifications/initialized".to_string(), 0),
                ("tools/call".to_string(), 0),
                ("tools/call".to_string(), 1),
                ("tools/call".to_string(), 2),
            ]
        );
        // every request on a reopened connection still carries the session
        assert!(server.seen()[3..]
            .iter()
            .all(|r| r.header("Mcp-Session-Id") == Some("s-1")));
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "connect"), (3, 0));
    }

    #[test]
    fn nothing_listening_backs_off() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("address").port()
        };
        let ctx = testing::ctx(Settings {
            url: Some(format!("http://127.0.0.1:{port}/mcp")),
            ..Settings::default()
        });
        testing::run(async {
            let mut s = HttpSession::new(&ctx);
            assert!(!s.open(&ctx, Instant::now(), false).await);
            // an open session's call that cannot connect asks for a pause
            s.session = Some(Session::new(Some("s".into()), "2025-11-25".into()));
            let call = &ctx.items[0];
            let f = s
                .one(&ctx, call, Instant::now(), call.name, None)
                .await
                .expect_err("nothing listens");
            assert!(f.backoff && !f.lost_session);
            assert!(f.reason.starts_with("connect failed"), "{}", f.reason);
        });
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "initialize"), (1, 1));
        assert_eq!(count(&rows, "connect"), (2, 2));
    }

    #[test]
    fn new_connections_come_from_the_source_addresses_in_turn() {
        let server = Server::start(|_| Answer::Close);
        let ctx = testing::ctx(Settings {
            source_addresses: vec!["127.0.0.2-127.0.0.4".into()],
            ..settings(&server)
        });
        testing::run(async {
            let mut s = HttpSession::new(&ctx);
            for _ in 0..6 {
                // the server closes each connection: every open makes a new one
                assert!(!s.open(&ctx, Instant::now(), false).await);
            }
        });
        let peers: Vec<String> = server.seen().iter().map(|r| r.peer.to_string()).collect();
        let want = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
        assert_eq!(peers, [want, want].concat());
        // an address of another host is refused before any load
        let cfg = Settings {
            source_addresses: vec!["192.0.2.1".into()],
            ..settings(&server)
        }
        .build()
        .expect("valid config");
        let e = crate::shared::Shared::new(cfg).err().expect("not local");
        assert!(
            e.starts_with(
                "engine config: source_addresses: 192.0.2.1 is not an address of this host"
            ),
            "{e}"
        );
    }

    #[test]
    fn cookies_set_by_the_server_go_with_the_next_requests() {
        let server = Server::start(|seen| match mcp(seen, "s-1") {
            Answer::Reply(bytes) if seen.what() == "initialize" => Answer::Reply(
                String::from_utf8_lossy(&bytes)
                    .replacen(
                        "HTTP/1.1 200 X\r\n",
                        "HTTP/1.1 200 X\r\nSet-Cookie: lb=a1; Path=/\r\n",
                        1,
                    )
                    .into_bytes(),
            ),
            other => other,
        });
        let ctx = testing::ctx(Settings {
            bearer_tokens: vec!["t1".into()],
            ..settings(&server)
        });
        testing::run(async {
            let mut s = HttpSession::new(&ctx);
            assert!(s.open(&ctx, Instant::now(), false).await);
            assert!(s.delete(&ctx).await);
        });
        let seen = server.seen();
        assert_eq!(seen[0].header("Cookie"), None);
        for r in &seen {
            assert_eq!(r.header("Authorization"), Some("Bearer t1"), "{}", r.what());
        }
        for r in &seen[1..] {
            assert_eq!(r.header("Cookie"), Some("lb=a1"), "{}", r.what());
        }
    }

    #[test]
    fn a_replaced_token_goes_with_the_very_next_request() {
        let server = Server::start(|seen| mcp(seen, "s-1"));
        let ctx = testing::ctx(Settings {
            bearer_tokens: vec!["t1".into()],
            ..settings(&server)
        });
        testing::run(async {
            let mut s = HttpSession::new(&ctx);
            assert!(s.open(&ctx, Instant::now(), false).await);
            ctx.shared.replace_bearer_tokens(vec!["t2".into()]);
            // the next open too (a session refused for its token opens with the new one)
            assert!(s.open(&ctx, Instant::now(), false).await);
            let call = &ctx.items[0];
            assert!(s
                .one(&ctx, call, Instant::now(), call.name, None)
                .await
                .is_ok());
            assert!(s.delete(&ctx).await);
        });
        let seen = server.seen();
        let tokens: Vec<_> = seen
            .iter()
            .map(|r| (r.what(), r.header("Authorization")))
            .collect();
        assert_eq!(seen.len(), 6, "{tokens:?}");
        for r in &seen[..2] {
            assert_eq!(r.header("Authorization"), Some("Bearer t1"), "{tokens:?}");
        }
        for r in &seen[2..] {
            assert_eq!(r.header("Authorization"), Some("Bearer t2"), "{tokens:?}");
        }
    }

    #[test]
    fn a_stateless_session_opens_with_discover_and_has_nothing_to_delete() {
        let server = Server::start(|seen| mcp(seen, "ignored"));
        let ctx = testing::ctx(Settings {
            protocol_version: "2026-07-28".into(),
            ..settings(&server)
        });
        testing::run(async {
            let mut s = HttpSession::new(&ctx);
            assert!(s.open(&ctx, Instant::now(), false).await);
            let call = &ctx.items[0];
            assert!(s
                .one(&ctx, call, Instant::now(), call.name, None)
                .await
                .is_ok());
            assert!(!s.delete(&ctx).await, "no session id: no DELETE");
        });
        let seen = server.seen();
        assert_eq!(
            seen.iter().map(testing::Seen::what).collect::<Vec<_>>(),
            ["server/discover", "tools/call"]
        );
        for r in &seen {
            assert_eq!(r.header("MCP-Protocol-Version"), Some("2026-07-28"));
            assert_eq!(r.header("Mcp-Session-Id"), None);
            assert_eq!(r.header("Mcp-Method"), Some(r.what().as_str()));
            assert_eq!(
                r.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
                "2026-07-28"
            );
        }
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "server/discover"), (1, 0));
        assert_eq!(count(&rows, "initialize"), (0, 0));
    }
}
