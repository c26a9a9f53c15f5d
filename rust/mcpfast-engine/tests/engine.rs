//! The engine against the in-repo mock responder (`examples/mock_server.rs`) and scripted
//! faulty servers: counts, rows, failures with their reasons, and bounded stops.

#[allow(dead_code)]
#[path = "../examples/mock_server.rs"]
mod mock;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mcpfast_engine::config::{Family, JsonObject, MixCall, MixItem, Settings};
use mcpfast_engine::serde_json::Value;
use mcpfast_engine::stats::Row;
use mcpfast_engine::Engine;
use mock::MockOptions;

fn engine(settings: Settings) -> Engine {
    let e = Engine::new(settings.build().expect("valid config")).expect("engine");
    e.start().expect("start");
    e
}

/// The engine's settings for the mock responder on `port` (the defaults otherwise).
fn http(port: u16) -> Settings {
    Settings {
        url: Some(url(port)),
        ..Settings::default()
    }
}

/// Tool arguments `{"text": text}`.
fn text(text: &str) -> JsonObject {
    JsonObject::from_iter([("text".to_string(), Value::from(text))])
}

fn row<'a>(e: &Engine, rows: &'a [Row], name: &str) -> Option<&'a Row> {
    rows.iter().find(|r| e.name(r.name) == name)
}

fn count(e: &Engine, rows: &[Row], name: &str) -> (u64, u64) {
    row(e, rows, name).map_or((0, 0), |r| (r.num, r.failures))
}

/// Drain every window until `stop`, merged by name: (name, num, failures, errors).
fn run_for(e: &Engine, users: usize, secs: f64) -> Vec<Row> {
    e.set_users(users);
    std::thread::sleep(Duration::from_secs_f64(secs));
    let mut rows = e.drain();
    let t0 = Instant::now();
    e.stop(Duration::from_secs(2));
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "stop drains within its grace"
    );
    rows.extend(e.drain());
    merge(rows)
}

fn merge(rows: Vec<Row>) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    for r in rows {
        if let Some(m) = out.iter_mut().find(|m| m.name == r.name) {
            m.num += r.num;
            m.failures += r.failures;
            m.buckets.extend(r.buckets);
            for (k, n) in r.errors {
                match m.errors.iter_mut().find(|e| e.0 == k) {
                    Some(e) => e.1 += n,
                    None => m.errors.push((k, n)),
                }
            }
        } else {
            out.push(r);
        }
    }
    out
}

fn url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/mcp")
}

#[test]
fn tools_call_json_counts_agree_with_the_server() {
    let opts = MockOptions::default();
    let answered = opts.answered.clone();
    let (port, open) = mock::spawn(opts);
    let e = engine(Settings {
        tool: "echo".into(),
        arguments: text("hi"),
        ..http(port)
    });
    let rows = run_for(&e, 4, 0.5);
    let (calls, failed) = count(&e, &rows, "tools/call:echo");
    assert!(calls > 100, "{calls} calls");
    assert_eq!(failed, 0);
    assert_eq!(
        calls as usize,
        answered.load(Ordering::Relaxed),
        "every answered call counted once"
    );
    assert_eq!(count(&e, &rows, "initialize"), (4, 0));
    assert_eq!(count(&e, &rows, "notifications/initialized"), (4, 0));
    assert_eq!(
        count(&e, &rows, "DELETE"),
        (4, 0),
        "sessions are deleted at stop"
    );
    assert_eq!(open.load(Ordering::Relaxed), 0);
    let r = row(&e, &rows, "tools/call:echo").expect("row");
    assert_eq!(r.buckets.iter().map(|b| b.1).sum::<u64>(), calls);
    let s = e.status();
    assert_eq!(s.completed, calls + 12);
    let hist: u64 = e
        .histograms()
        .iter()
        .filter(|h| h.0 == "tools/call:echo" && !h.1)
        .map(|h| h.2.iter().map(|b| b.1).sum::<u64>())
        .sum();
    assert_eq!(hist, calls, "the cumulative histogram holds every call");
}

