//! What the front adds to the engine's rows: the rows of a run summed per phase (inside and
//! outside the measured window, [`Tally`]), µs summaries of HDR histograms, and CPU time (this
//! process, and the server's from `/proc/PID/stat`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mcpfast_engine::rows::FixedRow;
use mcpfast_engine::stats::{new_hist, Row};
use serde_json::{json, Map, Value};

/// The summary's phase names, in their order (the engine's rows map onto them).
pub const PHASES: [&str; 5] = [
    "initialize",
    "notifications/initialized",
    "server/discover",
    "tools/call",
    "delete",
];

/// The summary phase of an engine row; `None` for rows the front does not report as requests.
pub fn phase_of(name: usize) -> Option<usize> {
    match FixedRow::from_id(name)? {
        FixedRow::Initialize => Some(0),
        FixedRow::Initialized => Some(1),
        FixedRow::Discover => Some(2),
        FixedRow::Call | FixedRow::First => Some(3),
        FixedRow::Delete => Some(4),
        _ => None,
    }
}

/// One phase (or the cycle row): successes and failures, in all and in the window; the
/// window's µs histograms of successes and, in the open model, send lag and service time.
pub struct Counted {
    pub ok: u64,
    pub ok_total: u64,
    pub failed: u64,
    pub failed_total: u64,
    pub latency: Histogram<u64>,
    pub service: Histogram<u64>,
    pub lag: Histogram<u64>,
}

impl Default for Counted {
    fn default() -> Self {
        Counted {
            ok: 0,
            ok_total: 0,
            failed: 0,
            failed_total: 0,
            latency: new_hist(),
            service: new_hist(),
            lag: new_hist(),
        }
    }
}

/// Drained rows of a run, added up.
#[derive(Default)]
pub struct Tally {
    pub phases: [Counted; 5],
    pub cycle: Counted,
    /// "phase: reason" -> count, over the run and inside the window.
    pub failures: BTreeMap<String, u64>,
    pub failures_in_window: u64,
}

fn record_buckets(h: &mut Histogram<u64>, buckets: &[(u64, u64)], minus: &[(u64, u64)]) {
    for &(us, n) in buckets {
        let f = minus.iter().find(|b| b.0 == us).map_or(0, |b| b.1);
        if n > f {
            let _ = h.record_n(us, n - f);
        }
    }
}

impl Tally {
    /// Add drained rows; `in_window`: they are the measured window's.
    pub fn add(&mut self, rows: &[Row], in_window: bool) {
        for r in rows {
            let (c, phase) = match phase_of(r.name) {
                Some(i) => (&mut self.phases[i], PHASES[i]),
                None if r.name == FixedRow::Cycle.id() => (&mut self.cycle, "cycle"),
                None => continue,
            };
            let ok = r.num - r.failures;
            c.ok_total += ok;
            c.failed_total += r.failures;
            for (reason, n) in &r.errors {
                *self
                    .failures
                    .entry(format!("{phase}: {reason}"))
                    .or_insert(0) += n;
            }
            if in_window {
                c.ok += ok;
                c.failed += r.failures;
                self.failures_in_window += r.failures;
                record_buckets(&mut c.latency, &r.buckets, &r.failed_buckets);
                record_buckets(&mut c.service, &r.service_buckets, &[]);
                record_buckets(&mut c.lag, &r.lag_buckets, &[]);
            }
        }
    }

    pub fn failures_total(&self) -> u64 {
        self.failures.values().sum()
    }

    /// The `failures` block: total, in the window, by kind, and the first reply of each kind
    /// that had one (`samples`: the engine's, as (row name, reason, text)).
    pub fn failures_json(&self, samples: &[(String, String, String)]) -> Value {
        let by_kind: Map<String, Value> = self
            .failures
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let mut kept = Map::new();
        for (name, reason, text) in samples {
            let phase = match name.as_str() {
                "DELETE" => "delete",
                n if n.starts_with("tools/call") => "tools/call",
                n => n,
            };
            kept.entry(format!("{phase}: {reason}"))
                .or_insert_with(|| json!(text));
        }
        json!({"total": self.failures_total(), "in_window": self.failures_in_window, "by_kind": by_kind, "samples": kept})
    }

    /// µs summaries of the phases that saw a success in the window.
    pub fn latency_json(&self) -> Value {
        let mut out = Map::new();
        for (i, c) in self.phases.iter().enumerate() {
            if !c.latency.is_empty() {
                out.insert(PHASES[i].into(), summary(&c.latency));
            }
        }
        Value::Object(out)
    }

    /// Per phase: successes in the window and in all.
    pub fn requests_json(&self) -> Value {
        let mut out = Map::new();
        for (i, c) in self.phases.iter().enumerate() {
            if c.ok_total > 0 {
                out.insert(
                    PHASES[i].into(),
                    json!({"ok_in_window": c.ok, "ok_total": c.ok_total}),
                );
            }
        }
        Value::Object(out)
    }
}

