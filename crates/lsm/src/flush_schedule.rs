//! [`FlushSchedule`]: which sealed memtable the flusher takes next, and the failure episodes of
//! memtables whose flushes fail.
//!
//! A memtable whose flush fails backs off ([`crate::retry`]: 100 ms doubling to 30 s) while every
//! other memtable, of its index and of others, keeps flushing; its rows stay searchable in shared
//! memory. An index's flush failure episode ends when none of its memtables is backing off any
//! more. A user's request (`strata_flush`) makes an index's failing memtables due at once.
//!
//! [`FlushSchedule::flush_one`] drives one attempt through a [`FlushHost`] (the flush itself and
//! its reports are the host's), and [`FlushSchedule::shutdown_flush`] flushes at shutdown within a
//! deadline.

use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::files::FileError;
use crate::flush::FlushTarget;
use crate::retry::{Backoff, Failure, RetrySchedule};
use crate::slabs::{SlabCounts, SlabInfo, SlabState};

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

/// What [`FlushSchedule::flush_one`] needs from its host.
pub trait FlushHost {
    /// A registered index (a handle to it).
    type Index;

    /// Every slab's header now.
    fn slabs(&self) -> Vec<SlabInfo>;

    /// The index registered in directory slot `slot`.
    fn index(&self, slot: usize) -> Option<Self::Index>;

    /// Builds and publishes the memtable `target` of `index`; [`FileError::Cancelled`] when the
    /// build was cancelled (not a failure).
    fn flush(&mut self, index: &Self::Index, target: FlushTarget) -> Result<(), FileError>;

    /// `target` of `index` was flushed; `recovered` says what that ended.
    fn flushed(&mut self, index: &Self::Index, target: FlushTarget, recovered: Recovered);

    /// Flushing `target` of `index` failed with `error`; `attempt` is 1 when an episode begins.
    fn failed(&mut self, index: &Self::Index, target: FlushTarget, error: &str, attempt: u32);

    /// Seals every active memtable (shutdown).
    fn seal_all(&mut self);

    /// Frees the slabs of flushed memtables no scan reads.
    fn free_unread(&mut self);
}

/// What one [`FlushSchedule::flush_one`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushStep {
    /// A memtable was flushed (or found empty).
    Done,
    /// A flush failed or was cancelled; other memtables may still be due.
    NotDone,
    /// No memtable is due.
    Idle,
}

impl FlushSchedule {
    /// Flushes one sealed, complete memtable that is due (not backing off after a failure).
    pub fn flush_one<H: FlushHost>(&mut self, host: &mut H, clock: &impl Clock) -> FlushStep {
        let Some(target) = self.next(&host.slabs(), clock) else {
            return FlushStep::Idle;
        };
        let Some(index) = host.index(target.index) else {
            // Not expected (unregistering frees an index's slabs); never retried in a hot loop.
            self.failed(target, clock);
            return FlushStep::NotDone;
        };
        match host.flush(&index, target) {
            Ok(()) => {
                let recovered = self.succeeded(target, &host.slabs());
                host.flushed(&index, target, recovered);
                FlushStep::Done
            }
            Err(FileError::Cancelled) => FlushStep::NotDone,
            Err(e) => {
                let error = e.to_string();
                let failure = self.failed(target, clock);
                host.failed(&index, target, &error, failure.attempt);
                FlushStep::NotDone
            }
        }
    }

    /// One round of the service's flushing: frees the slabs no scan reads, then flushes due
    /// memtables one at a time (freeing slabs between flushes) until none is due or `stop` says a
    /// shutdown began, frees again and forgets the retry state of memtables that are gone.
    pub fn flush_round<H: FlushHost>(&mut self, host: &mut H, clock: &impl Clock, stop: impl Fn() -> bool) {
        loop {
            host.free_unread();
            match self.flush_one(host, clock) {
                FlushStep::Done | FlushStep::NotDone if !stop() => {}
                _ => break,
            }
        }
        host.free_unread();
        self.forget_gone(&host.slabs());
    }

