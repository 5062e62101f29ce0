//! On a primary: settling, without waiting for a writer, the groups of memtables the index
//! service has flushed.
//!
//! A flushed memtable's group stays open in the status pages until a backend settles it: the
//! service has no database connection, so it only raises the index's `release_pending` flag, and
//! the next insert, VACUUM or `strata_flush` of the index settles. An index nobody writes to
//! after a bulk load would keep its last groups open indefinitely. That costs a standby one
//! memtable slab per open group (it cannot flush a group before the primary settles it), so a
//! standby could run out of slabs and stall while the primary sits idle; and the primary's own
//! merges leave open groups' segments alone.
//!
//! So the index service launches, for a database holding an index whose flag has stayed raised
//! for [`SETTLE_AFTER`], a short-lived background worker ([`strata_settler_main`]) that connects to
//! the database, settles every such index of it (each in its own subtransaction, an error logged
//! once per failure episode and retried with backoff), and exits after [`IDLE_EXIT`] with nothing
//! to settle, so that it never holds a database open for long (`DROP DATABASE` waits for it).

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pgrx::bgworkers::BackgroundWorker;
use pgrx::pg_sys;
use strata_lsm::retry::{Backoff, EpisodeLog, RetrySchedule};
use strata_lsm::workers::{pending_settles, PendingSince};

use crate::db_workers::DatabaseWorkers;
use crate::fmgr::in_recovery;
use crate::shmem;

/// How long an index's flag stays raised (no writer settled) before the service launches a worker.
pub const SETTLE_AFTER: Duration = Duration::from_millis(300);
/// How long a worker runs with nothing to settle before it exits.
pub const IDLE_EXIT: Duration = Duration::from_secs(2);
/// The least time between two launches of one database's worker.
const RELAUNCH_AFTER: Duration = Duration::from_secs(1);
/// How often a worker looks for indexes to settle.
const SETTLE_INTERVAL: Duration = Duration::from_millis(100);

/// The service's record of pending flags and of the workers it launched.
pub struct Settlers {
    pending: PendingSince,
    workers: DatabaseWorkers,
}

impl Default for Settlers {
    fn default() -> Self {
        Self {
            pending: PendingSince::default(),
            workers: DatabaseWorkers::new("settler", "strata_settler_main", false, RELAUNCH_AFTER),
        }
    }
}

impl Settlers {
    /// Launches a worker for each database with an index whose flag has been raised for
    /// [`SETTLE_AFTER`] and no worker running; called by the service every round (a primary only).
    pub fn tick(&mut self) {
        if in_recovery() {
            self.pending.clear();
            return;
        }
        let now = Instant::now();
        for db in self.pending.due(&pending_now(), now, SETTLE_AFTER) {
            self.workers.ensure_running(db, now);
        }
    }
}

/// The directory slots whose index has flushed groups to settle, with their databases.
fn pending_now() -> Vec<(usize, u32)> {
    pending_settles(&shmem::shared().indexes, &shmem::directory_lock(false))
}

/// The worker of one database (its OID is the argument).
#[pgrx::pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn strata_settler_main(argument: pg_sys::Datum) {
    let db = crate::db_workers::connect(argument);
    let mut last_work = Instant::now();
    while BackgroundWorker::wait_latch(Some(SETTLE_INTERVAL)) && last_work.elapsed() < IDLE_EXIT {
        if in_recovery() {
            break;
        }
        if BackgroundWorker::transaction(|| settle_database(db.to_u32())) {
            last_work = Instant::now();
        }
    }
}

thread_local! {
    /// The worker's retry schedule, by directory slot.
    static RETRIES: RefCell<RetrySchedule<usize>> = RefCell::new(RetrySchedule::new(Backoff::default()));
}

/// Settles every index of database `db` whose flag is raised and that is due; returns whether
/// any was.
fn settle_database(db: u32) -> bool {
    let now = Instant::now();
    let due: Vec<usize> = pending_now()
        .into_iter()
        .filter(|&(slot, of)| of == db && RETRIES.with(|r| r.borrow().is_due(&slot, now)))
        .map(|(slot, _)| slot)
        .collect();
    for &slot in &due {
        let entry = &shmem::shared().indexes[slot];
        let relid = pg_sys::Oid::from(entry.relid.load(Ordering::Acquire));
        let outcome = crate::fmgr::in_subtransaction(|| settle_index(slot, relid));
        let episodes = EpisodeLog {
            work: format!("pg_strata settler: settling flushed memtables of index {relid:?}"),
            meanwhile: "the next insert into the index settles them too",
        };
        let line = match outcome {
            Ok(()) => episodes.succeeded(RETRIES.with(|r| r.borrow_mut().succeeded(&slot))),
            // `settle_if_pending` raised the flag again, for the next attempt (or writer).
            Err(error) => {
                episodes.failed(RETRIES.with(|r| r.borrow_mut().failed(slot, Instant::now())).attempt, &error)
            }
        };
        if let Some(line) = line {
            pgrx::log!("{line}");
        }
    }
    !due.is_empty()
}

/// Settles directory slot `slot`'s index, relation `relid`, if the slot still holds it (a
/// relation dropped meanwhile is skipped, and one whose storage is no longer the slot's —
/// rewritten, or the OID reused — is left alone).
fn settle_index(slot: usize, relid: pg_sys::Oid) {
    crate::access::with_index_by_oid(relid, |index| {
        // SAFETY: `index` is an open index relation (with_index_by_oid), on this backend's thread.
        unsafe {
            let key = crate::access::state::key_of(index);
            let entry = &shmem::shared().indexes[slot];
            let same = crate::access::is_strata_index(index) && entry.key.get(&shmem::directory_lock(false)) == key;
            if same {
                // The flag is raised again if settling fails, for the next attempt (or writer).
                let handle = crate::access::opening::open(index);
                crate::access::state::settle_if_pending(index, &handle);
            }
        }
    });
}
