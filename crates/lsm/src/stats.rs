//! What `strata_index_stats` shows of an index, and when the functions that wait for its
//! background work (`strata_flush`, `strata_wait_for_merges`) report a failure instead of waiting
//! on, as pure functions over values read from shared memory and the segment set.

use std::time::Duration;

use crate::clock::Clock;
use crate::memtable::Memtable;
use crate::segment_set::OpenSegment;
use crate::slabs::{SlabMemory, SlabState};

/// Failed attempts after which waiting functions report a failure instead of waiting on.
pub const FAILURES_REPORTED: u32 = 3;

/// One row of `strata_index_stats`: a memtable, a segment, or the index's failing merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsRow {
    /// `memtable`, `segment` or `merges`.
    pub part: &'static str,
    /// SegmentID of the memtable or segment (0 for `merges`).
    pub id: i64,
    /// `active`, `sealed`, `flushing`, `flush failing`, `recovering`, `published`, `failing`, …
    pub state: &'static str,
    /// The segment kind's name (`exact` for memtables, empty for `merges`).
    pub kind: String,
    /// Rows it holds (slots filled, for a memtable).
    pub rows: i64,
    /// Of which deleted (SQL `bigint`s, as the counters are read one at a time).
    pub deleted: i64,
    /// Bytes (a memtable's whole capacity).
    pub bytes: i64,
    /// Failed attempts of its background work in the current episode.
    pub retries: u32,
    /// The last error of that work, while it fails.
    pub last_error: Option<String>,
}

/// A memtable's counters, read from its slab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemtableStats {
    /// Its slab's state.
    pub state: SlabState,
    /// Its SegmentID.
    pub segment_id: u64,
    /// Failed flush attempts.
    pub flush_failures: u32,
    /// Slots filled.
    pub filled: u64,
    /// Rows written, deleted or not ([`Memtable::written_rows`]: a span row counts once).
    pub written: u64,
    /// Rows not deleted.
    pub live: u64,
    /// Slots in all.
    pub capacity: u64,
}

impl MemtableStats {
    /// The counters of `memtable` now (no lock: each is read atomically, not all at one moment).
    pub fn of<M: SlabMemory + ?Sized>(memtable: &Memtable<'_, M>) -> Self {
        let header = memtable.header();
        Self {
            state: header.state(),
            segment_id: header.segment_id(),
            flush_failures: header.flush_failures(),
            filled: header.filled() as u64,
            written: memtable.written_rows(),
            live: memtable.live_rows(),
            capacity: header.capacity() as u64,
        }
    }

    /// Its row, for an index of `dims` dimensions whose failing flushes last failed with
    /// `flush_error` (shown only while this memtable's flushes fail).
    pub fn row(&self, dims: u32, flush_error: Option<&str>) -> StatsRow {
        let failing = self.flush_failures > 0;
        let state = match self.state {
            SlabState::Active => "active",
            SlabState::Sealed | SlabState::Flushing if failing => "flush failing",
            SlabState::Sealed => "sealed",
            SlabState::Flushing => "flushing",
            SlabState::Recovering => "recovering",
            SlabState::Absorbing => "absorbing",
            _ => "other",
        };
        StatsRow {
            part: "memtable",
            id: self.segment_id as i64,
            state,
            kind: "exact".to_owned(),
            rows: self.written as i64,
            deleted: self.written as i64 - self.live as i64,
            bytes: self.capacity as i64 * (i64::from(dims) * 4 + 8),
            retries: self.flush_failures,
            last_error: flush_error.filter(|_| failing).map(str::to_owned),
        }
    }
}

/// The row of a published segment whose kind is named `kind`.
pub fn segment_row<S>(open: &OpenSegment<S>, kind: &str) -> StatsRow {
    StatsRow {
        part: "segment",
        id: open.entry.id as i64,
        state: "published",
        kind: kind.to_owned(),
        rows: open.entry.rows as i64,
        deleted: open.deleted.as_ref().map_or(0, |d| d.count() as i64),
        bytes: open.entry.bytes as i64,
        retries: 0,
        last_error: None,
    }
}

/// The row of the index's merges while they fail (`merge_failure`: attempts and last error).
pub fn merges_row(merge_failure: Option<(u32, String)>) -> Option<StatsRow> {
    failing_work_row("merges", merge_failure)
}

