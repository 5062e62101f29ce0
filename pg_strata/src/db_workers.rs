//! Background workers of one database that the index service launches (it has no database
//! connection itself): the absorbers of a standby (`absorber`) and the settlers of a primary
//! (`settler`). This module launches them; which run and when to relaunch one is
//! [`strata_lsm::workers::Launches`].

use std::time::{Duration, Instant};

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, DynamicBackgroundWorker, SignalWakeFlags,
};
use pgrx::pg_sys;
use strata_lsm::workers::Launches;

/// The workers of one role, by database OID.
pub struct DatabaseWorkers {
    /// The role, named in the process title (`pg_strata {role} for database {oid}`).
    role: &'static str,
    /// The exported entry point the worker runs (its argument is the database OID).
    function: &'static str,
    /// Started once a standby accepts read-only connections rather than after recovery.
    during_recovery: bool,
    launched: Launches<DynamicBackgroundWorker>,
}

impl DatabaseWorkers {
    /// No workers yet, of role `role` running `function`.
    pub fn new(role: &'static str, function: &'static str, during_recovery: bool, relaunch_after: Duration) -> Self {
        Self { role, function, during_recovery, launched: Launches::new(relaunch_after) }
    }

    /// Launches the worker of database `db` unless one is running or the last launch was less
    /// than the relaunch pause ago (a worker that keeps failing is not relaunched in a loop).
    pub fn ensure_running(&mut self, db: u32, now: Instant) {
        let (role, function, during_recovery) = (self.role, self.function, self.during_recovery);
        self.launched.ensure_running(db, now, |w| w.pid().is_ok(), |db| launch(role, function, during_recovery, db));
    }

    /// Forgets every worker (they stop by themselves).
    pub fn clear(&mut self) {
        self.launched.clear();
    }
}

/// Launches the worker of role `role` (running `function`) for database `db`.
fn launch(role: &str, function: &str, during_recovery: bool, db: u32) -> Option<DynamicBackgroundWorker> {
    let mut builder = BackgroundWorkerBuilder::new(&format!("pg_strata {role} for database {db}"))
        .set_type(&format!("pg_strata {role}"))
        .set_library("pg_strata")
        .set_function(function)
        .enable_spi_access();
    if during_recovery {
        // After enable_spi_access, which would wait for the end of recovery.
        builder = builder.set_start_time(BgWorkerStartTime::ConsistentState);
    }
    builder.set_argument(Some(pg_sys::Datum::from(db))).set_restart_time(None).load_dynamic().ok()
}

/// A worker's first step: handles SIGHUP and SIGTERM and connects to the database its argument
/// names; returns that database's OID.
pub fn connect(argument: pg_sys::Datum) -> pg_sys::Oid {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let db = pg_sys::Oid::from(argument.value() as u32);
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(db), None);
    db
}
