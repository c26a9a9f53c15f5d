//! What the caller's thread and the engine threads share: the config, where connections go,
//! the targets (users, rate, iteration budget, stop), each thread's statistics and counters,
//! the bearer tokens, the `hold` fan-out rounds and the queue of urgent events. The caller's
//! thread only stores atomics and swaps windows under a per-thread mutex; each engine thread
//! writes its own slot.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::config::{self, Config};
use crate::net::Endpoint;
use crate::rows;
use crate::stats::{Clock, ThreadStats};
use crate::target::{Target, TlsOptions};

/// Most urgent events kept between two `events()` calls (more are counted, not kept).
const MAX_EVENTS: usize = 1000;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Counters of one engine thread (summed by `status`).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) sent: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) late: AtomicU64,
    pub(crate) dropped: AtomicU64,
    /// Open model: arrivals the pacer queued (or dropped) more than `PACER_BEHIND` after their
    /// intended time: the thread could not keep its own schedule (it, not the server, was late).
    pub(crate) behind: AtomicU64,
    pub(crate) sessions_open: AtomicU64,
    pub(crate) inflight: AtomicU64,
    /// This thread's CPU time (ns), refreshed by the thread itself.
    pub(crate) cpu_ns: AtomicU64,
    /// Sessions opened (initialize + initialized, or server/discover), since start.
    pub(crate) established: AtomicU64,
    /// Sessions opened again after the server answered 404.
    pub(crate) reinitialized: AtomicU64,
    /// Iterations finished (ok or not): handshake/churn cycles, hold session openings,
    /// requests of the per-session families.
    pub(crate) iterations: AtomicU64,
    /// `hold`: sessions held now.
    pub(crate) held: AtomicU64,
    /// HTTP connections: sessions' connections finished, TCP connects, closes by the server
    /// (`Connection: close` or EOF between requests), closes found while idle, SSE messages
    /// other than the reply before it. Added when a session's connection is done.
    pub(crate) connections: AtomicU64,
    pub(crate) connects: AtomicU64,
    pub(crate) server_closes: AtomicU64,
    pub(crate) idle_closes: AtomicU64,
    pub(crate) sse_other_messages: AtomicU64,
    /// `agents`: agents running now (in a session, thinking or idle between sessions).
    pub(crate) agents: AtomicU64,
    /// Open model: arrivals queued for this thread's sessions and not yet taken.
    pub(crate) queued: AtomicU64,
    _pad: [u64; 2],
}

/// The fan-out rounds as this engine sees them.
#[derive(Debug, Default)]
pub(crate) struct Fanout {
    /// The round now (0: none yet) and its send time (CLOCK_MONOTONIC ns).
    pub(crate) round: u64,
    pub(crate) sent_ns: u64,
    /// The streams held when the round began, and how many have had its event.
    pub(crate) expected: u64,
    pub(crate) seen: u64,
    /// Rounds this engine's trigger began.
    pub(crate) triggers: u64,
    /// (round, µs from the send to the last held stream's arrival), each complete round.
    pub(crate) complete: Vec<(u64, u64)>,
}

/// Urgent events for the caller, and the socket that makes its file descriptor readable.
struct Events {
    /// The events, and how many were not kept (over [`MAX_EVENTS`]).
    queue: Mutex<(Vec<(String, String)>, u64)>,
    tx: UnixStream,
    rx: UnixStream,
}

impl Events {
    fn new() -> Result<Events, String> {
        let (tx, rx) =
            UnixStream::pair().map_err(|e| format!("cannot create the event socket: {e}"))?;
        tx.set_nonblocking(true)
            .and_then(|()| rx.set_nonblocking(true))
            .map_err(|e| format!("cannot set up the event socket: {e}"))?;
        Ok(Events {
            queue: Mutex::new((Vec::new(), 0)),
            tx,
            rx,
        })
    }
}

