//! The four load modes. Each runs on one thread (tokio current-thread runtime, `LocalSet`);
//! tasks share one [`Stats`] through `Rc<RefCell<_>>` and never hold the borrow across an await.

use std::cell::RefCell;
use std::future::Future;
use std::io::Write;
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cli::Options;
use crate::http::{Conn, ExchangeError};
use crate::mcp::{self, Failure, Phase, Problem, Proto, Scratch, Session};
use crate::stats::Stats;

pub mod calls;
pub mod churn;
pub mod handshakes;
pub mod hold;

/// Upper bound on the iterations of any per-task loop (the loops also stop at their deadline).
pub const MAX_ITERATIONS: u64 = 1 << 40;
/// Pause after a failed connect, so a refused port is not hammered in a tight loop.
pub const CONNECT_BACKOFF: Duration = Duration::from_millis(20);

/// What every mode gets.
pub struct Run {
    pub opts: Options,
    pub proto: Rc<Proto>,
    pub stats: Rc<RefCell<Stats>>,
    pub started: Instant,
    /// Hard cap: no new request starts after this.
    pub deadline: Instant,
}

/// The result of a mode: the summary JSON, the human line, and whether the run was cut short.
pub struct Outcome {
    pub summary: Value,
    pub human: String,
    pub cut_short: bool,
}

impl Run {
    pub fn past_deadline(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// The common head of every summary.
    pub fn header(&self, event: &str) -> Value {
        json!({
            "event": event,
            "mode": self.opts.mode.name(),
            "url": self.opts.url,
            "protocol_version_requested": self.opts.protocol_version,
        })
    }
}

/// Write one JSON object as a line on stdout.
pub fn emit(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

/// Record a failure; back off briefly when the server could not be reached.
pub async fn note_failure(stats: &RefCell<Stats>, failure: &Failure, in_window: bool) {
    stats.borrow_mut().fail(failure, in_window);
    if matches!(
        failure.problem,
        Problem::Exchange(ExchangeError::Connect(_))
    ) {
        tokio::time::sleep(CONNECT_BACKOFF).await;
    }
}

/// Wait for `a` or `b`, whichever is ready first; `true` if `a` was.
pub async fn first_of<A: Future, B: Future>(a: A, b: B) -> bool {
    let mut a = pin!(a);
    let mut b = pin!(b);
    std::future::poll_fn(|cx| {
        if a.as_mut().poll(cx).is_ready() {
            return Poll::Ready(true);
        }
        if b.as_mut().poll(cx).is_ready() {
            return Poll::Ready(false);
        }
        Poll::Pending
    })
    .await
}

/// Per-phase counts and latency, failures, connections: the part shared by all summaries.
pub fn common_json(stats: &Stats, conns: &ConnTally) -> Value {
    let mut requests = serde_json::Map::new();
    for phase in mcp::PHASES {
        let i = phase as usize;
        if stats.ok_total[i] > 0 {
            requests.insert(
                phase.name().into(),
                json!({"ok_in_window": stats.ok[i], "ok_total": stats.ok_total[i]}),
            );
        }
    }
    json!({
        "requests": requests,
        "failures": stats.failures_json(),
        "latency_us": stats.latency_json(),
        "connections": {
            "opened": conns.connects,
            "closed_by_server": conns.server_closes,
            "closed_while_idle": conns.idle_closes,
            "reconnects": conns.connects.saturating_sub(conns.initial),
        },
        "sse_messages_before_reply": conns.sse_other_messages,
        "sessions_reinitialized_after_404": stats.reinitialized,
        "protocol_versions_negotiated": stats.versions,
    })
}

/// Connection counts summed over tasks.
#[derive(Debug, Default, Clone, Copy)]
pub struct ConnTally {
    pub connects: u64,
    pub server_closes: u64,
    pub idle_closes: u64,
    pub sse_other_messages: u64,
    /// Connections a mode means to open (one per task); the rest are reconnects.
    pub initial: u64,
}

impl ConnTally {
    pub fn add(&mut self, conn: &Conn) {
        self.connects += conn.connects;
        self.server_closes += conn.server_closes;
        self.sse_other_messages += conn.sse_other_messages;
        self.idle_closes += conn.idle_closes;
        self.initial += 1;
    }
}

/// DELETE sessions on one connection; returns how many succeeded.
pub async fn delete_all(conn: &mut Conn, run: &Run, sessions: &[Session]) -> u64 {
    let mut deleted = 0;
    for s in sessions {
        let t0 = Instant::now();
        match mcp::delete(conn, &run.proto, s).await {
            Ok(()) => {
                run.stats.borrow_mut().ok(Phase::Delete, t0.elapsed(), true);
                deleted += 1;
            }
            Err(f) => note_failure(&run.stats, &f, false).await,
        }
    }
    deleted
}

/// Open one session on `conn` (initialize + initialized), recording both phases.
pub async fn open_session(
    conn: &mut Conn,
    run: &Run,
    scratch: &mut Scratch,
    id: i64,
    need_id: bool,
    window: impl Fn(Instant) -> bool,
) -> Option<Session> {
    let t0 = Instant::now();
    let session = match mcp::initialize(conn, &run.proto, scratch, id).await {
        Ok(s) if need_id && s.id.is_none() => {
            let f = Failure {
                phase: Phase::Initialize,
                problem: Problem::NoSessionId,
                sample: None,
            };
            note_failure(&run.stats, &f, window(Instant::now())).await;
            return None;
        }
        Ok(s) => s,
        Err(f) => {
            note_failure(&run.stats, &f, window(Instant::now())).await;
            return None;
        }
    };
    let t1 = Instant::now();
    {
        let mut stats = run.stats.borrow_mut();
        stats.ok(Phase::Initialize, t1 - t0, window(t1));
        stats.negotiated(&session.version);
    }
    match mcp::initialized(conn, &run.proto, scratch, &session).await {
        Ok(()) => {
            let t2 = Instant::now();
            run.stats
                .borrow_mut()
                .ok(Phase::Initialized, t2 - t1, window(t2));
            Some(session)
        }
        Err(f) => {
            note_failure(&run.stats, &f, window(Instant::now())).await;
            // do not leave a half-open session behind
            if session.id.is_some() {
                if let Err(f) = mcp::delete(conn, &run.proto, &session).await {
                    note_failure(&run.stats, &f, false).await;
                }
            }
            None
        }
    }
}

/// A human-readable µs figure from a latency summary.
pub fn pct(latency: &Value, phase: &str, key: &str) -> String {
    match latency
        .get(phase)
        .and_then(|p| p.get(key))
        .and_then(Value::as_f64)
    {
        Some(us) if us >= 1000.0 => format!("{:.2} ms", us / 1000.0),
        Some(us) => format!("{us:.0} µs"),
        None => "-".into(),
    }
}

/// Add the members of `from` to the object `into`.
pub fn merge(into: &mut Value, from: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), from) {
        a.extend(b);
    }
}

pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
