//! A raw pipelined stdio MCP client: the ceiling the engine's stdio side is measured against
//! (bench_results/swarm/stdio/). It keeps `--inflight` `tools/call` lines outstanding on each
//! of `--children` server processes, from one thread, and does nothing else: no statistics
//! but a counter per child, no timeouts, no histograms. Replies are framed by `mcpfast-core`'s
//! line framer and checked by its envelope scanner (a result with an integer id that is
//! outstanding); anything else is counted as an error and ends the run.
//!
//!   cargo run --release -p mcpfast-engine --example stdio_raw -- \
//!       --children 8 --inflight 32 --seconds 10 --warmup 3 \
//!       [--tool echo] [--arguments '{"text":"hello"}'] -- COMMAND [ARGS...]
//!
//! Prints one JSON line: calls in the measured window (it opens `--warmup` seconds after the
//! last child answered `initialize`), calls/s, this
//! process's CPU seconds in the window, and the errors (0 on a correct run).

use std::cell::Cell;
use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use mcpfast_core::envelope::{self, Decoded, Id, Kind};
use mcpfast_core::framer::{Frame, LineFramer};
use mcpfast_core::DEFAULT_MAX_DEPTH;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

struct Args {
    children: usize,
    inflight: usize,
    seconds: f64,
    warmup: f64,
    tool: String,
    arguments: String,
    command: Vec<String>,
}

fn parse_args() -> Args {
    let mut a = Args {
        children: 8,
        inflight: 32,
        seconds: 10.0,
        warmup: 3.0,
        tool: "echo".into(),
        arguments: r#"{"text":"hello"}"#.into(),
        command: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--" {
            a.command = it.by_ref().collect();
            break;
        }
        let value = it
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--children" => a.children = number(&flag, &value),
            "--inflight" => a.inflight = number(&flag, &value),
            "--seconds" => a.seconds = number(&flag, &value),
            "--warmup" => a.warmup = number(&flag, &value),
            "--tool" => a.tool = value,
            "--arguments" => a.arguments = value,
            _ => usage(&format!("unknown option {flag}")),
        }
    }
    if a.command.is_empty() || a.children == 0 || a.inflight == 0 {
        usage("need --children >= 1, --inflight >= 1 and a command after --");
    }
    a
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> T {
    value
        .parse()
        .unwrap_or_else(|_| usage(&format!("bad value for {flag}: {value}")))
}

fn usage(msg: &str) -> ! {
    eprintln!("stdio_raw: {msg}\nusage: stdio_raw [--children N] [--inflight N] [--seconds S] [--warmup S] [--tool T] [--arguments JSON] -- COMMAND...");
    std::process::exit(2);
}

fn cpu_s() -> f64 {
    let r = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF);
    r.map_or(0.0, |r| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(r.user_time()) + t(r.system_time())
    })
}

fn epoch_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The request line of `id`: the prefix, the digits, the suffix (the id spliced in).
struct Line {
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Line {
    fn push(&self, id: i64, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.head);
        out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
        out.extend_from_slice(&self.tail);
    }
}

