//! `calls`: closed-loop tools/call, one request in flight per session, one connection per
//! session; rate and latency over the window after the warm-up.

use std::rc::Rc;
use std::time::Instant;

use serde_json::json;

use super::{
    common_json, delete_all, merge, note_failure, open_session, pct, round1, round3, ConnTally,
    Outcome, Run, MAX_ITERATIONS,
};
use crate::http::Conn;
use crate::mcp::{self, Phase, Scratch, Session};
use crate::stats::{cpu_json, process_cpu, server_cpu_json, Cpu};

struct Worker {
    conn: Conn,
    scratch: Scratch,
    session: Session,
}

pub async fn run(run: Rc<Run>) -> Outcome {
    let n = run.opts.sessions;
    // 1. open every session, each on its own connection, all at once
    let t_open = Instant::now();
    let mut opening = Vec::with_capacity(n);
    for _ in 0..n {
        let run = run.clone();
        opening.push(tokio::task::spawn_local(async move {
            let mut conn = Conn::new(run.proto.target.addr);
            let mut scratch = Scratch::default();
            match open_session(&mut conn, &run, &mut scratch, 1, false, |_| false).await {
                Some(session) => Ok(Worker {
                    conn,
                    scratch,
                    session,
                }),
                None => Err(conn),
            }
        }));
    }
    let mut tally = ConnTally::default();
    let mut workers = Vec::with_capacity(n);
    for task in opening {
        match task.await {
            Ok(Ok(w)) => workers.push(w),
            Ok(Err(conn)) => tally.add(&conn),
            Err(e) => run
                .stats
                .borrow_mut()
                .fail_kind(format!("task failed: {e}")),
        }
    }
    let open_seconds = t_open.elapsed().as_secs_f64();
    let opened = workers.len();

    // 2. warm up, then measure
    let measure_start = Instant::now() + run.opts.warmup;
    let end = (measure_start + run.opts.duration).min(run.deadline);
    let mut looping = Vec::with_capacity(opened);
    for mut w in workers {
        let run = run.clone();
        looping.push(tokio::task::spawn_local(async move {
            let in_window = |t: Instant| t >= measure_start && t < end;
            for _ in 0..MAX_ITERATIONS {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let result =
                    mcp::call(&mut w.conn, &run.proto, &mut w.scratch, &mut w.session).await;
                let t1 = Instant::now();
                match result {
                    Ok(()) => run
                        .stats
                        .borrow_mut()
                        .ok(Phase::Call, t1 - t0, in_window(t1)),
                    Err(f) => {
                        note_failure(&run.stats, &f, in_window(t1)).await;
                        if f.session_gone() && Instant::now() < end {
                            // the server forgot the session: open a new one and go on
                            let id = w.session.next_id;
                            if let Some(s) =
                                open_session(&mut w.conn, &run, &mut w.scratch, id, false, |_| {
                                    false
                                })
                                .await
                            {
                                w.session = s;
                                run.stats.borrow_mut().reinitialized += 1;
                            }
                        }
                    }
                }
            }
            w
        }));
    }
    let pids = &run.opts.server_pids;
    let (cpu_start, cpu_end, server_start, server_end) = if opened > 0 {
        tokio::time::sleep_until(measure_start.into()).await;
        let (a, sa) = (Cpu::now(), process_cpu(pids));
        tokio::time::sleep_until(end.into()).await;
        (a, Cpu::now(), sa, process_cpu(pids))
    } else {
        (Cpu::now(), Cpu::now(), None, None)
    };
    let window = end.saturating_duration_since(measure_start);
    let mut workers = Vec::with_capacity(opened);
    for task in looping {
        match task.await {
            Ok(w) => workers.push(w),
            Err(e) => run
                .stats
                .borrow_mut()
                .fail_kind(format!("task failed: {e}")),
        }
    }

    // 3. DELETE every session
    let mut deleting = Vec::with_capacity(workers.len());
    for mut w in workers {
        let run = run.clone();
        deleting.push(tokio::task::spawn_local(async move {
            let deleted = if w.session.id.is_some() && !run.past_deadline() {
                delete_all(&mut w.conn, &run, std::slice::from_ref(&w.session)).await
            } else {
                0
            };
            (w.conn, deleted)
        }));
    }
    let mut deleted = 0;
    for task in deleting {
        if let Ok((conn, d)) = task.await {
            tally.add(&conn);
            deleted += d;
        }
    }

    let stats = run.stats.borrow();
    let calls = stats.ok[Phase::Call as usize];
    let secs = window.as_secs_f64();
    let rate = if secs > 0.0 { calls as f64 / secs } else { 0.0 };
    let (cpu, cpu_detail) = cpu_json(run.started, Some((cpu_start, cpu_end, window)));
    let cut_short = window < run.opts.duration;
    let mut summary = run.header("summary");
    summary["sessions"] = json!({"requested": n, "opened": opened, "deleted": deleted, "open_seconds": round3(open_seconds)});
    summary["tool"] = json!(run.opts.tool);
    summary["warmup_seconds"] = json!(run.opts.warmup.as_secs_f64());
    summary["window_seconds"] = json!(round3(secs));
    summary["calls"] = json!(calls);
    summary["calls_per_second"] = json!(round1(rate));
    let common = common_json(&stats, &tally);
    merge(&mut summary, common);
    summary["generator_cpu_seconds"] = json!(cpu);
    summary["generator_cpu"] = cpu_detail;
    summary["cut_short"] = json!(cut_short);
    if !pids.is_empty() {
        summary["server_cpu"] = server_cpu_json(pids, server_start, server_end, window, calls);
    }
    let lat = &summary["latency_us"];
    let human = format!(
        "calls: {:.0} calls/s over {:.1} s ({} of {} sessions), p50 {} p99 {} max {}, {} failures, generator CPU {:.2} s ({:.0}% of a core in the window)",
        rate,
        secs,
        opened,
        n,
        pct(lat, "tools/call", "p50"),
        pct(lat, "tools/call", "p99"),
        pct(lat, "tools/call", "max"),
        stats.failures_total(),
        cpu,
        summary["generator_cpu"]["window_share_of_one_core"].as_f64().unwrap_or(0.0) * 100.0,
    );
    Outcome {
        summary,
        human,
        cut_short,
    }
}