/// On a standby, the row of the index's absorbing (following the primary's membership log, in
/// the absorber worker) while it fails (`absorb_failure`: attempts and last error).
pub fn absorb_row(absorb_failure: Option<(u32, String)>) -> Option<StatsRow> {
    failing_work_row("absorb", absorb_failure)
}

/// A row of background work named `part` in state `failing`, while `failure` says it fails.
fn failing_work_row(part: &'static str, failure: Option<(u32, String)>) -> Option<StatsRow> {
    failure.map(|(retries, error)| StatsRow {
        part,
        id: 0,
        state: "failing",
        kind: String::new(),
        rows: 0,
        deleted: 0,
        bytes: 0,
        retries,
        last_error: Some(error),
    })
}

/// A caller waiting for an index's memtables to be flushed: remembers the failed attempts of each
/// memtable waiting to be flushed when the wait began.
#[derive(Debug, Clone, Default)]
pub struct FlushWait {
    before: Vec<(u64, u32)>,
}

impl FlushWait {
    /// A wait that begins with `pending`: `(SegmentID, failed flush attempts)` of each memtable
    /// waiting to be flushed.
    pub fn new(pending: Vec<(u64, u32)>) -> Self {
        Self { before: pending }
    }

    /// The first of `pending` (as for [`FlushWait::new`], now) whose flush failed during the wait
    /// and has failed at least [`FAILURES_REPORTED`] times: the wait reports it instead of going
    /// on.
    pub fn failing(&self, pending: &[(u64, u32)]) -> Option<(u64, u32)> {
        let before = |memtable: u64| self.before.iter().find(|(id, _)| *id == memtable).map_or(0, |&(_, f)| f);
        pending.iter().copied().find(|&(id, failures)| failures >= FAILURES_REPORTED && failures > before(id))
    }

    /// One look at the wait given `pending` now: ready when no memtable waits any more, failing
    /// with [`FlushWait::failing`]'s memtable, pending otherwise.
    pub fn poll(&self, pending: &[(u64, u32)]) -> Poll<(), (u64, u32)> {
        match self.failing(pending) {
            _ if pending.is_empty() => Poll::Ready(()),
            Some(failing) => Poll::Failing(failing),
            None => Poll::Pending,
        }
    }
}

/// `(SegmentID, failed flush attempts)` of the memtables of `memtables` waiting to be flushed
/// (sealed or flushing), what [`FlushWait`] takes.
pub fn awaiting_flush<'m, M: SlabMemory + ?Sized + 'm>(
    memtables: impl IntoIterator<Item = &'m Memtable<'m, M>>,
) -> Vec<(u64, u32)> {
    memtables
        .into_iter()
        .filter(|m| m.header().state().awaits_flush())
        .map(|m| (m.segment_id(), m.header().flush_failures()))
        .collect()
}

/// One look at a wait for merges that began with `before` failed attempts: ready (with `done`'s
/// result) when no merge is pending, failing with the merges' current failure
/// (`failure`: attempts and last error) when [`merges_failing`], pending otherwise.
pub fn merges_poll<T>(
    pending: bool,
    before: u32,
    failure: Option<(u32, String)>,
    done: impl FnOnce() -> T,
) -> Poll<T, (u32, String)> {
    match failure {
        _ if !pending => Poll::Ready(done()),
        Some((failures, error)) if merges_failing(before, failures) => Poll::Failing((failures, error)),
        _ => Poll::Pending,
    }
}

/// A wait's timeout given in seconds: finite and not negative, else an error naming the value;
/// one too large for a [`Duration`] waits without end.
pub fn wait_timeout(seconds: f64) -> Result<Duration, String> {
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(format!("timeout_seconds must be a finite number of seconds, at least 0, not {seconds}"));
    }
    Ok(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
}

/// The message of a waiting function (`function`) that reports background work (`what`) failing
/// `failures` times instead of waiting on.
pub fn failing_message(function: &str, what: &str, failures: u32) -> String {
    format!(
        "{function}: {what} ({failures} failed attempts); the index service keeps retrying with backoff and the rows \
         stay searchable"
    )
}

