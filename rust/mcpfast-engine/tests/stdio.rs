//! stdio: pipelined requests to child processes, children that exit (reported, restarted),
//! and a bounded stop. The scripted servers are small `sh` and `python3` programs.

use std::time::{Duration, Instant};

use mcpfast_engine::config::{Settings, Transport};
use mcpfast_engine::stats::Row;
use mcpfast_engine::Engine;

/// A stdio MCP responder that answers `limit` tools/call and then exits with status 7. With a
/// second argument every 3rd tools/call reply is a 100,000-byte line: `head` with the id first,
/// `tail` with the id last, `stall` (the 3rd call only) the first 10,000 bytes of one with the
/// id first, and then nothing more (the line never ends).
const RESPONDER: &str = r#"
import json, sys, time
limit = int(sys.argv[1])
mode = sys.argv[2] if len(sys.argv) > 2 else None
calls = 0
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    big = False
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "t", "version": "0"}}
    elif msg["method"] == "tools/call":
        calls += 1
        if calls > limit:
            sys.stderr.write("responder: limit reached\n")
            sys.exit(7)
        if calls % 10 == 0:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}) + "\n")
        big = mode is not None and calls % 3 == 0
        text = "x" * 100000 if big else msg["params"]["arguments"].get("text", "")
        result = {"content": [{"type": "text", "text": text}]}
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}) + "\n")
        sys.stdout.flush()
        continue
    if big and mode == "tail":
        out = json.dumps({"jsonrpc": "2.0", "result": result, "id": msg["id"]})
    else:
        out = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result})
    if big and mode == "stall":
        sys.stdout.write(out[:10000])
        sys.stdout.flush()
        time.sleep(60)
    sys.stdout.write(out + "\n")
    sys.stdout.flush()
"#;

fn stdio(command: &[&str]) -> Settings {
    Settings {
        transport: Transport::Stdio,
        command: command.iter().map(|a| (*a).to_string()).collect(),
        inflight_per_process: 8,
        timeout_s: 5.0,
        ..Settings::default()
    }
}

fn engine(settings: &Settings) -> Engine {
    Engine::new(settings.build().expect("config")).expect("engine")
}

/// Collect events until `done` holds (at most 10 s).
fn events_until(e: &Engine, done: impl Fn(&[(String, String)]) -> bool) -> Vec<(String, String)> {
    let t0 = Instant::now();
    let mut events = Vec::new();
    while t0.elapsed() < Duration::from_secs(10) && !done(&events) {
        std::thread::sleep(Duration::from_millis(20));
        events.extend(e.events());
    }
    events
}

fn totals(e: &Engine, rows: &[Row], name: &str) -> (u64, u64, Vec<(String, u64)>) {
    let mut out = (0, 0, Vec::new());
    for r in rows.iter().filter(|r| e.name(r.name) == name) {
        out.0 += r.num;
        out.1 += r.failures;
        out.2.extend(r.errors.iter().cloned());
    }
    out
}

#[test]
fn pipelined_calls_to_a_child_that_exits_are_reported_and_restarted() {
    let e = engine(&stdio(&["python3", "-c", RESPONDER, "200"]));
    e.start().expect("start");
    e.set_users(2);
    let t0 = Instant::now();
    let mut events = Vec::new();
    let mut rows = Vec::new();
    // each child answers 200 calls, then exits: wait for several restarts (bounded)
    while t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
        events.extend(e.events());
        rows.extend(e.drain());
        if events.iter().filter(|(k, _)| k == "child_exited").count() >= 4 {
            break;
        }
    }
    let t = Instant::now();
    e.stop(Duration::from_secs(2));
    assert!(t.elapsed() < Duration::from_secs(3));
    rows.extend(e.drain());
    let exits: Vec<&String> = events
        .iter()
        .filter(|(k, _)| k == "child_exited")
        .map(|(_, m)| m)
        .collect();
    assert!(exits.len() >= 4, "{events:?}");
    assert!(
        exits
            .iter()
            .all(|m| m.contains("exit status: 7") && m.contains("limit reached")),
        "{exits:?}"
    );
    let (inits, init_failed, _) = totals(&e, &rows, "initialize");
    assert!(
        inits as usize >= exits.len() && init_failed == 0,
        "restarted: {inits} initialize"
    );
    let (calls, failed, errors) = totals(&e, &rows, "tools/call:echo");
    // every child answered exactly 200 before exiting; the in-flight ones failed with the reason
    assert!(calls - failed >= 800, "{calls} {failed}");
    assert!(
        failed > 0 && errors.iter().all(|(r, _)| r == "stdio server exited"),
        "{errors:?}"
    );
}

#[test]
fn a_child_that_cannot_start_properly_is_reported_with_its_stderr() {
    let e = engine(&stdio(&["sh", "-c", "echo boom >&2; exit 3"]));
    e.start().expect("start");
    e.set_users(1);
    let events = events_until(&e, |ev| {
        ev.iter().filter(|(k, _)| k == "child_exited").count() >= 2
    });
    e.stop(Duration::from_secs(1));
    let rows = e.drain();
    let exits: Vec<&String> = events
        .iter()
        .filter(|(k, _)| k == "child_exited")
        .map(|(_, m)| m)
        .collect();
    assert!(exits.len() >= 2, "restarted after a backoff: {events:?}");
    assert!(
        exits[0].contains("exit status: 3") && exits[0].contains("boom"),
        "{exits:?}"
    );
    let (n, f, _) = totals(&e, &rows, "initialize");
    assert!(n >= 2 && n == f);
}

