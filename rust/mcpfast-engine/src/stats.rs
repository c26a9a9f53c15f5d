//! Per-thread statistics: windows (swapped out by `drain`) and cumulative histograms.
//!
//! Each engine thread owns one `ThreadStats` behind its own mutex. The thread locks it once
//! per completed request (uncontended: a few ns); `drain` locks it just long enough to swap the
//! window for an empty one. Latencies are µs from the monotonic clock; the epoch second of a
//! completion comes from one wall-clock offset taken at engine start (`Clock`).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;

/// Histogram range: 1 µs .. 1 h, 3 significant digits (values above are clamped).
const HIST_MAX_US: u64 = 3_600_000_000;
const SIGFIG: u8 = 3;

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, SIGFIG).expect("constant, valid histogram bounds")
}

/// Monotonic time to wall-clock epoch seconds, with one offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    mono0: Instant,
    wall0: f64,
    wall0_ns: u128,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    pub(crate) fn new() -> Clock {
        let mono0 = Instant::now();
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Clock {
            mono0,
            wall0: since_epoch.as_secs_f64(),
            wall0_ns: since_epoch.as_nanos(),
        }
    }

    pub(crate) fn wall(&self, at: Instant) -> f64 {
        self.wall0 + at.saturating_duration_since(self.mono0).as_secs_f64()
    }

    /// `at` on the system clock, in ns since the epoch (exact: a grid of µs periods on it
    /// stays where it is, which an f64 of seconds would not).
    pub(crate) fn wall_ns(&self, at: Instant) -> u128 {
        self.wall0_ns + at.saturating_duration_since(self.mono0).as_nanos()
    }
}

/// One (request_type, name) row of a window.
#[derive(Debug, Clone)]
struct Entry {
    num: u64,
    failures: u64,
    total_us: u64,
    min_us: u64,
    max_us: u64,
    content_length: u64,
    /// Every request (successes and failures), as Locust's response times are.
    hist: Histogram<u64>,
    /// The failed requests only (a subset of `hist`), per failure reason (the reasons of
    /// `errors`), so a dashboard can name each kind of failure with its own latencies.
    failed_by_reason: Vec<(String, Box<Histogram<u64>>)>,
    /// (epoch second of completion, requests, failures), ascending.
    per_second: Vec<(i64, u64, u64)>,
    last_ts: f64,
    /// (reason, count): few distinct reasons, so a list.
    errors: Vec<(String, u64)>,
    /// Open model only (made on the first such request): the service time (from the actual
    /// send to the end) and the send lag (actual send minus intended send time), µs.
    service: Option<Box<Histogram<u64>>>,
    lag: Option<Box<Histogram<u64>>>,
}

impl Entry {
    fn new() -> Entry {
        Entry {
            num: 0,
            failures: 0,
            total_us: 0,
            min_us: u64::MAX,
            max_us: 0,
            content_length: 0,
            hist: new_hist(),
            failed_by_reason: Vec::new(),
            per_second: Vec::new(),
            last_ts: 0.0,
            errors: Vec::new(),
            service: None,
            lag: None,
        }
    }

    fn add_second(&mut self, sec: i64, n: u64, f: u64) {
        match self.per_second.last_mut() {
            Some(last) if last.0 == sec => {
                last.1 += n;
                last.2 += f;
            }
            Some(last) if last.0 < sec => self.per_second.push((sec, n, f)),
            None => self.per_second.push((sec, n, f)),
            Some(_) => match self.per_second.binary_search_by_key(&sec, |e| e.0) {
                Ok(i) => {
                    self.per_second[i].1 += n;
                    self.per_second[i].2 += f;
                }
                Err(i) => self.per_second.insert(i, (sec, n, f)),
            },
        }
    }

    fn add_error(&mut self, reason: &str, n: u64) {
        if let Some(e) = self.errors.iter_mut().find(|e| e.0 == reason) {
            e.1 += n;
        } else {
            self.errors.push((reason.to_string(), n));
        }
    }

    fn failed_hist_of(&mut self, reason: &str) -> &mut Histogram<u64> {
        let i = match self.failed_by_reason.iter().position(|e| e.0 == reason) {
            Some(i) => i,
            None => {
                self.failed_by_reason
                    .push((reason.to_string(), Box::new(new_hist())));
                self.failed_by_reason.len() - 1
            }
        };
        &mut self.failed_by_reason[i].1
    }

