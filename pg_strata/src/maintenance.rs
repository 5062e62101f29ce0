//! Segment maintenance run by the index service: merging small segments and rebuilding segments
//! with many deleted rows, in the three steps of [`strata_lsm::merge`] (prepare and finish on the
//! service's main thread under the index's manifest lock, the build on a helper thread created
//! with every signal blocked), so that flushes and VACUUM never wait for a build.
//!
//! One merge is under way at a time. Replaced files are left to the service's sweeper
//! ([`crate::sweep`]), which deletes unlisted files after a grace period, so that backends still
//! reading an older manifest can open them. An index whose merge fails is retried with
//! exponential backoff while the other indexes keep merging; one LOG line marks the start and one
//! the end of each failure episode, and `strata_index_stats` shows it.

use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Instant;

use strata_engine::cancel::Cancel;
use strata_lsm::files::FileError;
use strata_lsm::manifest::segment_file_name;
use strata_lsm::merge::{self, Finished, MergePlan, Prepared};
use strata_lsm::policy::Action;
use strata_lsm::retry::{Backoff, RetrySchedule};

use crate::index::publish;
use crate::index::state::IndexHandle;
use crate::shmem::{self, IndexKey};

/// A merge whose segment is being built on a helper thread.
struct Pending {
    handle: IndexHandle,
    plan: MergePlan,
    /// Stops the build when the service shuts down.
    cancel: Cancel,
    /// The built file's row count.
    worker: JoinHandle<Result<u64, FileError>>,
}

/// The service's maintenance state: at most one merge in flight, and the indexes whose merges
/// fail, backing off.
pub struct Maintenance {
    pending: Option<Pending>,
    retries: RetrySchedule<IndexKey>,
}

impl Default for Maintenance {
    fn default() -> Self {
        Self { pending: None, retries: RetrySchedule::new(Backoff::default()) }
    }
}

impl Maintenance {
    /// Whether a merge is being built (the service then polls more often).
    pub fn busy(&self) -> bool {
        self.pending.is_some()
    }

    /// Segment ids being written by the merge in flight (not garbage although unlisted).
    pub fn in_flight(&self) -> Vec<u64> {
        self.pending.iter().map(|p| p.plan.new_id).collect()
    }

    /// Finishes the merge in flight if its build is done; otherwise, when none is in flight,
    /// starts one for the first index that needs it and is not backing off after a failure.
    pub fn step(&mut self) {
        if let Some(pending) = self.pending.take() {
            if !pending.worker.is_finished() {
                self.pending = Some(pending);
                return;
            }
            let handle = pending.handle.clone();
            match finish(pending) {
                Ok(()) => self.succeeded(&handle),
                Err(e) => self.failed(&handle, &e.to_string()),
            }
        }
        let now = Instant::now();
        for slot in 0..shmem::MAX_INDEXES {
            let Some(handle) = crate::index::state::registered(slot) else { continue };
            if !self.retries.is_due(&handle.key, now) {
                continue;
            }
            match start(&handle) {
                Ok(Some(pending)) => {
                    self.pending = Some(pending);
                    break;
                }
                // Nothing to merge any more (or merged directly): an episode of failures ends.
                Ok(None) if self.retries.failures(&handle.key) > 0 => self.succeeded(&handle),
                Ok(None) => {}
                Err(e) => self.failed(&handle, &e.to_string()),
            }
        }
    }

    /// Makes `handle`'s failing merges due now (a user asked for a retry).
    pub fn retry_now(&mut self, handle: &IndexHandle) {
        self.retries.make_due(Instant::now(), |key| *key == handle.key);
    }

    fn succeeded(&mut self, handle: &IndexHandle) {
        let failed = self.retries.succeeded(&handle.key);
        handle.shared().merge_failure.clear();
        if failed > 0 {
            crate::service_log::log(&format!(
                "merging segments of index {} succeeded after {failed} failed attempts",
                crate::service_log::describe(handle)
            ));
        }
    }

    fn failed(&mut self, handle: &IndexHandle, error: &str) {
        let failure = self.retries.failed(handle.key, Instant::now());
        handle.shared().merge_failure.record(&shmem::directory_lock(true), error);
        if failure.attempt == 1 {
            crate::service_log::log(&format!(
                "merging segments of index {} failed: {error}; retrying with backoff (searches are unaffected)",
                crate::service_log::describe(handle)
            ));
        }
    }

