//! The bookkeeping of the per-database background workers the index service launches (it has no
//! database connection itself, so work that needs one — settling flushed groups on a primary,
//! following the replayed log on a standby — runs in a worker connected to the index's database):
//!
//! - [`Launches`]: at most one worker per database and role, and a worker that stopped (an error,
//!   a conflict, its database dropped) launched again only after a pause, never in a loop;
//! - [`PendingSince`] and [`pending_settles`]: on a primary, when an index's flushed groups have
//!   waited long enough for a writer to settle them that a settler worker should;
//! - [`PendingSettle`]: the flag taken down by whoever settles, raised again unless the settle
//!   completes (an error unwinding through it loses nothing);
//! - [`due_in`]: which of a worker's keys to try in a round, each failing key waiting its backoff
//!   while the others go on.
//!
//! pg_strata launches the workers (`BackgroundWorkerBuilder`), connects them and runs their work
//! in subtransactions; every decision of when is here.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hash;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::index_slot::{HeldLock, IndexSlot};
use crate::retry::RetrySchedule;

/// The workers of one role, by database OID: each with its handle (`None` when the launch failed)
/// and when it was launched.
///
/// Guarantees: [`Launches::ensure_running`] launches a database's worker only when none was
/// launched yet, or the last one is no longer alive *and* was launched at least `relaunch_after`
/// ago (a launch that failed counts as a worker that stopped at once).
#[derive(Debug)]
pub struct Launches<W> {
    relaunch_after: Duration,
    launched: BTreeMap<u32, (Option<W>, Instant)>,
}

impl<W> Launches<W> {
    /// No workers yet; a stopped worker is launched again at most every `relaunch_after`.
    pub fn new(relaunch_after: Duration) -> Self {
        Self { relaunch_after, launched: BTreeMap::new() }
    }

    /// Launches (`launch`) the worker of database `db` at `now` unless one is running (`alive`)
    /// or the last launch was less than the relaunch pause ago. Returns whether it launched.
    pub fn ensure_running(
        &mut self,
        db: u32,
        now: Instant,
        alive: impl Fn(&W) -> bool,
        launch: impl FnOnce(u32) -> Option<W>,
    ) -> bool {
        let running = self.launched.get(&db).is_some_and(|(worker, launched)| {
            worker.as_ref().is_some_and(&alive) || now.duration_since(*launched) < self.relaunch_after
        });
        if !running {
            self.launched.insert(db, (launch(db), now));
        }
        !running
    }

    /// Forgets every worker (they stop by themselves).
    pub fn clear(&mut self) {
        self.launched.clear();
    }
}

/// The slots of `slots` whose index has flushed groups waiting to be settled (in use, its
/// `release_pending` flag raised), with the index's database; `lock` is the directory lock (the
/// key is read under it).
pub fn pending_settles(slots: &[IndexSlot], lock: &impl HeldLock) -> Vec<(usize, u32)> {
    slots
        .iter()
        .enumerate()
        .filter(|(_, entry)| {
            entry.in_use.load(Ordering::Acquire) == 1 && entry.release_pending.load(Ordering::Acquire) == 1
        })
        .map(|(slot, entry)| (slot, entry.key.get(lock).db))
        .collect()
}

/// An index's `release_pending` flag ([`IndexSlot::release_pending`]) taken down by the backend
/// that is about to settle the index's flushed groups.
///
/// Guarantees: the flag is raised again when this value is dropped before
/// [`PendingSettle::settled`] — also when an error unwinds through its owner while settling — so
/// a settle that fails leaves the flag as it found it, for the next writer, VACUUM or settler
/// worker; after `settled` the flag stays down (until the service raises it for a later flush).
#[derive(Debug)]
#[must_use = "dropping it at once raises the flag again"]
pub struct PendingSettle<'a> {
    flag: &'a AtomicU32,
    settled: bool,
}

impl<'a> PendingSettle<'a> {
    /// Takes `flag` down: `Some` when it was raised (the caller then settles and calls
    /// [`PendingSettle::settled`]), `None` when there is nothing to settle.
    pub fn take(flag: &'a AtomicU32) -> Option<Self> {
        // Built only when taken (not as `then_some`'s argument): dropping it raises the flag.
        if flag.swap(0, Ordering::AcqRel) == 1 {
            Some(Self { flag, settled: false })
        } else {
            None
        }
    }

    /// The flushed groups were settled: the flag stays down.
    pub fn settled(mut self) {
        self.settled = true;
    }
}

impl Drop for PendingSettle<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.flag.store(1, Ordering::Release);
        }
    }
}

/// When each slot's pending flag was first seen raised, so that a settler is launched only for
/// flags that no writer lowered within a grace period.
///
/// Guarantees: a database is due once one of its slots has been seen pending, without a look in
/// between that saw it lowered, for at least the grace period; a look that does not see a slot
/// pending forgets it (its next raise starts over).
#[derive(Debug, Default)]
pub struct PendingSince {
    since: BTreeMap<usize, Instant>,
}

impl PendingSince {
    /// Records one look at `now` at the slots pending now (`(slot, database)`, as
    /// [`pending_settles`] returns them); returns the databases with a slot pending for at least
    /// `grace`.
    pub fn due(&mut self, pending: &[(usize, u32)], now: Instant, grace: Duration) -> BTreeSet<u32> {
        self.since.retain(|slot, _| pending.iter().any(|(s, _)| s == slot));
        pending
            .iter()
            .filter(|(slot, _)| now.duration_since(*self.since.entry(*slot).or_insert(now)) >= grace)
            .map(|&(_, db)| db)
            .collect()
    }

