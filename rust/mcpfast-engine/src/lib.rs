//! mcpfast-engine: the native MCP load engine, pure Rust on `mcpfast-core`.
//!
//! An [`Engine`] is built from a [`Config`] (typed [`config::Settings`], validated once by
//! `Settings::build`) without starting anything; `start` spawns `threads` OS threads, each with
//! its own tokio current-thread runtime (I/O and time drivers only: no signal driver, so no
//! SIGCHLD handler and nothing process-global). Each thread owns its sessions, its share of the
//! users and of the rate, and its own statistics ([`stats`]); the caller's thread only flips
//! atomics, swaps windows under a short per-thread mutex, and joins at `stop`.
//!
//! Modules: [`http`] (HTTP/1.1 client, keep-alive), [`mcp`] (requests of both eras, reply
//! checks), [`check`] (replies on the core's envelope scanner and SSE decoder), [`rows`] (the
//! stats rows and their names), [`templates`] (request bodies built once), [`runtime`] (the
//! engine threads), [`pacing`] (the open model), `http_families` and [`stdio`] (the families
//! over HTTP and over child processes), [`hold`] (held GET streams and their fan-out).

pub mod check;
pub mod config;
pub mod hold;
pub mod http;
mod http_families;
pub mod mcp;
pub mod net;
pub mod pacing;
pub mod rows;
pub mod runtime;
pub mod stats;
pub mod stdio;
mod tasks;
pub mod templates;

/// The JSON types of [`config::Settings`] (tool arguments, capabilities, mix params), at the
/// version the engine is built with.
pub use serde_json;

/// The protocol versions the engine speaks, by era (the core's lists; the mock server of
/// `examples/` answers with them).
pub use mcpfast_core::versions;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use config::Config;
use stats::{Clock, Row, ThreadStats};

/// Most urgent events kept between two `events()` calls (more are counted, not kept).
const MAX_EVENTS: usize = 1000;

/// Counters of one engine thread (summed by `status`).
#[derive(Debug, Default)]
pub struct Counters {
    pub sent: AtomicU64,
    pub completed: AtomicU64,
    pub late: AtomicU64,
    pub dropped: AtomicU64,
    pub sessions_open: AtomicU64,
    pub inflight: AtomicU64,
    /// This thread's CPU time (ns), refreshed by the thread itself.
    pub cpu_ns: AtomicU64,
    /// Sessions opened (initialize + initialized, or server/discover), since start.
    pub established: AtomicU64,
    /// Sessions opened again after the server answered 404.
    pub reinitialized: AtomicU64,
    /// Iterations finished (ok or not): handshake/churn cycles, hold session openings,
    /// requests of the per-session families.
    pub iterations: AtomicU64,
    /// `hold`: sessions held now.
    pub held: AtomicU64,
    /// HTTP connections: sessions' connections finished, TCP connects, closes by the server
    /// (`Connection: close` or EOF between requests), closes found while idle, SSE messages
    /// other than the reply before it. Added when a session's connection is done.
    pub connections: AtomicU64,
    pub connects: AtomicU64,
    pub server_closes: AtomicU64,
    pub idle_closes: AtomicU64,
    pub sse_other_messages: AtomicU64,
    _pad: [u64; 4],
}