    /// Cancels the merge in flight (at shutdown) and waits at most [`ABANDON_WAIT`] for its
    /// thread, which stops within one unit of work; its file, if any, is removed. A thread still
    /// running then is left to end with the process (whatever it wrote is unlisted garbage).
    pub fn abandon(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.cancel.request();
            let deadline = Instant::now() + ABANDON_WAIT;
            while !pending.worker.is_finished() && Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            if pending.worker.is_finished() && matches!(pending.worker.join(), Ok(Ok(_))) {
                pending.handle.files().remove_quietly(&segment_file_name(pending.plan.new_id));
            }
        }
    }
}

/// The cancellation token of the merge in flight (service-local), so that a shutdown noticed
/// in the middle of a flush cancels the merge at once.
static MERGE_IN_FLIGHT: std::sync::Mutex<Option<Cancel>> = std::sync::Mutex::new(None);

/// Requests cancellation of the merge in flight, if any (the service saw SIGTERM).
pub fn cancel_merge_in_flight() {
    if let Some(cancel) = MERGE_IN_FLIGHT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
        cancel.request();
    }
}

/// How long a shutdown waits for a cancelled merge thread.
const ABANDON_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// The merge or rebuild the service would start now in `handle`'s index (`None`: nothing to
/// do). The service and `strata_wait_for_merges` use this same choice.
pub fn pending_action(handle: &IndexHandle) -> Result<Option<Action>, FileError> {
    let Some(manifest) = handle.files().load_manifest()? else {
        return Ok(None);
    };
    let listed = &handle.shared().listed;
    Ok(merge::choose(&manifest, handle.config.memtable_rows, |memtable| listed.contains(memtable)))
}

/// Step 1: prepares a merge or rebuild of `handle`'s index and starts its build on a helper
/// thread; publishes directly when every input row is deleted.
fn start(handle: &IndexHandle) -> Result<Option<Pending>, FileError> {
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    // Until recovery has reconciled the index, leave it be.
    if handle.shared().ready.load(Ordering::Acquire) != 1 {
        return Ok(None);
    }
    let files = handle.files();
    let listed = &handle.shared().listed;
    let prepared = merge::prepare(
        &files,
        handle.config.memtable_rows,
        |memtable| listed.contains(memtable),
        crate::gucs::BUILD_THREADS.get() as usize,
        || handle.shared().next_id.fetch_add(1, Ordering::AcqRel),
        publish::next_id_floor(handle),
    );
    let (plan, work) = match publish::panic_if_unsynced(prepared)? {
        Prepared::Nothing | Prepared::Dropped => return Ok(None),
        Prepared::Build(plan, work) => (plan, work),
    };
    let cancel = work.cancel();
    // The thread inherits a fully blocked signal mask and never calls PostgreSQL.
    // Copying a large input takes a while: the shutdown's cancel stops it (MERGE_IN_FLIGHT).
    let worker = crate::threads::with_signals_blocked(|| {
        std::thread::Builder::new().name("pg_strata merge".into()).spawn(move || (*work).run())
    })
    .map_err(|e| FileError::Build { kind: "merged", message: format!("cannot start a merge thread: {e}") })?;
    *MERGE_IN_FLIGHT.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(cancel.clone());
    Ok(Some(Pending { handle: handle.clone(), plan, cancel, worker }))
}

/// Step 3: publishes a built merge, carrying over deletions VACUUM made meanwhile.
fn finish(pending: Pending) -> Result<(), FileError> {
    let Pending { handle, plan, worker, .. } = pending;
    let built =
        worker.join().map_err(|_| FileError::Build { kind: "merged", message: "the merge thread panicked".into() })?;
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    let still_registered = {
        let lock = shmem::directory_lock(false);
        crate::index::state::handle_of_slot(handle.slot, &lock).is_some_and(|h| h.key == handle.key)
    };
    let files = handle.files();
    if !still_registered {
        // Dropped or rebuilt meanwhile: whatever the build did is moot.
        files.remove_quietly(&segment_file_name(plan.new_id));
        return Ok(());
    }
    let rows = built?;
    let finished =
        merge::finish(&files, plan, rows, publish::next_id_floor(&handle), publish::generation_publisher(&handle));
    match publish::panic_if_unsynced(finished)? {
        Finished::Published | Finished::Discarded => Ok(()),
    }
}