#[test]
fn sse_replies_and_two_threads() {
    let opts = MockOptions {
        sse: true,
        ..MockOptions::default()
    };
    let answered = opts.answered.clone();
    let (port, _) = mock::spawn(opts);
    let e = engine(Settings {
        threads: 2,
        ..http(port)
    });
    let rows = run_for(&e, 5, 0.5);
    let (calls, failed) = count(&e, &rows, "tools/call:echo");
    assert!(calls > 50);
    assert_eq!(failed, 0);
    assert_eq!(calls as usize, answered.load(Ordering::Relaxed));
    assert_eq!(count(&e, &rows, "initialize"), (5, 0));
}

#[test]
fn handshake_family_rows() {
    let (port, open) = mock::spawn(MockOptions::default());
    let e = engine(Settings {
        family: Family::Handshake,
        ..http(port)
    });
    let rows = run_for(&e, 3, 0.4);
    let (init, f) = count(&e, &rows, "initialize");
    assert!(init > 10);
    assert_eq!(f, 0);
    let (initialized, _) = count(&e, &rows, "notifications/initialized");
    let (first, _) = count(&e, &rows, "tools/call:echo (first)");
    let (deleted, _) = count(&e, &rows, "DELETE");
    // stop may cut a lifecycle between two phases: at most one per user
    assert!(init - initialized <= 3 && initialized - first <= 3 && first - deleted <= 3);
    assert!(open.load(Ordering::Relaxed) <= 3);
}

#[test]
fn session_churn_abandons_its_share() {
    let (port, open) = mock::spawn(MockOptions::default());
    let e = engine(Settings {
        family: Family::SessionChurn,
        churn_delete_share: 0.5,
        ..http(port)
    });
    let rows = run_for(&e, 2, 0.4);
    let (init, _) = count(&e, &rows, "initialize");
    let (deleted, _) = count(&e, &rows, "DELETE");
    assert!(init > 10);
    assert!(
        deleted * 2 <= init + 2 && deleted * 2 + 4 >= init,
        "{deleted} of {init}"
    );
    assert!(open.load(Ordering::Relaxed) as u64 >= init - deleted - 2);
}

#[test]
fn wrong_ids_are_failures_with_their_reason() {
    let (port, _) = mock::spawn(MockOptions {
        wrong_id_every: 5,
        ..MockOptions::default()
    });
    let e = engine(http(port));
    let rows = run_for(&e, 2, 0.3);
    let r = row(&e, &rows, "tools/call:echo").expect("row");
    assert!(r.failures > 0 && r.failures * 5 <= r.num + 5);
    assert_eq!(r.errors.len(), 1);
    assert_eq!(r.errors[0].0, "reply id mismatch");
    assert_eq!(r.errors[0].1, r.failures);
}

#[test]
fn stalled_replies_time_out_and_stop_is_bounded() {
    let (port, _) = mock::spawn(MockOptions {
        stall_every: 3,
        ..MockOptions::default()
    });
    let e = engine(Settings {
        timeout_s: 0.2,
        ..http(port)
    });
    let rows = run_for(&e, 2, 0.8);
    let r = row(&e, &rows, "tools/call:echo").expect("row");
    assert!(r.failures >= 2, "{:?}", r.errors);
    assert!(r.errors.iter().all(|e| e.0 == "timeout"), "{:?}", r.errors);
    assert!(r.num > r.failures, "the sessions go on after a timeout");
}

#[test]
fn oversized_replies_fail_clearly() {
    let (port, _) = mock::spawn(MockOptions::default());
    let long = "x".repeat(3000);
    let e = engine(Settings {
        max_reply_bytes: 2048,
        arguments: text(&long),
        ..http(port)
    });
    let rows = run_for(&e, 1, 0.2);
    let r = row(&e, &rows, "tools/call:echo").expect("row");
    assert_eq!(r.failures, r.num);
    assert_eq!(r.errors[0].0, "response body too large");
}