    /// Merge another window's entry into this one (exact: HDR add).
    fn merge(&mut self, other: &Entry) {
        self.num += other.num;
        self.failures += other.failures;
        self.total_us += other.total_us;
        self.min_us = self.min_us.min(other.min_us);
        self.max_us = self.max_us.max(other.max_us);
        self.content_length += other.content_length;
        let _ = self.hist.add(&other.hist);
        for (reason, h) in &other.failed_by_reason {
            let _ = self.failed_hist_of(reason).add(&**h);
        }
        for &(s, n, f) in &other.per_second {
            self.add_second(s, n, f);
        }
        self.last_ts = self.last_ts.max(other.last_ts);
        for (r, n) in &other.errors {
            self.add_error(r, *n);
        }
        merge_opt(&mut self.service, &other.service);
        merge_opt(&mut self.lag, &other.lag);
    }
}

fn merge_opt(mine: &mut Option<Box<Histogram<u64>>>, other: &Option<Box<Histogram<u64>>>) {
    if let Some(o) = other {
        match mine {
            Some(m) => {
                let _ = m.add(&**o);
            }
            None => *mine = Some(o.clone()),
        }
    }
}

/// How many failure samples one thread keeps (the first per (name, reason)).
const MAX_SAMPLES: usize = 64;

/// One thread's counts since the last drain, indexed by name id.
#[derive(Debug, Default)]
pub(crate) struct Window {
    entries: Vec<Option<Box<Entry>>>,
}

/// Everything one engine thread records.
#[derive(Debug, Default)]
pub(crate) struct ThreadStats {
    pub(crate) window: Window,
    /// Cumulative µs histograms since start or reset: successes, and failures.
    pub(crate) cum_ok: Vec<Option<Box<Histogram<u64>>>>,
    pub(crate) cum_fail: Vec<Option<Box<Histogram<u64>>>>,
    /// The start of the first reply that failed its check, per (name, reason), since start.
    pub(crate) samples: Vec<(usize, String, String)>,
    /// Protocol versions the server chose (handshake era), with how many sessions each.
    pub(crate) versions: Vec<(String, u64)>,
}

fn slot<T>(v: &mut Vec<Option<Box<T>>>, i: usize, make: impl FnOnce() -> T) -> &mut T {
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    v[i].get_or_insert_with(|| Box::new(make()))
}

impl ThreadStats {
    /// Record one completed request: `latency_us`, failure reason if it failed, reply length,
    /// and its wall-clock completion time.
    pub(crate) fn record(
        &mut self,
        name: usize,
        latency_us: u64,
        failure: Option<&str>,
        content_length: u64,
        wall: f64,
    ) {
        let us = latency_us.clamp(1, HIST_MAX_US);
        let e = slot(&mut self.window.entries, name, Entry::new);
        e.num += 1;
        e.total_us += us;
        e.min_us = e.min_us.min(us);
        e.max_us = e.max_us.max(us);
        e.content_length += content_length;
        let _ = e.hist.record(us);
        let failed = u64::from(failure.is_some());
        e.failures += failed;
        e.add_second(wall.floor() as i64, 1, failed);
        if wall > e.last_ts {
            e.last_ts = wall;
        }
        if let Some(reason) = failure {
            e.add_error(reason, 1);
            let _ = e.failed_hist_of(reason).record(us);
            let _ = slot(&mut self.cum_fail, name, new_hist).record(us);
        } else {
            let _ = slot(&mut self.cum_ok, name, new_hist).record(us);
        }
    }

    /// Open model: the service time and send lag of one completed request of row `name`
    /// (recorded with `record`, which has its latency from the intended send time).
    pub(crate) fn record_open(&mut self, name: usize, service_us: u64, lag_us: u64) {
        let e = slot(&mut self.window.entries, name, Entry::new);
        let _ = e
            .service
            .get_or_insert_with(|| Box::new(new_hist()))
            .record(service_us.clamp(1, HIST_MAX_US));
        let _ = e
            .lag
            .get_or_insert_with(|| Box::new(new_hist()))
            .record(lag_us.clamp(1, HIST_MAX_US));
    }

