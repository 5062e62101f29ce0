//! What `EXPLAIN (ANALYZE)` reports of strata scans and of a crash recovery run by the statement,
//! as counters and the text lines shown after the plan:
//!
//! ```text
//! Strata Scans: rounds=1 segments searched=4 memtable rows=812 candidates=40 dead rows hinted=3 memtable ms=0.210 segment ms=0.630
//! Strata Filter: segments by strategy: exact scan=3 filtered graph=1 post-check=0, segment rows allowed=912 checked=1240, memtable rows admitted=31
//! Strata Recovery: 2.1 ms, 1 memtables rebuilt from 5000 heap rows, 0 segments dropped, 0 rows invalidated
//! ```

use std::fmt::Write as _;

/// What the scans of one statement did, summed over their rounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanCounters {
    /// Scan rounds.
    pub rounds: u64,
    /// Segments searched.
    pub segments: u64,
    /// Memtable rows compared.
    pub memtable_rows: u64,
    /// Candidates produced.
    pub candidates: u64,
    /// What the rounds' filtered searches did (zero without a filter).
    pub filtered: crate::scan::round::FilterReport,
    /// Rounds that applied a filter.
    pub filtered_rounds: u64,
    /// Time searching memtables, ns.
    pub memtable_nanos: u64,
    /// Time searching segments, summed over segments, ns.
    pub segment_nanos: u64,
    /// Segment rows the executor found dead and the scans hinted ([`crate::dead_rows`]).
    pub dead_rows_hinted: u64,
}

impl ScanCounters {
    /// No scan has run.
    pub const NONE: Self = Self {
        rounds: 0,
        segments: 0,
        memtable_rows: 0,
        candidates: 0,
        filtered: crate::scan::round::FilterReport::NONE,
        filtered_rounds: 0,
        memtable_nanos: 0,
        segment_nanos: 0,
        dead_rows_hinted: 0,
    };

    /// Adds one round that searched `segments` segments and `memtable_rows` memtable rows and
    /// produced `candidates` candidates.
    pub fn add_round(&mut self, segments: u64, memtable_rows: u64, candidates: u64) {
        self.rounds += 1;
        self.segments += segments;
        self.memtable_rows += memtable_rows;
        self.candidates += candidates;
    }

    /// Adds one round's search times: memtables and the sum over its segments, ns.
    pub fn add_times(&mut self, memtable_nanos: u64, segment_nanos: u64) {
        self.memtable_nanos = self.memtable_nanos.saturating_add(memtable_nanos);
        self.segment_nanos = self.segment_nanos.saturating_add(segment_nanos);
    }

    /// Adds segment rows a scan hinted dead.
    pub fn add_hinted(&mut self, rows: u64) {
        self.dead_rows_hinted += rows;
    }

    /// Adds what one round's filtered searches did (a round with a filter).
    pub fn add_filtered(&mut self, report: &crate::scan::round::FilterReport) {
        self.filtered_rounds += 1;
        for (total, add) in self.filtered.segments_by_strategy.iter_mut().zip(report.segments_by_strategy) {
            *total += add;
        }
        self.filtered.segment_rows_allowed += report.segment_rows_allowed;
        self.filtered.segment_rows_checked += report.segment_rows_checked;
        self.filtered.memtable_rows_admitted += report.memtable_rows_admitted;
    }

    /// The text of the `Strata Filter` line; `None` when no round applied a filter.
    pub fn filter_line(&self) -> Option<String> {
        (self.filtered_rounds > 0).then(|| {
            let [exact, graph, post] = self.filtered.segments_by_strategy;
            format!(
                "segments by strategy: exact scan={exact} filtered graph={graph} post-check={post}, \
                 segment rows allowed={} checked={}, memtable rows admitted={}",
                self.filtered.segment_rows_allowed,
                self.filtered.segment_rows_checked,
                self.filtered.memtable_rows_admitted
            )
        })
    }

