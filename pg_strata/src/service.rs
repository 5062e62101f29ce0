//! The index service: one background worker that turns sealed memtables into segments, frees
//! their slabs once no scan reads them, merges segments, flushes what it can at shutdown, and
//! removes garbage files and the files of dropped indexes.
//!
//! It needs no database connection: everything it touches is shared memory and files under
//! `$PGDATA/pg_strata`. Builds run on helper threads created with all signals blocked; only this
//! process's main thread calls PostgreSQL.
//!
//! Failures never block other work: a memtable whose flush fails is retried with exponential
//! backoff ([`strata_lsm::retry`]) while every other memtable and index keeps flushing, its rows
//! stay searchable in shared memory, one LOG line marks the start and one the end of each failure
//! episode, and `strata_index_stats` shows the state, the retry count and the last error.
//! Shutdown is bounded: on SIGTERM the merge in flight is cancelled, memtables are flushed for at
//! most [`SHUTDOWN_FLUSH_BUDGET`](strata_lsm::service_timing::SHUTDOWN_FLUSH_BUDGET), and whatever
//! is left stays listed in the status pages, from which the next start recovers it. The service
//! always exits with code 1, so that the postmaster starts it again after a SIGTERM that was not
//! part of a shutdown.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, SignalWakeFlags};
use pgrx::pg_sys;
use strata_engine::cancel::Cancel;
use strata_lsm::clock::SystemClock;
use strata_lsm::files::FileError;
use strata_lsm::flush::FlushTarget;
use strata_lsm::flush_schedule::{FlushHost, FlushSchedule, Recovered};
use strata_lsm::retry::EpisodeLog;
use strata_lsm::service_timing::{round_wait, Periodic, Shutdown, SWEEP_INTERVAL};
use strata_lsm::slabs::SlabInfo;

use crate::access::dispatch::dispatch;
use crate::access::kind::Kind;
use crate::access::publish;
use crate::access::state::{self, IndexHandle, ROOT_DIR};
use crate::maintenance::{registered_indexes, Merges, ABANDON_WAIT};
use crate::service_log;
use crate::shmem;

/// When SIGTERM was first seen (pgrx's flag resets when read).
static SHUTDOWN: Shutdown = Shutdown::new();

/// Whether SIGTERM has arrived (the service is shutting down).
pub fn shutting_down() -> bool {
    shutdown_deadline().is_some()
}

/// The end of the shutdown flush budget, once SIGTERM has arrived.
fn shutdown_deadline() -> Option<Instant> {
    SHUTDOWN.deadline(BackgroundWorker::sigterm_received(), &SystemClock)
}

/// Registers the service with the postmaster; called from `_PG_init`.
pub fn register() {
    BackgroundWorkerBuilder::new("pg_strata index service")
        .set_type("pg_strata index service")
        .set_library("pg_strata")
        .set_function("strata_service_main")
        .enable_shmem_access(None)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// The service's flushes, cancelled once `deadline` (when given) has passed.
struct Flushes {
    deadline: Option<Instant>,
}

impl FlushHost for Flushes {
    type Index = IndexHandle;

    fn slabs(&self) -> Vec<SlabInfo> {
        shmem::slabs().infos()
    }

    fn index(&self, slot: usize) -> Option<IndexHandle> {
        state::registered(slot)
    }

    /// Builds and publishes the memtable `target` names ([`strata_lsm::flush`]) into a segment of
    /// the index's kind ([`crate::access::kind::Kind::build`]).
    fn flush(&mut self, handle: &IndexHandle, target: FlushTarget) -> Result<(), FileError> {
        // Serialises with VACUUM and rebuilds of this index.
        let _manifest_lock = shmem::manifest_lock(handle.slot);
        let next_id = || handle.shared().next_id.fetch_add(1, Ordering::AcqRel);
        // Under the directory lock: scans stop reading the slab, and the next writer releases
        // its status list.
        let on_flushed = |manifest: Option<&strata_lsm::manifest::Manifest>| {
            if let Some(manifest) = manifest {
                publish::store_generation_locked(handle, manifest);
            }
            handle.shared().release_pending.store(1, Ordering::Release);
        };
        let deadline = self.deadline;
        let flushed = dispatch!(handle.access_kind, K => {
            let files = K::files(handle);
            strata_lsm::flush::flush_rows(
                shmem::slabs(),
                &files,
                target,
                |memtable: &_| K::collect(handle, memtable),
                next_id,
                || publish::next_id_floor(handle),
                |rows| K::build(handle, rows, &mut |cancel| wait_for_build(cancel, deadline)),
                on_flushed,
            )
        });
        flushed.map(|_| ()).map_err(publish::panic_on_unsynced)
    }

    fn flushed(&mut self, handle: &IndexHandle, target: FlushTarget, recovered: Recovered) {
        if let Some(line) = flush_episodes(handle, target).succeeded(recovered.failed_attempts) {
            service_log::log(&line);
        }
        if recovered.index_healthy {
            handle.shared().flush_failure.clear();
        }
    }

    fn failed(&mut self, handle: &IndexHandle, target: FlushTarget, error: &str, attempt: u32) {
        shmem::slabs().memtable(target.slab).header().record_flush_failures(attempt);
        handle.shared().flush_failure.record(&shmem::directory_lock(true), error);
        if let Some(line) = flush_episodes(handle, target).failed(attempt, error) {
            service_log::log(&line);
        }
    }

    fn seal_all(&mut self) {
        shmem::slabs().seal_all();
    }

    fn free_unread(&mut self) {
        shmem::slabs().free_unread();
    }
}

/// Waits a little for a build on a helper thread; requests its cancellation once SIGTERM has
/// arrived and `deadline` (the shutdown budget) has passed.
fn wait_for_build(cancel: &Cancel, deadline: Option<Instant>) {
    wait_latch(Duration::from_millis(10));
    if shutting_down() {
        crate::maintenance::cancel_merge_in_flight();
    }
    let deadline = deadline.or_else(shutdown_deadline);
    if deadline.is_some_and(|d| Instant::now() >= d) {
        cancel.request();
    }
}

/// Waits on the process latch for at most `timeout`; returns whether the postmaster died.
fn wait_latch(timeout: Duration) -> bool {
    // SAFETY: the standard latch wait of a background worker's main thread.
    let events = unsafe {
        let events = pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_POSTMASTER_DEATH) as i32,
            timeout.as_millis().clamp(1, 60_000) as std::ffi::c_long,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
        events
    };
    events & pg_sys::WL_POSTMASTER_DEATH as i32 != 0
}

