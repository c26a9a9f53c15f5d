//! End-to-end: the `mcpfast-load` binary in every mode against the mock server of
//! `rust/mcpfast-engine/examples/mock_server.rs` (JSON and chunked-SSE replies, and deliberate misbehaviour).

#[allow(dead_code)]
#[path = "../../mcpfast-engine/examples/mock_server.rs"]
mod mock;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mock::MockOptions;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mcpfast-load");

fn wait(mut child: Child, limit: Duration) -> (i32, Vec<Value>, String) {
    let t0 = Instant::now();
    // bounded: 50 ms steps up to `limit`
    for _ in 0..(limit.as_millis() / 50 + 1) {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every stdout line is JSON"))
        .collect();
    (
        out.status.code().unwrap_or(-1),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run(args: &[&str], port: u16) -> (i32, Vec<Value>, String) {
    let url = format!("http://127.0.0.1:{port}/mcp");
    let child = Command::new(BIN)
        .args(args)
        .args(["--url", &url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcpfast-load");
    wait(child, Duration::from_secs(60))
}

fn last(lines: &[Value]) -> &Value {
    lines.last().expect("a summary line")
}

#[test]
fn calls_json_replies() {
    let (port, open) = mock::spawn(MockOptions::default());
    let (code, lines, stderr) = run(
        &[
            "calls",
            "--sessions",
            "4",
            "--duration",
            "0.5",
            "--warmup",
            "0.2",
        ],
        port,
    );
    let s = last(&lines);
    assert_eq!(code, 0, "{s}\n{stderr}");
    assert_eq!(s["failures"]["total"], 0);
    assert!(s["calls"].as_u64().expect("calls") > 100, "{s}");
    assert!(s["calls_per_second"].as_f64().expect("rate") > 0.0);
    assert_eq!(s["sessions"]["deleted"], 4);
    assert!(s["latency_us"]["tools/call"]["p99"].as_f64().expect("p99") > 0.0);
    assert!(s["generator_cpu_seconds"].as_f64().is_some());
    assert_eq!(open.load(Ordering::Relaxed), 0, "every session deleted");
    assert!(stderr.contains("calls/s"));
}

#[test]
fn calls_sse_chunked_replies() {
    let (port, open) = mock::spawn(MockOptions {
        sse: true,
        ..Default::default()
    });
    let (code, lines, stderr) = run(
        &[
            "calls",
            "--sessions",
            "3",
            "--duration",
            "0.5",
            "--warmup",
            "0",
        ],
        port,
    );
    let s = last(&lines);
    assert_eq!(code, 0, "{s}\n{stderr}");
    let calls = s["requests"]["tools/call"]["ok_total"]
        .as_u64()
        .expect("calls");
    assert!(calls > 100);
    // one notification before every reply (initialize and tools/call)
    assert_eq!(s["sse_messages_before_reply"].as_u64(), Some(calls + 3));
    assert_eq!(open.load(Ordering::Relaxed), 0);
}

#[test]
fn graceful_closes_reconnect_without_failures() {
    let (port, _) = mock::spawn(MockOptions {
        close_every: 10,
        ..Default::default()
    });
    let (code, lines, _) = run(
        &[
            "calls",
            "--sessions",
            "2",
            "--duration",
            "0.3",
            "--warmup",
            "0",
        ],
        port,
    );
    let s = last(&lines);
    assert_eq!(code, 0, "{s}");
    assert!(
        s["connections"]["reconnects"].as_u64().expect("reconnects") > 5,
        "{s}"
    );
    assert!(
        s["connections"]["closed_by_server"]
            .as_u64()
            .expect("closes")
            > 5
    );
}

#[test]
fn dropped_connections_are_failures() {
    let (port, _) = mock::spawn(MockOptions {
        reset_every: 50,
        ..Default::default()
    });
    let (code, lines, _) = run(
        &[
            "calls",
            "--sessions",
            "2",
            "--duration",
            "0.3",
            "--warmup",
            "0",
        ],
        port,
    );
    let s = last(&lines);
    assert_eq!(code, 1, "{s}");
    let n = s["failures"]["by_kind"]["tools/call: connection closed by server"]
        .as_u64()
        .expect("kind counted");
    assert!(n > 0);
    assert!(
        s["calls"].as_u64().expect("calls") > 0,
        "the run goes on after reconnecting"
    );
}

#[test]
fn wrong_ids_and_timeouts_are_failures() {
    let (port, _) = mock::spawn(MockOptions {
        wrong_id_every: 20,
        ..Default::default()
    });
    let (code, lines, _) = run(
        &[
            "calls",
            "--sessions",
            "2",
            "--duration",
            "0.3",
            "--warmup",
            "0",
        ],
        port,
    );
    let s = last(&lines);
    assert_eq!(code, 1);
    assert!(
        s["failures"]["by_kind"]["tools/call: reply id mismatch"]
            .as_u64()
            .expect("kind")
            > 0,
        "{s}"
    );
    assert!(s["failures"]["samples"]["tools/call: reply id mismatch"]
        .as_str()
        .expect("sample")
        .starts_with("HTTP 200"));

    let (port, _) = mock::spawn(MockOptions {
        stall_every: 40,
        ..Default::default()
    });
    let (code, lines, _) = run(
        &[
            "calls",
            "--sessions",
            "2",
            "--duration",
            "1",
            "--warmup",
            "0",
            "--timeout",
            "0.2",
        ],
        port,
    );
    let s = last(&lines);
    assert_eq!(code, 1);
    assert!(
        s["failures"]["by_kind"]["tools/call: timeout"]
            .as_u64()
            .expect("kind")
            > 0,
        "{s}"
    );
}

#[test]
fn handshakes_cycle_and_leave_nothing() {
    let (port, open) = mock::spawn(MockOptions {
        sse: true,
        ..Default::default()
    });
    let (code, lines, stderr) = run(
        &[
            "handshakes",
            "--connections",
            "3",
            "--duration",
            "0.5",
            "--warmup",
            "0.1",
        ],
        port,
    );
    let s = last(&lines);
    assert_eq!(code, 0, "{s}\n{stderr}");
    assert!(s["handshakes"].as_u64().expect("handshakes") > 50);
    for phase in ["initialize", "notifications/initialized", "delete"] {
        assert!(s["latency_us"][phase]["p50"].as_f64().is_some(), "{phase}");
    }
    assert_eq!(open.load(Ordering::Relaxed), 0);
}

#[test]
fn hold_keeps_sessions_until_stdin_says() {
    // the server also closes connections idle for 200 ms: the DELETEs must reconnect, not fail
    let (port, open) = mock::spawn(MockOptions {
        idle_close_ms: 200,
        ..Default::default()
    });
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut child = Command::new(BIN)
        .args([
            "hold",
            "--sessions",
            "50",
            "--connections",
            "4",
            "--url",
            &url,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("held line");
    let held: Value = serde_json::from_str(&line).expect("json");
    assert_eq!(held["event"], "held");
    assert_eq!(held["sessions_open"], 50);
    assert_eq!(open.load(Ordering::Relaxed), 50, "held on the server");
    std::thread::sleep(Duration::from_millis(800));
    child
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("write");
    let mut rest = String::new();
    for _ in 0..10 {
        let mut l = String::new();
        if stdout.read_line(&mut l).expect("read") == 0 {
            break;
        }
        rest.push_str(&l);
    }
    let status = child.wait().expect("exit");
    let s: Value = serde_json::from_str(rest.trim()).expect("summary json");
    assert_eq!(status.code(), Some(0), "{s}");
    assert_eq!(s["deleted"], 50);
    assert_eq!(s["released_by"], "stdin");
    assert_eq!(s["failures"]["total"], 0);
    assert!(
        s["connections"]["closed_while_idle"]
            .as_u64()
            .expect("count")
            > 0,
        "{s}"
    );
    assert_eq!(open.load(Ordering::Relaxed), 0);
}

#[test]
fn hold_no_delete_and_eof() {
    let (port, open) = mock::spawn(MockOptions::default());
    // stdin is /dev/null: EOF at once releases the hold
    let (code, lines, _) = run(
        &[
            "hold",
            "--sessions",
            "20",
            "--connections",
            "3",
            "--no-delete",
        ],
        port,
    );
    assert_eq!(code, 0);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["deleted"], 0);
    assert_eq!(open.load(Ordering::Relaxed), 20, "left open on purpose");
}

#[test]
fn churn_reports_progress() {
    let (port, open) = mock::spawn(MockOptions::default());
    let (code, lines, _) = run(
        &[
            "churn",
            "--cycles",
            "400",
            "--connections",
            "4",
            "--report-every",
            "100",
        ],
        port,
    );
    assert_eq!(code, 0, "{lines:?}");
    let progress: Vec<&Value> = lines.iter().filter(|l| l["event"] == "progress").collect();
    assert_eq!(progress.len(), 4);
    assert_eq!(progress[3]["cycles_done"], 400);
    let s = last(&lines);
    assert_eq!(s["cycles_ok"], 400);
    assert_eq!(open.load(Ordering::Relaxed), 0);
}

#[test]
fn nothing_listening_is_reported() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let (code, lines, _) = run(
        &[
            "calls",
            "--sessions",
            "2",
            "--duration",
            "0.2",
            "--warmup",
            "0",
        ],
        port,
    );
    assert_eq!(code, 1);
    let s = last(&lines);
    assert!(
        s["failures"]["by_kind"]["initialize: connect failed (ConnectionRefused)"]
            .as_u64()
            .is_some(),
        "{s}"
    );
}

#[test]
fn calls_at_a_rate_report_the_open_model() {
    let (port, open) = mock::spawn(MockOptions::default());
    let (code, lines, stderr) = run(
        &[
            "calls",
            "--sessions",
            "4",
            "--rate",
            "400",
            "--duration",
            "1",
            "--warmup",
            "0.2",
        ],
        port,
    );
    let s = last(&lines);
    assert_eq!(code, 0, "{s}\n{stderr}");
    let calls = s["calls"].as_u64().expect("calls");
    // the open model sends at the rate, not as fast as it can (the window is 1 s)
    assert!((200..=480).contains(&calls), "{s}");
    let om = &s["open_model"];
    assert_eq!(om["target_rate"], 400.0);
    // one send lag and one service time per call of the window; latency counts the same calls
    assert_eq!(om["send_lag_us"]["count"].as_u64(), Some(calls));
    assert_eq!(om["service_time_us"]["count"].as_u64(), Some(calls));
    assert_eq!(s["latency_us"]["tools/call"]["count"].as_u64(), Some(calls));
    assert!(om["late"].as_u64().is_some() && om["dropped"].as_u64().is_some());
    assert_eq!(open.load(Ordering::Relaxed), 0);
    // the closed model has no open_model block
    let (port, _) = mock::spawn(MockOptions::default());
    let (_, lines, _) = run(
        &[
            "calls",
            "--sessions",
            "2",
            "--duration",
            "0.2",
            "--warmup",
            "0",
        ],
        port,
    );
    assert!(last(&lines).get("open_model").is_none());
}