    /// The text of the `Strata Scans` line; `None` when no scan ran a round. With `timing`
    /// (EXPLAIN's TIMING option), the time spent in memtables and in segments (summed over
    /// segments, so it can exceed the wall time when they run on helper threads) follows.
    pub fn line(&self, timing: bool) -> Option<String> {
        (self.rounds > 0).then(|| {
            let mut line = format!(
                "rounds={} segments searched={} memtable rows={} candidates={}",
                self.rounds, self.segments, self.memtable_rows, self.candidates
            );
            if self.dead_rows_hinted > 0 {
                let _ = write!(line, " dead rows hinted={}", self.dead_rows_hinted);
            }
            if timing {
                let ms = |ns: u64| ns as f64 / 1e6;
                let _ = write!(
                    line,
                    " memtable ms={:.3} segment ms={:.3}",
                    ms(self.memtable_nanos),
                    ms(self.segment_nanos)
                );
            }
            line
        })
    }
}

/// What a recovery run by the statement did, for the `Strata Recovery` line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecoverySummary {
    /// Duration, ms.
    pub millis: f64,
    /// Memtables refilled from the heap.
    pub rebuilt_memtables: u64,
    /// Heap rows re-read.
    pub reinserted_rows: u64,
    /// Segments dropped.
    pub dropped_segments: u64,
    /// Segment rows marked deleted.
    pub invalidated_rows: u64,
}

impl RecoverySummary {
    /// The text of the `Strata Recovery` line.
    pub fn line(&self) -> String {
        format!(
            "{:.1} ms, {} memtables rebuilt from {} heap rows, {} segments dropped, {} rows invalidated",
            self.millis, self.rebuilt_memtables, self.reinserted_rows, self.dropped_segments, self.invalidated_rows
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scans_line_sums_rounds_and_is_absent_without_one() {
        let mut counters = ScanCounters::default();
        assert_eq!(counters.line(false), None);
        counters.add_round(4, 800, 30);
        counters.add_round(0, 12, 10);
        counters.add_times(200_000, 1_500_000);
        counters.add_times(10_000, 0);
        assert_eq!(counters.line(false).unwrap(), "rounds=2 segments searched=4 memtable rows=812 candidates=40");
        assert_eq!(
            counters.line(true).unwrap(),
            "rounds=2 segments searched=4 memtable rows=812 candidates=40 memtable ms=0.210 segment ms=1.500"
        );
        assert_eq!(counters.filter_line(), None, "no round filtered");
        counters.add_hinted(2);
        counters.add_hinted(1);
        assert_eq!(
            counters.line(false).unwrap(),
            "rounds=2 segments searched=4 memtable rows=812 candidates=40 dead rows hinted=3"
        );
        let report = crate::scan::round::FilterReport {
            segments_by_strategy: [2, 1, 0],
            segment_rows_allowed: 900,
            segment_rows_checked: 1000,
            memtable_rows_admitted: 30,
        };
        counters.add_filtered(&report);
        counters.add_filtered(&crate::scan::round::FilterReport {
            segments_by_strategy: [1, 0, 0],
            segment_rows_allowed: 12,
            segment_rows_checked: 240,
            memtable_rows_admitted: 1,
        });
        assert_eq!(
            counters.filter_line().unwrap(),
            "segments by strategy: exact scan=3 filtered graph=1 post-check=0, segment rows allowed=912 checked=1240, memtable rows admitted=31"
        );
    }

    #[test]
    fn the_recovery_line() {
        let summary = RecoverySummary {
            millis: 2.06,
            rebuilt_memtables: 1,
            reinserted_rows: 5000,
            dropped_segments: 0,
            invalidated_rows: 3,
        };
        assert_eq!(
            summary.line(),
            "2.1 ms, 1 memtables rebuilt from 5000 heap rows, 0 segments dropped, 3 rows invalidated"
        );
    }
}
