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
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pgrx::bgworkers::BackgroundWorker;
use pgrx::pg_sys;
use strata_lsm::retry::{Backoff, RetrySchedule};

use crate::db_workers::DatabaseWorkers;
use crate::shmem::{self, MAX_INDEXES};

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
    /// Directory slot → when its flag was first seen raised.
    pending_since: BTreeMap<usize, Instant>,
    workers: DatabaseWorkers,
}

impl Default for Settlers {
    fn default() -> Self {
        Self {
            pending_since: BTreeMap::new(),
            workers: DatabaseWorkers::new("settler", "strata_settler_main", false, RELAUNCH_AFTER),
        }
    }
}

impl Settlers {
    /// Launches a worker for each database with an index whose flag has been raised for
    /// [`SETTLE_AFTER`] and no worker running; called by the service every round (a primary only).
    pub fn tick(&mut self) {
        // SAFETY: a plain query of the startup process's state.
        if unsafe { pg_sys::RecoveryInProgress() } {
            self.pending_since.clear();
            return;
        }
        let now = Instant::now();
        let mut due = std::collections::BTreeSet::new();
        for slot in 0..MAX_INDEXES {
            let entry = &shmem::shared().indexes[slot];
            let pending =
                entry.in_use.load(Ordering::Acquire) == 1 && entry.release_pending.load(Ordering::Acquire) == 1;
            if !pending {
                self.pending_since.remove(&slot);
                continue;
            }
            let since = *self.pending_since.entry(slot).or_insert(now);
            if now.duration_since(since) >= SETTLE_AFTER {
                due.insert(entry.key.get(&shmem::directory_lock(false)).db);
            }
        }
        for db in due {
            self.workers.ensure_running(db, now);
        }
    }
}

/// The worker of one database (its OID is the argument).
#[pgrx::pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn strata_settler_main(argument: pg_sys::Datum) {
    let db = crate::db_workers::connect(argument);
    let mut last_work = Instant::now();
    while BackgroundWorker::wait_latch(Some(SETTLE_INTERVAL)) && last_work.elapsed() < IDLE_EXIT {
        // SAFETY: a plain query of the startup process's state.
        if unsafe { pg_sys::RecoveryInProgress() } {
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
    let mut any = false;
    for slot in 0..MAX_INDEXES {
        let entry = &shmem::shared().indexes[slot];
        if entry.in_use.load(Ordering::Acquire) != 1
            || entry.release_pending.load(Ordering::Acquire) != 1
            || entry.key.get(&shmem::directory_lock(false)).db != db
            || !RETRIES.with(|r| r.borrow().is_due(&slot, Instant::now()))
        {
            continue;
        }
        any = true;
        let relid = pg_sys::Oid::from(entry.relid.load(Ordering::Acquire));
        let outcome = crate::fmgr::in_subtransaction(|| settle_index(slot, relid));
        match outcome {
            Ok(()) => {
                let failed = RETRIES.with(|r| r.borrow_mut().succeeded(&slot));
                if failed > 0 {
                    pgrx::log!("pg_strata settler: index {relid:?} settles again after {failed} failed attempts");
                }
            }
            Err(error) => {
                // Raised again, for the next attempt (or the next writer).
                entry.release_pending.store(1, Ordering::Release);
                let retry = RETRIES.with(|r| r.borrow_mut().failed(slot, Instant::now()));
                if retry.attempt == 1 {
                    pgrx::log!(
                        "pg_strata settler: settling flushed memtables of index {relid:?} failed: {error}; retrying \
                         with backoff (the next insert into the index settles them too)"
                    );
                }
            }
        }
    }
    any
}

/// Settles directory slot `slot`'s index, relation `relid`, if the slot still holds it.
fn settle_index(slot: usize, relid: pg_sys::Oid) {
    // SAFETY: opening a relation by OID inside the caller's subtransaction (its lock and
    // reference are released by the subtransaction's end, also when an error unwinds); a
    // relation dropped meanwhile is skipped (try_relation_open returns NULL), and one whose
    // storage is no longer the slot's (rewritten, or the OID reused) is left alone.
    unsafe {
        let index = pg_sys::try_relation_open(relid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        if index.is_null() {
            return;
        }
        let key = crate::index::state::key_of(index);
        let entry = &shmem::shared().indexes[slot];
        let same = crate::index::is_strata_index(index) && entry.key.get(&shmem::directory_lock(false)) == key;
        if same && entry.release_pending.swap(0, Ordering::AcqRel) == 1 {
            let handle = crate::index::opening::open(index);
            crate::index::state::settle_flushed(index, &handle);
        }
        pg_sys::relation_close(index, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    }
}
