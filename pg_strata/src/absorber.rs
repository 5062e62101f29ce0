//! On a standby: one background worker per database that holds strata indexes, keeping each
//! index's derived state up to date with replay between queries (`index::standby::absorb`), so that
//! a standby that sat idle answers its next query without first catching up — and a promoted one
//! has little left to do.
//!
//! The index service (which has no database connection) launches them: every
//! [`CHECK_INTERVAL`] while the server is in recovery, one per database OID named by an index
//! directory under `$PGDATA/pg_strata`; a worker that stopped (an error, a recovery conflict, its
//! database dropped) is launched again at most every [`RELAUNCH_AFTER`]. A worker connects to its
//! database once hot standby accepts connections, absorbs every [`ABSORB_INTERVAL`] in a short
//! transaction, and exits when recovery ends.
//!
//! Each index's pass runs in its own subtransaction: one that fails (a full disk, a damaged
//! file) is rolled back, shown by `strata_index_stats` (part `absorb`, its attempts and last
//! error), logged once per failure episode, and retried with backoff, while the database's other
//! indexes are absorbed on every round. A pass never waits for memtable slabs: an index short of
//! them wakes the index service and is taken up again on the next round.

use std::cell::RefCell;
use std::path::Path;
use std::time::{Duration, Instant};

use pgrx::bgworkers::BackgroundWorker;
use pgrx::{pg_sys, Spi};
use strata_lsm::files::index_dirs;
use strata_lsm::retry::{Backoff, EpisodeLog, RetrySchedule};
use strata_lsm::workers::due_in;

use crate::access::standby::stopping;
use crate::access::state::ROOT_DIR;
use crate::db_workers::DatabaseWorkers;
use crate::fmgr::in_recovery;

/// How often the service looks for databases that need a worker.
const CHECK_INTERVAL: Duration = Duration::from_secs(2);
/// The least time between two launches of one database's worker.
const RELAUNCH_AFTER: Duration = Duration::from_secs(10);
/// How often a worker absorbs.
const ABSORB_INTERVAL: Duration = Duration::from_millis(200);

/// The service's record of the workers it launched.
pub struct Absorbers {
    workers: DatabaseWorkers,
    checked: Option<Instant>,
}

impl Default for Absorbers {
    fn default() -> Self {
        Self { workers: DatabaseWorkers::new("absorber", "strata_absorber_main", true, RELAUNCH_AFTER), checked: None }
    }
}

impl Absorbers {
    /// Launches the workers that should run and do not; called by the service every round.
    pub fn tick(&mut self) {
        if !in_recovery() {
            // The workers exit by themselves when recovery ends.
            self.workers.clear();
            return;
        }
        let now = Instant::now();
        if self.checked.is_some_and(|at| now.duration_since(at) < CHECK_INTERVAL) {
            return;
        }
        self.checked = Some(now);
        for db in databases() {
            self.workers.ensure_running(db, now);
        }
    }
}

/// The database OIDs named by index directories under `$PGDATA/pg_strata`.
fn databases() -> std::collections::BTreeSet<u32> {
    index_dirs(Path::new(ROOT_DIR)).into_iter().map(|((db, _, _), _)| db).collect()
}

/// The worker of one database (its OID is the argument).
#[pgrx::pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn strata_absorber_main(argument: pg_sys::Datum) {
    crate::db_workers::connect(argument);
    while BackgroundWorker::wait_latch(Some(ABSORB_INTERVAL)) && !stopping() {
        if !in_recovery() {
            break;
        }
        BackgroundWorker::transaction(absorb_database);
    }
}

thread_local! {
    /// The worker's retry schedule, by index OID: an index whose pass failed waits its backoff
    /// while the database's other indexes are absorbed on every round.
    static RETRIES: RefCell<RetrySchedule<u32>> = RefCell::new(RetrySchedule::new(Backoff::default()));
}

/// Absorbs every permanent strata or bm25 index of the connected database that is due, each in its own
/// subtransaction: an error in one index is caught, recorded in its slot (`strata_index_stats`
/// shows it) and logged once per failure episode, and the other indexes go on.
fn absorb_database() {
    let indexes: Vec<u32> = Spi::connect(|client| {
        client
            .select(
                "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_am a ON a.oid = c.relam \
                 JOIN pg_catalog.pg_proc p ON p.oid = a.amhandler \
                 WHERE p.probin = '$libdir/pg_strata' \
                 AND p.prosrc IN ('strata_amhandler', 'strata_hnsw_amhandler', 'strata_ivfflat_amhandler', \
                 'strata_bm25_amhandler') \
                 AND c.relkind = 'i' AND c.relpersistence = 'p'",
                None,
                &[],
            )
            .map(|rows| {
                rows.filter_map(|row| row.get::<pg_sys::Oid>(1).ok().flatten().map(pg_sys::Oid::to_u32)).collect()
            })
            .unwrap_or_default()
    });
    let due = RETRIES.with(|retries| due_in(&mut retries.borrow_mut(), &indexes, Instant::now()));
    for oid in due {
        if !stopping() {
            absorb_index(pg_sys::Oid::from(oid));
        }
    }
}

/// One index's pass, isolated in a subtransaction, with its outcome recorded.
fn absorb_index(oid: pg_sys::Oid) {
    let slot = std::cell::Cell::new(None);
    // The cell holds a plain `Option<usize>`, whole whatever point an error unwinds from.
    // Inside the subtransaction, whose end releases the relation also when an error unwinds; a
    // relation dropped since the query is skipped.
    let outcome = crate::fmgr::in_subtransaction(std::panic::AssertUnwindSafe(|| {
        crate::access::with_index_by_oid(oid, |index| {
            // SAFETY: `index` is an open strata index (the query's), on this backend's thread,
            // holding no status page or manifest lock.
            unsafe {
                let handle = crate::access::opening::open(index);
                slot.set(Some(handle.slot));
                crate::access::standby::absorb_once(index, &handle);
            }
        });
    }));
    let failure = |slot: usize| &crate::shmem::shared().indexes[slot].absorb_failure;
    let episodes = EpisodeLog {
        work: format!("pg_strata absorber: following index {oid:?}"),
        meanwhile: "the other indexes go on; its queries on this standby raise the error meanwhile; \
                    strata_index_stats shows the state",
    };
    match outcome {
        Ok(()) => {
            RETRIES.with(|retries| retries.borrow_mut().succeeded(&oid.to_u32()));
            let failed = slot.get().map_or(0, |slot| failure(slot).clear());
            if let Some(line) = episodes.succeeded(failed) {
                pgrx::log!("{line}");
            }
        }
        Err(error) => {
            let retry = RETRIES.with(|retries| retries.borrow_mut().failed(oid.to_u32(), Instant::now()));
            // The episode is the slot's (it outlives a relaunched worker); without a slot (the
            // index could not even be opened) the worker's own count decides.
            let attempt = slot
                .get()
                .map_or(retry.attempt, |slot| failure(slot).record(&crate::shmem::directory_lock(true), &error));
            if let Some(line) = episodes.failed(attempt, &error) {
                pgrx::log!("{line}");
            }
        }
    }
}
