//! The engine threads: one tokio current-thread runtime each (I/O + time drivers only), a
//! controller that converges the thread's sessions on its share of the users, a pacer for the
//! open model, and one task per session (HTTP) or child process (stdio, [`crate::stdio`]).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio::sync::Notify;

use crate::check::{SseCheck, Verdict, Want};
use crate::config::{Arrivals, Config, Family, NewConnection, Transport};
use crate::http::{Conn, ContentType};
use crate::mcp::{Problem, Proto, Session, CLIENT_INFO};
use crate::net::Endpoint;
use crate::{lock, Shared};

/// Stats name ids (their names: [`row_name`]).
pub const N_INITIALIZE: usize = 0;
pub const N_INITIALIZED: usize = 1;
pub const N_DISCOVER: usize = 2;
pub const N_DELETE: usize = 3;
pub const N_CALL: usize = 4;
pub const N_FIRST: usize = 5;
pub const N_STREAM: usize = 6;
pub const N_PROGRESS_FIRST: usize = 7;
pub const N_PROGRESS_GAP: usize = 8;
pub const N_SSE_FIRST: usize = 9;
pub const N_SSE_GAP: usize = 10;
/// `cycle_latency`: a whole handshake / churn cycle.
pub const N_CYCLE: usize = 11;
/// `sse_streaming`'s standalone GET stream: opened (time to its first bytes), the gap before
/// each event (since the previous one or the open), and a server that offers none (405).
pub const N_GET_OPEN: usize = 12;
pub const N_GET_EVENT: usize = 13;
pub const N_GET_405: usize = 14;
/// A new connection: the TCP connect, and the TLS handshake after it (`https`).
pub const N_CONNECT: usize = 15;
pub const N_TLS: usize = 16;
/// `retry_after`: a wait a refusal's `Retry-After` asked for (the time actually waited).
pub const N_RETRY_WAIT: usize = 17;

/// The rows every engine has, ids `0..FIXED_ROWS` (the mix's own rows follow).
pub const FIXED_ROWS: usize = 18;

/// The name of fixed row `id`, as the Python users report it.
pub fn row_name(id: usize, cfg: &Config) -> String {
    let fixed = match id {
        N_INITIALIZE => "initialize",
        N_INITIALIZED => "notifications/initialized",
        N_DISCOVER => "server/discover",
        N_DELETE => "DELETE",
        N_CALL => return format!("tools/call:{}", cfg.tool),
        N_FIRST => return format!("tools/call:{} (first)", cfg.tool),
        N_STREAM => return format!("tools/call:{}", cfg.stream_tool),
        N_PROGRESS_FIRST => "progress:first-event",
        N_PROGRESS_GAP => "progress:gap",
        N_SSE_FIRST => "sse:first-event",
        N_SSE_GAP => "sse:gap",
        N_CYCLE => "cycle",
        N_GET_OPEN => "GET:open",
        N_GET_EVENT => "GET:event",
        N_GET_405 => "GET:405",
        N_CONNECT => "connect",
        N_TLS => "tls:handshake",
        N_RETRY_WAIT => "Retry-After wait",
        _ => "",
    };
    fixed.to_string()
}

/// Rows that time a request (counted as completed): not the events of a streaming reply, not a
/// cycle (made of requests), not the opening of a connection.
fn is_request_row(name: usize) -> bool {
    !(N_PROGRESS_FIRST..=N_CYCLE).contains(&name)
        && name != N_GET_EVENT
        && name != N_CONNECT
        && name != N_TLS
        && name != N_RETRY_WAIT
}

/// A send later than this after its intended time counts as late (open model; the default
/// of the config's `late_after_s`).
pub const LATE: Duration = Duration::from_millis(1);
/// Pause after a failed session start, so a refusing server does not become a hot loop.
pub const BACKOFF: Duration = Duration::from_millis(100);
/// How often the controller looks at the targets (users, stop).
const TICK: Duration = Duration::from_millis(10);

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

