//! `hold`: open N sessions over C connections and keep them; print a JSON line when all are
//! open, wait for a line or end of file on stdin (or the deadline), then DELETE them unless
//! `--no-delete`.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use serde_json::json;

use super::{
    common_json, delete_all, emit, first_of, merge, open_session, pct, round1, round3, ConnTally,
    Outcome, Run,
};
use crate::http::Conn;
use crate::mcp::{Scratch, Session};
use crate::stats::cpu_json;

pub async fn run(run: Rc<Run>) -> Outcome {
    let n = run.opts.sessions;
    let c = run.opts.connections;
    let next = Rc::new(Cell::new(0usize));
    let t_open = Instant::now();
    let mut tasks = Vec::with_capacity(c);
    for _ in 0..c {
        let run = run.clone();
        let next = next.clone();
        tasks.push(tokio::task::spawn_local(async move {
            let mut conn = Conn::new(run.proto.target.addr);
            let mut scratch = Scratch::default();
            let mut held: Vec<Session> = Vec::new();
            // each task takes the next session to open until all N are taken
            for _ in 0..n {
                let i = next.get();
                if i >= n || run.past_deadline() {
                    break;
                }
                next.set(i + 1);
                if let Some(s) =
                    open_session(&mut conn, &run, &mut scratch, 1, true, |_| true).await
                {
                    held.push(s);
                }
            }
            (conn, held)
        }));
    }
    let mut groups: Vec<(Conn, Vec<Session>)> = Vec::with_capacity(c);
    for task in tasks {
        match task.await {
            Ok(g) => groups.push(g),
            Err(e) => run
                .stats
                .borrow_mut()
                .fail_kind(format!("task failed: {e}")),
        }
    }
    let open_seconds = t_open.elapsed().as_secs_f64();
    let held: usize = groups.iter().map(|(_, s)| s.len()).sum();

    let (cpu, cpu_detail) = cpu_json(run.started, None);
    let mut line = run.header("held");
    line["sessions_requested"] = json!(n);
    line["sessions_open"] = json!(held);
    line["open_seconds"] = json!(round3(open_seconds));
    line["opens_per_second"] = json!(round1(if open_seconds > 0.0 {
        held as f64 / open_seconds
    } else {
        0.0
    }));
    {
        let stats = run.stats.borrow();
        line["failures"] = stats.failures_json();
        line["latency_us"] = stats.latency_json();
    }
    line["generator_cpu_seconds"] = json!(cpu);
    line["generator_cpu"] = cpu_detail;
    line["pid"] = json!(std::process::id());
    emit(&line);
    eprintln!("hold: {held} of {n} sessions open in {open_seconds:.2} s; waiting for a line or EOF on stdin");

    // wait for the driver (a line or EOF on stdin), or the hard deadline
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let _ = std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let mut buf = String::new();
            let _ = std::io::stdin().read_line(&mut buf);
            let _ = tx.send(());
        });
    let t_wait = Instant::now();
    let released = first_of(rx, tokio::time::sleep_until(run.deadline.into())).await;
    let held_seconds = t_wait.elapsed().as_secs_f64();

    let t_delete = Instant::now();
    let mut deleted = 0;
    let mut tally = ConnTally::default();
    if run.opts.no_delete {
        for (conn, _) in &groups {
            tally.add(conn);
        }
    } else {
        let run_deletes = Rc::new(Cell::new(0u64));
        let mut tasks = Vec::with_capacity(groups.len());
        for (mut conn, sessions) in groups {
            let run = run.clone();
            let count = run_deletes.clone();
            tasks.push(tokio::task::spawn_local(async move {
                let d = delete_all(&mut conn, &run, &sessions).await;
                count.set(count.get() + d);
                conn
            }));
        }
        for task in tasks {
            if let Ok(conn) = task.await {
                tally.add(&conn);
            }
        }
        deleted = run_deletes.get();
    }
    let delete_seconds = t_delete.elapsed().as_secs_f64();

    let stats = run.stats.borrow();
    let (cpu, cpu_detail) = cpu_json(run.started, None);
    let mut summary = run.header("summary");
    summary["sessions_requested"] = json!(n);
    summary["sessions_open"] = json!(held);
    summary["connections"] = json!(c);
    summary["open_seconds"] = json!(round3(open_seconds));
    summary["held_seconds"] = json!(round3(held_seconds));
    summary["released_by"] = json!(if released { "stdin" } else { "max-time" });
    summary["deleted"] = json!(deleted);
    summary["delete_skipped"] = json!(run.opts.no_delete);
    summary["delete_seconds"] = json!(round3(delete_seconds));
    merge(&mut summary, common_json(&stats, &tally));
    summary["generator_cpu_seconds"] = json!(cpu);
    summary["generator_cpu"] = cpu_detail;
    let cut_short = !released;
    summary["cut_short"] = json!(cut_short);
    let lat = &summary["latency_us"];
    let human = format!(
        "hold: {held} of {n} sessions held {held_seconds:.1} s, {} deleted, initialize p50 {} p99 {}, {} failures, generator CPU {cpu:.2} s",
        if run.opts.no_delete { "none".to_string() } else { deleted.to_string() },
        pct(lat, "initialize", "p50"),
        pct(lat, "initialize", "p99"),
        stats.failures_total(),
    );
    Outcome {
        summary,
        human,
        cut_short,
    }
}