    /// Has a sample for (`name`, `reason`) been kept (or is the list full)?
    pub(crate) fn has_sample(&self, name: usize, reason: &str) -> bool {
        self.samples.len() >= MAX_SAMPLES
            || self.samples.iter().any(|s| s.0 == name && s.1 == reason)
    }

    pub(crate) fn add_sample(&mut self, name: usize, reason: &str, sample: String) {
        if !self.has_sample(name, reason) {
            self.samples.push((name, reason.to_string(), sample));
        }
    }

    pub(crate) fn negotiated(&mut self, version: &str) {
        match self.versions.iter_mut().find(|v| v.0 == version) {
            Some(v) => v.1 += 1,
            None => self.versions.push((version.to_string(), 1)),
        }
    }

    pub(crate) fn take_window(&mut self) -> Window {
        std::mem::take(&mut self.window)
    }

    pub(crate) fn reset_cumulative(&mut self) {
        self.cum_ok.clear();
        self.cum_fail.clear();
    }
}

/// (failure reason, (µs, count) buckets of the requests that failed for it).
pub type ReasonBuckets = Vec<(String, Vec<(u64, u64)>)>;

/// One merged row of a drain, in the contract's shape.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: usize,
    pub num: u64,
    pub failures: u64,
    pub total_ms: f64,
    pub min_ms: Option<f64>,
    pub max_ms: f64,
    pub content_length: u64,
    /// (µs, count): every recorded bucket, at its highest equivalent value.
    pub buckets: Vec<(u64, u64)>,
    /// The same for the failed requests only (a subset of `buckets`).
    pub failed_buckets: Vec<(u64, u64)>,
    /// (reason, its failed requests' buckets): `failed_buckets` split by the reasons of `errors`.
    pub failed_by_reason: ReasonBuckets,
    pub per_second: Vec<(i64, u64, u64)>,
    pub last_ts: f64,
    pub errors: Vec<(String, u64)>,
    /// Open model: (µs, count) of the service time (actual send to end) and of the send lag
    /// (actual minus intended send time) of this window's requests; empty in the closed model.
    pub service_buckets: Vec<(u64, u64)>,
    pub lag_buckets: Vec<(u64, u64)>,
}

/// (value µs, count) for every non-empty bucket.
pub(crate) fn buckets(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| {
            (
                h.highest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
        .collect()
}

/// The buckets of every failed request: the reasons' histograms added up.
fn failed_buckets(by_reason: &[(String, Box<Histogram<u64>>)]) -> Vec<(u64, u64)> {
    let Some((_, first)) = by_reason.first() else {
        return Vec::new();
    };
    let mut all = first.clone();
    for (_, h) in &by_reason[1..] {
        let _ = all.add(&**h);
    }
    buckets(&all)
}

/// Merge per-thread windows into rows, one per name that saw a request.
pub(crate) fn merge_windows(windows: Vec<Window>) -> Vec<Row> {
    let mut merged: Vec<Option<Box<Entry>>> = Vec::new();
    for w in windows {
        for (i, e) in w.entries.into_iter().enumerate() {
            let Some(e) = e else { continue };
            if merged.len() <= i {
                merged.resize_with(i + 1, || None);
            }
            match &mut merged[i] {
                Some(m) => m.merge(&e),
                slot @ None => *slot = Some(e),
            }
        }
    }
    merged
        .into_iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let e = e?;
            (e.num > 0).then(|| Row {
                name: i,
                num: e.num,
                failures: e.failures,
                total_ms: e.total_us as f64 / 1000.0,
                min_ms: (e.num > 0).then(|| e.min_us as f64 / 1000.0),
                max_ms: e.max_us as f64 / 1000.0,
                content_length: e.content_length,
                buckets: buckets(&e.hist),
                failed_buckets: failed_buckets(&e.failed_by_reason),
                failed_by_reason: e
                    .failed_by_reason
                    .iter()
                    .map(|(reason, h)| (reason.clone(), buckets(h)))
                    .collect(),
                per_second: e.per_second.clone(),
                last_ts: e.last_ts,
                errors: e.errors.clone(),
                service_buckets: e.service.as_deref().map(buckets).unwrap_or_default(),
                lag_buckets: e.lag.as_deref().map(buckets).unwrap_or_default(),
            })
        })
        .collect()
}

