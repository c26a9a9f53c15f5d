//! Drive the engine for a while and print one JSON line: requests/s per row, the engine
//! threads' CPU seconds, and the sessions' RSS. For benchmarks (bench_results/swarm/engine/).
//!
//!   cargo run --release -p mcpfast-engine --example engine_bench -- '<target JSON>' USERS SECONDS [WARMUP]
//!
//! The target is a JSON object with `url` and optionally `arguments` (of the tools/call) and
//! `max_sessions`, as benchmarks/sh/engine.sh writes it; every other setting is the engine's
//! default.

use std::time::{Duration, Instant};

use mcpfast_engine::config::Settings;
use mcpfast_engine::serde_json::{self, Value};
use mcpfast_engine::Engine;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// The engine's settings for the bench's target object.
fn settings(target: &str) -> Result<Settings, String> {
    let Value::Object(target) =
        serde_json::from_str(target).map_err(|e| format!("target: not JSON: {e}"))?
    else {
        return Err("target: not a JSON object".into());
    };
    let mut settings = Settings::default();
    for (key, value) in target {
        match (key.as_str(), value) {
            ("url", Value::String(url)) => settings.url = Some(url),
            ("arguments", Value::Object(arguments)) => settings.arguments = arguments,
            ("max_sessions", Value::Number(n)) => {
                settings.max_sessions = n
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or("target: max_sessions: not a count")?;
            }
            (key, _) => {
                return Err(format!(
                    "target: {key}: not url, arguments or max_sessions of its type"
                ))
            }
        }
    }
    Ok(settings)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: engine_bench TARGET_JSON USERS SECONDS [WARMUP]");
        std::process::exit(2);
    }
    let users: usize = args[1].parse().unwrap_or(32);
    let secs: f64 = args[2].parse().unwrap_or(5.0);
    let warmup: f64 = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(1.0);
    let rss0 = rss_kib();
    let e = match settings(&args[0]).and_then(|s| Engine::new(s.build()?)) {
        Ok(e) => e,
        Err(err) => {
            eprintln!("{err}");
            std::process::exit(2);
        }
    };
    if let Err(err) = e.start() {
        eprintln!("{err}");
        std::process::exit(2);
    }
    e.set_users(users);
    std::thread::sleep(Duration::from_secs_f64(warmup));
    let _ = e.drain();
    let cpu0 = e.status().cpu_s;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let rows = e.drain();
    let wall = t0.elapsed().as_secs_f64();
    let st = e.status();
    let rss = rss_kib();
    e.stop(Duration::from_secs(2));
    let mut per_row = serde_json::Map::new();
    for r in &rows {
        per_row.insert(
            e.name(r.name).to_string(),
            serde_json::json!({"requests": r.num, "failures": r.failures, "per_s": (r.num as f64 / wall).round(),
                "mean_ms": if r.num > 0 { r.total_ms / r.num as f64 } else { 0.0 }}),
        );
    }
    let total: u64 = rows.iter().map(|r| r.num).sum();
    let line = serde_json::json!({
        "users": users, "seconds": wall, "rows": per_row,
        "requests_per_s": (total as f64 / wall).round(),
        "engine_cpu_s": st.cpu_s - cpu0,
        "engine_cpu_share": (st.cpu_s - cpu0) / wall,
        "sessions_open": st.sessions_open,
        "rss_kib_before": rss0, "rss_kib": rss,
        "late": st.late, "dropped": st.dropped,
    });
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}
