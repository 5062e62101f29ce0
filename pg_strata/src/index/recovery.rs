//! Crash recovery of one index (the paper's §5.4), run on the index's first use after a restart.
//!
//! PostgreSQL's WAL replay has already restored the status pages; they say which memtables were
//! not known to be flushed and which heap TIDs each held. [`strata_lsm::recovery::plan`] compares
//! them with the manifest; this module only executes the plan:
//!
//! 1. under the index's manifest lock, drop segments built only from memtables newer than
//!    `max_memtable_id`, and mark deleted the rows of flushed-but-listed memtables whose TIDs the
//!    status pages do not list (deletion bitmaps only ever gain rows: what VACUUM removed stays
//!    removed); one manifest update publishes both;
//! 2. refill the memtables no segment covers by fetching their TIDs from the heap (computing
//!    index expressions as CREATE INDEX does), under their original SegmentIDs, and hand them to
//!    the index service;
//! 3. mark the index ready; the caller then releases the lists of memtables now in segments.
//!
//! The work is bounded by the status pages (the unflushed memtables), not by the index size.
//! A clean restart runs the same steps; they find nothing to change.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

use pgrx::pg_sys;
use strata_engine::bitset::Bitset;
use strata_engine::segment::Segment;
use strata_lsm::manifest::Manifest;
use strata_lsm::recovery::{plan, refill_gaps, DiskSegment, RecoveryAction, Status, StatusMemtable};
use strata_lsm::status::FLAG_INIT_FORK;

use super::heap::HeapVectors;
use super::publish::{self, raise};
use super::segments::read_deletions;
use super::state::{self, IndexHandle};
use super::status::{self, MetaLock};
use crate::shmem;

/// What step 1 changed.
#[derive(Default)]
struct SegmentRepairs {
    dropped: u64,
    invalidated: u64,
}