/// Count, mean and percentiles (µs) of one µs histogram.
pub fn summary(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return json!({"count": 0});
    }
    json!({
        "count": h.len(),
        "min": h.min(),
        "mean": (h.mean() * 100.0).round() / 100.0,
        "p50": h.value_at_quantile(0.50),
        "p90": h.value_at_quantile(0.90),
        "p99": h.value_at_quantile(0.99),
        "p99_9": h.value_at_quantile(0.999),
        "max": h.max(),
    })
}

/// User and system CPU seconds used by this process so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    pub user: f64,
    pub system: f64,
}

impl Cpu {
    pub fn now() -> Cpu {
        match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
            Ok(u) => {
                let secs =
                    |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
                Cpu {
                    user: secs(u.user_time()),
                    system: secs(u.system_time()),
                }
            }
            Err(_) => Cpu::default(),
        }
    }

    pub fn total(&self) -> f64 {
        self.user + self.system
    }

    pub fn since(&self, earlier: &Cpu) -> Cpu {
        Cpu {
            user: self.user - earlier.user,
            system: self.system - earlier.system,
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// CPU seconds (user + system) that the processes `pids` have used so far, added up
/// (`/proc/PID/stat`); `None` when there are none or one cannot be read.
pub fn process_cpu(pids: &[u32]) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    let mut total = 0u64;
    for pid in pids {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        total += proc_stat_ticks(&text)?;
    }
    Some(total as f64 / ticks as f64)
}

/// utime + stime (fields 14 and 15, in clock ticks) of a `/proc/PID/stat` line; the command
/// name (field 2) is in parentheses and may itself hold spaces and parentheses.
fn proc_stat_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11); // `rest` starts at field 3
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The `server_cpu` block: the server's CPU over the measured window, per operation counted
/// in it. `a` and `b` are `process_cpu` read at the window's start and end.
pub fn server_cpu_json(
    pids: &[u32],
    a: Option<f64>,
    b: Option<f64>,
    window: Duration,
    ops: u64,
) -> Value {
    match (a, b) {
        (Some(a), Some(b)) => {
            let used = (b - a).max(0.0);
            let secs = window.as_secs_f64();
            json!({
                "pids": pids,
                "window_seconds": round3(used),
                "share_of_one_core": if secs > 0.0 { round3(used / secs) } else { 0.0 },
                "us_per_operation": if ops > 0 { (used / ops as f64 * 1e7).round() / 10.0 } else { 0.0 },
            })
        }
        _ => json!({"pids": pids, "error": format!("could not read /proc/PID/stat of {pids:?}")}),
    }
}

/// The `generator_cpu_seconds` figure and its breakdown, over the whole run and over a window.
pub fn cpu_json(started: Instant, window: Option<(Cpu, Cpu, Duration)>) -> (f64, Value) {
    let total = Cpu::now();
    let wall = started.elapsed().as_secs_f64();
    let mut detail = json!({
        "user": round3(total.user),
        "system": round3(total.system),
        "wall_seconds": round3(wall),
        "share_of_one_core": if wall > 0.0 { round3(total.total() / wall) } else { 0.0 },
    });
    if let Some((a, b, len)) = window {
        let used = b.since(&a);
        let secs = len.as_secs_f64();
        detail["window_seconds"] = json!(round3(used.total()));
        detail["window_share_of_one_core"] = json!(if secs > 0.0 {
            round3(used.total() / secs)
        } else {
            0.0
        });
    }
    (round3(total.total()), detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_fields_after_the_command_name() {
        // field 2 may hold spaces and parentheses: counting starts after the last ')'
        let line = "4242 (py (thon) x) S 1 4242 4242 0 -1 4194560 9000 0 0 0 1234 567 0 0 20 0 3 0 100 0 0";
        assert_eq!(proc_stat_ticks(line), Some(1234 + 567));
        assert_eq!(proc_stat_ticks("4242 (short"), None);
        assert_eq!(proc_stat_ticks("1 (x) S 1 2"), None);
    }

    #[test]
    fn own_process_cpu_is_readable_and_grows() {
        let pid = [std::process::id()];
        assert_eq!(process_cpu(&[]), None);
        let a = process_cpu(&pid).expect("own /proc stat");
        let mut x = 0u64;
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(60) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let b = process_cpu(&pid).expect("own /proc stat");
        assert!(b >= a);
        let twice = process_cpu(&[pid[0], pid[0]]).expect("own /proc stat");
        assert!(twice >= 2.0 * b);
        let v = server_cpu_json(&pid, Some(1.0), Some(1.5), Duration::from_secs(1), 1000);
        assert_eq!(v["window_seconds"], json!(0.5));
        assert_eq!(v["share_of_one_core"], json!(0.5));
        assert_eq!(v["us_per_operation"], json!(500.0));
        assert!(
            server_cpu_json(&pid, None, Some(1.0), Duration::from_secs(1), 1)["error"].is_string()
        );
    }
}