/// What the caller's thread and the engine threads share.
pub(crate) struct Shared {
    pub(crate) cfg: Config,
    /// Where HTTP connections go (for stdio: an address nothing connects to).
    pub(crate) endpoint: Arc<Endpoint>,
    /// The next bearer token slot to hand to a new user (mod the count).
    next_token: AtomicUsize,
    /// The bearer tokens now (the config's, until `set_bearer_tokens`), and how many times they
    /// were replaced: a user rebuilds its `Authorization` line when the count moves.
    bearer: Mutex<Arc<Vec<String>>>,
    bearer_gen: AtomicU64,
    /// Stats names, indexed by name id.
    pub(crate) names: Vec<String>,
    pub(crate) clock: Clock,
    stop: AtomicBool,
    /// In-flight work is abandoned after this instant (set by `stop`).
    deadline_ns: AtomicU64,
    /// When `stop` was called (ns on `started_at`, 0 = not yet): the open model's last arrival
    /// is due before it.
    stop_ns: AtomicU64,
    /// When the current open-model schedule began (ns on `started_at`, 0 = none): `start` with a
    /// rate, or `set_rate` turning a closed model open. Every thread's arrivals run from it,
    /// whenever that thread first gets the CPU.
    open_since_ns: AtomicU64,
    users: AtomicUsize,
    /// f64 bits of the rate; 0 = closed model.
    rate_bits: AtomicU64,
    /// Iterations the engine may still start (`u64::MAX`: no bound).
    budget: AtomicU64,
    /// Iterations ended, all threads (for `progress_every`).
    iterations_done: AtomicU64,
    pub(crate) stats: Vec<Mutex<ThreadStats>>,
    pub(crate) counters: Vec<Counters>,
    /// `hold` with streams: the fan-out rounds, and the file they are shared through.
    pub(crate) fanout: Mutex<Fanout>,
    pub(crate) hold_clock: Option<std::fs::File>,
    events: Events,
    started_at: Instant,
}

impl Shared {
    /// The shared state of an engine for `cfg`: where its connections go (its TLS files read,
    /// its host resolved), its `hold_clock` file opened.
    pub(crate) fn new(cfg: Config) -> Result<Shared, String> {
        let events = Events::new()?;
        let threads = cfg.threads;
        let rate = cfg.rate.unwrap_or(0.0);
        let names = rows::names(&cfg);
        let endpoint = match &cfg.target {
            Some(target) => Endpoint::new(target, &cfg.connect_to, &cfg.tls)
                .and_then(|e| e.with_sources(&cfg.source_addresses))
                .map_err(|e| format!("engine config: {e}"))?,
            None => Endpoint::new(&Target::nowhere(), &[], &TlsOptions::default())?,
        };
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
        Ok(Shared {
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
            events,
            started_at: Instant::now(),
            cfg,
        })
    }

    /// Queue an urgent event and make the event fd readable.
    pub(crate) fn event(&self, kind: &str, msg: String) {
        let mut ev = lock(&self.events.queue);
        if ev.0.len() >= MAX_EVENTS {
            ev.1 += 1;
            return;
        }
        let was_empty = ev.0.is_empty();
        ev.0.push((kind.to_string(), msg));
        if was_empty {
            let _ = (&self.events.tx).write(&[1]);
        }
    }

    /// Urgent events since the last call (and clears the event fd).
    pub(crate) fn take_events(&self) -> Vec<(String, String)> {
        let mut buf = [0u8; 64];
        while let Ok(n) = (&self.events.rx).read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        let mut ev = lock(&self.events.queue);
        let mut out = std::mem::take(&mut ev.0);
        if ev.1 > 0 {
            out.push(("events_dropped".into(), format!("{} events not kept", ev.1)));
            ev.1 = 0;
        }
        out
    }

