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

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, DynamicBackgroundWorker, SignalWakeFlags,
};
use pgrx::{pg_sys, Spi};

use crate::index::state::{parse_index_dir, ROOT_DIR};

/// How often the service looks for databases that need a worker.
const CHECK_INTERVAL: Duration = Duration::from_secs(2);
/// The least time between two launches of one database's worker.
const RELAUNCH_AFTER: Duration = Duration::from_secs(10);
/// How often a worker absorbs.
const ABSORB_INTERVAL: Duration = Duration::from_millis(200);

/// The service's record of the workers it launched.
#[derive(Default)]
pub struct Absorbers {
    launched: BTreeMap<u32, (Option<DynamicBackgroundWorker>, Instant)>,
    checked: Option<Instant>,
}

impl Absorbers {
    /// Launches the workers that should run and do not; called by the service every round.
    pub fn tick(&mut self) {
        // SAFETY: a plain query of the startup process's state.
        if !unsafe { pg_sys::RecoveryInProgress() } {
            // The workers exit by themselves when recovery ends.
            self.launched.clear();
            return;
        }
        let now = Instant::now();
        if self.checked.is_some_and(|at| now.duration_since(at) < CHECK_INTERVAL) {
            return;
        }
        self.checked = Some(now);
        for db in databases() {
            let running = self.launched.get(&db).is_some_and(|(worker, launched)| {
                worker.as_ref().is_some_and(|w| w.pid().is_ok()) || now.duration_since(*launched) < RELAUNCH_AFTER
            });
            if !running {
                self.launched.insert(db, (launch(db), now));
            }
        }
    }
}

/// The database OIDs named by index directories under `$PGDATA/pg_strata`.
fn databases() -> std::collections::BTreeSet<u32> {
    let Ok(entries) = std::fs::read_dir(ROOT_DIR) else {
        return std::collections::BTreeSet::default();
    };
    entries.flatten().filter_map(|e| parse_index_dir(&e.file_name().to_string_lossy())).map(|key| key.db).collect()
}

/// Registers the worker of database `db` (started once hot standby accepts connections).
fn launch(db: u32) -> Option<DynamicBackgroundWorker> {
    BackgroundWorkerBuilder::new(&format!("pg_strata absorber for database {db}"))
        .set_type("pg_strata absorber")
        .set_library("pg_strata")
        .set_function("strata_absorber_main")
        .enable_spi_access()
        // After enable_spi_access, which would wait for the end of recovery.
        .set_start_time(BgWorkerStartTime::ConsistentState)
        .set_argument(Some(pg_sys::Datum::from(db)))
        .set_restart_time(None)
        .load_dynamic()
        .ok()
}

/// The worker of one database (its OID is the argument).
#[pgrx::pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn strata_absorber_main(argument: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let db = pg_sys::Oid::from(argument.value() as u32);
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(db), None);
    while BackgroundWorker::wait_latch(Some(ABSORB_INTERVAL)) && !crate::index::standby::stopping() {
        // SAFETY: a plain query of the startup process's state.
        if !unsafe { pg_sys::RecoveryInProgress() } {
            break;
        }
        BackgroundWorker::transaction(absorb_database);
    }
}

/// Absorbs every permanent strata index of the connected database.
fn absorb_database() {
    let indexes: Vec<pg_sys::Oid> = Spi::connect(|client| {
        client
            .select(
                "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_am a ON a.oid = c.relam \
                 WHERE a.amname = 'strata' AND c.relkind = 'i' AND c.relpersistence = 'p'",
                None,
                &[],
            )
            .map(|rows| rows.filter_map(|row| row.get::<pg_sys::Oid>(1).ok().flatten()).collect())
            .unwrap_or_default()
    });
    for oid in indexes {
        // SAFETY: opening an index relation by OID in a transaction; a relation dropped since the
        // query is skipped (try_relation_open returns NULL); closed below with the same lock.
        unsafe {
            let index = pg_sys::try_relation_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            if index.is_null() {
                continue;
            }
            let handle = crate::index::opening::open(index);
            crate::index::standby::absorb(index, &handle);
            pg_sys::relation_close(index, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        }
    }
}