    /// At shutdown: seals everything and flushes until `deadline` (or until nothing is left to
    /// flush: no memtable is due and none is pinned by a writer finishing a row). Returns how many
    /// memtables are left unflushed (active or sealed).
    pub fn shutdown_flush<H: FlushHost>(&mut self, host: &mut H, deadline: Instant, clock: &impl Clock) -> usize {
        host.seal_all();
        while clock.now() < deadline {
            host.free_unread();
            if self.flush_one(host, clock) == FlushStep::Idle {
                // Writers still finishing a row may hold a pin for a moment.
                let pinned = host.slabs().iter().any(|slab| slab.state == SlabState::Sealed && slab.writers > 0);
                if !pinned {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        host.free_unread();
        SlabCounts::of(&host.slabs()).sum(&[SlabState::Active, SlabState::Sealed])
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

    /// A host over plain slab infos: flushing marks a slab FLUSHED unless its memtable is in
    /// `failing`; every flush takes `cost` of the clock.
    struct Host<'c> {
        slabs: Vec<SlabInfo>,
        failing: Vec<u64>,
        registered: Vec<usize>,
        cost: Duration,
        clock: &'c ManualClock,
        calls: Vec<String>,
    }

    impl<'c> Host<'c> {
        fn new(slabs: Vec<SlabInfo>, clock: &'c ManualClock) -> Self {
            Self { slabs, failing: Vec::new(), registered: vec![0, 1], cost: Duration::ZERO, clock, calls: Vec::new() }
        }
    }

    impl FlushHost for Host<'_> {
        type Index = usize;

        fn slabs(&self) -> Vec<SlabInfo> {
            self.slabs.clone()
        }

        fn index(&self, slot: usize) -> Option<usize> {
            self.registered.contains(&slot).then_some(slot)
        }

        fn flush(&mut self, _index: &usize, target: FlushTarget) -> Result<(), FileError> {
            self.clock.advance(self.cost);
            if self.failing.contains(&target.segment_id) {
                return Err(FileError::Build { kind: "exact", message: "disk full".into() });
            }
            self.slabs[target.slab].state = SlabState::Flushed;
            Ok(())
        }

        fn flushed(&mut self, index: &usize, target: FlushTarget, recovered: Recovered) {
            self.calls.push(format!(
                "flushed {index}/{} after {} healthy {}",
                target.segment_id, recovered.failed_attempts, recovered.index_healthy
            ));
        }

        fn failed(&mut self, index: &usize, target: FlushTarget, error: &str, attempt: u32) {
            self.calls.push(format!("failed {index}/{} attempt {attempt}: {error}", target.segment_id));
        }

        fn seal_all(&mut self) {
            for slab in &mut self.slabs {
                if slab.state == SlabState::Active {
                    slab.state = SlabState::Sealed;
                }
            }
        }

        fn free_unread(&mut self) {
            for slab in &mut self.slabs {
                if slab.state == SlabState::Flushed {
                    slab.state = SlabState::Free;
                }
            }
        }
    }

    #[test]
    fn flush_one_reports_failures_and_recoveries_through_the_host() {
        let clock = ManualClock::default();
        let mut schedule = FlushSchedule::default();
        let mut host = Host::new(vec![sealed(0, 0, 10), sealed(1, 1, 20)], &clock);
        host.failing.push(10);
        assert_eq!(schedule.flush_one(&mut host, &clock), FlushStep::NotDone);
        assert_eq!(schedule.flush_one(&mut host, &clock), FlushStep::Done);
        assert_eq!(schedule.flush_one(&mut host, &clock), FlushStep::Idle, "memtable 10 backs off");
        host.failing.clear();
        clock.advance(Duration::from_millis(100));
        assert_eq!(schedule.flush_one(&mut host, &clock), FlushStep::Done);
        assert_eq!(
            host.calls,
            [
                "failed 0/10 attempt 1: building a exact segment: disk full",
                "flushed 1/20 after 0 healthy true",
                "flushed 0/10 after 1 healthy true",
            ]
        );
    }

    #[test]
    fn a_round_flushes_every_due_memtable_frees_their_slabs_and_stops_at_a_shutdown() {
        let clock = ManualClock::default();
        let mut schedule = FlushSchedule::default();
        let mut host = Host::new(vec![sealed(0, 0, 10), sealed(1, 1, 20), sealed(2, 0, 30)], &clock);
        host.failing.push(20);
        schedule.flush_round(&mut host, &clock, || false);
        let states: Vec<SlabState> = host.slabs.iter().map(|s| s.state).collect();
        assert_eq!(states, [SlabState::Free, SlabState::Sealed, SlabState::Free], "20 fails and backs off");
        assert!(schedule.next_due().is_some());
        // Memtable 20's slab is reused by another memtable: its retry state goes.
        host.slabs[1] = sealed(1, 1, 21);
        host.failing.clear();
        host.slabs.push(sealed(3, 1, 40));
        schedule.flush_round(&mut host, &clock, || true);
        let flushed = host.slabs.iter().filter(|s| s.state == SlabState::Free).count();
        assert_eq!(flushed, 3, "a shutdown stops the round after one flush");
        schedule.flush_round(&mut host, &clock, || false);
        assert!(host.slabs.iter().all(|s| s.state == SlabState::Free));
        assert_eq!(schedule.next_due(), None);
    }

    #[test]
    fn an_unregistered_index_is_not_flushed_nor_retried_at_once() {
        let clock = ManualClock::default();
        let mut schedule = FlushSchedule::default();
        let mut host = Host::new(vec![sealed(0, 5, 10)], &clock);
        assert_eq!(schedule.flush_one(&mut host, &clock), FlushStep::NotDone);
        assert_eq!(schedule.flush_one(&mut host, &clock), FlushStep::Idle);
        assert!(host.calls.is_empty());
    }

    #[test]
    fn shutdown_flushes_everything_it_can_before_the_deadline() {
        let clock = ManualClock::default();
        let mut active = sealed(2, 1, 30);
        active.state = SlabState::Active;
        let mut host = Host::new(vec![sealed(0, 0, 10), sealed(1, 0, 11), active], &clock);
        let deadline = clock.now() + Duration::from_millis(800);
        assert_eq!(FlushSchedule::default().shutdown_flush(&mut host, deadline, &clock), 0);
        assert!(host.slabs.iter().all(|s| s.state == SlabState::Free), "sealed, flushed and freed");
    }

    #[test]
    fn shutdown_leaves_what_the_deadline_does_not_allow() {
        let clock = ManualClock::default();
        let slabs = (0..5).map(|i| sealed(i, 0, 10 + i as u64)).collect();
        let mut host = Host::new(slabs, &clock);
        host.cost = Duration::from_millis(300);
        let deadline = clock.now() + Duration::from_millis(800);
        // Flushes start at 0, 300 and 600 ms; the one ending at 900 ms is the last.
        assert_eq!(FlushSchedule::default().shutdown_flush(&mut host, deadline, &clock), 2);
        host.failing = vec![13, 14];
        host.cost = Duration::from_millis(1);
        let deadline = clock.now() + Duration::from_millis(800);
        assert_eq!(FlushSchedule::default().shutdown_flush(&mut host, deadline, &clock), 2, "failing ones stay");
    }
}
