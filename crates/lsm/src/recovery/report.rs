//! What one crash recovery of an index did, in one value: computed from the recovered status
//! pages and the results of [`repair`](super::repair) and [`refill`](super::refill), stored into
//! the index's shared counters (`strata_index_recovery()`), shown by EXPLAIN and logged.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Refilled, Repairs, Status};
use crate::explain::RecoverySummary;
use crate::index_slot::RecoveryCounters;

/// What one recovery did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    /// How long it took, µs.
    pub micros: u64,
    /// Memtables the status pages listed.
    pub listed_memtables: u64,
    /// Status list pages read.
    pub status_pages: u64,
    /// Segments dropped.
    pub dropped_segments: u64,
    /// Segment rows newly marked deleted.
    pub invalidated_rows: u64,
    /// Memtables refilled from the heap.
    pub rebuilt_memtables: u64,
    /// Heap rows read back into them.
    pub reinserted_rows: u64,
}

impl Recovered {
    /// The recovery that read `status` from `pages` list pages, repaired the files as `repairs`
    /// says and refilled memtables as `refilled` says, in `took`.
    pub fn of(took: Duration, status: &Status, pages: usize, repairs: &Repairs, refilled: Refilled) -> Self {
        Self {
            micros: took.as_micros() as u64,
            listed_memtables: status.memtables.len() as u64,
            status_pages: pages as u64,
            dropped_segments: repairs.dropped,
            invalidated_rows: repairs.invalidated,
            rebuilt_memtables: refilled.memtables,
            reinserted_rows: refilled.rows,
        }
    }

    /// Stores every counter into `counters`, with `finished_at` (the host's timestamp of the end)
    /// last, so that a reader that sees it sees the rest (they are written once, by the recovering
    /// backend, before the index is marked ready).
    pub fn store(&self, counters: &RecoveryCounters, finished_at: u64) {
        let fields = [
            (&counters.micros, self.micros),
            (&counters.listed_memtables, self.listed_memtables),
            (&counters.status_pages, self.status_pages),
            (&counters.dropped_segments, self.dropped_segments),
            (&counters.invalidated_rows, self.invalidated_rows),
            (&counters.rebuilt_memtables, self.rebuilt_memtables),
            (&counters.reinserted_rows, self.reinserted_rows),
            (&counters.finished_at, finished_at),
        ];
        for (counter, value) in fields {
            counter.store(value, Ordering::Relaxed);
        }
    }

    /// The `Strata Recovery` line's numbers.
    pub fn summary(&self) -> RecoverySummary {
        RecoverySummary {
            millis: self.micros as f64 / 1000.0,
            rebuilt_memtables: self.rebuilt_memtables,
            reinserted_rows: self.reinserted_rows,
            dropped_segments: self.dropped_segments,
            invalidated_rows: self.invalidated_rows,
        }
    }

    /// The server log line of a recovery of the index named `index` that changed something or
    /// handled a reset of an unlogged index (`reset`); `None` for a recovery that found nothing
    /// to do.
    pub fn log_line(&self, index: &str, reset: bool) -> Option<String> {
        let changed = self.dropped_segments + self.invalidated_rows + self.rebuilt_memtables > 0;
        (changed || reset).then(|| {
            format!(
                "pg_strata: recovered index {index} in {:.1} ms: {} listed memtables, {} segments dropped, {} rows \
                 invalidated, {} memtables rebuilt from {} heap rows",
                self.micros as f64 / 1000.0,
                self.listed_memtables,
                self.dropped_segments,
                self.invalidated_rows,
                self.rebuilt_memtables,
                self.reinserted_rows
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index_slot::RecoveryReport;
    use crate::recovery::{RecoveryAction, StatusMemtable};

    fn recovered() -> Recovered {
        let status = Status {
            max_memtable_id: 9,
            memtables: vec![StatusMemtable { id: 8, tids: vec![1, 2] }, StatusMemtable { id: 9, tids: vec![3] }],
        };
        let repairs = Repairs {
            dropped: 1,
            invalidated: 4,
            refill: vec![RecoveryAction::RebuildMemtable { memtable: 9, tids: vec![3] }],
            mixed: Vec::new(),
        };
        Recovered::of(Duration::from_micros(2_500), &status, 3, &repairs, Refilled { memtables: 1, rows: 5 })
    }

    /// Every counter lands in its own field of the shared counters, as the SQL function reads them.
    #[test]
    fn a_recovery_is_stored_field_by_field() {
        let counters = RecoveryCounters::default();
        recovered().store(&counters, 7_000_123);
        let expected = RecoveryReport {
            finished_at: Some(7_000_123),
            duration_ms: 2.5,
            listed_memtables: 2,
            status_pages: 3,
            dropped_segments: 1,
            invalidated_rows: 4,
            rebuilt_memtables: 1,
            reinserted_rows: 5,
        };
        assert_eq!(counters.report(), expected);
        let summary = recovered().summary();
        assert_eq!(
            summary.line(),
            "2.5 ms, 1 memtables rebuilt from 5 heap rows, 1 segments dropped, 4 rows invalidated"
        );
    }

    /// A recovery is logged when it changed something or reset an unlogged index, not otherwise.
    #[test]
    fn only_recoveries_that_did_something_are_logged() {
        assert_eq!(
            recovered().log_line("IndexKey { db: 1 }", false).as_deref(),
            Some(
                "pg_strata: recovered index IndexKey { db: 1 } in 2.5 ms: 2 listed memtables, 1 segments dropped, 4 \
                 rows invalidated, 1 memtables rebuilt from 5 heap rows"
            )
        );
        let clean = Recovered { listed_memtables: 2, status_pages: 3, micros: 900, ..Recovered::default() };
        assert_eq!(clean.log_line("i", false), None);
        assert!(clean.log_line("i", true).is_some_and(|line| line.contains("in 0.9 ms: 2 listed memtables")));
        for changed in [
            Recovered { dropped_segments: 1, ..clean },
            Recovered { invalidated_rows: 1, ..clean },
            Recovered { rebuilt_memtables: 1, ..clean },
        ] {
            assert!(changed.log_line("i", false).is_some(), "{changed:?}");
        }
    }
}