    /// Forgets every slot (the server is no longer a primary).
    pub fn clear(&mut self) {
        self.since.clear();
    }
}

/// The keys of `keys` that `schedule` lets a worker try at `now`, after forgetting the failures
/// of keys no longer among them (dropped indexes).
pub fn due_in<K: Eq + Hash + Clone>(schedule: &mut RetrySchedule<K>, keys: &[K], now: Instant) -> Vec<K> {
    schedule.retain(|key| keys.contains(key));
    keys.iter().filter(|key| schedule.is_due(key, now)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::index_slot::IndexKey;
    use crate::retry::Backoff;

    struct Lock;

    impl HeldLock for Lock {
        fn is_directory(&self) -> bool {
            true
        }

        fn is_exclusive(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_database_gets_one_worker_and_a_stopped_one_is_relaunched_only_after_the_pause() {
        let pause = Duration::from_secs(10);
        let mut launches = Launches::new(pause);
        let alive = Cell::new(true);
        let launched = Cell::new(0);
        let start = Instant::now();
        let mut ensure = |at: Duration, fails: bool| {
            launches.ensure_running(
                7,
                start + at,
                |_: &u32| alive.get(),
                |db| {
                    launched.set(launched.get() + 1);
                    (!fails).then_some(db)
                },
            )
        };
        assert!(ensure(Duration::ZERO, false), "the first look launches");
        assert!(!ensure(Duration::from_mins(1), false), "never a second worker while one runs");
        alive.set(false);
        assert!(ensure(Duration::from_secs(61), true), "stopped, launched long ago: relaunched");
        assert!(!ensure(Duration::from_secs(70), false), "a failed launch waits the pause");
        assert!(ensure(Duration::from_secs(71), false));
        assert_eq!(launched.get(), 3);
        launches.clear();
        assert!(launches.ensure_running(7, start, |_| true, |_| None), "cleared: launched again at once");
    }

    #[test]
    fn only_flags_raised_for_the_whole_grace_period_make_their_database_due() {
        let grace = Duration::from_millis(300);
        let mut pending = PendingSince::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert!(pending.due(&[(1, 10), (2, 20)], at(0), grace).is_empty());
        assert!(pending.due(&[(1, 10), (2, 20)], at(100), grace).is_empty());
        // Slot 2 was settled by a writer in between: its clock starts over.
        assert!(pending.due(&[(1, 10)], at(200), grace).is_empty());
        assert_eq!(pending.due(&[(1, 10), (2, 20)], at(300), grace), BTreeSet::from([10]));
        assert_eq!(pending.due(&[(1, 10), (2, 20)], at(599), grace), BTreeSet::from([10]));
        assert_eq!(pending.due(&[(1, 10), (2, 20)], at(600), grace), BTreeSet::from([10, 20]));
        pending.clear();
        assert!(pending.due(&[(1, 10)], at(900), grace).is_empty(), "cleared: starts over");
    }

    #[test]
    fn pending_settles_lists_slots_in_use_with_the_flag_raised() {
        let slots: Vec<IndexSlot> = (0..4).map(|_| IndexSlot::free()).collect();
        for (slot, in_use, pending) in [(0, 1, 1), (1, 1, 0), (2, 0, 1), (3, 1, 1)] {
            slots[slot].in_use.store(in_use, Ordering::Release);
            slots[slot].release_pending.store(pending, Ordering::Release);
            slots[slot].key.set(&Lock, IndexKey { db: 100 + slot as u32, spc: 0, relnode: slot as u32 });
        }
        assert_eq!(pending_settles(&slots, &Lock), [(0, 100), (3, 103)]);
    }

    #[test]
    fn a_taken_flag_is_raised_again_unless_the_settle_completes() {
        let flag = AtomicU32::new(0);
        assert!(PendingSettle::take(&flag).is_none(), "nothing to settle");
        assert_eq!(flag.load(Ordering::Acquire), 0);

        flag.store(1, Ordering::Release);
        let pending = PendingSettle::take(&flag).expect("raised");
        assert_eq!(flag.load(Ordering::Acquire), 0, "down while settling");
        pending.settled();
        assert_eq!(flag.load(Ordering::Acquire), 0, "settled: stays down");

        flag.store(1, Ordering::Release);
        drop(PendingSettle::take(&flag).expect("raised"));
        assert_eq!(flag.load(Ordering::Acquire), 1, "given up: raised again");

        // An error raised while settling unwinds through the owner: the flag is raised again.
        let unwound = std::panic::catch_unwind(|| {
            let _pending = PendingSettle::take(&flag).expect("raised");
            panic!("settling failed");
        });
        assert!(unwound.is_err());
        assert_eq!(flag.load(Ordering::Acquire), 1, "unwound: raised again");
    }

    #[test]
    fn failing_keys_wait_their_backoff_and_vanished_keys_are_forgotten() {
        let mut schedule = RetrySchedule::new(Backoff::default());
        let now = Instant::now();
        schedule.failed(2u32, now);
        schedule.failed(9u32, now);
        assert_eq!(due_in(&mut schedule, &[1, 2, 3], now), [1, 3]);
        assert_eq!(schedule.failures(&9), 0, "key 9 is gone: its failures are forgotten");
        assert_eq!(schedule.failures(&2), 1);
        assert_eq!(due_in(&mut schedule, &[1, 2, 3], now + Duration::from_millis(100)), [1, 2, 3]);
    }
}