/// The `_meta` every 2026-07-28 request carries.
pub fn modern_meta(cfg: &Config) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(
        "io.modelcontextprotocol/protocolVersion".into(),
        Value::String(cfg.protocol_version.clone()),
    );
    meta.insert(
        "io.modelcontextprotocol/clientCapabilities".into(),
        serde_json::from_str(&cfg.client_capabilities).unwrap_or(Value::Object(Map::new())),
    );
    meta.insert(
        "io.modelcontextprotocol/clientInfo".into(),
        serde_json::from_str(CLIENT_INFO).unwrap_or(Value::Null),
    );
    meta
}

const ID_MARK: &str = "\u{1}mcpfast-id\u{1}";

/// A request body with the id (and maybe the progress token) left out: `parts` joined by the id.
#[derive(Debug, Clone)]
pub struct Template {
    pub method: String,
    /// Stats name id.
    pub name: usize,
    pub parts: Vec<Vec<u8>>,
    /// Per-request headers (2026-07-28: `Mcp-Method`, `Mcp-Name`).
    pub headers: Vec<u8>,
    pub want: Want,
    pub weight: u32,
    /// A progress token (= the id) in `_meta`.
    pub progress: bool,
}

impl Template {
    pub fn new(
        cfg: &Config,
        method: &str,
        params: Option<&str>,
        header_name: Option<&str>,
        name: usize,
        progress: bool,
    ) -> Template {
        let stateless = cfg.stateless();
        let mut params: Option<Value> = params.and_then(|p| serde_json::from_str(p).ok());
        if stateless || progress {
            let mut p = match params.take() {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            let mut meta = match p.remove("_meta") {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            if stateless {
                meta.extend(modern_meta(cfg));
            }
            if progress {
                meta.insert("progressToken".into(), Value::String(ID_MARK.into()));
            }
            p.insert("_meta".into(), Value::Object(meta));
            params = Some(Value::Object(p));
        }
        let mut msg = Map::new();
        msg.insert("jsonrpc".into(), Value::String("2.0".into()));
        msg.insert("id".into(), Value::String(ID_MARK.into()));
        msg.insert("method".into(), Value::String(method.into()));
        if let Some(p) = params {
            msg.insert("params".into(), p);
        }
        let text = Value::Object(msg).to_string();
        let mark = Value::String(ID_MARK.into()).to_string();
        let parts = text.split(&mark).map(|s| s.as_bytes().to_vec()).collect();
        let mut headers = Vec::new();
        if stateless {
            headers.extend_from_slice(b"Mcp-Method: ");
            headers.extend_from_slice(encode_header_value(method).as_bytes());
            headers.extend_from_slice(b"\r\n");
            if let Some(n) = header_name {
                headers.extend_from_slice(b"Mcp-Name: ");
                headers.extend_from_slice(encode_header_value(n).as_bytes());
                headers.extend_from_slice(b"\r\n");
            }
        }
        Template {
            method: method.into(),
            name,
            parts,
            headers,
            want: if method == "tools/call" {
                Want::ToolCall
            } else {
                Want::Plain
            },
            weight: 1,
            progress,
        }
    }

    /// The body for request `id`.
    pub fn body(&self, id: i64, out: &mut Vec<u8>) {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(id).as_bytes();
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(digits);
            }
            out.extend_from_slice(p);
        }
    }

    pub fn body_len(&self, id: i64) -> usize {
        let mut digits = itoa::Buffer::new();
        let n = digits.format(id).len();
        self.parts.iter().map(Vec::len).sum::<usize>() + n * (self.parts.len() - 1)
    }
}

/// SEP-2243 header values: visible ASCII without surrounding spaces as is, anything else as
/// `=?base64?<base64 of the UTF-8>?=`.
pub fn encode_header_value(v: &str) -> String {
    let safe = !v.is_empty()
        && v.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !v.starts_with(' ')
        && !v.ends_with(' ')
        && (!v.starts_with("=?") || !v.ends_with("?="));
    if safe {
        return v.to_string();
    }
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::from("=?base64?");
    for chunk in v.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out.push_str("?=");
    out
}

