//! stdio: one child process per user, many requests in flight per process (pipelined lines).
//!
//! The child is spawned with `std::process::Command` on the engine thread; its pipes become
//! tokio's non-blocking pipe types and it is reaped with `try_wait` (no SIGCHLD handler, no
//! signal driver). Writing and reading are interleaved in one loop, so a child that blocks on
//! a full stdout never deadlocks us; stderr is drained by its own task (its tail goes into the
//! `child_exited` event). Replies are framed by `mcpfast-core`'s line framer and checked by its
//! envelope scanner; server requests get an error reply (roots/list: no roots), notifications
//! are counted (progress gives the streaming rows).

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mcpfast_core::envelope::{self, Decoded, Id, Kind};
use mcpfast_core::framer::{Frame, LineFramer};
use mcpfast_core::{json, write, DEFAULT_MAX_DEPTH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use crate::check::{self, Verdict, Want};
use crate::config::Family;
use crate::context::{Ctx, BACKOFF};
use crate::rows::FixedRow;
use crate::templates::Template;

/// stderr kept for the exit report.
const STDERR_TAIL: usize = 2048;
/// How often timeouts and the targets are looked at.
const TICK: Duration = Duration::from_millis(20);

struct Pending {
    from: Instant,
    name: usize,
    want: Want,
    progress: Vec<Instant>,
}

/// A running child and its pipes.
struct Proc {
    child: Child,
    stdin: Option<pipe::Sender>,
    stdout: pipe::Receiver,
    stderr_tail: Rc<RefCell<Vec<u8>>>,
    stderr_done: Rc<std::cell::Cell<bool>>,
    started: Instant,
}

fn spawn(ctx: &Ctx) -> std::io::Result<Proc> {
    let argv = &ctx.cfg().command;
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let started = Instant::now();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        return Err(std::io::Error::other("child pipes missing"));
    };
    let stdin = pipe::Sender::from_owned_fd(OwnedFd::from(stdin))?;
    let stdout = pipe::Receiver::from_owned_fd(OwnedFd::from(stdout))?;
    let mut stderr = pipe::Receiver::from_owned_fd(OwnedFd::from(stderr))?;
    let tail = Rc::new(RefCell::new(Vec::new()));
    let t = tail.clone();
    let done = Rc::new(std::cell::Cell::new(false));
    let d = done.clone();
    tokio::task::spawn_local(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut tail = t.borrow_mut();
            tail.extend_from_slice(&buf[..n]);
            if tail.len() > STDERR_TAIL {
                let cut = tail.len() - STDERR_TAIL;
                tail.drain(..cut);
            }
        }
        d.set(true);
    });
    Ok(Proc {
        child,
        stdin: Some(stdin),
        stdout,
        stderr_tail: tail,
        stderr_done: done,
        started,
    })
}

