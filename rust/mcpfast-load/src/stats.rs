//! Counting and timing: per-phase HDR histograms (nanoseconds, reported in µs), failures by
//! kind, and the generator's own CPU time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

use crate::mcp::{Failure, Phase, PHASES};

/// Latency histogram: 1 ns .. 100 s, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("constant histogram bounds are valid")
}

/// Everything a run counts. One per run, shared by its tasks (single thread).
pub struct Stats {
    /// Successful requests per phase: inside the measured window, and in all.
    pub ok: [u64; 4],
    pub ok_total: [u64; 4],
    pub latency: [Histogram<u64>; 4],
    /// Complete cycles (handshakes, churn) inside the window, and their latency.
    pub cycles: u64,
    pub cycles_total: u64,
    pub cycle_latency: Histogram<u64>,
    pub failures: BTreeMap<String, u64>,
    /// The first response seen for each failure kind that had one.
    pub samples: BTreeMap<String, String>,
    pub failures_in_window: u64,
    /// Protocol versions the server chose, with how many sessions each.
    pub versions: BTreeMap<String, u64>,
    /// Sessions opened again after the server answered 404.
    pub reinitialized: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    pub fn new() -> Self {
        Stats {
            ok: [0; 4],
            ok_total: [0; 4],
            latency: [histogram(), histogram(), histogram(), histogram()],
            cycles: 0,
            cycles_total: 0,
            cycle_latency: histogram(),
            failures: BTreeMap::new(),
            samples: BTreeMap::new(),
            failures_in_window: 0,
            versions: BTreeMap::new(),
            reinitialized: 0,
        }
    }

    #[inline]
    pub fn ok(&mut self, phase: Phase, elapsed: Duration, in_window: bool) {
        let i = phase as usize;
        self.ok_total[i] += 1;
        if in_window {
            self.ok[i] += 1;
            self.latency[i].saturating_record(nanos(elapsed));
        }
    }

    #[inline]
    pub fn cycle(&mut self, elapsed: Duration, in_window: bool) {
        self.cycles_total += 1;
        if in_window {
            self.cycles += 1;
            self.cycle_latency.saturating_record(nanos(elapsed));
        }
    }

    pub fn negotiated(&mut self, version: &str) {
        match self.versions.get_mut(version) {
            Some(n) => *n += 1,
            None => {
                self.versions.insert(version.to_owned(), 1);
            }
        }
    }

    #[cold]
    pub fn fail(&mut self, failure: &Failure, in_window: bool) {
        let kind = failure.kind();
        if let Some(sample) = &failure.sample {
            if !self.samples.contains_key(&kind) {
                self.samples.insert(kind.clone(), sample.clone());
            }
        }
        *self.failures.entry(kind).or_insert(0) += 1;
        if in_window {
            self.failures_in_window += 1;
        }
    }

    #[cold]
    pub fn fail_kind(&mut self, kind: String) {
        *self.failures.entry(kind).or_insert(0) += 1;
    }

    pub fn failures_total(&self) -> u64 {
        self.failures.values().sum()
    }

    pub fn failures_json(&self) -> Value {
        let by_kind: Map<String, Value> = self
            .failures
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let samples: Map<String, Value> = self
            .samples
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        json!({"total": self.failures_total(), "in_window": self.failures_in_window, "by_kind": by_kind, "samples": samples})
    }

    /// Latency summaries (µs) of the phases that saw any request in the window.
    pub fn latency_json(&self) -> Value {
        let mut out = Map::new();
        for phase in PHASES {
            let h = &self.latency[phase as usize];
            if !h.is_empty() {
                out.insert(phase.name().into(), summary(h));
            }
        }
        Value::Object(out)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

fn us(ns: u64) -> f64 {
    (ns as f64 / 10.0).round() / 100.0
}

/// Count, mean and percentiles in µs of one histogram.
pub fn summary(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return json!({"count": 0});
    }
    json!({
        "count": h.len(),
        "min": us(h.min()),
        "mean": (h.mean() / 10.0).round() / 100.0,
        "p50": us(h.value_at_quantile(0.50)),
        "p90": us(h.value_at_quantile(0.90)),
        "p99": us(h.value_at_quantile(0.99)),
        "p99_9": us(h.value_at_quantile(0.999)),
        "max": us(h.max()),
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
