//! Segment maintenance run by the index service: merging small segments and rebuilding segments
//! with many deleted rows, as chosen by [`strata_lsm::policy::choose`].
//!
//! A merge or rebuild runs in three steps, so that flushes (and VACUUM) never wait for its build:
//!
//! 1. **start** (service main thread, under the index's manifest lock): choose the inputs and copy
//!    their live rows (stored form), remembering which rows each input's deletion bitmap excluded;
//! 2. **build** (a helper thread created with every signal blocked, pure Rust): build the segment
//!    with a fresh id and write its file;
//! 3. **finish** (main thread, manifest lock again): if the inputs are still published, rows that
//!    VACUUM deleted from them meanwhile are marked in a deletion bitmap of the new segment (by
//!    TID), and one manifest update swaps the inputs for it — a scan sees the old set or the new.
//!    Otherwise the new file is deleted.
//!
//! One merge is under way at a time. Replaced files are left to the service's sweeper
//! ([`crate::sweep`]), which deletes unlisted files after a grace period, so that backends still
//! reading an older manifest can open them. An index whose merge fails is retried with
//! exponential backoff while the other indexes keep merging; one LOG line marks the start and one
//! the end of each failure episode, and `strata_index_stats` shows it.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Instant;

use strata_engine::cancel::Cancel;
use strata_lsm::retry::{Backoff, RetrySchedule};

use strata_engine::bitset::Bitset;
use strata_engine::segment::{build_segment, build_segment_extending, merge_segments, IndexKind, MergeSource, Segment};
use strata_lsm::manifest::{segment_file_name, Manifest, SegmentEntry};
use strata_lsm::policy::{self, Action, Policy, SegmentStats};

use crate::index::publish;
use crate::index::segments::read_deletions;
use crate::index::state::IndexHandle;
use crate::shmem::{self, IndexKey};

/// An input of a merge as it was when the merge started.
struct Input {
    entry: SegmentEntry,
    /// Rows its deletion bitmap excluded then.
    excluded: Option<Bitset>,
}