    /// A file descriptor readable when `take_events` has something.
    pub(crate) fn event_fd(&self) -> RawFd {
        self.events.rx.as_raw_fd()
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Stop the engine threads at once (one could not be spawned).
    pub(crate) fn halt(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stop sending; what is in flight may finish within `grace`.
    pub(crate) fn request_stop(&self, grace: Duration) {
        let now = self.now_ns();
        self.stop_ns.store(now, Ordering::Release);
        self.deadline_ns
            .store(now + grace.as_nanos() as u64, Ordering::Relaxed);
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Past the stop grace: abandon what is in flight.
    pub(crate) fn past_deadline(&self) -> bool {
        let d = self.deadline_ns.load(Ordering::Relaxed);
        d != 0 && self.now_ns() >= d
    }

    /// The rate of one thread, None in the closed model.
    pub(crate) fn thread_rate(&self) -> Option<f64> {
        let r = f64::from_bits(self.rate_bits.load(Ordering::Acquire));
        (r > 0.0).then(|| r / self.cfg.threads as f64)
    }

    /// The engine starts: an open model's schedule begins now.
    pub(crate) fn begin_open_schedule(&self) {
        if self.thread_rate().is_some() {
            let now = self.now_ns();
            self.open_since_ns.store(now, Ordering::Release);
        }
    }

    /// Open model at `rate` arrivals/s for the engine; None: closed model. Each rate is a
    /// schedule of its own, from now: the arrivals queued for the previous one and not yet
    /// sent are dropped by the pacers when they see it (a step of a capacity search is judged
    /// on its own arrivals, not on a backlog of the step before).
    pub(crate) fn set_rate(&self, rate: Option<f64>) {
        let r = rate.filter(|r| r.is_finite() && *r > 0.0).unwrap_or(0.0);
        if r > 0.0 {
            // the new schedule's start, stored before the threads see the rate
            let now = self.now_ns();
            self.open_since_ns.store(now, Ordering::Release);
        }
        self.rate_bits.store(r.to_bits(), Ordering::Release);
    }

    /// Thread `idx`'s first arrival of the uniform schedule that began at `since`. Every
    /// generator thread of every process sharing the rate (Locust workers, each at its share)
    /// sends once a period; started at `since` they would all send together, in bursts as big
    /// as their number. So each starts on a grid of its period laid on the system clock (one
    /// clock for every process of a machine), shifted by its slot among all of them over the
    /// total rate, and the streams interleave. Poisson arrivals (random already), and periods
    /// over a second (a wait that long at the start would matter more than the bursts), start
    /// at `since`.
    pub(crate) fn first_arrival(&self, idx: usize, since: Instant) -> Instant {
        let rate = f64::from_bits(self.rate_bits.load(Ordering::Acquire));
        if rate <= 0.0 || !matches!(self.cfg.arrivals, config::Arrivals::Uniform) {
            return since;
        }
        let workers = self.cfg.worker_count.max(1);
        let period_ns = (self.cfg.threads.max(1) as f64 / rate * 1e9).round();
        if !(1.0..=1e9).contains(&period_ns) {
            return since;
        }
        let period = period_ns as u128;
        let slot = (idx * workers + self.cfg.worker_index) as f64;
        let offset = ((slot / (rate * workers as f64) * 1e9).round() as u128) % period;
        let wall = self.clock.wall_ns(since);
        let wait = (offset + period - wall % period) % period;
        since + Duration::from_nanos(wait as u64)
    }

    fn now_ns(&self) -> u64 {
        (self.started_at.elapsed().as_nanos() as u64).max(1)
    }

    fn at_ns(&self, ns: u64) -> Option<Instant> {
        (ns != 0).then(|| self.started_at + Duration::from_nanos(ns))
    }

    /// When the current open-model schedule began (None before `start`).
    pub(crate) fn open_since(&self) -> Option<Instant> {
        self.at_ns(self.open_since_ns.load(Ordering::Acquire))
    }

    /// When `stop` was called (None before).
    pub(crate) fn stopped_at(&self) -> Option<Instant> {
        self.at_ns(self.stop_ns.load(Ordering::Acquire))
    }

    /// The users of the whole engine now.
    pub(crate) fn users(&self) -> usize {
        self.users.load(Ordering::Relaxed)
    }

    pub(crate) fn set_users(&self, n: usize) {
        self.users.store(n, Ordering::Relaxed);
    }

    /// The users thread `idx` should run.
    pub(crate) fn thread_users(&self, idx: usize) -> usize {
        let n = self.users.load(Ordering::Relaxed);
        let t = self.cfg.threads;
        n / t + usize::from(idx < n % t)
    }

    pub(crate) fn name_id(&self, name: &str) -> usize {
        self.names.iter().position(|n| n == name).unwrap_or(0)
    }

    /// Take one iteration from the budget; false when it is spent.
    pub(crate) fn take_iteration(&self) -> bool {
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

    /// Allow `n` more iterations (unless the budget is unbounded).
    pub(crate) fn add_iterations(&self, n: u64) {
        let _ = self
            .budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(if b == u64::MAX {
                    b
                } else {
                    b.saturating_add(n)
                })
            });
    }

    /// An iteration ended: the count of every thread's, this one included.
    pub(crate) fn iteration_ended(&self) -> u64 {
        self.iterations_done.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A new user's turn among the bearer tokens.
    pub(crate) fn next_token_slot(&self) -> usize {
        self.next_token.fetch_add(1, Ordering::Relaxed)
    }

    /// How many times the bearer tokens were replaced.
    pub(crate) fn bearer_gen(&self) -> u64 {
        self.bearer_gen.load(Ordering::Acquire)
    }

    /// The bearer tokens now.
    pub(crate) fn bearer_tokens(&self) -> Arc<Vec<String>> {
        Arc::clone(&lock(&self.bearer))
    }

    /// Replace the bearer tokens: every user sends the new ones from its next request on.
    pub(crate) fn replace_bearer_tokens(&self, tokens: Vec<String>) {
        *lock(&self.bearer) = Arc::new(tokens);
        self.bearer_gen.fetch_add(1, Ordering::Release);
    }

    /// The GET streams held now, every thread.
    pub(crate) fn streams_open(&self) -> u64 {
        self.counters
            .iter()
            .map(|c| c.held.load(Ordering::Relaxed))
            .sum()
    }

    /// The current round and its send time: from the clock file, else this engine's own.
    pub(crate) fn round_now(&self, f: &Fanout) -> (u64, u64) {
        let Some(file) = &self.hold_clock else {
            return (f.round, f.sent_ns);
        };
        let mut b = [0u8; 16];
        if file.read_exact_at(&mut b, 0).is_err() {
            return (0, 0); // no round yet
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        (word(0), word(8))
    }
}
