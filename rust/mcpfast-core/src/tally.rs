//! The counts a server's short path keeps of the requests it answers, for a metrics page to
//! read when it is scraped: requests by what was answered and its HTTP status, and a histogram
//! of the time each took, in nanoseconds.
//!
//! A tally is a run of 64-bit cells laid out by [`Layout`], written by one process only (the
//! one whose short path answers) and read by any: the cells may be memory the process shares
//! with others (a file each process of a server maps), so that a page served by any of them
//! sums them all. The cells are atomics for that reason; the one writer stores plain values.
//!
//! The layout, in cells: a mark ([`MARK`]), the number of finite bucket bounds `B`, the `B`
//! bounds, then `B + 1` bucket counts (not cumulative; the last one is `+Inf`), the sum of the
//! times, and [`SLOTS`] slots of two cells: a key (what was answered and its status) and its
//! count. A reader skips a key whose count is still 0 (the writer claims a slot before it
//! counts in it).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::admit::TOOLS_CALL_NAME;

/// The first cell of a tally: what a reader checks before it trusts the rest.
pub const MARK: u64 = 0x6d63_7066_7461_6c31; // "mcpftal1"

/// Slots for (answer, status) pairs: the short path answers four things with a handful of
/// statuses each, far fewer than this. The last four are spares, one per answer, for counts
/// that find every other slot taken.
pub const SLOTS: usize = 32;

/// The status a request is counted under once every slot is taken (never in practice: see
/// [`SLOTS`]): counted still, as no status.
pub const NO_STATUS: u16 = 0;

/// What the short path answered, named as a metrics page labels requests (the JSON-RPC method
/// of a POST, the HTTP method of a DELETE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    ToolsCall = 1,
    Initialize = 2,
    Initialized = 3,
    Delete = 4,
}

impl Answered {
    pub const ALL: [Answered; 4] = [
        Answered::ToolsCall,
        Answered::Initialize,
        Answered::Initialized,
        Answered::Delete,
    ];

    /// The label of the requests counted as this.
    pub fn label(self) -> &'static str {
        match self {
            Answered::ToolsCall => TOOLS_CALL_NAME,
            Answered::Initialize => "initialize",
            Answered::Initialized => "notifications/initialized",
            Answered::Delete => "DELETE",
        }
    }

    fn of(code: u64) -> Option<Answered> {
        Answered::ALL.into_iter().find(|a| *a as u64 == code)
    }
}

/// Why cells cannot hold a tally of a layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// Bucket bounds that do not rise, or none.
    Bounds,
    /// Fewer cells than the layout takes.
    TooFew { cells: usize, needed: usize },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Bounds => f.write_str("bucket bounds must be given and rise"),
            Mismatch::TooFew { cells, needed } => {
                write!(
                    f,
                    "a tally of this layout needs {needed} cells, not {cells}"
                )
            }
        }
    }
}

impl std::error::Error for Mismatch {}

/// Where each part of a tally is, for bucket bounds (in nanoseconds) that rise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    bounds: Vec<u64>,
}

