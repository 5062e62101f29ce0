//! [`MergeRunner`]: the bookkeeping of background merges — at most one merge in flight (its build
//! on a helper thread), indexes whose merges fail backing off ([`crate::retry`]) while the others
//! keep merging, failure episodes reported once at their start and once at their end, and a
//! bounded wait for the build in flight at shutdown.
//!
//! The steps of a merge themselves ([`crate::merge`]: prepare under the manifest lock, build,
//! finish) and the reporting are the host's ([`MergeHost`]); the runner decides when each is
//! called.

use std::hash::Hash;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use strata_engine::cancel::Cancel;

use crate::clock::Clock;
use crate::files::FileError;
use crate::merge::MergePlan;
use crate::retry::{Backoff, RetrySchedule};

/// A merge whose segment is being built on a helper thread (step 2), as the host started it.
pub struct Started {
    /// What finishing it needs.
    pub plan: MergePlan,
    /// Stops the build.
    pub cancel: Cancel,
    /// The build; its result is the built file's row count.
    pub worker: JoinHandle<Result<u64, FileError>>,
}

/// What the runner needs from its host.
pub trait MergeHost {
    /// An index the host can merge (a handle to it).
    type Index: Clone;
    /// The identity under which an index backs off.
    type Key: Eq + Hash + Clone;

    /// The identity of `index`.
    fn key(&self, index: &Self::Index) -> Self::Key;

    /// Step 1: prepares a merge of `index` and starts its build (`None`: nothing to do, or done
    /// at once).
    fn start(&mut self, index: &Self::Index) -> Result<Option<Started>, FileError>;

    /// Step 3: publishes the merge `plan` of `index` whose build returned `built` (the build's
    /// thread has ended).
    fn finish(&mut self, index: &Self::Index, plan: MergePlan, built: Result<u64, FileError>) -> Result<(), FileError>;

    /// Removes the file a build abandoned at shutdown wrote as segment `new_id`.
    fn discard(&mut self, index: &Self::Index, new_id: u64);

    /// A merge of `index` succeeded (or found nothing left to do) after `failed_attempts` failed
    /// attempts in its episode (0: no failure episode was under way).
    fn succeeded(&mut self, index: &Self::Index, failed_attempts: u32);

    /// A merge of `index` failed with `error`; `attempt` is 1 when a failure episode begins.
    fn failed(&mut self, index: &Self::Index, error: &str, attempt: u32);
}

/// The merge in flight.
struct InFlight<I> {
    index: I,
    started: Started,
}

/// The service's merge state: at most one merge in flight, and the indexes whose merges fail,
/// backing off.
///
/// Guarantees: [`MergeHost::start`] is not called while a merge is in flight, nor for an index
/// backing off after a failure (until its backoff has passed or [`MergeRunner::retry_now`]);
/// [`MergeHost::finish`] is called once per started merge, after its build has ended, unless the
/// merge is abandoned.
pub struct MergeRunner<H: MergeHost> {
    in_flight: Option<InFlight<H::Index>>,
    retries: RetrySchedule<H::Key>,
}

impl<H: MergeHost> Default for MergeRunner<H> {
    fn default() -> Self {
        Self { in_flight: None, retries: RetrySchedule::new(Backoff::default()) }
    }
}

