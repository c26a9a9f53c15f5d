//! `handshakes`: each connection loops initialize, notifications/initialized, DELETE; complete
//! cycles per second and per-phase latency over the window after the warm-up.

use std::rc::Rc;
use std::time::Instant;

use serde_json::json;

use super::{
    common_json, merge, note_failure, open_session, pct, round1, round3, ConnTally, Outcome, Run,
    MAX_ITERATIONS,
};
use crate::http::Conn;
use crate::mcp::{self, Phase, Scratch};
use crate::stats::{cpu_json, process_cpu, server_cpu_json, summary as hist_summary, Cpu};

pub async fn run(run: Rc<Run>) -> Outcome {
    let c = run.opts.connections;
    let measure_start = Instant::now() + run.opts.warmup;
    let end = (measure_start + run.opts.duration).min(run.deadline);
    let mut tasks = Vec::with_capacity(c);
    for _ in 0..c {
        let run = run.clone();
        tasks.push(tokio::task::spawn_local(async move {
            let in_window = |t: Instant| t >= measure_start && t < end;
            let mut conn = Conn::new(run.proto.target.addr);
            let mut scratch = Scratch::default();
            let mut id: i64 = 0;
            for _ in 0..MAX_ITERATIONS {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                id += 1;
                let Some(session) =
                    open_session(&mut conn, &run, &mut scratch, id, true, in_window).await
                else {
                    continue;
                };
                let t1 = Instant::now();
                match mcp::delete(&mut conn, &run.proto, &session).await {
                    Ok(()) => {
                        let t2 = Instant::now();
                        let mut stats = run.stats.borrow_mut();
                        stats.ok(Phase::Delete, t2 - t1, in_window(t2));
                        stats.cycle(t2 - t0, in_window(t2));
                    }
                    Err(f) => note_failure(&run.stats, &f, in_window(Instant::now())).await,
                }
            }
            conn
        }));
    }
    let pids = &run.opts.server_pids;
    tokio::time::sleep_until(measure_start.into()).await;
    let (cpu_start, server_start) = (Cpu::now(), process_cpu(pids));
    tokio::time::sleep_until(end.into()).await;
    let (cpu_end, server_end) = (Cpu::now(), process_cpu(pids));
    let mut tally = ConnTally::default();
    for task in tasks {
        match task.await {
            Ok(conn) => tally.add(&conn),
            Err(e) => run
                .stats
                .borrow_mut()
                .fail_kind(format!("task failed: {e}")),
        }
    }
    let window = end.saturating_duration_since(measure_start);
    let secs = window.as_secs_f64();
    let stats = run.stats.borrow();
    let rate = if secs > 0.0 {
        stats.cycles as f64 / secs
    } else {
        0.0
    };
    let (cpu, cpu_detail) = cpu_json(run.started, Some((cpu_start, cpu_end, window)));
    let mut summary = run.header("summary");
    summary["connections_requested"] = json!(c);
    summary["warmup_seconds"] = json!(run.opts.warmup.as_secs_f64());
    summary["window_seconds"] = json!(round3(secs));
    summary["handshakes"] = json!(stats.cycles);
    summary["handshakes_total"] = json!(stats.cycles_total);
    summary["handshakes_per_second"] = json!(round1(rate));
    summary["cycle_latency_us"] = hist_summary(&stats.cycle_latency);
    merge(&mut summary, common_json(&stats, &tally));
    summary["generator_cpu_seconds"] = json!(cpu);
    summary["generator_cpu"] = cpu_detail;
    let cut_short = window < run.opts.duration;
    summary["cut_short"] = json!(cut_short);
    if !pids.is_empty() {
        summary["server_cpu"] =
            server_cpu_json(pids, server_start, server_end, window, stats.cycles);
    }
    let lat = &summary["latency_us"];
    let human = format!(
        "handshakes: {:.0} cycles/s over {:.1} s ({} connections), initialize p50 {} p99 {}, DELETE p99 {}, {} failures, generator CPU {:.2} s",
        rate,
        secs,
        c,
        pct(lat, "initialize", "p50"),
        pct(lat, "initialize", "p99"),
        pct(lat, "delete", "p99"),
        stats.failures_total(),
        cpu,
    );
    Outcome {
        summary,
        human,
        cut_short,
    }
}
