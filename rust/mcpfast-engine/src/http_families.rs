//! The HTTP families: one task per user, with its own keep-alive connection and session
//! (`tools_call`, `mixed`, `sse_streaming`: a session looping over requests; `handshake`,
//! `session_churn`: a fresh session each iteration; `hold`: sessions opened and kept).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::check::{SseCheck, Verdict, Want};
use crate::config::{Family, NewConnection};
use crate::http::{Conn, ContentType};
use crate::lock;
use crate::mcp::{Problem, Session};
use crate::rows::FixedRow;
use crate::runtime::{Ctx, BACKOFF, TICK};
use crate::templates::Template;

/// What one HTTP session keeps.
struct HttpSession {
    conn: Conn,
    sse: SseCheck,
    req: Vec<u8>,
    /// `POST` head up to the per-request headers (no Content-Length yet).
    head: Vec<u8>,
    session: Option<Session>,
    next_id: i64,
    delete_acc: f64,
    /// The server forgot the session (404): the next open is a re-initialization.
    lost: bool,
    /// `sse_streaming`: stream calls made, and the GET stream's own connection.
    streams: u64,
    get_conn: Option<Conn>,
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
}

/// The `Authorization` line of token slot `slot` now (empty without tokens), and the token
/// generation it was built from.
fn token_line(ctx: &Ctx, slot: usize) -> (u64, Vec<u8>) {
    let shared = &ctx.shared;
    let gen = shared.bearer_gen.load(Ordering::Acquire);
    let tokens = Arc::clone(&crate::lock(&shared.bearer));
    let mut line = Vec::new();
    if !tokens.is_empty() {
        line.extend_from_slice(b"Authorization: Bearer ");
        line.extend_from_slice(tokens[slot % tokens.len()].as_bytes());
        line.extend_from_slice(b"\r\n");
    }
    (gen, line)
}

/// Failure reason and whether the session must be opened again.
struct Failed {
    reason: String,
    lost_session: bool,
    len: usize,
    /// Nothing could be connected: pause before the next attempt (no hot loop on a dead server).
    backoff: bool,
    /// A reply arrived (and failed its check): it is in the parser, for a sample.
    replied: bool,
}