impl Layout {
    pub fn new(bounds: Vec<u64>) -> Result<Layout, Mismatch> {
        if bounds.is_empty() || bounds.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Mismatch::Bounds);
        }
        Ok(Layout { bounds })
    }

    /// The bucket bounds, in nanoseconds.
    pub fn bounds(&self) -> &[u64] {
        &self.bounds
    }

    fn buckets_at(&self) -> usize {
        2 + self.bounds.len()
    }

    fn sum_at(&self) -> usize {
        self.buckets_at() + self.bounds.len() + 1
    }

    fn slots_at(&self) -> usize {
        self.sum_at() + 1
    }

    /// The cells a tally of this layout takes.
    pub fn cells(&self) -> usize {
        self.slots_at() + 2 * SLOTS
    }

    /// Start a tally in `cells` (zeroed, as a new file or allocation is): the mark and the
    /// bounds, so a reader knows its layout.
    pub fn start(&self, cells: &[AtomicU64]) -> Result<(), Mismatch> {
        if cells.len() < self.cells() {
            return Err(Mismatch::TooFew {
                cells: cells.len(),
                needed: self.cells(),
            });
        }
        cells[1].store(self.bounds.len() as u64, Ordering::Relaxed);
        for (cell, bound) in cells[2..].iter().zip(&self.bounds) {
            cell.store(*bound, Ordering::Relaxed);
        }
        // the mark last: a reader trusts nothing before it is there
        cells[0].store(MARK, Ordering::Release);
        Ok(())
    }

    /// Count one request answered as `answered` with `status`, which took `nanos`, in the
    /// tally [`Layout::start`] began in `cells`. The caller is the tally's only writer, so a
    /// count is a load and a store (readers see each cell whole).
    pub fn count(&self, cells: &[AtomicU64], answered: Answered, status: u16, nanos: u64) {
        let bucket = self
            .bounds
            .iter()
            .position(|b| nanos <= *b)
            .unwrap_or(self.bounds.len());
        bump(&cells[self.buckets_at() + bucket], 1);
        bump(&cells[self.sum_at()], nanos);
        let slots = &cells[self.slots_at()..self.cells()];
        let (general, spare) = slots.split_at(2 * (SLOTS - Answered::ALL.len()));
        let key = key(answered, status);
        for pair in general.chunks_exact(2) {
            let k = pair[0].load(Ordering::Relaxed);
            if k == 0 {
                pair[0].store(key, Ordering::Relaxed);
            } else if k != key {
                continue;
            }
            bump(&pair[1], 1);
            return;
        }
        // Every slot taken by other keys (never in practice, see SLOTS): the count is kept,
        // under no status, in the spare slot of its answer.
        let i = 2 * (answered as usize - 1);
        spare[i].store(self::key(answered, NO_STATUS), Ordering::Relaxed);
        bump(&spare[i + 1], 1);
    }
}

fn key(answered: Answered, status: u16) -> u64 {
    ((answered as u64) << 16) | u64::from(status)
}