#[test]
fn a_server_that_dies_and_comes_back() {
    let opts = MockOptions::default();
    let down = opts.down.clone();
    let answered = opts.answered.clone();
    let (port, _) = mock::spawn(opts);
    let e = engine(Settings {
        timeout_s: 1.0,
        ..http(port)
    });
    e.set_users(2);
    std::thread::sleep(Duration::from_millis(200));
    down.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(300));
    let before = answered.load(Ordering::Relaxed);
    down.store(false, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(400));
    let rows = run_for(&e, 2, 0.0);
    assert!(
        answered.load(Ordering::Relaxed) > before + 10,
        "the run goes on after the server is back"
    );
    let total_failures: u64 = rows.iter().map(|r| r.failures).sum();
    assert!(total_failures > 0);
    let reasons: Vec<&str> = rows
        .iter()
        .flat_map(|r| r.errors.iter().map(|e| e.0.as_str()))
        .collect();
    assert!(
        reasons
            .iter()
            .all(|r| r.contains("closed") || r.contains("io error") || r.contains("http 404")),
        "{reasons:?}"
    );
}

#[test]
fn nothing_listening_is_a_connect_error_event() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let e = engine(http(port));
    e.set_users(2);
    std::thread::sleep(Duration::from_millis(300));
    let events = e.events();
    assert!(
        events
            .iter()
            .any(|(k, m)| k == "connect_error" && m.contains("connect failed")),
        "{events:?}"
    );
    let rows = run_for(&e, 2, 0.0);
    let (n, f) = count(&e, &rows, "initialize");
    assert!(n > 0 && n == f);
}

#[test]
fn open_model_counts_late_and_dropped() {
    let (port, _) = mock::spawn(MockOptions::default());
    let e = engine(Settings {
        rate: Some(2000.0),
        max_inflight: 16,
        ..http(port)
    });
    let t0 = Instant::now();
    let rows = run_for(&e, 2, 1.0);
    let elapsed = t0.elapsed().as_secs_f64();
    let (calls, failed) = count(&e, &rows, "tools/call:echo");
    let s = e.status();
    assert_eq!(failed, 0);
    assert!(calls > 0);
    // the open model never sends more than the rate allows (the engine ran < elapsed + 0.1 s) ...
    assert!(
        calls as f64 <= 2000.0 * (elapsed + 0.1),
        "{calls} in {elapsed} s"
    );
    // ... and every arrival of the run is either sent or counted as dropped
    assert!(
        (calls + s.dropped) as f64 >= 2000.0 * 1.0 - 16.0,
        "{calls} + {} dropped",
        s.dropped
    );
    // too few sessions for the rate: arrivals queue, then are dropped
    let (port, _) = mock::spawn(MockOptions {
        stall_every: 2,
        ..MockOptions::default()
    });
    let e = engine(Settings {
        rate: Some(500.0),
        max_inflight: 8,
        timeout_s: 0.3,
        ..http(port)
    });
    let _ = run_for(&e, 1, 0.8);
    let s = e.status();
    assert!(s.dropped > 0 && s.late > 0, "{s:?}");
}

#[test]
fn open_model_schedule_runs_from_start_to_stop_whatever_the_threads_timing() {
    // no users take arrivals: with one queue place per thread, every arrival but those queued
    // is dropped, so `dropped` counts the schedule exactly: rate x (stop - start), however late
    // each thread first ran or last woke (an exact identity, not a timing margin)
    let threads = 3;
    let rate = 3000.0;
    let settings = Settings {
        rate: Some(rate),
        max_inflight: 1,
        threads,
        ..http(9)
    };
    let e = Engine::new(settings.build().expect("config")).expect("engine");
    let a = Instant::now();
    e.start().expect("start");
    let b = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    let c = Instant::now();
    e.stop(Duration::from_millis(100));
    let d = Instant::now();
    let s = e.status();
    // each thread's schedule holds floor(window x its rate) + 1 arrivals, one of them queued
    let least = (rate * (c - b).as_secs_f64()).floor() - threads as f64;
    let most = rate * (d - a).as_secs_f64() + threads as f64;
    let arrivals = (s.dropped + threads as u64) as f64;
    assert!(
        least <= arrivals && arrivals <= most,
        "{least} <= {arrivals} <= {most}: {s:?}"
    );
    assert_eq!(s.sent, 0);
}

