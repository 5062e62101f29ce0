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

use strata_engine::cancel::Cancel;
use strata_lsm::files::{FileError, IndexFiles};
use strata_lsm::manifest::segment_file_name;
use strata_lsm::manifest::IndexConfig;
use strata_lsm::merge::{self, Finished, MergePlan, Prepared};
use strata_lsm::merge_runner::{MergeHost, MergeRunner, Started};
use strata_lsm::policy::Action;
use strata_lsm::retry::EpisodeLog;
use strata_lsm::segment_type::SegmentType;

use crate::access::dispatch::dispatch;
use crate::access::kind::Kind;
use crate::access::publish;
use crate::access::state::IndexHandle;
use crate::shmem::{self, IndexKey};

/// The service's maintenance state: at most one merge in flight, and the indexes whose merges
/// fail, backing off ([`MergeRunner`] over [`Merges`]).
pub type Maintenance = MergeRunner<Merges>;

/// The registered indexes, in directory order (each looked up when the runner gets to it).
pub fn registered_indexes() -> impl Iterator<Item = IndexHandle> {
    (0..shmem::MAX_INDEXES).filter_map(crate::access::state::registered)
}

/// The steps of merges in the index service's process, and their reports.
pub struct Merges;

impl MergeHost for Merges {
    type Index = IndexHandle;
    type Key = IndexKey;

    fn key(&self, handle: &IndexHandle) -> IndexKey {
        handle.key
    }

    /// Step 1: prepares a merge or rebuild of `handle`'s index and starts its build on a helper
    /// thread; publishes directly when every input row is deleted.
    fn start(&mut self, handle: &IndexHandle) -> Result<Option<Started>, FileError> {
        let _manifest_lock = shmem::manifest_lock(handle.slot);
        // Until recovery has reconciled the index, leave it be.
        if handle.shared().ready.load(Ordering::Acquire) != 1 {
            return Ok(None);
        }
        dispatch!(handle.access_kind, K => start_merge(handle, &K::files(handle)))
    }

    /// Step 3: publishes a built merge, carrying over deletions VACUUM made meanwhile.
    fn finish(
        &mut self,
        handle: &IndexHandle,
        plan: MergePlan,
        built: Result<u64, FileError>,
    ) -> Result<(), FileError> {
        let _manifest_lock = shmem::manifest_lock(handle.slot);
        let still_registered = {
            let lock = shmem::directory_lock(false);
            crate::access::state::handle_of_slot(handle.slot, &lock).is_some_and(|h| h.key == handle.key)
        };
        if !still_registered {
            // Dropped or rebuilt meanwhile: whatever the build did is moot.
            dispatch!(handle.access_kind, K => K::files(handle).remove_quietly(&segment_file_name(plan.new_id)));
            return Ok(());
        }
        let rows = built?;
        dispatch!(handle.access_kind, K => finish_merge(handle, &K::files(handle), plan, rows))
    }

    fn discard(&mut self, handle: &IndexHandle, new_id: u64) {
        dispatch!(handle.access_kind, K => K::files(handle).remove_quietly(&segment_file_name(new_id)));
    }

    fn succeeded(&mut self, handle: &IndexHandle, failed: u32) {
        handle.shared().merge_failure.clear();
        if let Some(line) = merge_episodes(handle).succeeded(failed) {
            crate::service_log::log(&line);
        }
    }

    fn failed(&mut self, handle: &IndexHandle, error: &str, attempt: u32) {
        handle.shared().merge_failure.record(&shmem::directory_lock(true), error);
        if let Some(line) = merge_episodes(handle).failed(attempt, error) {
            crate::service_log::log(&line);
        }
    }
}

/// The log lines of `handle`'s merge failure episodes.
fn merge_episodes(handle: &IndexHandle) -> EpisodeLog {
    EpisodeLog {
        work: format!("merging segments of index {}", crate::service_log::describe(handle)),
        meanwhile: "searches are unaffected",
    }
}

/// Step 1 for segments of type `S`: prepares a merge or rebuild and starts its build on a helper
/// thread. The caller holds the index's manifest lock.
fn start_merge<S: SegmentType<Config = IndexConfig>>(
    handle: &IndexHandle,
    files: &IndexFiles<S>,
) -> Result<Option<Started>, FileError> {
    // The oldest group still open in the status pages or held in one of this node's memtables:
    // only older groups' segments are merged, as on every other node.
    let pending = merge::pending_floor(handle.shared().listed.smallest(), &shmem::slabs().infos(), handle.slot);
    let prepared = merge::prepare(
        files,
        handle.config.memtable_rows,
        pending,
        crate::gucs::BUILD_THREADS.get() as usize,
        || handle.shared().next_id.fetch_add(1, Ordering::AcqRel),
        publish::next_id_floor(handle),
        publish::generation_publisher(handle),
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
    Ok(Some(Started { plan, cancel, worker }))
}

/// Step 3 for segments of type `S`: publishes the built merge of `rows` rows. The caller holds
/// the index's manifest lock.
fn finish_merge<S: SegmentType<Config = IndexConfig>>(
    handle: &IndexHandle,
    files: &IndexFiles<S>,
    plan: MergePlan,
    rows: u64,
) -> Result<(), FileError> {
    let finished =
        merge::finish(files, plan, rows, publish::next_id_floor(handle), publish::generation_publisher(handle));
    match publish::panic_if_unsynced(finished)? {
        Finished::Published | Finished::Discarded => Ok(()),
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
pub const ABANDON_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// The merge or rebuild the service will start in `handle`'s index once its flushed segments
/// have settled (`None`: nothing to do), what `strata_wait_for_merges` waits for
/// ([`merge::choose_once_settled`]), and the number of segments of the manifest it chose from
/// (the manifest file is published before the shared generation moves on, so a count from the
/// segment set of that generation could lag behind).
pub fn pending_action(handle: &IndexHandle) -> Result<(Option<Action>, usize), FileError> {
    let Some(manifest) = dispatch!(handle.access_kind, K => K::files(handle).load_manifest())? else {
        return Ok((None, 0));
    };
    Ok((merge::choose_once_settled(&manifest, handle.config.memtable_rows), manifest.segments.len()))
}
