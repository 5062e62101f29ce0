//! Segment maintenance run by the index service: merging small segments and rebuilding segments
//! with many deleted rows, as chosen by [`strata_lsm::policy::choose`].
//!
//! A merge or rebuild reads the live rows of its input segments (in stored form), builds one new
//! segment with a fresh id, and publishes a manifest that swaps the inputs for it in one step, so
//! a scan sees either the old set or the new one. It holds the index's manifest lock throughout,
//! which orders it with VACUUM: deletions are either already in the inputs' bitmaps (and the rows
//! are left out) or applied to the new segment by the next VACUUM. Replaced files are deleted
//! after a grace period, so that backends still reading an older manifest can open them.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use strata_lsm::manifest::{Manifest, SegmentEntry};
use strata_lsm::policy::{self, Action, Policy, SegmentStats};

use crate::index::publish;
use crate::index::segments::read_deletions;
use crate::index::state::IndexHandle;
use crate::shmem;

/// How long replaced segment files stay on disk.
const GRACE: Duration = Duration::from_mins(1);

/// Files waiting for their grace period to end.
#[derive(Default)]
pub struct Garbage {
    files: Vec<(PathBuf, Instant)>,
}

impl Garbage {
    /// Queues `path` for deletion after the grace period.
    pub fn defer(&mut self, path: PathBuf) {
        self.files.push((path, Instant::now() + GRACE));
    }

    /// Deletes the files whose grace period is over.
    pub fn collect(&mut self) {
        let now = Instant::now();
        self.files.retain(|(path, deadline)| {
            if *deadline <= now {
                let _ = std::fs::remove_file(path);
                false
            } else {
                true
            }
        });
    }
}

fn policy_for(handle: &IndexHandle) -> Policy {
    Policy { base_rows: u64::from(handle.config.memtable_rows.max(1)), ..Policy::default() }
}

/// Runs at most one maintenance action on `handle`'s index; returns whether it did work.
pub fn maintain(handle: &IndexHandle, garbage: &mut Garbage) -> Result<bool, String> {
    let dir = handle.dir();
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    let Some(manifest) = Manifest::load(&dir).map_err(|e| e.to_string())? else {
        return Ok(false);
    };
    // Until recovery has reconciled the index, and while the status pages may still list a
    // segment's memtable (recovery would then trim that segment by its rows' TIDs), leave it be.
    if handle.shared().ready.load(Ordering::Acquire) != 1 {
        return Ok(false);
    }
    let oldest_listed = handle.shared().oldest_listed.load(Ordering::Acquire);
    let stats: Vec<SegmentStats> = manifest
        .segments
        .iter()
        .filter(|s| s.covers.iter().all(|&memtable| memtable < oldest_listed))
        .map(|s| SegmentStats { id: s.id, rows: s.rows, deleted: s.deleted })
        .collect();
    let inputs = match policy::choose(&stats, &policy_for(handle)) {
        None => return Ok(false),
        Some(Action::Merge(ids)) => ids,
        Some(Action::Rebuild(id)) => vec![id],
    };
    let entries: Vec<SegmentEntry> =
        inputs.iter().filter_map(|id| manifest.segments.iter().find(|s| s.id == *id).cloned()).collect();
    let mut ids = Vec::new();
    let mut vectors = Vec::new();
    let mut covers = Vec::new();
    for entry in &entries {
        let segment = strata_engine::segment::Segment::open(&dir.join(entry.file_name())).map_err(|e| e.to_string())?;
        let deleted = match entry.deletion_file_name() {
            Some(name) => Some(read_deletions(&dir.join(name), segment.len())?),
            None => None,
        };
        let store = segment.store();
        for row in 0..segment.len() {
            if deleted.as_ref().is_some_and(|d| d.contains(row)) {
                continue;
            }
            ids.push(segment.id(row));
            vectors.extend_from_slice(&store.row_f32(row));
        }
        covers.extend_from_slice(&entry.covers);
    }
    let new_id = handle.shared().next_id.fetch_add(1, Ordering::AcqRel);
    let replaced: Vec<u64> = entries.iter().map(|e| e.id).collect();
    let threads = crate::gucs::BUILD_THREADS.get() as usize;
    if ids.is_empty() {
        publish::update_manifest_locked(handle, |m| m.segments.retain(|s| !replaced.contains(&s.id)), || {})?;
    } else {
        let built = publish::build(handle, ids, vectors, threads)?;
        let path = built.write(&dir, &format!("{new_id}.seg")).map_err(|e| e.to_string())?;
        let bytes = std::fs::metadata(&path).map_err(|e| e.to_string())?.len();
        let entry =
            SegmentEntry { id: new_id, covers, rows: built.meta().rows, deleted: 0, deletion_generation: 0, bytes };
        publish::update_manifest_locked(
            handle,
            |m| {
                m.segments.retain(|s| !replaced.contains(&s.id));
                m.segments.push(entry);
            },
            || {},
        )?;
    }
    for entry in &entries {
        garbage.defer(dir.join(entry.file_name()));
        if let Some(name) = entry.deletion_file_name() {
            garbage.defer(dir.join(name));
        }
    }
    Ok(true)
}