#[test]
fn users_converge_up_and_down() {
    let (port, open) = mock::spawn(MockOptions::default());
    let e = engine(Settings {
        threads: 2,
        ..http(port)
    });
    // converging takes a few ticks and round trips: wait for it (bounded), then check
    let settle = |want: u64, server: usize| {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5)
            && (e.status().sessions_open != want || open.load(Ordering::Relaxed) != server)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    e.set_users(6);
    settle(6, 6);
    assert_eq!(e.status().sessions_open, 6);
    assert_eq!(open.load(Ordering::Relaxed), 6);
    e.set_users(2);
    settle(2, 2);
    assert_eq!(e.status().sessions_open, 2);
    assert_eq!(
        open.load(Ordering::Relaxed),
        2,
        "retired sessions are deleted"
    );
    e.stop(Duration::from_secs(1));
    assert_eq!(open.load(Ordering::Relaxed), 0);
}

#[test]
fn a_slow_tool_reads_its_delay() {
    // the mock answers every tools/call 2 ms late: no latency can read less than that, and the
    // median stays near it (a loose bound: this asserts what is measured, not how fast)
    let (port, _) = mock::spawn(MockOptions {
        delay_us: 2000,
        ..MockOptions::default()
    });
    let e = engine(http(port));
    let rows = run_for(&e, 4, 0.6);
    let r = row(&e, &rows, "tools/call:echo").expect("row");
    let mut seen = 0;
    let mut p50 = 0;
    for &(us, n) in &r.buckets {
        seen += n;
        if seen * 2 >= r.num {
            p50 = us;
            break;
        }
    }
    assert!(r.failures == 0 && r.num > 100);
    assert!(r.min_ms.is_some_and(|m| m >= 2.0), "{:?}", r.min_ms);
    assert!((2000..50_000).contains(&p50), "p50 {p50} µs");
}

#[test]
fn mixed_stream_items_time_their_events_and_only_theirs() {
    let opts = MockOptions {
        sse: true,
        ..MockOptions::default()
    };
    let (port, _) = mock::spawn(opts);
    let tool = |name: &str, arguments: JsonObject, stream: bool| MixItem {
        stream,
        ..MixItem::new(
            MixCall::Tool {
                name: name.into(),
                arguments,
            },
            1,
        )
    };
    let e = engine(Settings {
        family: Family::Mixed,
        mix: vec![
            tool("echo", text("s"), true),
            tool("plain", JsonObject::new(), false),
        ],
        ..http(port)
    });
    let rows = run_for(&e, 3, 0.5);
    let (calls, failed) = count(&e, &rows, "tools/call:echo");
    let (lists, list_failed) = count(&e, &rows, "tools/call:plain");
    assert!(calls > 10 && lists > 10, "{calls} calls, {lists} lists");
    assert_eq!((failed, list_failed), (0, 0));
    // every stream call's reply is an SSE event: one first-event per stream call, none for the plain calls
    assert_eq!(count(&e, &rows, "sse:first-event"), (calls, 0));
}

/// The (µs, count) buckets of every raw row named `name`, added up.
fn all_buckets(
    e: &Engine,
    rows: &[Row],
    name: &str,
    pick: fn(&Row) -> &Vec<(u64, u64)>,
) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| e.name(r.name) == name) {
        out.extend(pick(r).iter().copied());
    }
    out.sort_unstable();
    out
}

fn total(b: &[(u64, u64)]) -> u64 {
    b.iter().map(|x| x.1).sum()
}

