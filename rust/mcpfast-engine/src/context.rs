//! [`Ctx`], what one engine thread's tasks share: the family's request templates built once,
//! the thread's statistics and counters, its random draws, its share of the users (which slots
//! go on) and the open model's queue of arrivals (filled by `pacing`, taken by the sessions).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Notify;

use crate::config::{Config, Family, NewConnection, Think};
use crate::http::Conn;
use crate::mcp::Proto;
use crate::net::Endpoint;
use crate::rows::{self, FixedRow};
use crate::shared::{lock, Counters, Shared};
use crate::target::Target;
use crate::templates::Template;

/// Pause after a failed session start, so a refusing server does not become a hot loop.
pub(crate) const BACKOFF: Duration = Duration::from_millis(100);
/// How often the controller looks at the targets (users, stop), and how long a session waits
/// for an arrival before it looks at them again (twice this).
pub(crate) const TICK: Duration = Duration::from_millis(10);

/// What one engine thread shares among its tasks.
pub(crate) struct Ctx {
    pub(crate) shared: Arc<Shared>,
    pub(crate) idx: usize,
    pub(crate) proto: Proto,
    /// The family's requests: the call (or the mix, or the stream call).
    pub(crate) items: Vec<Template>,
    pub(crate) discover: Template,
    /// `sse_streaming` in 2026-07-28: the `subscriptions/listen` a session holds.
    pub(crate) listen: Template,
    /// `agents`: the `tools/list` each session starts with.
    pub(crate) list: Template,
    /// Wakes every task resting ([`Ctx::rest`]) when the engine stops or the thread's users
    /// go down.
    woken: Notify,
    total_weight: u32,
    /// The users this thread runs now (its slots below it go on).
    target: Cell<usize>,
    /// Open model: the queued arrivals (intended send times), and their doorbell.
    tokens: RefCell<VecDeque<Instant>>,
    token_ready: Notify,
    rng: Cell<u64>,
    last_connect_event: Cell<Option<Instant>>,
    /// The URL the cookie jars match cookies against (HTTP only).
    pub(crate) cookie_url: Option<url::Url>,
}

