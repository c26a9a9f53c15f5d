//! `churn`: create-and-delete cycles (initialize, initialized, DELETE) over C connections, with
//! a JSON progress line every `--report-every` completed cycles so a driver can sample the
//! server's memory at those points.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use serde_json::json;

use super::{
    common_json, emit, merge, note_failure, open_session, pct, round1, round3, ConnTally, Outcome,
    Run,
};
use crate::http::Conn;
use crate::mcp::{self, Phase, Scratch};
use crate::stats::{cpu_json, summary as hist_summary};

pub async fn run(run: Rc<Run>) -> Outcome {
    let cycles = run.opts.cycles;
    let every = run.opts.report_every;
    let c = run.opts.connections;
    let next = Rc::new(Cell::new(0u64));
    let done = Rc::new(Cell::new(0u64));
    let t_start = Instant::now();
    let mut tasks = Vec::with_capacity(c);
    for _ in 0..c {
        let run = run.clone();
        let next = next.clone();
        let done = done.clone();
        tasks.push(tokio::task::spawn_local(async move {
            let mut conn = Conn::new(run.proto.target.addr);
            let mut scratch = Scratch::default();
            for _ in 0..cycles {
                let i = next.get();
                if i >= cycles || run.past_deadline() {
                    break;
                }
                next.set(i + 1);
                let t0 = Instant::now();
                let Some(session) =
                    open_session(&mut conn, &run, &mut scratch, 1, true, |_| true).await
                else {
                    finish_cycle(&run, &done, every, t_start);
                    continue;
                };
                let t1 = Instant::now();
                match mcp::delete(&mut conn, &run.proto, &session).await {
                    Ok(()) => {
                        let t2 = Instant::now();
                        let mut stats = run.stats.borrow_mut();
                        stats.ok(Phase::Delete, t2 - t1, true);
                        stats.cycle(t2 - t0, true);
                    }
                    Err(f) => note_failure(&run.stats, &f, true).await,
                }
                finish_cycle(&run, &done, every, t_start);
            }
            conn
        }));
    }
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
    let elapsed = t_start.elapsed().as_secs_f64();
    let stats = run.stats.borrow();
    let attempted = done.get();
    let rate = if elapsed > 0.0 {
        stats.cycles_total as f64 / elapsed
    } else {
        0.0
    };
    let (cpu, cpu_detail) = cpu_json(run.started, None);
    let mut summary = run.header("summary");
    summary["cycles_requested"] = json!(cycles);
    summary["cycles_attempted"] = json!(attempted);
    summary["cycles_ok"] = json!(stats.cycles_total);
    summary["connections_requested"] = json!(c);
    summary["elapsed_seconds"] = json!(round3(elapsed));
    summary["cycles_per_second"] = json!(round1(rate));
    summary["cycle_latency_us"] = hist_summary(&stats.cycle_latency);
    merge(&mut summary, common_json(&stats, &tally));
    summary["generator_cpu_seconds"] = json!(cpu);
    summary["generator_cpu"] = cpu_detail;
    let cut_short = attempted < cycles;
    summary["cut_short"] = json!(cut_short);
    let lat = &summary["latency_us"];
    let human = format!(
        "churn: {} of {} cycles ok in {:.1} s ({:.0}/s, {} connections), initialize p99 {}, DELETE p99 {}, {} failures, generator CPU {:.2} s",
        stats.cycles_total,
        cycles,
        elapsed,
        rate,
        c,
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

/// Count a finished cycle (ok or not); every `every` cycles print a progress line.
fn finish_cycle(run: &Run, done: &Cell<u64>, every: u64, t_start: Instant) {
    let d = done.get() + 1;
    done.set(d);
    if d % every == 0 {
        let stats = run.stats.borrow();
        let elapsed = t_start.elapsed().as_secs_f64();
        let mut line = run.header("progress");
        line["cycles_done"] = json!(d);
        line["cycles_ok"] = json!(stats.cycles_total);
        line["failures"] = json!(stats.failures_total());
        line["elapsed_seconds"] = json!(round3(elapsed));
        line["cycles_per_second"] = json!(round1(if elapsed > 0.0 {
            d as f64 / elapsed
        } else {
            0.0
        }));
        emit(&line);
    }
}
