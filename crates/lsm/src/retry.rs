//! Retrying failed background work without a hot loop: exponential backoff with a cap, and
//! failure episodes (the first failure begins one, the next success ends it), so that a caller
//! logs once per episode rather than once per attempt.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Exponential backoff: the `n`-th consecutive failure waits `first · 2ⁿ⁻¹`, at most `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Wait after the first failure.
    pub first: Duration,
    /// Longest wait.
    pub cap: Duration,
}

impl Default for Backoff {
    /// 100 ms after the first failure, doubling up to 30 s.
    fn default() -> Self {
        Self { first: Duration::from_millis(100), cap: Duration::from_secs(30) }
    }
}

impl Backoff {
    /// The wait after `failures` consecutive failures (zero for none); never above `cap`.
    pub fn delay(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32.checked_shl(failures - 1).unwrap_or(u32::MAX);
        self.first.saturating_mul(factor).min(self.cap)
    }
}

/// What [`RetrySchedule::failed`] reports about a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// Consecutive failures of the key, this one included (1 = an episode begins).
    pub attempt: u32,
    /// The wait before the key is due again.
    pub retry_in: Duration,
}

/// Per-key retry state: which keys are failing, how often, and when each may be tried again.
///
/// Guarantees: a key that never failed is always due; after a failure it is not due again until
/// its backoff has passed; [`RetrySchedule::succeeded`] forgets it and returns how many attempts
/// of the episode had failed.
#[derive(Debug, Clone)]
pub struct RetrySchedule<K> {
    backoff: Backoff,
    failing: HashMap<K, (u32, Instant)>,
}

impl<K: Eq + Hash + Clone> RetrySchedule<K> {
    /// An empty schedule using `backoff`.
    pub fn new(backoff: Backoff) -> Self {
        Self { backoff, failing: HashMap::new() }
    }

    /// Whether `key` may be tried at `now`.
    pub fn is_due(&self, key: &K, now: Instant) -> bool {
        self.failing.get(key).is_none_or(|&(_, due)| due <= now)
    }

    /// Records a failure of `key` at `now`.
    pub fn failed(&mut self, key: K, now: Instant) -> Failure {
        let entry = self.failing.entry(key).or_insert((0, now));
        entry.0 = entry.0.saturating_add(1);
        let retry_in = self.backoff.delay(entry.0);
        entry.1 = now + retry_in;
        Failure { attempt: entry.0, retry_in }
    }

    /// Records a success of `key`; returns the failed attempts of the episode it ends (0: none).
    pub fn succeeded(&mut self, key: &K) -> u32 {
        self.failing.remove(key).map_or(0, |(failures, _)| failures)
    }

    /// Makes every failing key that `select` accepts due at `now` (a user asked for a retry);
    /// their failure counts stay.
    pub fn make_due(&mut self, now: Instant, mut select: impl FnMut(&K) -> bool) {
        for (key, (_, due)) in &mut self.failing {
            if select(key) {
                *due = now;
            }
        }
    }

    /// Consecutive failures of `key` (0 when healthy).
    pub fn failures(&self, key: &K) -> u32 {
        self.failing.get(key).map_or(0, |&(failures, _)| failures)
    }

    /// Forgets keys that no longer exist (`keep` returns false for them).
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.failing.retain(|key, _| keep(key));
    }

    /// The earliest moment a failing key becomes due, if any key is failing.
    pub fn next_due(&self) -> Option<Instant> {
        self.failing.values().map(|&(_, due)| due).min()
    }
}

/// The log lines of one kind of background work's failure episodes: one line when an episode
/// begins, one when the next success ends it, none for the attempts in between, so a failure
/// that persists for hours logs twice, not once per retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeLog {
    /// The work, as the subject of the line ("flushing memtable 7 of index 16384").
    pub work: String,
    /// What goes on meanwhile, for the line that begins an episode ("its rows stay searchable").
    pub meanwhile: &'static str,
}

impl EpisodeLog {
    /// The line for the failed attempt number `attempt` of its episode (1 begins it) with
    /// `error`: `Some` only when it begins the episode.
    pub fn failed(&self, attempt: u32, error: &str) -> Option<String> {
        (attempt == 1).then(|| format!("{} failed: {error}; retrying with backoff ({})", self.work, self.meanwhile))
    }

    /// The line for a success after `failed` failed attempts: `Some` only when it ends an
    /// episode (`failed > 0`).
    pub fn succeeded(&self, failed: u32) -> Option<String> {
        (failed > 0).then(|| format!("{} succeeded after {failed} failed attempts", self.work))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_logs_its_first_failure_and_its_end_only() {
        let log = EpisodeLog { work: "merging segments of index 7".to_owned(), meanwhile: "searches are unaffected" };
        let mut schedule = RetrySchedule::new(Backoff::default());
        let (mut now, mut lines) = (Instant::now(), Vec::new());
        for _ in 0..5 {
            let failure = schedule.failed(7, now);
            lines.extend(log.failed(failure.attempt, "disk full"));
            now += failure.retry_in;
        }
        lines.extend(log.succeeded(schedule.succeeded(&7)));
        lines.extend(log.succeeded(schedule.succeeded(&7)));
        assert_eq!(
            lines,
            [
                "merging segments of index 7 failed: disk full; retrying with backoff (searches are unaffected)",
                "merging segments of index 7 succeeded after 5 failed attempts",
            ]
        );
    }

    #[test]
    fn backoff_doubles_from_the_first_wait_and_stops_at_the_cap() {
        let backoff = Backoff { first: Duration::from_millis(100), cap: Duration::from_secs(30) };
        let waits: Vec<u128> = (0..12).map(|n| backoff.delay(n).as_millis()).collect();
        assert_eq!(waits, [0, 100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
        assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(30));
    }

    #[test]
    fn a_failing_key_waits_its_backoff_while_others_stay_due_and_success_ends_the_episode() {
        let mut schedule = RetrySchedule::new(Backoff::default());
        let start = Instant::now();
        assert!(schedule.is_due(&"poisoned", start));
        let first = schedule.failed("poisoned", start);
        assert_eq!(first, Failure { attempt: 1, retry_in: Duration::from_millis(100) });
        assert!(!schedule.is_due(&"poisoned", start + Duration::from_millis(99)));
        assert!(schedule.is_due(&"healthy", start), "one failing key never blocks another");
        assert!(schedule.is_due(&"poisoned", start + Duration::from_millis(100)));
        let mut now = start;
        for attempt in 2..=20 {
            now += schedule.backoff.delay(attempt - 1);
            assert!(schedule.is_due(&"poisoned", now));
            assert_eq!(schedule.failed("poisoned", now).attempt, attempt);
        }
        // 20 attempts in a row span minutes, not a hot loop.
        assert!(now - start > Duration::from_mins(5), "{:?}", now - start);
        assert_eq!(schedule.next_due(), Some(now + Duration::from_secs(30)));
        schedule.make_due(now, |key| *key == "other");
        assert!(!schedule.is_due(&"poisoned", now));
        schedule.make_due(now, |key| *key == "poisoned");
        assert!(schedule.is_due(&"poisoned", now));
        assert_eq!(schedule.failures(&"poisoned"), 20);
        assert_eq!(schedule.succeeded(&"poisoned"), 20);
        assert_eq!(schedule.succeeded(&"poisoned"), 0);
        assert!(schedule.is_due(&"poisoned", now));
        assert_eq!(schedule.failed("poisoned", now).attempt, 1, "a new episode starts over");
        schedule.retain(|_| false);
        assert_eq!(schedule.next_due(), None);
    }
}