/// What one engine thread shares among its tasks.
pub struct Ctx {
    pub shared: Arc<Shared>,
    pub idx: usize,
    pub proto: Proto,
    /// The family's requests: the call (or the mix, or the stream call).
    pub items: Vec<Template>,
    pub discover: Template,
    total_weight: u32,
    target: Cell<usize>,
    running: RefCell<Vec<bool>>,
    live: Cell<usize>,
    tokens: RefCell<VecDeque<Instant>>,
    token_ready: Notify,
    rng: Cell<u64>,
    last_connect_event: Cell<Option<Instant>>,
    /// The URL the cookie jars match cookies against (HTTP only).
    pub cookie_url: Option<url::Url>,
}

impl Ctx {
    pub fn new(shared: Arc<Shared>, idx: usize) -> Ctx {
        let cfg = &shared.cfg;
        // stdio has no target: requests over HTTP are never built there
        let target = cfg.target.clone().unwrap_or_else(unreachable_target);
        let arguments: Value = serde_json::from_str(&cfg.arguments).unwrap_or(Value::Null);
        let mut proto = Proto::new(
            target,
            cfg.protocol_version.clone(),
            cfg.timeout,
            &cfg.tool,
            &arguments,
        );
        for (k, v) in &cfg.headers {
            proto.add_header(k, v);
        }
        if cfg.new_connection == NewConnection::Request {
            proto.add_header("Connection", "close");
        }
        proto.capabilities = cfg.client_capabilities.clone();
        proto.max_reply = cfg.max_reply_bytes;
        let call_params = format!(
            r#"{{"name":{},"arguments":{}}}"#,
            Value::String(cfg.tool.clone()),
            cfg.arguments
        );
        let items: Vec<Template> = match cfg.family {
            Family::Mixed => cfg
                .mix
                .iter()
                .map(|m| {
                    let mut t = Template::new(
                        cfg,
                        &m.method,
                        m.params.as_deref(),
                        m.name.as_deref(),
                        shared.name_id(&m.stat_name()),
                        m.stream,
                    );
                    t.weight = m.weight;
                    t
                })
                .collect(),
            Family::SseStreaming => {
                let params = format!(
                    r#"{{"name":{},"arguments":{}}}"#,
                    Value::String(cfg.stream_tool.clone()),
                    cfg.stream_arguments
                );
                vec![Template::new(
                    cfg,
                    "tools/call",
                    Some(&params),
                    Some(&cfg.stream_tool),
                    N_STREAM,
                    true,
                )]
            }
            _ => vec![Template::new(
                cfg,
                "tools/call",
                Some(&call_params),
                Some(&cfg.tool),
                N_CALL,
                false,
            )],
        };
        let discover = Template::new(cfg, "server/discover", Some("{}"), None, N_DISCOVER, false);
        let total_weight = items.iter().map(|t| t.weight).sum::<u32>().max(1);
        let seed = cfg.seed ^ (idx as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        Ctx {
            idx,
            proto,
            items,
            discover,
            total_weight,
            target: Cell::new(0),
            running: RefCell::new(Vec::new()),
            live: Cell::new(0),
            tokens: RefCell::new(VecDeque::new()),
            token_ready: Notify::new(),
            rng: Cell::new(seed),
            last_connect_event: Cell::new(None),
            cookie_url: cfg
                .target
                .as_ref()
                .and_then(|_| url::Url::parse(&cfg.url).ok()),
            shared,
        }
    }

    pub fn cfg(&self) -> &Config {
        &self.shared.cfg
    }

    pub fn counters(&self) -> &crate::Counters {
        &self.shared.counters[self.idx]
    }

    /// xorshift64*: the mix and Poisson gaps.
    pub fn random(&self) -> u64 {
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A uniform draw in (0, 1].
    pub fn unit(&self) -> f64 {
        ((self.random() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// The next request of the family (weighted pick for the mix).
    pub fn pick(&self) -> &Template {
        if self.items.len() == 1 {
            return &self.items[0];
        }
        let mut r = (self.random() % u64::from(self.total_weight)) as u32;
        for t in &self.items {
            if r < t.weight {
                return t;
            }
            r -= t.weight;
        }
        &self.items[0]
    }

    /// Record one completed request.
    pub fn record(
        &self,
        name: usize,
        from: Instant,
        end: Instant,
        failure: Option<&str>,
        len: usize,
    ) {
        let us = end.saturating_duration_since(from).as_micros() as u64;
        let wall = self.shared.clock.wall(end);
        lock(&self.shared.stats[self.idx]).record(name, us, failure, len as u64, wall);
        if is_request_row(name) {
            self.counters().completed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The connection the last exchange on `conn` opened, if any: its `connect` and
    /// `tls:handshake` rows. Returns the time spent opening, by which the caller moves the
    /// request's start on, so that no request's latency holds a connect or a handshake.
    pub fn opened(&self, conn: &mut Conn) -> Duration {
        let Some(o) = conn.take_opening() else {
            return Duration::ZERO;
        };
        self.record(
            N_CONNECT,
            o.began,
            o.connected,
            o.connect_failure.as_deref(),
            0,
        );
        if let Some((end, failure)) = &o.tls {
            self.record(N_TLS, o.connected, *end, failure.as_deref(), 0);
        }
        o.spent()
    }

    /// A new connection for this user's next exchange.
    pub fn endpoint(&self) -> Arc<Endpoint> {
        self.shared.endpoint.clone()
    }

    /// Open model: the send lag (actual minus intended send time) and the service time (from
    /// the actual send to the end) of a request of row `name` (its latency, from the intended
    /// time, goes through `record`).
    pub fn record_open(&self, name: usize, lag: Duration, service: Duration) {
        lock(&self.shared.stats[self.idx]).record_open(
            name,
            service.as_micros() as u64,
            lag.as_micros() as u64,
        );
    }

    /// Keep the start of a reply that failed its check (the first per name and reason).
    pub fn sample(&self, name: usize, reason: &str, conn: &Conn) {
        let mut st = lock(&self.shared.stats[self.idx]);
        if !st.has_sample(name, reason) {
            st.add_sample(name, reason, crate::mcp::reply_sample(conn));
        }
    }

    /// The connection of a session is done: add its counts.
    pub fn tally(&self, conn: &Conn) {
        let c = self.counters();
        c.connections.fetch_add(1, Ordering::Relaxed);
        c.connects.fetch_add(conn.connects, Ordering::Relaxed);
        c.server_closes
            .fetch_add(conn.server_closes, Ordering::Relaxed);
        c.idle_closes.fetch_add(conn.idle_closes, Ordering::Relaxed);
        c.sse_other_messages
            .fetch_add(conn.sse_other_messages, Ordering::Relaxed);
    }

    /// An iteration ended (ok or not).
    pub fn iteration_done(&self) {
        self.counters().iterations.fetch_add(1, Ordering::Relaxed);
        if let Some(every) = self.cfg().progress_every {
            let done = self.shared.iterations_done.fetch_add(1, Ordering::Relaxed) + 1;
            if done % every == 0 {
                self.shared.event("progress", done.to_string());
            }
        }
    }

    /// A connection error: counted by the caller; an event at most once a second per thread.
    pub fn connect_error(&self, msg: String) {
        let now = Instant::now();
        if self
            .last_connect_event
            .get()
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            self.last_connect_event.set(Some(now));
            self.shared.event("connect_error", msg);
        }
    }

    /// Should the session in `slot` go on?
    pub fn keep(&self, slot: usize) -> bool {
        !self.shared.stopping() && slot < self.target.get()
    }

    pub fn open_model(&self) -> bool {
        self.shared.thread_rate().is_some()
    }

    /// Open model: wait for the next arrival; its intended send time. None when the session
    /// should stop or the model went closed.
    pub async fn arrival(&self, slot: usize) -> Option<Instant> {
        loop {
            if !self.keep(slot) || !self.open_model() {
                return None;
            }
            if let Some(t) = self.try_arrival() {
                return Some(t);
            }
            let _ = tokio::time::timeout(TICK * 2, self.token_ready.notified()).await;
        }
    }

    /// Open model: an arrival that is already due, if any (counts it late if it waited).
    pub fn try_arrival(&self) -> Option<Instant> {
        let t = self.tokens.borrow_mut().pop_front()?;
        if Instant::now().saturating_duration_since(t) > self.cfg().late_after {
            self.counters().late.fetch_add(1, Ordering::Relaxed);
        }
        Some(t)
    }

    /// Wait for the pacer to queue an arrival (bounded).
    pub async fn token_notified(&self) {
        let _ = tokio::time::timeout(TICK * 2, self.token_ready.notified()).await;
    }

    /// Wait out the stop or a change of target, at most `d`.
    pub async fn pause(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
}

fn unreachable_target() -> crate::mcp::Target {
    crate::mcp::Target {
        tls: false,
        hostname: "127.0.0.1".into(),
        port: 9,
        host: "127.0.0.1:9".into(),
        path: "/".into(),
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

async fn controller(ctx: Rc<Ctx>) {
    let shared = ctx.shared.clone();
    tokio::task::spawn_local(pacer(ctx.clone()));
    while !shared.stopping() {
        let want = shared.thread_users(ctx.idx);
        ctx.target.set(want);
        {
            let mut running = ctx.running.borrow_mut();
            if running.len() < want {
                running.resize(want, false);
            }
            for slot in 0..want {
                if !running[slot] {
                    running[slot] = true;
                    ctx.live.set(ctx.live.get() + 1);
                    let c = ctx.clone();
                    tokio::task::spawn_local(async move {
                        match c.cfg().transport {
                            Transport::Http => http_session(&c, slot).await,
                            Transport::Stdio => crate::stdio::child_session(&c, slot).await,
                        }
                        c.running.borrow_mut()[slot] = false;
                        c.live.set(c.live.get() - 1);
                    });
                }
            }
        }
        shared.counters[ctx.idx]
            .cpu_ns
            .store(thread_cpu_ns(), Ordering::Relaxed);
        tokio::time::sleep(TICK).await;
    }
    ctx.token_ready.notify_waiters();
    // stop: sessions finish what is in flight (and DELETE) until the grace runs out
    while ctx.live.get() > 0 && !shared.past_deadline() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A monotonic timer with µs resolution (timerfd): tokio's timer has ms granularity.
pub struct Timer {
    fd: Option<tokio::io::unix::AsyncFd<TimerFdRaw>>,
}

struct TimerFdRaw(nix::sys::timerfd::TimerFd);

impl AsRawFd for TimerFdRaw {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl Default for Timer {
    fn default() -> Self {
        Self::new()
    }
}

impl Timer {
    pub fn new() -> Timer {
        use nix::sys::timerfd::{ClockId, TimerFd, TimerFlags};
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .ok()
        .and_then(|t| {
            // the fd is owned by the value AsyncFd holds, so it outlives the registration
            #[allow(deprecated)]
            let fd = tokio::io::unix::AsyncFd::new(TimerFdRaw(t));
            fd.ok()
        });
        Timer { fd }
    }

    /// Sleep `d` (µs resolution); falls back to tokio's timer if no timerfd could be made.
    pub async fn sleep(&self, d: Duration) {
        use nix::sys::time::TimeSpec;
        use nix::sys::timerfd::{Expiration, TimerSetTimeFlags};
        let Some(fd) = &self.fd else {
            tokio::time::sleep(d).await;
            return;
        };
        let d = d.max(Duration::from_micros(1));
        if fd
            .get_ref()
            .0
            .set(
                Expiration::OneShot(TimeSpec::from_duration(d)),
                TimerSetTimeFlags::empty(),
            )
            .is_err()
        {
            tokio::time::sleep(d).await;
            return;
        }
        // bounded: the timer fires after `d`; the outer timeout only guards a lost wakeup
        let _ = tokio::time::timeout(d + Duration::from_millis(50), async {
            loop {
                match fd.readable().await {
                    Ok(mut guard) => {
                        let mut buf = [0u8; 8];
                        match nix::unistd::read(guard.get_inner().0.as_fd(), &mut buf) {
                            Ok(_) => return,
                            Err(nix::errno::Errno::EAGAIN) => guard.clear_ready(),
                            Err(_) => return,
                        }
                    }
                    Err(_) => return,
                }
            }
        })
        .await;
    }
}

/// Open model: generate this thread's intended send times and queue them for the sessions.
async fn pacer(ctx: Rc<Ctx>) {
    let timer = Timer::new();
    // the next arrival's intended time, and the schedule it belongs to
    let mut next: Option<Instant> = None;
    let mut since: Option<Instant> = None;
    while !ctx.shared.stopping() {
        let Some(rate) = ctx.shared.thread_rate() else {
            next = None;
            ctx.tokens.borrow_mut().clear();
            tokio::time::sleep(TICK).await;
            continue;
        };
        let now = Instant::now();
        let open_since = ctx.shared.open_since();
        if next.is_none() || open_since != since {
            // a new schedule runs from when it was asked for, not from when this thread ran
            since = open_since;
            next = Some(open_since.unwrap_or(now));
        }
        let at = emit(&ctx, rate, next.unwrap_or(now), now);
        next = Some(at);
        let wait = at.saturating_duration_since(Instant::now()).min(TICK * 2);
        if wait.is_zero() {
            tokio::task::yield_now().await;
        } else {
            timer.sleep(wait).await;
        }
    }
    // the arrivals due before `stop` was called, whenever this thread saw it: queued (no
    // session takes them now) or dropped, as any other
    if let (Some(rate), Some(at), Some(end)) =
        (ctx.shared.thread_rate(), next, ctx.shared.stopped_at())
    {
        emit(&ctx, rate, at, end);
    }
}

/// Queue (or drop, past `max_inflight`) every arrival from `at` up to `until`; the next one's
/// intended time. At most 100,000 a call, so a long stall never blocks the thread.
fn emit(ctx: &Ctx, rate: f64, mut at: Instant, until: Instant) -> Instant {
    let max_queue = ctx.cfg().max_inflight;
    let mut due = 0u32;
    while at <= until && due < 100_000 {
        {
            let mut q = ctx.tokens.borrow_mut();
            if q.len() >= max_queue {
                ctx.counters().dropped.fetch_add(1, Ordering::Relaxed);
            } else {
                q.push_back(at);
            }
        }
        ctx.token_ready.notify_one();
        let gap = match ctx.cfg().arrivals {
            Arrivals::Uniform => 1.0 / rate,
            Arrivals::Poisson => -ctx.unit().ln() / rate,
        };
        at += Duration::from_secs_f64(gap.min(3600.0));
        due += 1;
    }
    at
}

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
                    ctx.record(N_DISCOVER, from, end, None, len);
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
                    ctx.record(N_DISCOVER, from, end, Some(&f.reason), f.len);
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
                ctx.record(N_INITIALIZE, from, end, None, len);
                lock(&ctx.shared.stats[ctx.idx]).negotiated(&v);
                (v, sid)
            }
            Err(reason) => {
                if replied {
                    ctx.sample(N_INITIALIZE, &reason, &self.conn);
                }
                ctx.record(N_INITIALIZE, from, end, Some(&reason), 0);
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
                ctx.record(N_INITIALIZED, t0, end, None, 0);
                ctx.counters().established.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(f) => {
                if f.replied {
                    ctx.sample(N_INITIALIZED, &f.reason, &self.conn);
                }
                ctx.record(N_INITIALIZED, t0, end, Some(&f.reason), f.len);
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
            ctx.sample(N_DELETE, reason, &self.conn);
        }
        ctx.record(N_DELETE, t0, end, failure.as_deref(), 0);
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
                ctx.record(N_GET_405, t0, end, None, 0);
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
                ctx.sample(N_GET_OPEN, &reason, conn);
            }
            ctx.record(N_GET_OPEN, t0, end, Some(&reason), 0);
            return;
        }
        if let Some(at) = first {
            ctx.record(N_GET_OPEN, t0, at, None, 0);
        }
        let mut last = first.unwrap_or(t0);
        for at in events {
            ctx.record(N_GET_EVENT, last, at, None, 0);
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
            report_times(ctx, N_SSE_FIRST, N_SSE_GAP, &times.0, start);
            report_times(ctx, N_PROGRESS_FIRST, N_PROGRESS_GAP, &times.1, start);
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

fn report_times(ctx: &Ctx, first: usize, gap: usize, times: &[Instant], from: Instant) {
    let Some(&t0) = times.first() else { return };
    ctx.record(first, from, t0, None, 0);
    for w in times.windows(2) {
        ctx.record(gap, w[0], w[1], None, 0);
    }
}

/// One HTTP user: its own keep-alive connection and session, looping over the family until
/// its slot is retired or the engine stops.
async fn http_session(ctx: &Ctx, slot: usize) {
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
                ctx.record(N_RETRY_WAIT, t0, Instant::now(), None, 0);
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
            s.one(ctx, t, Instant::now(), N_FIRST, None).await.is_ok()
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
            ctx.record(N_CYCLE, from, Instant::now(), None, 0);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values() {
        assert_eq!(encode_header_value("echo"), "echo");
        assert_eq!(encode_header_value(" x"), "=?base64?IHg=?=");
        assert_eq!(encode_header_value("é"), "=?base64?w6k=?=");
        assert_eq!(encode_header_value("abc"), "abc");
        assert_eq!(encode_header_value("a\u{1}bc"), "=?base64?YQFiYw==?=");
    }

    #[test]
    fn templates_carry_the_id_and_meta() {
        let cfg = Config::parse(
            br#"{"url":"http://127.0.0.1:1/mcp","protocol_version":"2026-07-28","tool":"echo","arguments":{"text":"hi"}}"#,
        )
        .expect("config");
        let t = Template::new(
            &cfg,
            "tools/call",
            Some(r#"{"name":"echo","arguments":{"text":"hi"}}"#),
            Some("echo"),
            N_CALL,
            true,
        );
        let mut body = Vec::new();
        t.body(42, &mut body);
        assert_eq!(body.len(), t.body_len(42));
        let v: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["id"], 42);
        assert_eq!(v["params"]["_meta"]["progressToken"], 42);
        assert_eq!(
            v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(v["params"]["arguments"]["text"], "hi");
        let h = String::from_utf8(t.headers.clone()).expect("utf8");
        assert_eq!(h, "Mcp-Method: tools/call\r\nMcp-Name: echo\r\n");
    }

    #[test]
    fn every_fixed_row_has_a_name() {
        let cfg =
            crate::Config::parse(br#"{"url":"http://127.0.0.1:1/","tool":"a","stream_tool":"b"}"#)
                .expect("config");
        let names: Vec<String> = (0..FIXED_ROWS).map(|id| row_name(id, &cfg)).collect();
        assert!(names.iter().all(|n| !n.is_empty()), "{names:?}");
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), FIXED_ROWS);
        assert_eq!(row_name(FIXED_ROWS, &cfg), "");
    }
}