/// One child: handshake, then `inflight` calls outstanding until `stop`.
async fn drive(
    command: Rc<Vec<String>>,
    line: Rc<Line>,
    inflight: usize,
    calls: Rc<Cell<u64>>,
    errors: Rc<Cell<u64>>,
    ready_children: Rc<Cell<usize>>,
    stop: Rc<Cell<bool>>,
) -> std::io::Result<()> {
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("child pipes missing"));
    };
    let mut tx = pipe::Sender::from_owned_fd(OwnedFd::from(stdin))?;
    let mut rx = pipe::Receiver::from_owned_fd(OwnedFd::from(stdout))?;
    let mut framer = LineFramer::new(16 << 20);
    let mut buf = vec![0u8; 64 * 1024];
    let mut out: Vec<u8> = Vec::with_capacity(inflight * 128);
    out.extend_from_slice(
        br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stdio-raw","version":"1"}}}"#,
    );
    out.push(b'\n');
    tx.write_all(&out).await?;
    out.clear();
    let mut ready = false;
    let mut outstanding: HashSet<i64> = HashSet::with_capacity(inflight * 2);
    let mut next_id: i64 = 1;
    let result = loop {
        let n = rx.read(&mut buf).await?;
        if n == 0 {
            break Err(std::io::Error::other("child closed stdout"));
        }
        let mut bad = 0u64;
        let mut answered = 0usize;
        let mut handshake_done = false;
        framer.feed(&buf[..n], |frame| {
            let Frame::Line(l) = frame else {
                bad += 1;
                return;
            };
            match envelope::decode_bytes(l, DEFAULT_MAX_DEPTH) {
                Ok(Decoded::Single(env)) if env.kind == Kind::Result => match env.id {
                    Some(Id::Int(0)) if !ready => handshake_done = true,
                    Some(Id::Int(id)) if outstanding.remove(&id) => answered += 1,
                    _ => bad += 1,
                },
                Ok(Decoded::Single(env)) if env.kind == Kind::Notification => {}
                _ => bad += 1,
            }
        });
        if bad > 0 {
            errors.set(errors.get() + bad);
            break Err(std::io::Error::other("bad reply"));
        }
        if handshake_done {
            ready = true;
            ready_children.set(ready_children.get() + 1);
            out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
            out.push(b'\n');
            answered = inflight; // fill the pipeline
        } else {
            calls.set(calls.get() + answered as u64);
        }
        if stop.get() {
            break Ok(());
        }
        for _ in 0..answered {
            line.push(next_id, &mut out);
            outstanding.insert(next_id);
            next_id += 1;
        }
        if !out.is_empty() {
            tx.write_all(&out).await?;
            out.clear();
        }
    };
    drop(tx);
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn main() {
    let a = parse_args();
    let params = format!(
        r#"{{"name":{},"arguments":{}}}"#,
        serde_json::Value::String(a.tool.clone()),
        a.arguments
    );
    let line = Rc::new(Line {
        head: br#"{"jsonrpc":"2.0","id":"#.to_vec(),
        tail: format!(",\"method\":\"tools/call\",\"params\":{params}}}\n").into_bytes(),
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    let command = Rc::new(a.command.clone());
    let stop = Rc::new(Cell::new(false));
    let errors = Rc::new(Cell::new(0u64));
    let ready = Rc::new(Cell::new(0usize));
    let counters: Vec<Rc<Cell<u64>>> = (0..a.children).map(|_| Rc::new(Cell::new(0))).collect();
    let report = local.block_on(&rt, async {
        let mut tasks = Vec::new();
        for c in &counters {
            tasks.push(tokio::task::spawn_local(drive(
                command.clone(),
                line.clone(),
                a.inflight,
                c.clone(),
                errors.clone(),
                ready.clone(),
                stop.clone(),
            )));
        }
        // the window opens `warmup` after the last child answered initialize (at most 60 s)
        let t_spawn = Instant::now();
        while ready.get() < a.children && t_spawn.elapsed() < Duration::from_secs(60) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let startup_s = t_spawn.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_secs_f64(a.warmup)).await;
        let before: Vec<u64> = counters.iter().map(|c| c.get()).collect();
        let (t0, cpu0, epoch0) = (Instant::now(), cpu_s(), epoch_s());
        tokio::time::sleep(Duration::from_secs_f64(a.seconds)).await;
        let after: Vec<u64> = counters.iter().map(|c| c.get()).collect();
        let (wall, cpu, epoch1) = (t0.elapsed().as_secs_f64(), cpu_s() - cpu0, epoch_s());
        stop.set(true);
        let mut failed = Vec::new();
        for t in tasks {
            match tokio::time::timeout(Duration::from_secs(5), t).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => failed.push(e.to_string()),
                Ok(Err(e)) => failed.push(e.to_string()),
                Err(_) => failed.push("child did not finish".into()),
            }
        }
        let per_child: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        let calls: u64 = per_child.iter().sum();
        serde_json::json!({
            "children": a.children, "inflight": a.inflight, "seconds": wall,
            "calls": calls, "calls_per_s": calls as f64 / wall, "per_child": per_child,
            "cpu_s": cpu, "cpu_share": cpu / wall, "startup_s": startup_s, "ready": ready.get(),
            "window_epoch_s": [epoch0, epoch1], "errors": errors.get(), "failed": failed,
        })
    });
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{report}");
}