fn bump(cell: &AtomicU64, by: u64) {
    cell.store(
        cell.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

/// What a tally holds, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    /// Requests counted, by what was answered and its status (0: see [`NO_STATUS`]).
    pub requests: Vec<(Answered, u16, u64)>,
    /// The bucket bounds, in nanoseconds.
    pub bounds: Vec<u64>,
    /// Requests per bucket, not cumulative: one more than the bounds (the last is `+Inf`).
    pub buckets: Vec<u64>,
    /// The sum of the times, in nanoseconds.
    pub nanos: u64,
}

/// What the tally in `cells` holds, or `None` when they hold none (no mark yet, or a layout
/// larger than the cells).
pub fn read(cells: &[AtomicU64]) -> Option<Counts> {
    if cells.first()?.load(Ordering::Acquire) != MARK {
        return None;
    }
    let n = usize::try_from(cells.get(1)?.load(Ordering::Relaxed)).ok()?;
    let bounds: Vec<u64> = cells
        .get(2..2 + n)?
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    let layout = Layout::new(bounds).ok()?;
    if cells.len() < layout.cells() {
        return None;
    }
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let buckets = cells[layout.buckets_at()..layout.sum_at()]
        .iter()
        .map(load)
        .collect();
    let nanos = load(&cells[layout.sum_at()]);
    let mut requests = Vec::new();
    for pair in cells[layout.slots_at()..layout.cells()].chunks_exact(2) {
        let (k, count) = (load(&pair[0]), load(&pair[1]));
        if k == 0 || count == 0 {
            continue;
        }
        let Some(answered) = Answered::of(k >> 16) else {
            continue;
        };
        requests.push((answered, (k & 0xffff) as u16, count));
    }
    Some(Counts {
        requests,
        bounds: layout.bounds,
        buckets,
        nanos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(n: usize) -> Vec<AtomicU64> {
        (0..n).map(|_| AtomicU64::new(0)).collect()
    }

    fn layout() -> Layout {
        Layout::new(vec![1_000, 10_000, 100_000]).expect("rising bounds")
    }

    #[test]
    fn bounds_must_rise() {
        assert_eq!(Layout::new(vec![]), Err(Mismatch::Bounds));
        assert_eq!(Layout::new(vec![5, 5]), Err(Mismatch::Bounds));
        assert_eq!(Layout::new(vec![5, 4]), Err(Mismatch::Bounds));
        assert_eq!(layout().cells(), 2 + 3 + 4 + 1 + 2 * SLOTS);
    }

    #[test]
    fn a_tally_is_read_as_counted() {
        let layout = layout();
        let c = cells(layout.cells());
        assert_eq!(read(&c), None, "not started");
        layout.start(&c).expect("enough cells");
        let empty = read(&c).expect("started");
        assert!(empty.requests.is_empty());
        assert_eq!(empty.buckets, vec![0, 0, 0, 0]);
        layout.count(&c, Answered::ToolsCall, 200, 1_000); // le 1000: the first bucket
        layout.count(&c, Answered::ToolsCall, 200, 1_001);
        layout.count(&c, Answered::ToolsCall, 400, 99_999);
        layout.count(&c, Answered::Initialized, 202, 5_000_000); // past every bound
        layout.count(&c, Answered::Delete, 200, 0);
        let counts = read(&c).expect("started");
        assert_eq!(
            counts.requests,
            vec![
                (Answered::ToolsCall, 200, 2),
                (Answered::ToolsCall, 400, 1),
                (Answered::Initialized, 202, 1),
                (Answered::Delete, 200, 1),
            ]
        );
        assert_eq!(counts.bounds, vec![1_000, 10_000, 100_000]);
        assert_eq!(counts.buckets, vec![2, 1, 1, 1]);
        assert_eq!(counts.nanos, 1_000 + 1_001 + 99_999 + 5_000_000);
    }

    #[test]
    fn too_few_cells_hold_no_tally() {
        let layout = layout();
        let c = cells(layout.cells() - 1);
        assert_eq!(
            layout.start(&c),
            Err(Mismatch::TooFew {
                cells: layout.cells() - 1,
                needed: layout.cells()
            })
        );
        assert_eq!(read(&c), None);
        // a mark over a layout larger than the cells: not trusted
        let short = cells(4);
        short[0].store(MARK, Ordering::Relaxed);
        short[1].store(3, Ordering::Relaxed);
        assert_eq!(read(&short), None);
        assert_eq!(read(&[]), None);
    }

    #[test]
    fn no_count_is_lost_when_every_slot_is_taken() {
        let layout = layout();
        let c = cells(layout.cells());
        layout.start(&c).expect("enough cells");
        let statuses = (100..100 + SLOTS as u16 + 5).collect::<Vec<_>>();
        for s in &statuses {
            layout.count(&c, Answered::ToolsCall, *s, 1);
        }
        layout.count(&c, Answered::Initialize, 999, 1);
        let counts = read(&c).expect("started");
        let total: u64 = counts.requests.iter().map(|r| r.2).sum();
        assert_eq!(total, statuses.len() as u64 + 1);
        assert_eq!(counts.buckets.iter().sum::<u64>(), total);
        assert!(counts
            .requests
            .iter()
            .any(|r| r.0 == Answered::Initialize && r.1 == NO_STATUS));
    }

    #[test]
    fn labels_are_the_methods_a_metrics_page_uses() {
        assert_eq!(
            Answered::ALL.map(Answered::label),
            [
                "tools/call",
                "initialize",
                "notifications/initialized",
                "DELETE"
            ]
        );
    }
}