/// A merge whose segment is being built on a helper thread.
struct Pending {
    handle: IndexHandle,
    inputs: Vec<Input>,
    covers: Vec<u64>,
    new_id: u64,
    /// Stops the build when the service shuts down.
    cancel: Cancel,
    /// The written file and its row count.
    worker: JoinHandle<Result<(PathBuf, u64), String>>,
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
        self.pending.iter().map(|p| p.new_id).collect()
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
                Err(e) => self.failed(&handle, &e),
            }
        }
        let now = Instant::now();
        for slot in 0..shmem::MAX_INDEXES {
            let Some(handle) = crate::service::handle_of(slot) else { continue };
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
                Err(e) => self.failed(&handle, &e),
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
            crate::service::log(&format!(
                "merging segments of index {} succeeded after {failed} failed attempts",
                crate::service::describe(handle)
            ));
        }
    }

    fn failed(&mut self, handle: &IndexHandle, error: &str) {
        let failure = self.retries.failed(handle.key, Instant::now());
        handle.shared().merge_failure.record(error);
        if failure.attempt == 1 {
            crate::service::log(&format!(
                "merging segments of index {} failed: {error}; retrying with backoff (searches are unaffected)",
                crate::service::describe(handle)
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
            if pending.worker.is_finished() {
                if let Ok(Ok((path, _))) = pending.worker.join() {
                    let _ = std::fs::remove_file(path);
                }
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

fn policy_for(handle: &IndexHandle) -> Policy {
    Policy { base_rows: u64::from(handle.config.memtable_rows.max(1)), ..Policy::default() }
}

/// The merge or rebuild the service would start now in `handle`'s index (`None`: nothing to
/// do). The service and `strata_wait_for_merges` use this same choice.
pub fn pending_action(handle: &IndexHandle) -> Result<Option<Action>, String> {
    let dir = handle.dir();
    let Some(manifest) = Manifest::load(&dir).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    Ok(choose(handle, &manifest))
}

/// The policy's choice over the segments of `manifest` that may be merged now: a segment whose
/// memtable is still listed in the status pages is left alone (recovery may trim it by TID).
fn choose(handle: &IndexHandle, manifest: &Manifest) -> Option<Action> {
    let listed = &handle.shared().listed;
    let stats: Vec<SegmentStats> = manifest
        .segments
        .iter()
        .filter(|s| !s.covers.iter().any(|&memtable| listed.contains(memtable)))
        .map(|s| SegmentStats { id: s.id, rows: s.rows, deleted: s.deleted })
        .collect();
    policy::choose(&stats, &policy_for(handle))
}

/// Step 1: chooses a merge or rebuild of `handle`'s index and starts building it; publishes
/// directly when every input row is deleted.
fn start(handle: &IndexHandle) -> Result<Option<Pending>, String> {
    let dir = handle.dir();
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    let Some(manifest) = Manifest::load(&dir).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    // Until recovery has reconciled the index, and while the status pages may still list a
    // segment's memtable (recovery would then trim that segment by its rows' TIDs), leave it be.
    if handle.shared().ready.load(Ordering::Acquire) != 1 {
        return Ok(None);
    }
    let chosen = match choose(handle, &manifest) {
        None => return Ok(None),
        Some(Action::Merge(ids)) => ids,
        Some(Action::Rebuild(id)) => vec![id],
    };
    let mut opened = Vec::new();
    for entry in chosen.iter().filter_map(|id| manifest.segments.iter().find(|s| s.id == *id)) {
        let segment = Segment::open(&dir.join(entry.file_name())).map_err(|e| e.to_string())?;
        let excluded = match entry.deletion_file_name() {
            Some(name) => Some(read_deletions(&dir.join(name), segment.len())?),
            None => None,
        };
        opened.push((entry.clone(), segment, excluded));
    }
    // An HNSW merge extends the graph of its largest input without deletions (its rows go
    // first), so it costs what the other inputs cost instead of a rebuild of everything.
    let base = matches!(handle.config.kind, IndexKind::Hnsw { .. })
        .then(|| {
            (0..opened.len())
                .filter(|&i| opened[i].2.as_ref().is_none_or(|d| d.count() == 0) && opened[i].1.stores_vectors())
                .max_by_key(|&i| (opened[i].1.len(), std::cmp::Reverse(i)))
        })
        .flatten();
    if let Some(first) = base {
        opened.swap(0, first);
    }
    let mut inputs = Vec::new();
    let mut ids = Vec::new();
    let mut vectors = Vec::new();
    let mut covers = Vec::new();
    // Segments without vectors are merged from their codes (they move to the merge thread).
    let mut compact_sources = Vec::new();
    let mut base_segment = None;
    let mut kept_rows = 0usize;
    for (position, (entry, segment, excluded)) in opened.into_iter().enumerate() {
        // Copying a large input takes a while: a shutdown does not wait for it.
        if crate::service::shutting_down() {
            return Ok(None);
        }
        covers.extend_from_slice(&entry.covers);
        kept_rows += segment.len() - excluded.as_ref().map_or(0, Bitset::count);
        match segment.store() {
            Some(store) => {
                for row in 0..segment.len() {
                    if excluded.as_ref().is_some_and(|d| d.contains(row)) {
                        continue;
                    }
                    ids.push(segment.id(row));
                    vectors.extend_from_slice(&store.row_f32(row));
                }
                if position == 0 && base.is_some() {
                    base_segment = Some(segment);
                }
            }
            None => compact_sources.push((segment, excluded.clone())),
        }
        inputs.push(Input { entry, excluded });
    }
    if !compact_sources.is_empty() && !vectors.is_empty() {
        return Err("cannot merge segments with and without stored vectors".into());
    }
    let replaced: Vec<u64> = inputs.iter().map(|i| i.entry.id).collect();
    if kept_rows == 0 {
        publish::update_manifest_locked(handle, |m| m.segments.retain(|s| !replaced.contains(&s.id)), || {})?;
        return Ok(None);
    }
    let new_id = handle.shared().next_id.fetch_add(1, Ordering::AcqRel);
    let rows = kept_rows;
    let options = publish::build_options(handle, rows, crate::gucs::BUILD_THREADS.get() as usize);
    let cancel = options.cancel.clone();
    let dims = handle.config.dims as usize;
    let target = dir.clone();
    // The thread inherits a fully blocked signal mask and never calls PostgreSQL.
    let worker = crate::threads::with_signals_blocked(|| {
        std::thread::Builder::new().name("pg_strata merge".into()).spawn(move || {
            let built = if let Some(base) = base_segment {
                build_segment_extending(&options, ids, vectors, dims, &base)
            } else if compact_sources.is_empty() {
                build_segment(&options, ids, vectors, dims)
            } else {
                let sources: Vec<MergeSource<'_>> = compact_sources
                    .iter()
                    .map(|(segment, deleted)| MergeSource { segment, deleted: deleted.as_ref() })
                    .collect();
                merge_segments(&options, &sources)
            }
            .map_err(|e| format!("building a merged segment: {e}"))?;
            if options.cancel.is_requested() {
                return Err("cancelled".to_owned());
            }
            let path = built.write(&target, &segment_file_name(new_id)).map_err(|e| e.to_string())?;
            Ok((path, built.meta().rows))
        })
    })
    .map_err(|e| format!("cannot start a merge thread: {e}"))?;
    *MERGE_IN_FLIGHT.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(cancel.clone());
    Ok(Some(Pending { handle: handle.clone(), inputs, covers, new_id, cancel, worker }))
}

/// Step 3: publishes a built merge, carrying over deletions VACUUM made meanwhile.
fn finish(pending: Pending) -> Result<(), String> {
    let Pending { handle, inputs, covers, new_id, worker, .. } = pending;
    let built = worker.join().map_err(|_| "the merge thread panicked".to_owned())?;
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    let still_registered = {
        let lock = shmem::directory_lock(false);
        crate::index::state::handle_of_slot(handle.slot, &lock).is_some_and(|h| h.key == handle.key)
    };
    if !still_registered {
        // Dropped or rebuilt meanwhile: whatever the build did is moot (the sweeper or the
        // dropped-index sweep removes its file).
        if let Ok((path, _)) = built {
            let _ = std::fs::remove_file(path);
        }
        return Ok(());
    }
    let (path, rows) = built?;
    let dir = handle.dir();
    // The inputs changed under the merge (not a failure: the policy chooses again).
    let discard = |_reason: &str| -> Result<(), String> {
        let _ = std::fs::remove_file(&path);
        Ok(())
    };
    let Some(manifest) = Manifest::load(&dir).map_err(|e| e.to_string())? else {
        return discard("manifest missing");
    };
    // TIDs deleted from the inputs since the merge started.
    let mut newly_deleted: HashSet<u64> = HashSet::new();
    for input in &inputs {
        let Some(current) = manifest.segments.iter().find(|s| s.id == input.entry.id) else {
            return discard("an input segment is gone");
        };
        if current.deletion_generation == input.entry.deletion_generation {
            continue;
        }
        let segment = Segment::open(&dir.join(current.file_name())).map_err(|e| e.to_string())?;
        let Some(name) = current.deletion_file_name() else {
            continue;
        };
        let now = read_deletions(&dir.join(name), segment.len())?;
        for row in 0..segment.len() {
            if now.contains(row) && !input.excluded.as_ref().is_some_and(|d| d.contains(row)) {
                newly_deleted.insert(segment.id(row));
            }
        }
    }
    let mut new_entry = SegmentEntry {
        id: new_id,
        covers,
        rows,
        deleted: 0,
        deletion_generation: 0,
        bytes: std::fs::metadata(&path).map_err(|e| e.to_string())?.len(),
    };
    if !newly_deleted.is_empty() {
        let merged = Segment::open(&path).map_err(|e| e.to_string())?;
        let mut deleted = Bitset::new(merged.len());
        for (row, tid) in merged.ids().iter().enumerate() {
            if newly_deleted.contains(tid) {
                deleted.insert(row);
            }
        }
        publish::write_deletions(&handle, new_id, 1, &deleted)?;
        new_entry.deletion_generation = 1;
        new_entry.deleted = deleted.count() as u64;
    }
    let replaced: Vec<u64> = inputs.iter().map(|i| i.entry.id).collect();
    publish::update_manifest_locked(
        &handle,
        |m| {
            m.segments.retain(|s| !replaced.contains(&s.id));
            m.segments.push(new_entry);
        },
        || {},
    )?;
    Ok(())
}