/// Past the stop grace the engine drops its sessions with their futures, `shutdown` included
/// (std's `Child` is not killed on drop): a child still running then is killed and reaped here,
/// so none outlives `Engine::stop`.
impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            // SIGKILL cannot be caught: the reap is a matter of ms (bounded all the same)
            for _ in 0..1000 {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Proc {
    /// Close stdin, give the child a moment to exit, then kill it; always reaped.
    async fn shutdown(&mut self) -> Option<std::process::ExitStatus> {
        self.stdin = None;
        for _ in 0..40 {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = self.child.kill();
        for _ in 0..200 {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        None
    }

    fn exit_report(&mut self, status: Option<std::process::ExitStatus>) -> String {
        let tail = String::from_utf8_lossy(&self.stderr_tail.borrow())
            .trim()
            .to_string();
        let status = status.map_or("still running (killed)".to_string(), |s| s.to_string());
        let lived = self.started.elapsed().as_secs_f64();
        format!(
            "stdio server pid {} exited ({status}) after {lived:.2} s; stderr: {}",
            self.child.id(),
            if tail.is_empty() { "(empty)" } else { &tail }
        )
    }
}

/// A request answered, its statistics not recorded yet.
struct Done {
    name: usize,
    from: Instant,
    end: Instant,
    reason: Option<String>,
    len: usize,
}

/// One reply line, as it relates to our requests.
enum Line {
    Reply {
        id: i64,
        verdict: Verdict,
        tool_error: bool,
    },
    /// A server request: answer it (the bytes of the answer).
    ServerRequest(Vec<u8>),
    Progress(i64),
    Other,
    Bad(Verdict),
}

fn classify(line: &[u8], want_of: impl Fn(i64) -> Option<Want>) -> Line {
    let env = match envelope::decode_bytes(line, DEFAULT_MAX_DEPTH) {
        Ok(Decoded::Single(env)) => env,
        Ok(Decoded::Batch(_)) => return Line::Bad(Verdict::NotJsonRpc),
        Err(e) if e.code == envelope::PARSE_ERROR => return Line::Bad(Verdict::Malformed),
        Err(_) => return Line::Bad(Verdict::NotJsonRpc),
    };
    match env.kind {
        Kind::Result | Kind::Error => {
            let Some(Id::Int(id)) = env.id else {
                return Line::Bad(if env.kind == Kind::Error {
                    Verdict::RpcError(env.error_code.and_then(|c| i64::try_from(c.value()).ok()))
                } else {
                    Verdict::IdMismatch
                });
            };
            if env.kind == Kind::Error {
                let code = env.error_code.and_then(|c| i64::try_from(c.value()).ok());
                return Line::Reply {
                    id,
                    verdict: Verdict::RpcError(code),
                    tool_error: false,
                };
            }
            let tool_error = want_of(id) == Some(Want::ToolCall)
                && env.result().is_some_and(|r| check::is_tool_error(&line[r]));
            Line::Reply {
                id,
                verdict: Verdict::Ok,
                tool_error,
            }
        }
        Kind::Request => {
            let mut out = Vec::with_capacity(128);
            out.extend_from_slice(write::HEAD);
            out.extend_from_slice(b",\"id\":");
            if let Some(id) = &env.id {
                write::write_id(&mut out, id);
            } else {
                out.extend_from_slice(b"null");
            }
            if env.method.as_ref().is_some_and(|m| m == "roots/list") {
                out.extend_from_slice(br#","result":{"roots":[]}}"#);
            } else {
                out.extend_from_slice(
                    br#","error":{"code":-32601,"message":"not supported by the load engine"}}"#,
                );
            }
            out.push(b'\n');
            Line::ServerRequest(out)
        }
        Kind::Notification => {
            if env
                .method
                .as_ref()
                .is_some_and(|m| m == "notifications/progress")
            {
                if let Some(p) = env.params() {
                    let params = &line[p];
                    if let Some(v) = check::member(params, "progressToken") {
                        if let Ok(text) = std::str::from_utf8(v) {
                            let mut r = json::Reader::new(text, 1);
                            if let Ok(json::Number::Int(t)) = r.number() {
                                return Line::Progress(t);
                            }
                        }
                    }
                }
            }
            Line::Other
        }
    }
}

/// Why the pipelined loop ended.
enum End {
    /// The child closed stdout or a pipe failed.
    Exited,
    /// The slot was retired or the engine stopped, and what was in flight is done.
    Retired,
    /// The handshake/churn families: the one iteration is over.
    Done,
    /// The server refused or did not answer the handshake.
    Refused,
}

/// One stdio user (the runtime's entry into the family): a child process, restarted when it
/// exits, until the slot is retired.
pub(crate) async fn run(ctx: &Ctx, slot: usize) {
    ctx.counters().sessions_open.fetch_add(1, Ordering::Relaxed);
    let fresh_each_time = matches!(ctx.cfg().family, Family::Handshake | Family::SessionChurn);
    while ctx.keep(slot) {
        let from = if ctx.open_model() && fresh_each_time {
            match ctx.arrival(slot).await {
                Some(t) => t,
                None => continue,
            }
        } else {
            Instant::now()
        };
        let mut proc = match spawn(ctx) {
            Ok(p) => p,
            Err(e) => {
                let reason = format!("cannot start the stdio server ({:?})", e.kind());
                ctx.record(FixedRow::Initialize, from, Instant::now(), Some(&reason), 0);
                ctx.shared.event(
                    "child_exited",
                    format!("cannot start {:?}: {e}", ctx.cfg().command),
                );
                ctx.pause(BACKOFF).await;
                continue;
            }
        };
        let end = run_child(ctx, slot, &mut proc, from, fresh_each_time).await;
        let status = proc.shutdown().await;
        match end {
            End::Exited => {
                // the stderr task reads to EOF: let it finish (bounded) so the report has it
                for _ in 0..50 {
                    if proc.stderr_done.get() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                let report = proc.exit_report(status);
                ctx.shared.event("child_exited", report);
                ctx.pause(BACKOFF).await;
            }
            End::Refused => ctx.pause(BACKOFF).await,
            End::Retired | End::Done => {}
        }
    }
    ctx.counters().sessions_open.fetch_sub(1, Ordering::Relaxed);
}

/// The line of request `id` built from `t`.
fn line(t: &Template, id: i64, out: &mut Vec<u8>) {
    t.body(id, &[], out);
    out.push(b'\n');
}

async fn run_child(ctx: &Ctx, slot: usize, proc: &mut Proc, from: Instant, once: bool) -> End {
    let cfg = ctx.cfg();
    let mut framer = LineFramer::new(cfg.max_reply_bytes);
    let mut rbuf = vec![0u8; 64 * 1024];
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    let mut written = 0usize;
    let mut pending: HashMap<i64, Pending> = HashMap::new();
    let mut next_id: i64 = 1;
    // handshake: initialize (+ initialized) or server/discover, timed from the spawn
    let init_id = next_id;
    next_id += 1;
    let stateless = cfg.stateless();
    let init_name = if stateless {
        FixedRow::Discover.id()
    } else {
        FixedRow::Initialize.id()
    };
    if stateless {
        line(&ctx.discover, init_id, &mut out);
    } else {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{init_id},"method":"initialize","params":{{"protocolVersion":{},"capabilities":{},"clientInfo":{}}}}}"#,
            serde_json::Value::String(cfg.protocol_version.clone()),
            cfg.client_capabilities,
            crate::mcp::CLIENT_INFO,
        );
        out.extend_from_slice(body.as_bytes());
        out.push(b'\n');
    }
    pending.insert(
        init_id,
        Pending {
            from,
            name: init_name,
            want: Want::Plain,
            progress: Vec::new(),
        },
    );
    ctx.counters().sent.fetch_add(1, Ordering::Relaxed);
    let mut ready = false;
    let mut first_done = false;
    let inflight = cfg.inflight_per_process;
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut exited = false;
    let mut refused = false;
    // the reply line being discarded as too large, once its request failed (with its id, if read)
    let mut oversized: Option<Option<i64>> = None;
    let mut oversized_lines = 0u64;
    let mut last_limit_event: Option<Instant> = None;
    let mut done: Vec<Done> = Vec::with_capacity(inflight);
    loop {
        if refused {
            record_done(ctx, &mut done);
            fail_all(ctx, &mut pending, "handshake failed");
            return End::Refused;
        }
        let keep = ctx.keep(slot);
        // queue new requests while there is room
        if ready && keep && !(once && first_done) {
            let open = ctx.open_model();
            while pending.len() < (if once { 1 } else { inflight }) {
                let at = if once {
                    Instant::now()
                } else if open {
                    match ctx.try_arrival() {
                        Some(t) => t,
                        None => break,
                    }
                } else {
                    Instant::now()
                };
                let t = if once { &ctx.items[0] } else { ctx.pick() };
                let id = next_id;
                next_id += 1;
                line(t, id, &mut out);
                pending.insert(
                    id,
                    Pending {
                        from: at,
                        name: if once { FixedRow::First.id() } else { t.name },
                        want: t.want,
                        progress: Vec::new(),
                    },
                );
                ctx.counters().sent.fetch_add(1, Ordering::Relaxed);
                ctx.counters().inflight.fetch_add(1, Ordering::Relaxed);
                if once {
                    break;
                }
            }
        }
        if pending.is_empty() && written >= out.len() {
            record_done(ctx, &mut done);
            if once && first_done {
                return End::Done;
            }
            if !keep {
                return End::Retired;
            }
        }
        // write what is queued at once (the pipe almost always has room): the child gets the
        // next requests while it is still busy with the last ones, not after another poll
        if written < out.len() {
            if let Some(s) = proc.stdin.as_ref() {
                match s.try_write(&out[written..]) {
                    Ok(n) => {
                        written += n;
                        if written == out.len() {
                            out.clear();
                            written = 0;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => break,
                }
            }
        }
        // the replies' statistics after the next requests went out
        record_done(ctx, &mut done);
        let want_write = written < out.len() && proc.stdin.is_some();
        let open_wait = ready && keep && ctx.open_model() && pending.len() < inflight && !once;
        tokio::select! {
            r = proc.stdout.read(&mut rbuf) => {
                let n = match r {
                    Ok(0) | Err(_) => { exited = true; 0 }
                    Ok(n) => n,
                };
                if exited {
                    break;
                }
                let now = Instant::now();
                let mut replies: Vec<Vec<u8>> = Vec::new();
                let mut too_large: Vec<(usize, Option<i64>)> = Vec::new();
                let mut bad_lines: Vec<Verdict> = Vec::new();
                framer.feed(&rbuf[..n], |frame| match frame {
                    Frame::Line(l) => {
                        match classify(l, |id| pending.get(&id).map(|p| p.want)) {
                            Line::Reply { id, verdict, tool_error } => {
                                let Some(p) = pending.remove(&id) else { return };
                                if p.name != init_name {
                                    ctx.counters().inflight.fetch_sub(1, Ordering::Relaxed);
                                }
                                let reason = match verdict {
                                    Verdict::Ok if tool_error => Some("result has isError: true".to_string()),
                                    Verdict::Ok => None,
                                    v => Some(v.describe()),
                                };
                                if p.name == init_name {
                                    ctx.record(p.name, p.from, now, reason.as_deref(), l.len());
                                } else {
                                    done.push(Done { name: p.name, from: p.from, end: now, reason: reason.clone(), len: l.len() });
                                }
                                if !p.progress.is_empty() {
                                    ctx.record(FixedRow::ProgressFirst, p.from, p.progress[0], None, 0);
                                    for w in p.progress.windows(2) {
                                        ctx.record(FixedRow::ProgressGap, w[0], w[1], None, 0);
                                    }
                                }
                                if p.name == init_name {
                                    if reason.is_none() {
                                        ready = true;
                                        if !stateless {
                                            replies.push(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec());
                                            ctx.record(FixedRow::Initialized, now, Instant::now(), None, 0);
                                        }
                                    } else {
                                        refused = true; // restart after the backoff
                                    }
                                } else if p.name == FixedRow::First.id() {
                                    first_done = true;
                                }
                            }
                            Line::ServerRequest(answer) => replies.push(answer),
                            Line::Progress(token) => {
                                if let Some(p) = pending.get_mut(&token) {
                                    p.progress.push(now);
                                }
                            }
                            Line::Bad(v) => bad_lines.push(v),
                            Line::Other => {}
                        }
                    }
                    Frame::TooLarge { size, head, .. } => {
                        // failed already while it was read (see below): only its end is news
                        if oversized.take().is_none() {
                            too_large.push((size, check::head_id(head)));
                        }
                    }
                });
                // a line over the bound fails its request as soon as the bound is crossed,
                // not when (or if) the line ends
                if oversized.is_none() {
                    if let Some((seen, head)) = framer.discarding() {
                        let id = check::head_id(head);
                        oversized = Some(id);
                        too_large.push((seen, id));
                    }
                }
                for v in bad_lines {
                    ctx.shared.event("bad_reply", format!("stdio server sent a line matching no request: {}", v.describe()));
                }
                for (size, id) in too_large {
                    let failed = fail_oversized(ctx, &mut pending, id, init_name, now);
                    for &(_, name) in &failed {
                        if name == init_name {
                            refused = true;
                        } else if name == FixedRow::First.id() {
                            first_done = true;
                        }
                    }
                    // the failures carry the reason; the event says why, at most once a second
                    oversized_lines += 1;
                    if last_limit_event.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
                        last_limit_event = Some(now);
                        ctx.shared.event(
                            "limit",
                            format!(
                                "stdio reply line of {}{size} bytes over max_reply_bytes ({}): {} ({oversized_lines} such line(s) from pid {} so far)",
                                if framer.discarding().is_some() { "at least " } else { "" },
                                cfg.max_reply_bytes,
                                match (id, failed.len()) {
                                    (Some(id), 1) => format!("request id {id} failed"),
                                    (Some(id), _) => format!("id {id} is not in flight"),
                                    (None, n) => format!("no id in its first bytes: the {n} request(s) in flight failed"),
                                },
                                proc.child.id(),
                            ),
                        );
                    }
                }
                for r in replies {
                    out.extend_from_slice(&r);
                    if r.last() != Some(&b'\n') {
                        out.push(b'\n');
                    }
                }
                if exited {
                    break;
                }
            }
            w = async {
                match proc.stdin.as_mut() {
                    Some(s) => s.write(&out[written..]).await,
                    None => Ok(0),
                }
            }, if want_write => {
                match w {
                    Ok(n) if n > 0 => {
                        written += n;
                        if written == out.len() {
                            out.clear();
                            written = 0;
                        }
                    }
                    _ => break,
                }
            }
            _ = ctx.token_notified(), if open_wait => {}
            _ = ticker.tick() => {
                let now = Instant::now();
                let timeout = cfg.timeout;
                let expired: Vec<i64> = pending
                    .iter()
                    .filter(|(_, p)| now.saturating_duration_since(p.from) > timeout)
                    .map(|(id, _)| *id)
                    .collect();
                for id in expired {
                    if let Some(p) = pending.remove(&id) {
                        if p.name != init_name {
                            ctx.counters().inflight.fetch_sub(1, Ordering::Relaxed);
                        }
                        ctx.record(p.name, p.from, now, Some("timeout"), 0);
                        if p.name == init_name {
                            refused = true;
                        } else if p.name == FixedRow::First.id() {
                            first_done = true;
                        }
                    }
                }
                if exited {
                    break;
                }
            }
        }
    }
    record_done(ctx, &mut done);
    fail_all(ctx, &mut pending, "stdio server exited");
    End::Exited
}

fn record_done(ctx: &Ctx, done: &mut Vec<Done>) {
    for d in done.drain(..) {
        ctx.record(d.name, d.from, d.end, d.reason.as_deref(), d.len);
    }
}

/// A reply line over `max_reply_bytes`: the request of its id fails with the reason; without a
/// readable id every request in flight fails (which one it answered cannot be told). Returns the
/// (id, stats name) of each request failed.
fn fail_oversized(
    ctx: &Ctx,
    pending: &mut HashMap<i64, Pending>,
    id: Option<i64>,
    init_name: usize,
    now: Instant,
) -> Vec<(i64, usize)> {
    let ids: Vec<i64> = match id {
        Some(id) => pending
            .contains_key(&id)
            .then_some(id)
            .into_iter()
            .collect(),
        None => pending.keys().copied().collect(),
    };
    let reason = Verdict::LineTooLarge.describe();
    let mut failed = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(p) = pending.remove(&id) {
            if p.name != init_name {
                ctx.counters().inflight.fetch_sub(1, Ordering::Relaxed);
            }
            ctx.record(p.name, p.from, now, Some(&reason), 0);
            failed.push((id, p.name));
        }
    }
    failed
}

fn fail_all(ctx: &Ctx, pending: &mut HashMap<i64, Pending>, reason: &str) {
    let now = Instant::now();
    for (_, p) in pending.drain() {
        if p.name != FixedRow::Initialize.id() && p.name != FixedRow::Discover.id() {
            ctx.counters().inflight.fetch_sub(1, Ordering::Relaxed);
        }
        ctx.record(p.name, p.from, now, Some(reason), 0);
    }
}
