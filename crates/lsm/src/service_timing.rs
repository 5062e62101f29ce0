//! The index service's timing decisions: how long it sleeps between rounds, how often it sweeps
//! garbage, and the bounded flush at shutdown (its deadline is fixed at the first shutdown signal).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::clock::Clock;

/// How long the service keeps flushing after a shutdown request before it leaves the rest to
/// recovery.
pub const SHUTDOWN_FLUSH_BUDGET: Duration = Duration::from_millis(800);

/// The longest sleep between rounds while a merge is being built.
pub const BUSY_WAIT: Duration = Duration::from_millis(20);

/// The longest sleep between rounds otherwise.
pub const IDLE_WAIT: Duration = Duration::from_millis(500);

/// The least time between two garbage sweeps.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(2);

/// When shutdown was first requested. A host's signal flag resets when read; this one stays set.
#[derive(Debug, Default)]
pub struct Shutdown {
    requested_at: OnceLock<Instant>,
}

impl Shutdown {
    /// No shutdown requested yet.
    pub const fn new() -> Self {
        Self { requested_at: OnceLock::new() }
    }

    /// The end of the shutdown flush budget ([`SHUTDOWN_FLUSH_BUDGET`] after the first request),
    /// once shutdown was requested; `signalled` says whether a request arrived since the last call.
    pub fn deadline(&self, signalled: bool, clock: &impl Clock) -> Option<Instant> {
        if signalled {
            self.requested_at.get_or_init(|| clock.now());
        }
        self.requested_at.get().map(|at| *at + SHUTDOWN_FLUSH_BUDGET)
    }
}

/// How long the service sleeps after a round at `now`: [`BUSY_WAIT`] while a merge is being built
/// (`merging`), [`IDLE_WAIT`] otherwise, and no longer than until `next_retry`, when a failing
/// flush is due again.
pub fn round_wait(merging: bool, next_retry: Option<Instant>, now: Instant) -> Duration {
    let idle = if merging { BUSY_WAIT } else { IDLE_WAIT };
    next_retry.map_or(idle, |due| due.saturating_duration_since(now).min(idle))
}

/// Work done at most once per interval (the first time at once).
#[derive(Debug, Clone)]
pub struct Periodic {
    interval: Duration,
    last: Option<Instant>,
}

impl Periodic {
    /// Work due at once, then whenever more than `interval` has passed since it was last due.
    pub fn new(interval: Duration) -> Self {
        Self { interval, last: None }
    }

    /// Whether the work is due at `now`; if so, it counts as done now.
    pub fn due(&mut self, now: Instant) -> bool {
        let due = self.last.is_none_or(|last| now.saturating_duration_since(last) > self.interval);
        if due {
            self.last = Some(now);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn the_shutdown_deadline_is_fixed_at_the_first_request() {
        let clock = ManualClock::default();
        let shutdown = Shutdown::new();
        assert_eq!(shutdown.deadline(false, &clock), None);
        let start = clock.now();
        assert_eq!(shutdown.deadline(true, &clock), Some(start + SHUTDOWN_FLUSH_BUDGET));
        clock.advance(Duration::from_millis(300));
        assert_eq!(shutdown.deadline(false, &clock), Some(start + SHUTDOWN_FLUSH_BUDGET), "the flag reset");
        assert_eq!(shutdown.deadline(true, &clock), Some(start + SHUTDOWN_FLUSH_BUDGET), "a second signal");
    }

    #[test]
    fn rounds_sleep_less_while_merging_and_wake_for_due_retries() {
        let now = Instant::now();
        assert_eq!(round_wait(false, None, now), IDLE_WAIT);
        assert_eq!(round_wait(true, None, now), BUSY_WAIT);
        assert_eq!(round_wait(false, Some(now + Duration::from_millis(70)), now), Duration::from_millis(70));
        assert_eq!(round_wait(true, Some(now + Duration::from_millis(70)), now), BUSY_WAIT);
        assert_eq!(round_wait(false, Some(now), now + Duration::from_secs(1)), Duration::ZERO, "overdue");
    }

    #[test]
    fn periodic_work_is_due_at_once_then_after_each_interval() {
        let clock = ManualClock::default();
        let mut sweeps = Periodic::new(SWEEP_INTERVAL);
        assert!(sweeps.due(clock.now()));
        assert!(!sweeps.due(clock.now()));
        clock.advance(SWEEP_INTERVAL);
        assert!(!sweeps.due(clock.now()), "more than the interval must pass");
        clock.advance(Duration::from_millis(1));
        assert!(sweeps.due(clock.now()));
        assert!(!sweeps.due(clock.now()));
    }
}