#[test]
fn a_missing_command_is_a_clear_failure() {
    let e = engine(&stdio(&["/nonexistent/mcp-server"]));
    e.start().expect("start");
    e.set_users(1);
    let events = events_until(&e, |ev| ev.iter().any(|(k, _)| k == "child_exited"));
    e.stop(Duration::from_secs(1));
    let rows = e.drain();
    assert!(
        events
            .iter()
            .any(|(k, m)| k == "child_exited" && m.contains("cannot start")),
        "{events:?}"
    );
    let (n, f, errors) = totals(&e, &rows, "initialize");
    assert!(n >= 1 && n == f && errors[0].0.contains("cannot start the stdio server"));
}

#[test]
fn a_silent_child_times_out_and_stop_is_bounded() {
    let e = engine(&Settings {
        timeout_s: 0.3,
        ..stdio(&["sh", "-c", "sleep 30"])
    });
    e.start().expect("start");
    e.set_users(1);
    std::thread::sleep(Duration::from_millis(800));
    let t = Instant::now();
    e.stop(Duration::from_millis(500));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let rows = e.drain();
    let (n, f, errors) = totals(&e, &rows, "initialize");
    assert!(n >= 1 && n == f, "{n} {f}");
    assert_eq!(errors[0].0, "timeout");
}

fn run_oversized(
    mode: &str,
    inflight: usize,
    until: impl Fn(&[Row]) -> bool,
) -> (Engine, Vec<Row>, Vec<(String, String)>) {
    // a mark of this run in the children's argv (ignored by the responder), for `alive_with`
    let mark = format!("mark-{}-{mode}", std::process::id());
    let e = engine(&Settings {
        inflight_per_process: inflight,
        timeout_s: 30.0,
        max_reply_bytes: 4096,
        ..stdio(&["python3", "-c", RESPONDER, "1000000", mode, &mark])
    });
    e.start().expect("start");
    e.set_users(1);
    let t0 = Instant::now();
    let mut rows = Vec::new();
    let mut events = Vec::new();
    while t0.elapsed() < Duration::from_secs(10) && !until(&rows) {
        std::thread::sleep(Duration::from_millis(20));
        rows.extend(e.drain());
        events.extend(e.events());
    }
    e.stop(Duration::from_millis(500));
    rows.extend(e.drain());
    events.extend(e.events());
    // stop kills the children, a stalled one too: none outlives it
    assert_eq!(
        alive_with(&mark),
        Vec::<u32>::new(),
        "children left after stop"
    );
    (e, rows, events)
}

/// The live (not zombie) processes whose argv holds `mark`.
fn alive_with(mark: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for d in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = d.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(d.path().join("stat")).unwrap_or_default();
        // the state follows the parenthesised command name
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'));
        let argv = std::fs::read(d.path().join("cmdline")).unwrap_or_default();
        if !zombie && argv.split(|&b| b == 0).any(|a| a == mark.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

fn failures_of(rows: &[Row]) -> u64 {
    rows.iter().map(|r| r.failures).sum()
}

#[test]
fn an_oversized_reply_line_fails_its_request_with_the_reason() {
    let (e, rows, events) = run_oversized("head", 8, |rows| failures_of(rows) >= 5);
    let (calls, failed, errors) = totals(&e, &rows, "tools/call:echo");
    assert!(failed >= 5 && calls - failed >= 10, "{calls} {failed}");
    // every failure is the size bound, none waited for the 30 s timeout
    assert!(
        errors.iter().all(|(r, _)| r == "reply line too large"),
        "{errors:?}"
    );
    assert!(
        events.iter().any(|(k, m)| k == "limit"
            && m.contains("over max_reply_bytes (4096)")
            && m.contains("failed")),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|(k, _)| k == "child_exited"),
        "{events:?}"
    );
}

#[test]
fn an_oversized_reply_without_a_readable_id_fails_what_is_in_flight() {
    let (e, rows, events) = run_oversized("tail", 4, |rows| failures_of(rows) >= 8);
    let (calls, failed, errors) = totals(&e, &rows, "tools/call:echo");
    assert!(failed >= 8 && calls > failed, "{calls} {failed}");
    assert!(
        errors.iter().all(|(r, _)| r == "reply line too large"),
        "{errors:?}"
    );
    assert!(
        events
            .iter()
            .any(|(k, m)| k == "limit" && m.contains("no id in its first bytes")),
        "{events:?}"
    );
}

#[test]
fn an_oversized_reply_fails_before_its_line_ends() {
    // the third reply's line never ends: its request fails on the size bound, not on the timeout;
    // the fourth, sent behind it to the stalled child, is still in flight past the stop grace and
    // is dropped (never counted, as over HTTP), whichever of the engine's clocks sees the end first
    let (e, rows, _) = run_oversized("stall", 1, |rows| failures_of(rows) >= 1);
    let (calls, failed, errors) = totals(&e, &rows, "tools/call:echo");
    assert_eq!((calls, failed), (3, 1), "{errors:?}");
    assert_eq!(
        e.status().sent,
        1 + 4,
        "initialize and four calls were sent"
    );
    assert_eq!(errors, vec![("reply line too large".to_string(), 1)]);
}
