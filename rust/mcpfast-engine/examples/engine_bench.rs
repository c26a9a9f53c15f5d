//! Drive the engine for a while and print one JSON line: requests/s per row, the engine
//! threads' CPU seconds, and the sessions' RSS. For benchmarks (bench_results/swarm/engine/).
//!
//!   cargo run --release -p mcpfast-engine --example engine_bench -- '<config JSON>' USERS SECONDS [WARMUP]

use std::time::{Duration, Instant};

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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: engine_bench CONFIG_JSON USERS SECONDS [WARMUP]");
        std::process::exit(2);
    }
    let users: usize = args[1].parse().unwrap_or(32);
    let secs: f64 = args[2].parse().unwrap_or(5.0);
    let warmup: f64 = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(1.0);
    let rss0 = rss_kib();
    let e = match Engine::new(args[0].as_bytes()) {
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