impl Ctx {
    pub(crate) fn new(shared: Arc<Shared>, idx: usize) -> Ctx {
        let cfg = &shared.cfg;
        // stdio has no target: requests over HTTP are never built there
        let target = cfg.target.clone().unwrap_or_else(Target::nowhere);
        let mut proto = Proto::new(target, cfg.protocol_version.clone());
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
            Family::Mixed | Family::Agents => cfg
                .mix
                .iter()
                .map(|m| {
                    let mut t = Template::new(
                        cfg.stateless(),
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
                    cfg.stateless(),
                    cfg,
                    "tools/call",
                    Some(&params),
                    Some(&cfg.stream_tool),
                    FixedRow::Stream.id(),
                    true,
                )]
            }
            // the first call of each start: handshake era, then 2026-07-28
            Family::Discover => [false, true]
                .into_iter()
                .map(|stateless| {
                    let row = if stateless {
                        FixedRow::FirstAfterDiscover
                    } else {
                        FixedRow::FirstAfterInitialize
                    };
                    Template::new(
                        stateless,
                        cfg,
                        "tools/call",
                        Some(&call_params),
                        Some(&cfg.tool),
                        row.id(),
                        false,
                    )
                })
                .collect(),
            _ => vec![Template::new(
                cfg.stateless(),
                cfg,
                "tools/call",
                Some(&call_params),
                Some(&cfg.tool),
                FixedRow::Call.id(),
                false,
            )],
        };
        let discover = Template::new(
            cfg.stateless() || cfg.family == Family::Discover,
            cfg,
            "server/discover",
            Some("{}"),
            None,
            FixedRow::Discover.id(),
            false,
        );
        // the list changes the Python user's listen asks for too
        let listen = Template::new(
            cfg.stateless(),
            cfg,
            "subscriptions/listen",
            Some(r#"{"notifications":{"toolsListChanged":true}}"#),
            None,
            FixedRow::ListenAck.id(),
            false,
        );
        let list = Template::new(
            cfg.stateless(),
            cfg,
            "tools/list",
            None,
            None,
            FixedRow::AgentList.id(),
            false,
        );
        let total_weight = items.iter().map(|t| t.weight).sum::<u32>().max(1);
        let seed = cfg.seed ^ (idx as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        Ctx {
            idx,
            proto,
            items,
            discover,
            listen,
            list,
            woken: Notify::new(),
            total_weight,
            target: Cell::new(0),
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

    pub(crate) fn cfg(&self) -> &Config {
        &self.shared.cfg
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.shared.counters[self.idx]
    }

    /// xorshift64*: the mix and Poisson gaps.
    fn random(&self) -> u64 {
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A uniform draw in (0, 1].
    pub(crate) fn unit(&self) -> f64 {
        ((self.random() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// The next request of the family (weighted pick for the mix).
    pub(crate) fn pick(&self) -> &Template {
        &self.items[self.pick_index()]
    }

    /// The index of the next request of the family among `items` (weighted pick).
    pub(crate) fn pick_index(&self) -> usize {
        if self.items.len() == 1 {
            return 0;
        }
        let mut r = (self.random() % u64::from(self.total_weight)) as u32;
        for (i, t) in self.items.iter().enumerate() {
            if r < t.weight {
                return i;
            }
            r -= t.weight;
        }
        0
    }

    /// A draw from `think` (a think time or an idle gap).
    pub(crate) fn draw(&self, think: &Think) -> Duration {
        think.sample(self.unit(), self.unit())
    }

    /// A uniform draw in `lo..=hi`.
    pub(crate) fn between(&self, lo: u32, hi: u32) -> u32 {
        lo + (self.random() % u64::from(hi - lo + 1)) as u32
    }

    /// Rest `d` (a think time, an idle gap) unless the engine stops or `slot` is retired
    /// first; true when the whole time passed and the slot goes on. Many tasks rest at once
    /// (an agent's think time is seconds): each on the runtime's timer, woken early by one
    /// notification to all.
    pub(crate) async fn rest(&self, slot: usize, d: Duration) -> bool {
        let until = tokio::time::Instant::now() + d;
        loop {
            let woken = self.woken.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if !self.keep(slot) {
                return false;
            }
            tokio::select! {
                () = tokio::time::sleep_until(until) => return self.keep(slot),
                () = &mut woken => {}
            }
        }
    }

    /// Record one completed request of row `name` (a [`FixedRow`] or a row id).
    pub(crate) fn record(
        &self,
        name: impl Into<usize>,
        from: Instant,
        end: Instant,
        failure: Option<&str>,
        len: usize,
    ) {
        let name = name.into();
        let us = end.saturating_duration_since(from).as_micros() as u64;
        let wall = self.shared.clock.wall(end);
        lock(&self.shared.stats[self.idx]).record(name, us, failure, len as u64, wall);
        if rows::is_request(name) {
            self.counters().completed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Record a figure that is a count, not a time (`agent:steps`), as the value of a row.
    pub(crate) fn record_value(&self, name: impl Into<usize>, value: u64) {
        let wall = self.shared.clock.wall(Instant::now());
        lock(&self.shared.stats[self.idx]).record(name.into(), value, None, 0, wall);
    }

    /// The connection the last exchange on `conn` opened, if any: its `connect` and
    /// `tls:handshake` rows. Returns the time spent opening, by which the caller moves the
    /// request's start on, so that no request's latency holds a connect or a handshake.
    pub(crate) fn opened(&self, conn: &mut Conn) -> Duration {
        let Some(o) = conn.take_opening() else {
            return Duration::ZERO;
        };
        self.record(
            FixedRow::Connect,
            o.began,
            o.connected,
            o.connect_failure.as_deref(),
            0,
        );
        if let Some((end, failure)) = &o.tls {
            self.record(FixedRow::Tls, o.connected, *end, failure.as_deref(), 0);
        }
        o.spent()
    }

    /// A new connection for this user's next exchange.
    pub(crate) fn endpoint(&self) -> Arc<Endpoint> {
        self.shared.endpoint.clone()
    }

    /// Open model: the send lag (actual minus intended send time) and the service time (from
    /// the actual send to the end) of a request of row `name` (its latency, from the intended
    /// time, goes through `record`).
    pub(crate) fn record_open(&self, name: usize, lag: Duration, service: Duration) {
        lock(&self.shared.stats[self.idx]).record_open(
            name,
            service.as_micros() as u64,
            lag.as_micros() as u64,
        );
    }

    /// A session was opened in `version` (the one the server chose).
    pub(crate) fn negotiated(&self, version: &str) {
        lock(&self.shared.stats[self.idx]).negotiated(version);
    }

    /// Keep the start of a reply that failed its check (the first per name and reason).
    pub(crate) fn sample(&self, name: impl Into<usize>, reason: &str, conn: &Conn) {
        let name = name.into();
        let mut st = lock(&self.shared.stats[self.idx]);
        if !st.has_sample(name, reason) {
            st.add_sample(name, reason, crate::mcp::reply_sample(conn));
        }
    }

    /// The connection of a session is done: add its counts.
    pub(crate) fn tally(&self, conn: &Conn) {
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
    pub(crate) fn iteration_done(&self) {
        self.counters().iterations.fetch_add(1, Ordering::Relaxed);
        if let Some(every) = self.cfg().progress_every {
            let done = self.shared.iteration_ended();
            if done % every == 0 {
                self.shared.event("progress", done.to_string());
            }
        }
    }

    /// A connection error: counted by the caller; an event at most once a second per thread.
    pub(crate) fn connect_error(&self, msg: String) {
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
    pub(crate) fn keep(&self, slot: usize) -> bool {
        !self.shared.stopping() && slot < self.target.get()
    }

    /// The users this thread runs from now on (fewer: the resting ones look whether they
    /// are retired).
    pub(crate) fn set_target(&self, users: usize) {
        if users < self.target.replace(users) {
            self.woken.notify_waiters();
        }
    }

    /// Wait out the stop or a change of target, at most `d`.
    pub(crate) async fn pause(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }

    pub(crate) fn open_model(&self) -> bool {
        self.shared.thread_rate().is_some()
    }

    /// Open model: wait for the next arrival; its intended send time. None when the session
    /// should stop or the model went closed.
    pub(crate) async fn arrival(&self, slot: usize) -> Option<Instant> {
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
    pub(crate) fn try_arrival(&self) -> Option<Instant> {
        let t = self.tokens.borrow_mut().pop_front()?;
        self.counters().queued.fetch_sub(1, Ordering::Relaxed);
        if Instant::now().saturating_duration_since(t) > self.cfg().late_after {
            self.counters().late.fetch_add(1, Ordering::Relaxed);
        }
        Some(t)
    }

    /// Wait for the pacer to queue an arrival (bounded).
    pub(crate) async fn token_notified(&self) {
        let _ = tokio::time::timeout(TICK * 2, self.token_ready.notified()).await;
    }

    /// Open model: queue an arrival intended at `at` for the sessions (dropped, and counted,
    /// past `max_inflight` queued) and wake one session.
    pub(crate) fn offer_arrival(&self, at: Instant, max_queue: usize) {
        {
            let mut q = self.tokens.borrow_mut();
            if q.len() >= max_queue {
                self.counters().dropped.fetch_add(1, Ordering::Relaxed);
            } else {
                q.push_back(at);
                self.counters().queued.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.token_ready.notify_one();
    }

    /// Open model: the model went closed; the queued arrivals are forgotten.
    pub(crate) fn clear_arrivals(&self) {
        let mut q = self.tokens.borrow_mut();
        self.counters()
            .queued
            .fetch_sub(q.len() as u64, Ordering::Relaxed);
        q.clear();
    }

    /// The engine stops: every session waiting for an arrival, and every task resting, looks
    /// again.
    pub(crate) fn wake_sessions(&self) {
        self.token_ready.notify_waiters();
        self.woken.notify_waiters();
    }
}