/// Executes the drops and bitmap rebuilds of `actions` (all, when `drop_all`) under the manifest
/// lock, publishing them in one manifest update.
fn repair_segments(handle: &IndexHandle, status: &Status, drop_all: bool) -> (SegmentRepairs, Vec<RecoveryAction>) {
    let dir = handle.dir();
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    let manifest = match Manifest::load(&dir) {
        Ok(Some(manifest)) => manifest,
        Ok(None) => raise(&format!("{}: manifest missing", dir.display())),
        Err(e) => raise(&format!("{}: {e}", dir.display())),
    };
    let disk: Vec<DiskSegment> =
        manifest.segments.iter().map(|s| DiskSegment { id: s.id, covers: s.covers.clone() }).collect();
    let actions = plan(status, &disk);
    let mut repairs = SegmentRepairs::default();
    let mut drops: Vec<u64> = if drop_all { manifest.segments.iter().map(|s| s.id).collect() } else { Vec::new() };
    // Bitmap rebuilds grouped by segment: (memtable, keep set).
    let mut trims: HashMap<u64, Vec<(u64, &[u64])>> = HashMap::new();
    for action in &actions {
        match action {
            RecoveryAction::DropSegment(id) => drops.push(*id),
            RecoveryAction::RebuildBitmap { segment, memtable, keep } => {
                let entry = manifest.segments.iter().find(|s| s.id == *segment).expect("planned from the manifest");
                if entry.covers.len() != 1 || entry.covers[0] != *memtable {
                    // Segments are merged only after their memtables' lists were durably
                    // released, so this does not happen; keeping the rows is the safe side
                    // (the heap's visibility check still hides uncommitted ones).
                    pgrx::warning!(
                        "pg_strata recovery: segment {segment} mixes memtables {:?}; its rows are kept as they are",
                        entry.covers
                    );
                    continue;
                }
                trims.entry(*segment).or_default().push((*memtable, keep));
            }
            RecoveryAction::RebuildMemtable { .. } => {}
        }
    }
    drops.sort_unstable();
    drops.dedup();
    let mut new_bitmaps: Vec<(u64, u64, u64)> = Vec::new();
    // TIDs each trimmed memtable's segments hold (deleted rows included).
    let mut present: HashMap<u64, HashSet<u64>> = HashMap::new();
    for (segment_id, keeps) in &trims {
        if drops.contains(segment_id) {
            continue;
        }
        let entry = manifest.segments.iter().find(|s| s.id == *segment_id).expect("planned from the manifest");
        let path = dir.join(entry.file_name());
        let segment = Segment::open(&path).unwrap_or_else(|e| raise(&format!("{}: {e}", path.display())));
        let mut deleted = match entry.deletion_file_name() {
            Some(name) => read_deletions(&dir.join(name), segment.len()).unwrap_or_else(|e| raise(&e)),
            None => Bitset::new(segment.len()),
        };
        let before = deleted.count();
        for &(memtable, _) in keeps {
            present.entry(memtable).or_default().extend(segment.ids().iter().copied());
        }
        for (row, tid) in segment.ids().iter().enumerate() {
            if !deleted.contains(row) && !keeps.iter().any(|(_, keep)| keep.binary_search(tid).is_ok()) {
                deleted.insert(row);
            }
        }
        let added = deleted.count() - before;
        if added == 0 {
            continue;
        }
        repairs.invalidated += added as u64;
        let generation = entry.deletion_generation + 1;
        publish::write_deletions(handle, *segment_id, generation, &deleted).unwrap_or_else(|e| raise(&e));
        new_bitmaps.push((*segment_id, generation, deleted.count() as u64));
    }
    if !drops.is_empty() || !new_bitmaps.is_empty() {
        let old_files: Vec<String> = manifest
            .segments
            .iter()
            .filter(|s| drops.contains(&s.id) || new_bitmaps.iter().any(|(id, _, _)| *id == s.id))
            .flat_map(|s| {
                let segment_file = drops.contains(&s.id).then(|| s.file_name());
                segment_file.into_iter().chain(s.deletion_file_name())
            })
            .collect();
        publish::update_manifest_locked(
            handle,
            |m| {
                m.segments.retain(|s| !drops.contains(&s.id));
                for (id, generation, deleted) in &new_bitmaps {
                    if let Some(entry) = m.segments.iter_mut().find(|s| s.id == *id) {
                        entry.deletion_generation = *generation;
                        entry.deleted = *deleted;
                    }
                }
            },
            || {},
        )
        .unwrap_or_else(|e| raise(&e));
        for name in old_files {
            let _ = std::fs::remove_file(dir.join(name));
        }
        repairs.dropped = drops.len() as u64;
    }
    // A listed memtable whose segments lack some of its TIDs (refilled over several slabs and
    // only partly flushed before another crash, or rows VACUUM left out of the flush whose list
    // update was lost) gets those TIDs refilled from the heap as well.
    let gaps = present_gaps(&trims, &present, &drops);
    drop(trims);
    let mut actions = actions;
    actions.extend(gaps);
    (repairs, actions)
}

/// Per trimmed memtable, the listed TIDs none of its kept segments holds.
fn present_gaps(
    trims: &HashMap<u64, Vec<(u64, &[u64])>>,
    present: &HashMap<u64, HashSet<u64>>,
    drops: &[u64],
) -> Vec<RecoveryAction> {
    let mut keep: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (segment, list) in trims {
        if !drops.contains(segment) {
            for &(memtable, tids) in list {
                keep.insert(memtable, tids.to_vec());
            }
        }
    }
    let present: BTreeMap<u64, BTreeSet<u64>> =
        present.iter().map(|(memtable, tids)| (*memtable, tids.iter().copied().collect())).collect();
    refill_gaps(&keep, &present)
}

