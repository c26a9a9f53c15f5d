//! The engine's handle: built from a [`Config`] without starting anything, then `start`,
//! steered (users, rate, iterations, bearer tokens), read (windows, histograms, status, events)
//! and stopped from the caller's threads. Its threads run [`crate::runtime`].

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::config::{self, Config};
use crate::runtime;
use crate::shared::{lock, Shared};
use crate::stats::{self, Row, ThreadStats};

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
    /// Open model: arrivals the generator itself queued late (its threads behind their
    /// schedule, whatever the server did): see `pacing::PACER_BEHIND`.
    pub behind: u64,
    pub established: u64,
    pub reinitialized: u64,
    pub iterations: u64,
    pub held: u64,
    /// `agents`: agents running (in a session, thinking, or idle between sessions).
    pub agents: u64,
    /// Open model: arrivals queued and not yet sent (sessions busy, or not open yet).
    pub queued: u64,
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
        let shared = Shared::new(cfg)?;
        let insecure = shared.endpoint.insecure();
        let engine = Engine {
            shared: Arc::new(shared),
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
        self.shared.replace_bearer_tokens(tokens);
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
        // one socket per session: the soft limit up to the hard one (what more a run needs is
        // asked for before it, by the caller: `raise_open_files_limit`)
        let _ = raise_open_files_limit(0);
        self.shared.begin_open_schedule();
        for idx in 0..self.shared.cfg.threads {
            let shared = self.shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("mcpfast-engine-{idx}"))
                .spawn(move || runtime::thread_main(shared, idx));
            match h {
                Ok(h) => threads.push(h),
                Err(e) => {
                    self.shared.halt();
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
        self.shared.set_users(n);
    }

    /// Open model at `rate` arrivals/s for this engine; None: closed model.
    pub fn set_rate(&self, rate: Option<f64>) {
        self.shared.set_rate(rate);
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
        self.shared.add_iterations(n);
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
        self.shared.request_stop(grace);
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

    /// How many connections can be open at once to the server before the ephemeral ports run
    /// out (each source address, each server address: the ports of
    /// `net.ipv4.ip_local_port_range`); None when the range cannot be read.
    pub fn port_capacity(&self) -> Option<u64> {
        self.shared.endpoint.port_capacity()
    }

    /// The local addresses new connections bind to, in turn (0: the kernel picks one).
    pub fn source_count(&self) -> usize {
        self.shared.endpoint.source_count()
    }

    /// Urgent events since the last call (and clears the event fd).
    pub fn events(&self) -> Vec<(String, String)> {
        self.shared.take_events()
    }

    /// A file descriptor readable when `events()` has something.
    pub fn fileno(&self) -> RawFd {
        self.shared.event_fd()
    }

    pub fn status(&self) -> Status {
        let mut s = Status {
            users: self.shared.users() as u64,
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
            s.behind += c.behind.load(Ordering::Relaxed);
            s.established += c.established.load(Ordering::Relaxed);
            s.reinitialized += c.reinitialized.load(Ordering::Relaxed);
            s.iterations += c.iterations.load(Ordering::Relaxed);
            s.held += c.held.load(Ordering::Relaxed);
            s.agents += c.agents.load(Ordering::Relaxed);
            s.queued += c.queued.load(Ordering::Relaxed);
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

/// Lift the process's open-file limit (`RLIMIT_NOFILE`) for `needed` descriptors (one per
/// connection, and a few of the process's own): the soft limit goes up to the hard one, and the
/// hard one up to `needed` where the OS allows it (root, or `CAP_SYS_RESOURCE`, up to
/// `fs.nr_open`). Returns the limit in force; an error names the limit and the number needed
/// when it stays below.
pub fn raise_open_files_limit(needed: u64) -> Result<u64, String> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| format!("cannot read the open-file limit (RLIMIT_NOFILE): {e}"))?;
    if needed > hard {
        if setrlimit(Resource::RLIMIT_NOFILE, needed, needed).is_ok() {
            return Ok(needed);
        }
        let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .map(|t| format!(", up to fs.nr_open = {}", t.trim()))
            .unwrap_or_default();
        return Err(format!(
            "the open-file limit (RLIMIT_NOFILE) is {soft} (hard {hard}) and this run needs about \
             {needed} open files (one per connection): raise it before the run (`ulimit -n {needed}`, \
             LimitNOFILE= for a service; raising a hard limit needs CAP_SYS_RESOURCE{nr_open})"
        ));
    }
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).map_err(|e| {
            format!("cannot raise the open-file limit to its hard limit {hard}: {e}")
        })?;
    }
    Ok(hard)
}
