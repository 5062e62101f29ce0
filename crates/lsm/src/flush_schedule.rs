//! [`FlushSchedule`]: which sealed memtable the flusher takes next, and the failure episodes of
//! memtables whose flushes fail.
//!
//! A memtable whose flush fails backs off ([`crate::retry`]: 100 ms doubling to 30 s) while every
//! other memtable, of its index and of others, keeps flushing; its rows stay searchable in shared
//! memory. An index's flush failure episode ends when none of its memtables is backing off any
//! more. A user's request (`strata_flush`) makes an index's failing memtables due at once.

use crate::clock::Clock;
use crate::flush::FlushTarget;
use crate::retry::{Backoff, Failure, RetrySchedule};
use crate::slabs::SlabInfo;

/// A memtable being retried: its slab and its SegmentID (a reused slab holds another memtable).
type MemtableKey = (usize, u64);

/// The flusher's schedule (see the module docs).
pub struct FlushSchedule {
    retries: RetrySchedule<MemtableKey>,
}

impl Default for FlushSchedule {
    fn default() -> Self {
        Self { retries: RetrySchedule::new(Backoff::default()) }
    }
}

/// What a successful flush ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// Failed attempts of this memtable before it succeeded (0: it never failed).
    pub failed_attempts: u32,
    /// Whether its index has no memtable backing off any more (its failure episode is over).
    pub index_healthy: bool,
}

impl FlushSchedule {
    /// The first memtable of `slabs` that may be flushed now (sealed, unpinned, complete) and is
    /// not backing off.
    pub fn next(&self, slabs: &[SlabInfo], clock: &impl Clock) -> Option<FlushTarget> {
        let now = clock.now();
        slabs
            .iter()
            .find(|slab| slab.flushable().is_ok() && self.retries.is_due(&(slab.slab, slab.segment_id), now))
            .map(|slab| FlushTarget { slab: slab.slab, index: slab.index, segment_id: slab.segment_id })
    }

    /// Records that flushing `target` failed; the returned attempt number is 1 when a failure
    /// episode of this memtable begins.
    pub fn failed(&mut self, target: FlushTarget, clock: &impl Clock) -> Failure {
        self.retries.failed((target.slab, target.segment_id), clock.now())
    }

    /// Records that `target` was flushed; `slabs` as they are now.
    pub fn succeeded(&mut self, target: FlushTarget, slabs: &[SlabInfo]) -> Recovered {
        let failed_attempts = self.retries.succeeded(&(target.slab, target.segment_id));
        let index_healthy = !slabs.iter().any(|slab| {
            slab.index == target.index
                && slab.state.awaits_flush()
                && self.retries.failures(&(slab.slab, slab.segment_id)) > 0
        });
        Recovered { failed_attempts, index_healthy }
    }

    /// Makes the failing memtables of index `index` due now (a user asked for a retry).
    pub fn retry_now(&mut self, index: usize, slabs: &[SlabInfo], clock: &impl Clock) {
        self.retries.make_due(clock.now(), |&(slab, _)| slabs.get(slab).is_some_and(|s| s.index == index));
    }

    /// Forgets memtables that no longer wait for a flush (flushed, or their index released).
    pub fn forget_gone(&mut self, slabs: &[SlabInfo]) {
        self.retries
            .retain(|&(slab, id)| slabs.get(slab).is_some_and(|s| s.segment_id == id && s.state.awaits_flush()));
    }

    /// When the next memtable backing off becomes due, if any is.
    pub fn next_due(&self) -> Option<std::time::Instant> {
        self.retries.next_due()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;
    use crate::slabs::SlabState;

    fn sealed(slab: usize, index: usize, segment_id: u64) -> SlabInfo {
        SlabInfo {
            slab,
            state: SlabState::Sealed,
            index,
            segment_id,
            capacity: 4,
            filled: 4,
            written: 4,
            readers: 0,
            writers: 0,
            flush_failures: 0,
        }
    }

    #[test]
    fn a_failing_memtable_backs_off_while_the_others_flush_and_its_episode_ends_with_its_index() {
        let clock = ManualClock::default();
        let mut schedule = FlushSchedule::default();
        let mut slabs = vec![sealed(0, 0, 10), sealed(1, 1, 20), sealed(2, 0, 11)];
        // Memtable 10 (index 0) fails: the next choice is another memtable, not it again.
        let first = schedule.next(&slabs, &clock).unwrap();
        assert_eq!(first.segment_id, 10);
        assert_eq!(schedule.failed(first, &clock).attempt, 1, "an episode begins");
        let second = schedule.next(&slabs, &clock).unwrap();
        assert_eq!(second.segment_id, 20, "index 1 keeps flushing");
        slabs[1].state = SlabState::Flushed;
        assert_eq!(schedule.succeeded(second, &slabs), Recovered { failed_attempts: 0, index_healthy: true });
        let third = schedule.next(&slabs, &clock).unwrap();
        assert_eq!(third.segment_id, 11, "index 0's other memtable keeps flushing");
        slabs[2].state = SlabState::Flushed;
        let recovered = schedule.succeeded(third, &slabs);
        assert!(!recovered.index_healthy, "memtable 10 of the same index still backs off");
        // Nothing due until the backoff passes; a pinned or incomplete memtable is never due.
        assert_eq!(schedule.next(&slabs, &clock), None);
        assert!(schedule.next_due().is_some());
        clock.advance(Duration::from_millis(99));
        assert_eq!(schedule.next(&slabs, &clock), None);
        clock.advance(Duration::from_millis(2));
        let retried = schedule.next(&slabs, &clock).unwrap();
        assert_eq!(retried.segment_id, 10);
        assert_eq!(schedule.failed(retried, &clock).attempt, 2);
        // A user's retry makes it due at once; success ends the index's episode.
        assert_eq!(schedule.next(&slabs, &clock), None);
        schedule.retry_now(0, &slabs, &clock);
        let asked = schedule.next(&slabs, &clock).unwrap();
        slabs[0].state = SlabState::Flushed;
        assert_eq!(schedule.succeeded(asked, &slabs), Recovered { failed_attempts: 2, index_healthy: true });
        // Pinned and incomplete memtables are not flushable.
        let mut pinned = sealed(3, 1, 30);
        pinned.writers = 1;
        let mut incomplete = sealed(4, 1, 31);
        incomplete.written = 3;
        assert_eq!(schedule.next(&[pinned, incomplete], &clock), None);
    }

    #[test]
    fn retry_state_of_memtables_that_left_is_forgotten() {
        let clock = ManualClock::default();
        let mut schedule = FlushSchedule::default();
        let slabs = vec![sealed(0, 0, 10)];
        let target = schedule.next(&slabs, &clock).unwrap();
        schedule.failed(target, &clock);
        // The slab was released and reused by memtable 12: it is due at once.
        let reused = vec![sealed(0, 0, 12)];
        schedule.forget_gone(&reused);
        assert_eq!(schedule.next_due(), None);
        assert_eq!(schedule.next(&reused, &clock).map(|t| t.segment_id), Some(12));
    }
}