impl HttpSession {
    fn new(ctx: &Ctx) -> HttpSession {
        let mut conn = Conn::new(ctx.endpoint());
        conn.set_max_body(ctx.cfg().max_reply_bytes);
        conn.parser.capture_cookies = ctx.cfg().cookies;
        let token_slot = ctx.shared.next_token.fetch_add(1, Ordering::Relaxed);
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
            streams: 0,
            get_conn: None,
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
        if ctx.shared.bearer_gen.load(Ordering::Acquire) != self.token_gen {
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
        if !ctx.cfg().stateless() {
            ctx.proto
                .head(&mut self.head, "POST", self.session.as_ref());
        } else {
            ctx.proto.head(&mut self.head, "POST", None);
            self.head.extend_from_slice(b"MCP-Protocol-Version: ");
            self.head
                .extend_from_slice(ctx.cfg().protocol_version.as_bytes());
            self.head.extend_from_slice(b"\r\n");
        }
        self.head.extend_from_slice(&self.own_headers);
    }

    fn build(&mut self, t: &Template, id: i64) {
        self.req.clear();
        self.req.extend_from_slice(&self.head);
        self.req.extend_from_slice(&t.headers);
        self.req.extend_from_slice(b"Content-Length: ");
        self.req
            .extend_from_slice(itoa::Buffer::new().format(t.body_len(id)).as_bytes());
        self.req.extend_from_slice(b"\r\n\r\n");
        t.body(id, &mut self.req);
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
    async fn open(&mut self, ctx: &Ctx, from: Instant, need_id: bool) -> bool {
        self.session = None;
        self.set_head(ctx);
        if ctx.cfg().new_connection == NewConnection::Session {
            self.conn.close();
        }
        if ctx.cfg().stateless() {
            let r = self.request(ctx, &ctx.discover, false, None).await;
            let end = Instant::now();
            let from = from + self.spent;
            return match r {
                Ok((len, _)) => {
                    ctx.record(FixedRow::Discover, from, end, None, len);
                    ctx.counters().established.fetch_add(1, Ordering::Relaxed);
                    self.session = Some(Session::new(
                        None,
                        ctx.cfg().protocol_version.clone(),
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
                            if crate::mcp::KNOWN_VERSIONS.contains(&v.as_str()) =>
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
                lock(&ctx.shared.stats[ctx.idx]).negotiated(&v);
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

    /// DELETE the session (handshake era, when the server minted an id); true when a DELETE
    /// was sent and answered 2xx.
    async fn delete(&mut self, ctx: &Ctx) -> bool {
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

    /// The session's standalone SSE stream (`GET`, handshake era), on its own connection, for
    /// `get_stream`: `GET:open` (time to the stream's first bytes: the priming event, or the
    /// first event), `GET:event` (the gap before each event with data), `GET:405` (the server
    /// offers none); any other status or an error fails `GET:open`. The end of the listening
    /// window closes the stream; it is not a failure.
    async fn get_stream(&mut self, ctx: &Ctx) {
        let Some(session) = self.session.as_ref() else {
            return;
        };
        let mut req = Vec::with_capacity(256);
        ctx.proto.head(&mut req, "GET", Some(session));
        req.extend_from_slice(&self.own_headers);
        req.extend_from_slice(b"\r\n");
        let max = ctx.cfg().max_reply_bytes;
        let conn = self.get_conn.get_or_insert_with(|| {
            let mut c = Conn::new(ctx.endpoint());
            c.set_max_body(max);
            c
        });
        let mut sse = SseCheck::new(max.min(mcpfast_core::DEFAULT_MAX_EVENT));
        sse.reset(-1, Want::Plain);
        let mut first: Option<Instant> = None;
        let mut events: Vec<Instant> = Vec::new();
        ctx.counters().sent.fetch_add(1, Ordering::Relaxed);
        ctx.counters().inflight.fetch_add(1, Ordering::Relaxed);
        let t0 = Instant::now();
        let r = conn
            .exchange_observed(&req, false, ctx.cfg().get_stream, &mut |chunk: &[u8]| {
                let now = Instant::now();
                first.get_or_insert(now);
                for _ in 0..sse.feed(chunk) {
                    events.push(now);
                }
            })
            .await;
        ctx.counters().inflight.fetch_sub(1, Ordering::Relaxed);
        let end = Instant::now();
        let t0 = t0 + ctx.opened(conn);
        let status = conn.parser.status;
        let open = match &r {
            _ if status == 405 => {
                ctx.record(FixedRow::Get405, t0, end, None, 0);
                return;
            }
            // the window ran out on an open stream, or the server ended it
            Ok(()) | Err(crate::http::ExchangeError::Timeout) if status == 200 => None,
            // the window ran out before the response head: nothing to time (as the Python
            // user's listening window does)
            Err(crate::http::ExchangeError::Timeout) if status == 0 => return,
            Ok(()) => Some(refusal(&conn.parser).0),
            Err(e) => Some(e.kind()),
        };
        if let Some(reason) = open {
            if r.is_ok() {
                ctx.sample(FixedRow::GetOpen, &reason, conn);
            }
            ctx.record(FixedRow::GetOpen, t0, end, Some(&reason), 0);
            return;
        }
        if let Some(at) = first {
            ctx.record(FixedRow::GetOpen, t0, at, None, 0);
        }
        let mut last = first.unwrap_or(t0);
        for at in events {
            ctx.record(FixedRow::GetEvent, last, at, None, 0);
            last = at;
        }
    }

    /// One request of the family, recorded under its name. `open`: (intended, actual) send
    /// time of the arrival in the open model (`from` is then the intended time, or the call's
    /// start when the arrival first opened the session).
    async fn one(
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

/// The failure reason of a refused reply (`http 401 invalid_token`, `http 429 rate limited
/// (Retry-After 2 s)`) and the wait its `Retry-After` asks for.
fn refusal(p: &crate::http::ResponseParser) -> (String, Option<f64>) {
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
pub(crate) async fn http_session(ctx: &Ctx, slot: usize) {
    let family = ctx.cfg().family;
    if family == Family::Hold {
        return hold_session(ctx, slot).await;
    }
    let mut s = HttpSession::new(ctx);
    let per_session = matches!(
        family,
        Family::ToolsCall | Family::Mixed | Family::SseStreaming
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
            }
            let t = ctx.pick();
            let open = open_model.then_some((from, sent));
            // the handshake had this arrival's intended time; the call starts after it
            let from = if opened { Instant::now() } else { from };
            let r = s.one(ctx, t, from, t.name, open).await;
            ctx.iteration_done();
            if family == Family::SseStreaming {
                s.streams += 1;
                let every = ctx.cfg().get_stream_every;
                if every > 0 && !ctx.cfg().stateless() && s.streams % every == 1 % every {
                    s.get_stream(ctx).await;
                }
            }
            if let Err(f) = r {
                if f.lost_session {
                    s.session = None;
                    s.lost = true;
                }
                if f.backoff {
                    ctx.pause(BACKOFF / 10).await;
                }
            }
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
    if per_session && !ctx.shared.past_deadline() {
        s.delete(ctx).await;
    }
    ctx.tally(&s.conn);
    if let Some(c) = &s.get_conn {
        ctx.tally(c);
    }
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