/// At shutdown: seals everything and flushes until `deadline` (the shutdown flush budget); memtables
/// left unflushed stay listed in the status pages and are recovered on the next start.
fn shutdown_flush(schedule: &mut FlushSchedule, deadline: Instant) {
    let left = schedule.shutdown_flush(&mut Flushes { deadline: Some(deadline) }, deadline, &SystemClock);
    if left > 0 {
        service_log::log(&format!(
            "stopping with {left} memtables unflushed: a restarted service flushes them from shared memory, \
             and after a server stop they are recovered from the status pages"
        ));
    }
}

/// The service's entry point.
#[pgrx::pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn strata_service_main(_argument: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // SAFETY: MyLatch is this process's latch, valid for the life of the process.
    shmem::shared().service_latch.store(unsafe { pg_sys::MyLatch }, Ordering::Release);
    if let Err(e) = std::fs::create_dir_all(ROOT_DIR) {
        service_log::log(&format!("cannot create {ROOT_DIR}: {e}"));
    }
    let promoted = strata_lsm::page_cache::promote_segments(std::path::Path::new(ROOT_DIR));
    if promoted > 0 {
        service_log::log(&format!("reading {promoted} bytes of segments into the page cache in the background"));
    }
    let mut sweeps = Periodic::new(SWEEP_INTERVAL);
    let mut schedule = FlushSchedule::default();
    let mut maintenance = crate::maintenance::Maintenance::default();
    let mut sweeper = crate::sweep::Sweeper::default();
    let mut absorbers = crate::absorber::Absorbers::default();
    let mut settlers = crate::settler::Settlers::default();
    loop {
        if let Some(deadline) = shutdown_deadline() {
            maintenance.abandon(&mut Merges, ABANDON_WAIT);
            shutdown_flush(&mut schedule, deadline);
            break;
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: reloading the configuration files on the main thread after SIGHUP.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        // strata_flush / strata_wait_for_merges asked to retry failing work now.
        for slot in 0..shmem::MAX_INDEXES {
            if shmem::shared().indexes[slot].retry_requested.swap(0, Ordering::AcqRel) == 1 {
                schedule.retry_now(slot, &shmem::slabs().infos(), &SystemClock);
                if let Some(handle) = state::registered(slot) {
                    maintenance.retry_now(&handle.key, &SystemClock);
                }
            }
        }
        schedule.flush_round(&mut Flushes { deadline: None }, &SystemClock, || shutdown_deadline().is_some());
        if shutdown_deadline().is_some() {
            continue;
        }
        maintenance.step(&mut Merges, registered_indexes(), &SystemClock);
        absorbers.tick();
        settlers.tick();
        if sweeps.due(Instant::now()) {
            sweeper.sweep(&maintenance.in_flight());
        }
        if wait_latch(round_wait(maintenance.busy(), schedule.next_due(), Instant::now())) {
            // Everything unflushed is rebuilt by crash recovery; exit at once.
            maintenance.abandon(&mut Merges, ABANDON_WAIT);
            break;
        }
    }
    shmem::shared().service_latch.store(std::ptr::null_mut(), Ordering::Release);
    // Exit code 1, not the 0 of a returning main: the postmaster forgets a worker that exits 0,
    // so a SIGTERM from outside a shutdown (an administrator's `kill`) would leave every index
    // without flushes until the next server start. After exit code 1 it starts the service again
    // after the restart time, and not at all once it is shutting down (PostgreSQL's logical
    // replication launcher exits the same way).
    // SAFETY: proc_exit on the worker's main thread, outside any transaction, where a returning
    // main would call proc_exit(0); helper threads make no PostgreSQL call, so one still finishing
    // a cancelled build is ended with the process as before.
    unsafe { pg_sys::proc_exit(1) }
}

/// The log lines of the failure episodes of flushing memtable `target` of `handle`'s index.
fn flush_episodes(handle: &IndexHandle, target: FlushTarget) -> EpisodeLog {
    EpisodeLog {
        work: format!("flushing memtable {} of index {}", target.segment_id, service_log::describe(handle)),
        meanwhile: "its rows stay searchable in shared memory; strata_index_stats shows the state",
    }
}