/// What the caller's thread and the engine threads share.
pub struct Shared {
    pub cfg: Config,
    /// Where HTTP connections go (for stdio: an address nothing connects to).
    pub endpoint: Arc<net::Endpoint>,
    /// The next bearer token slot to hand to a new user (mod the count).
    pub next_token: AtomicUsize,
    /// The bearer tokens now (the config's, until `set_bearer_tokens`), and how many times they
    /// were replaced: a user rebuilds its `Authorization` line when the count moves.
    pub bearer: Mutex<Arc<Vec<String>>>,
    pub bearer_gen: AtomicU64,
    /// Stats names, indexed by name id.
    pub names: Vec<String>,
    pub clock: Clock,
    pub stop: AtomicBool,
    /// In-flight work is abandoned after this instant (set by `stop`).
    pub deadline_ns: AtomicU64,
    /// When `stop` was called (ns on `started_at`, 0 = not yet): the open model's last arrival
    /// is due before it.
    stop_ns: AtomicU64,
    /// When the current open-model schedule began (ns on `started_at`, 0 = none): `start` with a
    /// rate, or `set_rate` turning a closed model open. Every thread's arrivals run from it,
    /// whenever that thread first gets the CPU.
    open_since_ns: AtomicU64,
    pub users: AtomicUsize,
    /// f64 bits of the rate; 0 = closed model.
    pub rate_bits: AtomicU64,
    /// Iterations the engine may still start (`u64::MAX`: no bound).
    pub budget: AtomicU64,
    /// Iterations ended, all threads (for `progress_every`).
    pub iterations_done: AtomicU64,
    pub stats: Vec<Mutex<ThreadStats>>,
    pub counters: Vec<Counters>,
    /// `hold` with streams: the fan-out rounds, and the file they are shared through.
    pub fanout: Mutex<hold::Fanout>,
    pub hold_clock: Option<std::fs::File>,
    events: Mutex<(Vec<(String, String)>, u64)>,
    event_tx: UnixStream,
    event_rx: UnixStream,
    started_at: Instant,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    /// Queue an urgent event and make the event fd readable.
    pub fn event(&self, kind: &str, msg: String) {
        let mut ev = lock(&self.events);
        if ev.0.len() >= MAX_EVENTS {
            ev.1 += 1;
            return;
        }
        let was_empty = ev.0.is_empty();
        ev.0.push((kind.to_string(), msg));
        if was_empty {
            let _ = (&self.event_tx).write(&[1]);
        }
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Past the stop grace: abandon what is in flight.
    pub fn past_deadline(&self) -> bool {
        let d = self.deadline_ns.load(Ordering::Relaxed);
        d != 0 && self.now_ns() >= d
    }

    /// The rate of one thread, None in the closed model.
    pub fn thread_rate(&self) -> Option<f64> {
        let r = f64::from_bits(self.rate_bits.load(Ordering::Acquire));
        (r > 0.0).then(|| r / self.cfg.threads as f64)
    }

    fn now_ns(&self) -> u64 {
        (self.started_at.elapsed().as_nanos() as u64).max(1)
    }

    fn at_ns(&self, ns: u64) -> Option<Instant> {
        (ns != 0).then(|| self.started_at + Duration::from_nanos(ns))
    }

    /// When the current open-model schedule began (None before `start`).
    pub fn open_since(&self) -> Option<Instant> {
        self.at_ns(self.open_since_ns.load(Ordering::Acquire))
    }

    /// When `stop` was called (None before).
    pub fn stopped_at(&self) -> Option<Instant> {
        self.at_ns(self.stop_ns.load(Ordering::Acquire))
    }

    /// The users thread `idx` should run.
    pub fn thread_users(&self, idx: usize) -> usize {
        let n = self.users.load(Ordering::Relaxed);
        let t = self.cfg.threads;
        n / t + usize::from(idx < n % t)
    }

    pub fn name_id(&self, name: &str) -> usize {
        self.names.iter().position(|n| n == name).unwrap_or(0)
    }

    /// Take one iteration from the budget; false when it is spent.
    pub fn take_iteration(&self) -> bool {
        if self.cfg.iterations.is_none() {
            return true; // unbounded: no shared cache line touched per request
        }
        self.budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| match b {
                u64::MAX => Some(b),
                0 => None,
                b => Some(b - 1),
            })
            .is_ok()
    }
}

/// A cumulative histogram: (name, failures?, (µs, count) buckets).
pub type Cumulative = (String, bool, Vec<(u64, u64)>);

/// The engine's status (see `status`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Status {
    pub users: u64,
    pub sessions_open: u64,
    pub inflight: u64,
    pub threads: u64,
    pub cpu_s: f64,
    pub sent: u64,
    pub completed: u64,
    pub late: u64,
    pub dropped: u64,
    pub established: u64,
    pub reinitialized: u64,
    pub iterations: u64,
    pub held: u64,
    pub connections: u64,
    pub connects: u64,
    pub server_closes: u64,
    pub idle_closes: u64,
    pub sse_other_messages: u64,
}