fn median(b: &[(u64, u64)]) -> u64 {
    let n = total(b);
    let mut seen = 0;
    for &(us, c) in b {
        seen += c;
        if seen * 2 >= n {
            return us;
        }
    }
    0
}

#[test]
fn open_model_keeps_service_time_and_send_lag_apart() {
    // one session for twice the rate it can carry (each call takes >= 5 ms): arrivals queue,
    // so the latency from the intended time grows while the service time stays the tool's
    let (port, _) = mock::spawn(MockOptions {
        delay_us: 5000,
        ..MockOptions::default()
    });
    let e = engine(Settings {
        rate: Some(400.0),
        ..http(port)
    });
    e.set_users(1);
    std::thread::sleep(Duration::from_millis(800));
    let mut rows = e.drain();
    e.stop(Duration::from_secs(2));
    rows.extend(e.drain());
    let name = "tools/call:echo";
    let num: u64 = rows
        .iter()
        .filter(|r| e.name(r.name) == name)
        .map(|r| r.num)
        .sum();
    let latency = all_buckets(&e, &rows, name, |r| &r.buckets);
    let service = all_buckets(&e, &rows, name, |r| &r.service_buckets);
    let lag = all_buckets(&e, &rows, name, |r| &r.lag_buckets);
    assert!(num > 20, "{num} calls");
    // one service time and one send lag per request, nothing else
    assert_eq!(total(&service), num);
    assert_eq!(total(&lag), num);
    // the service time is the server's: at least the tool's 5 ms, far below the queueing
    assert!(service[0].0 >= 5000, "service min {} µs", service[0].0);
    let (lat_p50, svc_p50, lag_max) = (
        median(&latency),
        median(&service),
        lag.last().expect("lag").0,
    );
    assert!(svc_p50 < 50_000, "service p50 {svc_p50} µs");
    assert!(
        lag_max > 100_000,
        "send lag max {lag_max} µs: the backlog shows"
    );
    assert!(
        lat_p50 > svc_p50,
        "latency p50 {lat_p50} µs vs service {svc_p50} µs"
    );
    assert!(e.status().late > 0);
    // the closed model records neither
    let (port, _) = mock::spawn(MockOptions::default());
    let e = engine(http(port));
    let rows = run_for(&e, 2, 0.3);
    assert!(rows
        .iter()
        .all(|r| r.service_buckets.is_empty() && r.lag_buckets.is_empty()));
}

#[test]
fn iterations_bound_the_run_and_hold_keeps_its_sessions() {
    // churn: exactly `iterations` cycles, a progress event every 50, the cycle row
    let (port, open) = mock::spawn(MockOptions::default());
    let e = engine(Settings {
        family: Family::SessionChurn,
        handshake_call: false,
        cycle_latency: true,
        iterations: Some(200),
        progress_every: Some(50),
        ..http(port)
    });
    e.set_users(4);
    let t0 = Instant::now();
    while e.status().iterations < 200 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    let rows = run_for(&e, 4, 0.0);
    assert_eq!(e.status().iterations, 200);
    assert_eq!(count(&e, &rows, "cycle"), (200, 0));
    assert_eq!(count(&e, &rows, "initialize"), (200, 0));
    assert_eq!(count(&e, &rows, "tools/call:echo (first)"), (0, 0));
    let progress: Vec<String> = e
        .events()
        .into_iter()
        .filter(|ev| ev.0 == "progress")
        .map(|ev| ev.1)
        .collect();
    assert_eq!(progress, ["50", "100", "150", "200"]);
    assert_eq!(open.load(Ordering::Relaxed), 0);
    // hold: 30 sessions over 3 connections, kept until stop, then deleted
    let (port, open) = mock::spawn(MockOptions::default());
    let e = engine(Settings {
        family: Family::Hold,
        iterations: Some(30),
        ..http(port)
    });
    e.set_users(3);
    let t0 = Instant::now();
    while e.status().iterations < 30 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = e.status();
    assert_eq!((s.held, s.established), (30, 30));
    assert_eq!(open.load(Ordering::Relaxed), 30);
    e.add_iterations(5);
    let t0 = Instant::now();
    while e.status().held < 35 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(open.load(Ordering::Relaxed), 35);
    e.stop(Duration::from_secs(5));
    let rows = e.drain();
    assert_eq!(count(&e, &rows, "DELETE"), (35, 0));
    assert_eq!(open.load(Ordering::Relaxed), 0);
    assert_eq!(e.status().connections, 3);
    assert_eq!(e.versions(), vec![("2025-11-25".to_string(), 35)]);
}