impl<H: MergeHost> MergeRunner<H> {
    /// Whether a merge is being built (the service then polls more often).
    pub fn busy(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Segment ids being written by the merge in flight (not garbage although unlisted).
    pub fn in_flight(&self) -> Vec<u64> {
        self.in_flight.iter().map(|m| m.started.plan.new_id).collect()
    }

    /// Finishes the merge in flight if its build is done; then, when none is in flight, starts one
    /// for the first of `indexes` that needs it and is not backing off after a failure.
    pub fn step(&mut self, host: &mut H, indexes: impl IntoIterator<Item = H::Index>, clock: &impl Clock) {
        if let Some(merge) = self.in_flight.take() {
            if !merge.started.worker.is_finished() {
                self.in_flight = Some(merge);
                return;
            }
            let InFlight { index, started: Started { plan, worker, .. } } = merge;
            let finished = match worker.join() {
                Ok(built) => host.finish(&index, plan, built),
                Err(_) => Err(FileError::Build { kind: "merged", message: "the merge thread panicked".into() }),
            };
            match finished {
                Ok(()) => self.succeeded(host, &index),
                Err(e) => self.failed(host, &index, &e.to_string(), clock),
            }
        }
        let now = clock.now();
        for index in indexes {
            if !self.retries.is_due(&host.key(&index), now) {
                continue;
            }
            match host.start(&index) {
                Ok(Some(started)) => {
                    self.in_flight = Some(InFlight { index, started });
                    break;
                }
                // Nothing to merge any more (or merged directly): an episode of failures ends.
                Ok(None) if self.retries.failures(&host.key(&index)) > 0 => self.succeeded(host, &index),
                Ok(None) => {}
                Err(e) => self.failed(host, &index, &e.to_string(), clock),
            }
        }
    }

    /// Makes the failing merges of the index `key` names due now (a user asked for a retry).
    pub fn retry_now(&mut self, key: &H::Key, clock: &impl Clock) {
        self.retries.make_due(clock.now(), |k| k == key);
    }

    fn succeeded(&mut self, host: &mut H, index: &H::Index) {
        let failed = self.retries.succeeded(&host.key(index));
        host.succeeded(index, failed);
    }

    fn failed(&mut self, host: &mut H, index: &H::Index, error: &str, clock: &impl Clock) {
        let failure = self.retries.failed(host.key(index), clock.now());
        host.failed(index, error, failure.attempt);
    }

    /// Cancels the merge in flight (at shutdown) and waits at most `wait` for its thread, which
    /// stops within one unit of work; the file of a build that completed is discarded. A thread
    /// still running then is left to end with the process (whatever it wrote is unlisted garbage).
    pub fn abandon(&mut self, host: &mut H, wait: Duration) {
        if let Some(InFlight { index, started }) = self.in_flight.take() {
            started.cancel.request();
            let deadline = Instant::now() + wait;
            while !started.worker.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if started.worker.is_finished() && matches!(started.worker.join(), Ok(Ok(_))) {
                host.discard(&index, started.plan.new_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::clock::ManualClock;

    /// What a test index does when started.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Behaviour {
        Nothing,
        FailToStart,
        /// Build `rows` rows, waiting for the gate (or cancellation) first.
        Build(u64),
        BuildFails,
    }

    struct Host {
        behaviour: HashMap<u32, Behaviour>,
        next_id: u64,
        /// Everything the runner called, in order.
        calls: Vec<String>,
        gate: Cancel,
    }

    impl Host {
        fn new() -> Self {
            Self { behaviour: HashMap::new(), next_id: 0, calls: Vec::new(), gate: Cancel::new() }
        }

        fn take_calls(&mut self) -> Vec<String> {
            std::mem::take(&mut self.calls)
        }
    }

    impl MergeHost for Host {
        type Index = u32;
        type Key = u32;

        fn key(&self, index: &u32) -> u32 {
            *index
        }

        fn start(&mut self, index: &u32) -> Result<Option<Started>, FileError> {
            self.calls.push(format!("start {index}"));
            let behaviour = self.behaviour[index];
            let (rows, fails) = match behaviour {
                Behaviour::Nothing => return Ok(None),
                Behaviour::FailToStart => return Err(FileError::Build { kind: "merged", message: "no".into() }),
                Behaviour::Build(rows) => (rows, false),
                Behaviour::BuildFails => (0, true),
            };
            self.next_id += 1;
            let cancel = Cancel::new();
            let (gate, stop) = (self.gate.clone(), cancel.clone());
            let worker = std::thread::spawn(move || {
                while !gate.is_requested() && !stop.is_requested() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if fails {
                    Err(FileError::Build { kind: "merged", message: "build failed".into() })
                } else {
                    Ok(rows)
                }
            });
            let plan = MergePlan { inputs: Vec::new(), covers: Vec::new(), new_id: self.next_id };
            Ok(Some(Started { plan, cancel, worker }))
        }

        fn finish(&mut self, index: &u32, plan: MergePlan, built: Result<u64, FileError>) -> Result<(), FileError> {
            self.calls.push(format!("finish {index} {} {:?}", plan.new_id, built.as_ref().ok()));
            built.map(|_| ())
        }

        fn discard(&mut self, index: &u32, new_id: u64) {
            self.calls.push(format!("discard {index} {new_id}"));
        }

        fn succeeded(&mut self, index: &u32, failed_attempts: u32) {
            self.calls.push(format!("succeeded {index} after {failed_attempts}"));
        }

        fn failed(&mut self, index: &u32, _error: &str, attempt: u32) {
            self.calls.push(format!("failed {index} attempt {attempt}"));
        }
    }

    /// Steps until the merge in flight is finished (the gate is open).
    fn step_until_idle(runner: &mut MergeRunner<Host>, host: &mut Host, indexes: &[u32], clock: &ManualClock) {
        for _ in 0..2000 {
            runner.step(host, indexes.iter().copied(), clock);
            if !runner.busy() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("the merge never finished");
    }

    #[test]
    fn one_merge_at_a_time_finished_after_its_build() {
        let mut host = Host::new();
        host.behaviour.extend([(1, Behaviour::Build(10)), (2, Behaviour::Build(20))]);
        let clock = ManualClock::default();
        let mut runner = MergeRunner::default();
        runner.step(&mut host, [1, 2], &clock);
        assert_eq!(host.take_calls(), ["start 1"], "index 2 waits for the merge in flight");
        assert!(runner.busy());
        assert_eq!(runner.in_flight(), [1]);
        runner.step(&mut host, [1, 2], &clock);
        assert_eq!(host.take_calls(), Vec::<String>::new(), "nothing while the build runs");
        host.gate.request();
        step_until_idle(&mut runner, &mut host, &[], &clock);
        assert_eq!(host.take_calls(), ["finish 1 1 Some(10)", "succeeded 1 after 0"]);
        assert!(runner.in_flight().is_empty());
    }

    #[test]
    fn failing_indexes_back_off_while_others_merge_and_episodes_end_once() {
        let mut host = Host::new();
        host.behaviour.extend([(1, Behaviour::FailToStart), (2, Behaviour::Nothing)]);
        let clock = ManualClock::default();
        let mut runner = MergeRunner::default();
        runner.step(&mut host, [1, 2], &clock);
        assert_eq!(host.take_calls(), ["start 1", "failed 1 attempt 1", "start 2"]);
        runner.step(&mut host, [1, 2], &clock);
        assert_eq!(host.take_calls(), ["start 2"], "index 1 backs off");
        clock.advance(Backoff::default().delay(1));
        runner.step(&mut host, [1, 2], &clock);
        assert_eq!(host.take_calls(), ["start 1", "failed 1 attempt 2", "start 2"]);
        host.behaviour.insert(1, Behaviour::Nothing);
        runner.step(&mut host, [1], &clock);
        assert_eq!(host.take_calls(), Vec::<String>::new(), "the second backoff is longer");
        runner.retry_now(&1, &clock);
        runner.step(&mut host, [1], &clock);
        assert_eq!(host.take_calls(), ["start 1", "succeeded 1 after 2"]);
        runner.step(&mut host, [1], &clock);
        assert_eq!(host.take_calls(), ["start 1"], "a healthy index reports no episode");
    }

    #[test]
    fn a_failed_build_is_a_failure_of_its_index() {
        let mut host = Host::new();
        host.behaviour.insert(1, Behaviour::BuildFails);
        host.gate.request();
        let clock = ManualClock::default();
        let mut runner = MergeRunner::default();
        step_until_idle(&mut runner, &mut host, &[1], &clock);
        assert_eq!(host.take_calls(), ["start 1", "finish 1 1 None", "failed 1 attempt 1"]);
    }

    #[test]
    fn abandoning_cancels_the_build_and_discards_what_it_wrote() {
        let mut host = Host::new();
        host.behaviour.insert(1, Behaviour::Build(5));
        let clock = ManualClock::default();
        let mut runner = MergeRunner::default();
        runner.step(&mut host, [1], &clock);
        host.take_calls();
        runner.abandon(&mut host, Duration::from_secs(10));
        assert_eq!(host.take_calls(), ["discard 1 1"]);
        assert!(!runner.busy());
        runner.abandon(&mut host, Duration::from_secs(10));
        assert_eq!(host.take_calls(), Vec::<String>::new());
    }
}