/// Merge cumulative histograms across threads: (name id, failed, histogram).
pub(crate) fn merge_cumulative(all: &[&ThreadStats]) -> Vec<(usize, bool, Histogram<u64>)> {
    let mut out: Vec<(usize, bool, Histogram<u64>)> = Vec::new();
    for (failed, pick) in [(false, 0), (true, 1)] {
        let mut acc: Vec<Option<Histogram<u64>>> = Vec::new();
        for t in all {
            let v = if pick == 0 { &t.cum_ok } else { &t.cum_fail };
            for (i, h) in v.iter().enumerate() {
                let Some(h) = h else { continue };
                if acc.len() <= i {
                    acc.resize_with(i + 1, || None);
                }
                match &mut acc[i] {
                    Some(a) => {
                        let _ = a.add(&**h);
                    }
                    slot @ None => *slot = Some((**h).clone()),
                }
            }
        }
        for (i, h) in acc.into_iter().enumerate() {
            if let Some(h) = h {
                out.push((i, failed, h));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_keeps_its_own_latencies() {
        let mut a = ThreadStats::default();
        let mut b = ThreadStats::default();
        a.record(0, 100, Some("timeout"), 0, 1.0);
        a.record(0, 2000, Some("http 503"), 0, 1.0);
        b.record(0, 100, Some("timeout"), 0, 1.0);
        b.record(0, 50, None, 0, 1.0);
        let rows = merge_windows(vec![a.take_window(), b.take_window()]);
        let r = &rows[0];
        assert_eq!(r.failures, 3);
        assert_eq!(
            r.failed_by_reason,
            vec![
                ("timeout".to_string(), vec![(100, 2)]),
                ("http 503".to_string(), vec![(2000, 1)]),
            ]
        );
        let split: u64 = r
            .failed_by_reason
            .iter()
            .flat_map(|(_, b)| b.iter().map(|x| x.1))
            .sum();
        assert_eq!(split, r.failed_buckets.iter().map(|x| x.1).sum::<u64>());
    }

    #[test]
    fn windows_merge_exactly() {
        let mut a = ThreadStats::default();
        let mut b = ThreadStats::default();
        for i in 0..1000u64 {
            a.record(0, 100 + i, None, 10, 1000.5);
            b.record(
                0,
                5000,
                if i % 10 == 0 { Some("http 500") } else { None },
                0,
                1001.2,
            );
        }
        b.record(1, 7, Some("timeout"), 0, 999.9);
        let rows = merge_windows(vec![a.take_window(), b.take_window()]);
        assert_eq!(rows.len(), 2);
        let r = &rows[0];
        assert_eq!((r.num, r.failures, r.content_length), (2000, 100, 10_000));
        assert_eq!(r.per_second, vec![(1000, 1000, 0), (1001, 1000, 100)]);
        assert_eq!(r.errors, vec![("http 500".to_string(), 100)]);
        assert_eq!(r.buckets.iter().map(|b| b.1).sum::<u64>(), 2000);
        assert_eq!(r.failed_buckets, vec![(5003, 100)]);
        assert_eq!(r.min_ms, Some(0.1));
        assert_eq!(r.max_ms, 5.0);
        assert!((r.last_ts - 1001.2).abs() < 1e-9);
        assert_eq!(
            r.failed_by_reason,
            vec![("http 500".to_string(), vec![(5003, 100)])]
        );
        // windows were taken: the next drain is empty, cumulative histograms stay
        assert!(merge_windows(vec![a.take_window(), b.take_window()]).is_empty());
        let cum = merge_cumulative(&[&a, &b]);
        let ok: u64 = cum.iter().filter(|c| !c.1).map(|c| c.2.len()).sum();
        let failed: u64 = cum.iter().filter(|c| c.1).map(|c| c.2.len()).sum();
        assert_eq!((ok, failed), (1900, 101));
        a.reset_cumulative();
        b.reset_cumulative();
        assert!(merge_cumulative(&[&a, &b]).is_empty());
    }
}