/// `sse_streaming` against the mock on `port`, its `echo` as the stream tool.
fn streaming(port: u16) -> Settings {
    Settings {
        family: Family::SseStreaming,
        stream_tool: "echo".into(),
        ..http(port)
    }
}

#[test]
fn sse_streaming_holds_the_get_stream_beside_its_calls() {
    // the mock answers GET with 405: one `GET:405` per session, never asked again
    let (port, _) = mock::spawn(MockOptions {
        sse: true,
        ..MockOptions::default()
    });
    let e = engine(streaming(port));
    let rows = run_for(&e, 2, 0.5);
    let (calls, failed) = count(&e, &rows, "tools/call:echo");
    assert!(calls > 10 && failed == 0, "{calls} calls, {failed} failed");
    assert_eq!(count(&e, &rows, "GET:405"), (2, 0));
    assert_eq!(count(&e, &rows, "GET:open"), (0, 0));

    // a GET stream with a priming event (no data) and 5 events 20 ms apart, then held: one
    // GET:open per session, a GET:event per event with data, the calls going on beside it
    let (port, open) = mock::spawn(MockOptions {
        sse: true,
        get_events: 5,
        ..MockOptions::default()
    });
    let e = engine(streaming(port));
    e.set_users(2);
    std::thread::sleep(Duration::from_millis(400));
    // each held stream is a request in flight (beside at most one call per session)
    let s = e.status();
    assert!((2..=4).contains(&s.inflight), "{} in flight", s.inflight);
    let rows = run_for(&e, 2, 0.2);
    assert_eq!(count(&e, &rows, "GET:open"), (2, 0), "one per session");
    assert_eq!(count(&e, &rows, "GET:event"), (10, 0));
    let gaps = row(&e, &rows, "GET:event").expect("row");
    assert!(gaps.min_ms.is_some_and(|m| m >= 15.0), "{:?}", gaps.min_ms);
    let (calls, failed) = count(&e, &rows, "tools/call:echo");
    assert!(calls > 100 && failed == 0, "{calls} calls, {failed} failed");
    // the streams were dropped at the stop (not failures), then the sessions DELETEd
    let s = e.status();
    assert_eq!(s.inflight, 0);
    assert_eq!(
        s.connections, 4,
        "the sessions' connections and the streams'"
    );
    assert_eq!(count(&e, &rows, "DELETE"), (2, 0));
    assert_eq!(open.load(Ordering::Relaxed), 0);

    // a server that ends the stream after one event: opened again, at most once a second
    let (port, _) = mock::spawn(MockOptions {
        sse: true,
        get_events: 1,
        get_ends: true,
        ..MockOptions::default()
    });
    let e = engine(streaming(port));
    let rows = run_for(&e, 2, 1.5);
    let (opened, failed) = count(&e, &rows, "GET:open");
    assert!((3..=4).contains(&opened) && failed == 0, "{opened} opens");
    assert_eq!(count(&e, &rows, "GET:event").1, 0);

    // hold_stream off: the calls alone
    let e = engine(Settings {
        hold_stream: false,
        ..streaming(port)
    });
    let rows = run_for(&e, 2, 0.2);
    assert!(count(&e, &rows, "tools/call:echo").0 > 10);
    assert!(rows.iter().all(|r| !e.name(r.name).starts_with("GET:")));
}