/// Fetches the rows at `tids` from the heap and computes their stored vectors. Every version that
/// some transaction may still see is fetched (the executor's visibility check runs at scan time,
/// as for every index entry); versions no one can see any more — aborted inserts, deletions older
/// than every snapshot — are skipped, since their TOAST data may already be gone.
///
/// # Safety
/// `index` must be the open strata index of `handle`.
unsafe fn fetch_rows(index: pg_sys::Relation, handle: &IndexHandle, tids: &[u64]) -> Vec<(u64, Vec<f32>)> {
    let mut rows = Vec::with_capacity(tids.len());
    // SAFETY: a non-vacuumable snapshot (what InitNonVacuumableSnapshot sets up) sees every row
    // version a concurrent transaction may still need, and never a version whose TOAST may be
    // gone; the reader is closed before returning.
    unsafe {
        let mut reader = HeapVectors::begin(index, std::ptr::null_mut());
        let mut not_removable: pg_sys::SnapshotData = std::mem::zeroed();
        not_removable.snapshot_type = pg_sys::SnapshotType::SNAPSHOT_NON_VACUUMABLE;
        not_removable.vistest = pg_sys::GlobalVisTestFor(reader.heap());
        for &packed in tids {
            if let Some(vector) = reader.fetch(handle, packed, &raw mut not_removable) {
                rows.push((packed, vector));
            }
        }
        reader.end();
    }
    rows
}

/// Recovers `handle`'s index (registered, not ready) and marks it ready.
///
/// # Safety
/// `index` must be the open strata index of `handle`, and `meta` its exclusively locked
/// metadata page.
pub unsafe fn recover(index: pg_sys::Relation, handle: &IndexHandle, meta: &MetaLock) {
    let started = Instant::now();
    // SAFETY: guaranteed by the caller.
    let (contents, listed, pages) = unsafe { status::read(index, meta) };
    // SAFETY: a plain query of the startup process's state.
    let standby = unsafe { pg_sys::RecoveryInProgress() };
    let init_reset = contents.flags & FLAG_INIT_FORK != 0;
    let status = Status {
        max_memtable_id: contents.max_memtable_id,
        memtables: listed.iter().map(|(id, tids)| StatusMemtable { id: *id, tids: tids.clone() }).collect(),
    };
    let (repairs, actions) = repair_segments(handle, &status, init_reset);
    if init_reset && !standby {
        // SAFETY: as above.
        unsafe { status::clear_flags(index, meta) };
    }
    let mut held = Vec::new();
    let mut reinserted = 0u64;
    let mut rebuilt = 0u64;
    for action in &actions {
        if let RecoveryAction::RebuildMemtable { memtable, tids } = action {
            // SAFETY: as above.
            let rows = unsafe { fetch_rows(index, handle, tids) };
            reinserted += rows.len() as u64;
            rebuilt += 1;
            state::refill_memtable(handle, *memtable, &rows, &mut held);
        }
    }
    state::finish_recovered(&held);
    let entry = handle.shared();
    entry.next_id.fetch_max(contents.max_memtable_id + 1, Ordering::AcqRel);
    let counters = &entry.recovery;
    let micros = started.elapsed().as_micros() as u64;
    counters.micros.store(micros, Ordering::Relaxed);
    counters.listed_memtables.store(listed.len() as u64, Ordering::Relaxed);
    counters.status_pages.store(pages as u64, Ordering::Relaxed);
    counters.dropped_segments.store(repairs.dropped, Ordering::Relaxed);
    counters.invalidated_rows.store(repairs.invalidated, Ordering::Relaxed);
    counters.rebuilt_memtables.store(rebuilt, Ordering::Relaxed);
    counters.reinserted_rows.store(reinserted, Ordering::Relaxed);
    // SAFETY: reading the clock.
    counters.finished_at.store(unsafe { pg_sys::GetCurrentTimestamp() } as u64, Ordering::Relaxed);
    entry.ready.store(1, Ordering::Release);
    crate::explain::record_recovery(crate::explain::RecoverySummary {
        millis: micros as f64 / 1000.0,
        rebuilt_memtables: rebuilt,
        reinserted_rows: reinserted,
        dropped_segments: repairs.dropped,
        invalidated_rows: repairs.invalidated,
    });
    if repairs.dropped + repairs.invalidated + rebuilt > 0 || init_reset {
        pgrx::log!(
            "pg_strata: recovered index {:?} in {:.1} ms: {} listed memtables, {} segments dropped, {} rows invalidated, {} memtables rebuilt from {} heap rows",
            handle.key,
            micros as f64 / 1000.0,
            listed.len(),
            repairs.dropped,
            repairs.invalidated,
            rebuilt,
            reinserted
        );
    }
}