/// The engine. Every method takes `&self` (shared freely between the caller's threads);
/// only `stop` blocks, joining the engine threads.
pub struct Engine {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    started: AtomicBool,
    stopped: AtomicBool,
    pid: u32,
}

impl Engine {
    /// An engine for `cfg` (where its connections go, its TLS files read); creates no thread
    /// and no runtime.
    pub fn new(cfg: Config) -> Result<Engine, String> {
        let (event_tx, event_rx) =
            UnixStream::pair().map_err(|e| format!("cannot create the event socket: {e}"))?;
        event_tx
            .set_nonblocking(true)
            .and_then(|()| event_rx.set_nonblocking(true))
            .map_err(|e| format!("cannot set up the event socket: {e}"))?;
        let threads = cfg.threads;
        let rate = cfg.rate.unwrap_or(0.0);
        let names = rows::names(&cfg);
        let endpoint = match &cfg.target {
            Some(target) => net::Endpoint::new(target, &cfg.connect_to, &cfg.tls)
                .map_err(|e| format!("engine config: {e}"))?,
            None => net::Endpoint::new(
                &mcp::Target::parse("http://127.0.0.1:9/").map_err(|e| e.to_string())?,
                &[],
                &net::TlsOptions::default(),
            )?,
        };
        let insecure = endpoint.insecure();
        let hold_clock = match &cfg.hold_clock {
            Some(path) => Some(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)
                    .map_err(|e| config::field_error("hold_clock", format!("{path}: {e}")))?,
            ),
            None => None,
        };
        let engine = Engine {
            shared: Arc::new(Shared {
                endpoint: Arc::new(endpoint),
                next_token: AtomicUsize::new(0),
                bearer: Mutex::new(Arc::new(cfg.bearer_tokens.clone())),
                bearer_gen: AtomicU64::new(0),
                names,
                clock: Clock::new(),
                stop: AtomicBool::new(false),
                deadline_ns: AtomicU64::new(0),
                stop_ns: AtomicU64::new(0),
                open_since_ns: AtomicU64::new(0),
                users: AtomicUsize::new(0),
                rate_bits: AtomicU64::new(rate.to_bits()),
                budget: AtomicU64::new(cfg.iterations.unwrap_or(u64::MAX)),
                iterations_done: AtomicU64::new(0),
                stats: (0..threads).map(|_| Mutex::default()).collect(),
                counters: (0..threads).map(|_| Counters::default()).collect(),
                fanout: Mutex::default(),
                hold_clock,
                events: Mutex::new((Vec::new(), 0)),
                event_tx,
                event_rx,
                started_at: Instant::now(),
                cfg,
            }),
            threads: Mutex::new(Vec::new()),
            started: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            pid: std::process::id(),
        };
        if insecure {
            engine.shared.event(
                "tls_insecure",
                "TLS without verification: any server certificate is accepted".into(),
            );
        }
        Ok(engine)
    }

    pub fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// Replace the bearer tokens while running (a refreshed OAuth access token): every user
    /// sends the new ones from its next request on, in the same turns as before.
    pub fn set_bearer_tokens(&self, tokens: Vec<String>) -> Result<(), String> {
        if tokens.is_empty() {
            return Err("bearer tokens: at least one".into());
        }
        config::check_bearer_tokens(&tokens).map_err(|e| format!("bearer tokens: {e}"))?;
        if self
            .shared
            .cfg
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        {
            return Err("bearer tokens: the config sends its own Authorization header".into());
        }
        *lock(&self.shared.bearer) = Arc::new(tokens);
        self.shared.bearer_gen.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Spawn the engine threads; returns at once. Once only.
    pub fn start(&self) -> Result<(), String> {
        if std::process::id() != self.pid {
            return Err("this engine was built in another process (before a fork): build a new one after the fork".into());
        }
        let mut threads = lock(&self.threads);
        if self.stopped.load(Ordering::Relaxed) {
            return Err("the engine was stopped: build a new one".into());
        }
        if self.started.load(Ordering::Relaxed) {
            return Ok(());
        }
        raise_open_files_limit();
        if self.shared.thread_rate().is_some() {
            let now = self.shared.now_ns();
            self.shared.open_since_ns.store(now, Ordering::Release);
        }
        for idx in 0..self.shared.cfg.threads {
            let shared = self.shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("mcpfast-engine-{idx}"))
                .spawn(move || runtime::thread_main(shared, idx));
            match h {
                Ok(h) => threads.push(h),
                Err(e) => {
                    self.shared.stop.store(true, Ordering::Relaxed);
                    return Err(format!("cannot spawn an engine thread: {e}"));
                }
            }
        }
        self.started.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Target concurrency (sessions over HTTP, child processes over stdio), capped by
    /// `max_sessions` (with a "limit" event).
    pub fn set_users(&self, n: usize) {
        let max = self.shared.cfg.max_sessions;
        let n = if n > max {
            self.shared.event(
                "limit",
                format!("{n} users asked, max_sessions is {max}: running {max}"),
            );
            max
        } else {
            n
        };
        self.shared.users.store(n, Ordering::Relaxed);
    }

    /// Open model at `rate` arrivals/s for this engine; None: closed model.
    pub fn set_rate(&self, rate: Option<f64>) {
        let r = rate.filter(|r| r.is_finite() && *r > 0.0).unwrap_or(0.0);
        // a closed model turning open starts a new schedule now (before the threads see the rate)
        if r > 0.0 && self.shared.thread_rate().is_none() {
            let now = self.shared.now_ns();
            self.shared.open_since_ns.store(now, Ordering::Release);
        }
        self.shared.rate_bits.store(r.to_bits(), Ordering::Release);
    }

    /// The windows of every thread since the last drain, merged per name.
    pub fn drain(&self) -> Vec<Row> {
        let windows = self
            .shared
            .stats
            .iter()
            .map(|m| lock(m).take_window())
            .collect();
        stats::merge_windows(windows)
    }

    /// Cumulative µs histograms: (name, failed, (µs, count) buckets).
    pub fn histograms(&self) -> Vec<Cumulative> {
        // clone under each lock, merge outside
        let snapshots: Vec<ThreadStats> = self
            .shared
            .stats
            .iter()
            .map(|m| {
                let g = lock(m);
                ThreadStats {
                    window: stats::Window::default(),
                    cum_ok: g.cum_ok.clone(),
                    cum_fail: g.cum_fail.clone(),
                    ..ThreadStats::default()
                }
            })
            .collect();
        let refs: Vec<&ThreadStats> = snapshots.iter().collect();
        stats::merge_cumulative(&refs)
            .into_iter()
            .map(|(i, failed, h)| (self.name(i).to_string(), failed, stats::buckets(&h)))
            .collect()
    }

    /// Allow `n` more iterations (a config with `iterations` bounds the run; this extends it).
    pub fn add_iterations(&self, n: u64) {
        let _ = self
            .shared
            .budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(if b == u64::MAX {
                    b
                } else {
                    b.saturating_add(n)
                })
            });
    }

    /// The first reply that failed its check, per (name, reason): (name, reason, the start of
    /// the reply: `HTTP <status> <content type>: <body>`).
    pub fn samples(&self) -> Vec<(String, String, String)> {
        let mut out: Vec<(String, String, String)> = Vec::new();
        for m in &self.shared.stats {
            for (name, reason, sample) in &lock(m).samples {
                let name = self.name(*name);
                if !out.iter().any(|o| o.0 == name && &o.1 == reason) {
                    out.push((name.to_string(), reason.clone(), sample.clone()));
                }
            }
        }
        out
    }

    /// `hold` with streams: the fan-out rounds this engine's trigger began, and (round, µs from
    /// the trigger's send to the last held stream's arrival) of every round that reached all
    /// of this engine's held streams.
    pub fn fanout(&self) -> (u64, Vec<(u64, u64)>) {
        let f = lock(&self.shared.fanout);
        (f.triggers, f.complete.clone())
    }

    /// Protocol versions the server chose, with how many sessions each, since start.
    pub fn versions(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = Vec::new();
        for m in &self.shared.stats {
            for (v, n) in &lock(m).versions {
                match out.iter_mut().find(|o| &o.0 == v) {
                    Some(o) => o.1 += n,
                    None => out.push((v.clone(), *n)),
                }
            }
        }
        out.sort();
        out
    }

    pub fn name(&self, id: usize) -> &str {
        self.shared.names.get(id).map_or("?", String::as_str)
    }

    pub fn request_type(&self) -> &str {
        &self.shared.cfg.request_type
    }

    /// Clear the cumulative histograms.
    pub fn reset(&self) {
        for m in &self.shared.stats {
            lock(m).reset_cumulative();
        }
    }

    /// Stop sending, let in-flight requests finish within `grace`, close everything, join.
    /// Idempotent.
    pub fn stop(&self, grace: Duration) {
        if self.stopped.swap(true, Ordering::Relaxed) {
            return;
        }
        let now = self.shared.now_ns();
        self.shared.stop_ns.store(now, Ordering::Release);
        self.shared
            .deadline_ns
            .store(now + grace.as_nanos() as u64, Ordering::Relaxed);
        self.shared.stop.store(true, Ordering::Relaxed);
        let handles = std::mem::take(&mut *lock(&self.threads));
        if std::process::id() != self.pid {
            // a forked child: the threads do not exist here; never join them
            std::mem::forget(handles);
            return;
        }
        for h in handles {
            let _ = h.join();
        }
    }

    /// Urgent events since the last call (and clears the event fd).
    pub fn events(&self) -> Vec<(String, String)> {
        let mut buf = [0u8; 64];
        while let Ok(n) = (&self.shared.event_rx).read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        let mut ev = lock(&self.shared.events);
        let mut out = std::mem::take(&mut ev.0);
        if ev.1 > 0 {
            out.push(("events_dropped".into(), format!("{} events not kept", ev.1)));
            ev.1 = 0;
        }
        out
    }

    /// A file descriptor readable when `events()` has something.
    pub fn fileno(&self) -> RawFd {
        self.shared.event_rx.as_raw_fd()
    }

    pub fn status(&self) -> Status {
        let mut s = Status {
            users: self.shared.users.load(Ordering::Relaxed) as u64,
            threads: if self.started.load(Ordering::Relaxed)
                && !self.stopped.load(Ordering::Relaxed)
            {
                self.shared.cfg.threads as u64
            } else {
                0
            },
            ..Status::default()
        };
        let mut cpu_ns = 0;
        for c in &self.shared.counters {
            s.sessions_open += c.sessions_open.load(Ordering::Relaxed);
            s.inflight += c.inflight.load(Ordering::Relaxed);
            s.sent += c.sent.load(Ordering::Relaxed);
            s.completed += c.completed.load(Ordering::Relaxed);
            s.late += c.late.load(Ordering::Relaxed);
            s.dropped += c.dropped.load(Ordering::Relaxed);
            s.established += c.established.load(Ordering::Relaxed);
            s.reinitialized += c.reinitialized.load(Ordering::Relaxed);
            s.iterations += c.iterations.load(Ordering::Relaxed);
            s.held += c.held.load(Ordering::Relaxed);
            s.connections += c.connections.load(Ordering::Relaxed);
            s.connects += c.connects.load(Ordering::Relaxed);
            s.server_closes += c.server_closes.load(Ordering::Relaxed);
            s.idle_closes += c.idle_closes.load(Ordering::Relaxed);
            s.sse_other_messages += c.sse_other_messages.load(Ordering::Relaxed);
            cpu_ns += c.cpu_ns.load(Ordering::Relaxed);
        }
        s.cpu_s = cpu_ns as f64 / 1e9;
        s
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if self.started.load(Ordering::Relaxed) {
            self.stop(Duration::from_millis(200));
        }
    }
}

/// One socket per session: lift the soft limit on open files to the hard limit.
pub fn raise_open_files_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}