/// Whether a caller waiting for merges that began with `before` failed attempts reports the
/// merges' `now` failed attempts instead of waiting on: they failed during the wait, at least
/// [`FAILURES_REPORTED`] times.
pub fn merges_failing(before: u32, now: u32) -> bool {
    now >= FAILURES_REPORTED && now > before
}

/// What one look at awaited background work found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poll<T, F> {
    /// Done, with its result.
    Ready(T),
    /// Still under way.
    Pending,
    /// Failing often enough to report `F` instead of waiting on.
    Failing(F),
}

/// Why [`wait_for`] ended without a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitError<F> {
    /// The work failed (what [`Poll::Failing`] said).
    Failing(F),
    /// It was still pending after the timeout.
    TimedOut,
}

/// Polls `poll` until it is ready or failing, calling `pause` (which wakes the worker and waits a
/// little) after each pending poll; ends with [`WaitError::TimedOut`] when more than `timeout` has
/// passed on `clock` since the wait began, checked after each pending poll.
pub fn wait_for<T, F>(
    clock: &impl Clock,
    timeout: Duration,
    mut poll: impl FnMut() -> Poll<T, F>,
    mut pause: impl FnMut(),
) -> Result<T, WaitError<F>> {
    let started = clock.now();
    loop {
        match poll() {
            Poll::Ready(result) => return Ok(result),
            Poll::Failing(failure) => return Err(WaitError::Failing(failure)),
            Poll::Pending => {}
        }
        if clock.now().saturating_duration_since(started) > timeout {
            return Err(WaitError::TimedOut);
        }
        pause();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memtable(state: SlabState, flush_failures: u32) -> MemtableStats {
        MemtableStats { state, segment_id: 9, flush_failures, filled: 10, written: 10, live: 7, capacity: 100 }
    }

    #[test]
    fn memtable_rows_name_their_state_and_show_errors_only_while_failing() {
        let row = memtable(SlabState::Sealed, 2).row(3, Some("disk full"));
        let expected = StatsRow {
            part: "memtable",
            id: 9,
            state: "flush failing",
            kind: "exact".to_owned(),
            rows: 10,
            deleted: 3,
            bytes: 100 * (3 * 4 + 8),
            retries: 2,
            last_error: Some("disk full".to_owned()),
        };
        assert_eq!(row, expected);
        let healthy = memtable(SlabState::Sealed, 0).row(3, Some("an error of another memtable"));
        assert_eq!((healthy.state, healthy.last_error), ("sealed", None));
        let names: Vec<&str> =
            [SlabState::Active, SlabState::Flushing, SlabState::Recovering, SlabState::Flushed, SlabState::Free]
                .into_iter()
                .map(|state| memtable(state, 0).row(1, None).state)
                .collect();
        assert_eq!(names, ["active", "flushing", "recovering", "other", "other"]);
        assert_eq!(memtable(SlabState::Flushing, 1).row(1, None).state, "flush failing");
    }

    #[test]
    fn merges_show_only_while_failing() {
        assert_eq!(merges_row(None), None);
        let row = merges_row(Some((4, "EIO".to_owned()))).unwrap();
        assert_eq!(
            (row.part, row.state, row.retries, row.last_error.as_deref()),
            ("merges", "failing", 4, Some("EIO"))
        );
    }

    #[test]
    fn a_failing_absorb_shows_as_its_own_row() {
        assert_eq!(absorb_row(None), None);
        let row = absorb_row(Some((2, "Input/output error".to_owned()))).unwrap();
        assert_eq!(
            (row.part, row.state, row.retries, row.last_error.as_deref()),
            ("absorb", "failing", 2, Some("Input/output error"))
        );
    }

    #[test]
    fn a_flush_wait_reports_memtables_that_failed_often_enough_during_it() {
        let wait = FlushWait::new(vec![(1, 5), (2, 0)]);
        assert_eq!(wait.failing(&[(1, 5), (2, 2)]), None, "no new failure reaches the threshold");
        assert_eq!(wait.failing(&[(1, 6), (2, 2)]), Some((1, 6)), "failed again during the wait");
        assert_eq!(wait.failing(&[(2, 3)]), Some((2, 3)));
        assert_eq!(wait.failing(&[(7, 3)]), Some((7, 3)), "sealed during the wait");
        assert_eq!(wait.failing(&[]), None);
    }

    #[test]
    fn a_merge_wait_reports_failures_made_during_it() {
        assert!(!merges_failing(0, 2));
        assert!(merges_failing(0, 3));
        assert!(!merges_failing(5, 5));
        assert!(merges_failing(5, 6));
        let failure = |n: u32| Some((n, "EIO".to_owned()));
        assert_eq!(merges_poll(false, 0, failure(9), || 4), Poll::Ready(4), "nothing pending: done");
        assert_eq!(merges_poll(true, 0, failure(3), || 4), Poll::Failing((3, "EIO".to_owned())));
        assert_eq!(merges_poll(true, 3, failure(3), || 4), Poll::Pending, "no failure during the wait");
        assert_eq!(merges_poll(true, 0, None, || 4), Poll::Pending);
    }

    #[test]
    fn a_flush_wait_is_ready_when_nothing_waits_and_fails_with_the_failing_memtable() {
        let wait = FlushWait::new(vec![(1, 0)]);
        assert_eq!(wait.poll(&[]), Poll::Ready(()));
        assert_eq!(wait.poll(&[(1, 2)]), Poll::Pending);
        assert_eq!(wait.poll(&[(1, 3)]), Poll::Failing((1, 3)));
    }

    #[test]
    fn memtables_awaiting_flush_are_the_sealed_and_flushing_ones() {
        use crate::memtable::MemtableLayout;
        use crate::slabs::test_region::{TestLock, TestRegion};
        use crate::slabs::Slabs;
        shuttle::check_random(
            || {
                let region = TestRegion::new(3, 64, 2, 1);
                let lock = TestLock::default();
                let slabs = Slabs::new(&region, &lock);
                let layout = MemtableLayout::new(64, 2);
                let mut slab_of = Vec::new();
                for id in 1..=3 {
                    let allocation = slabs.allocate(0, layout, || id).expect("a free slab");
                    slab_of.push(allocation.slab());
                    assert!(allocation.activate());
                    if id < 3 {
                        assert!(slabs.seal(0, slab_of[id as usize - 1], id));
                    }
                }
                region.header(slab_of[0]).record_flush_failures(2);
                let (memtables, ()) = slabs.snapshot(0, || ());
                let mut awaiting = awaiting_flush(memtables.iter());
                awaiting.sort_unstable();
                assert_eq!(awaiting, [(1, 2), (2, 0)], "the active memtable 3 is not awaited");
            },
            1,
        );
    }

    #[test]
    fn wait_timeouts_are_finite_and_not_negative() {
        assert_eq!(wait_timeout(1.5), Ok(Duration::from_millis(1500)));
        assert_eq!(wait_timeout(0.0), Ok(Duration::ZERO));
        assert_eq!(wait_timeout(1e300), Ok(Duration::MAX));
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                wait_timeout(bad),
                Err(format!("timeout_seconds must be a finite number of seconds, at least 0, not {bad}"))
            );
        }
        assert_eq!(
            failing_message("strata_flush", "memtable 4 cannot be flushed", 3),
            "strata_flush: memtable 4 cannot be flushed (3 failed attempts); the index service keeps retrying \
             with backoff and the rows stay searchable"
        );
    }

    #[test]
    fn waits_end_ready_failing_or_after_the_timeout() {
        let clock = crate::clock::ManualClock::default();
        let timeout = Duration::from_secs(5);
        let mut polls = 0;
        let ready = wait_for(
            &clock,
            timeout,
            || {
                polls += 1;
                if polls == 3 {
                    Poll::<u32, ()>::Ready(7)
                } else {
                    Poll::Pending
                }
            },
            || clock.advance(Duration::from_secs(1)),
        );
        assert_eq!((ready, polls), (Ok(7), 3));
        let failing = wait_for(&clock, timeout, || Poll::<(), _>::Failing("disk full"), || unreachable!());
        assert_eq!(failing, Err(WaitError::Failing("disk full")));
        let mut pauses = 0;
        let timed_out = wait_for(
            &clock,
            timeout,
            || Poll::<(), ()>::Pending,
            || {
                pauses += 1;
                clock.advance(Duration::from_secs(1));
            },
        );
        // Pending at 0..=5 s pauses; at 6 s more than the timeout has passed.
        assert_eq!((timed_out, pauses), (Err(WaitError::TimedOut), 6));
    }
}
