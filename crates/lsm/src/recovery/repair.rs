//! Executing a recovery plan on an index's files: segment drops and deletion-bitmap trims,
//! published in one manifest update.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{plan, refill_gaps, DiskSegment, RecoveryAction, Status};
use crate::files::{FileError, IndexFiles};
use crate::segment_type::SegmentType;

/// What [`repair`] changed and what is left for the caller.
#[derive(Debug, Default)]
pub struct Repairs {
    /// Segments dropped.
    pub dropped: u64,
    /// Segment rows newly marked deleted.
    pub invalidated: u64,
    /// Memtables to refill from the heap, by SegmentID with their TIDs (the plan's
    /// `RebuildMemtable` actions plus listed TIDs no kept segment holds).
    pub refill: Vec<RecoveryAction>,
    /// Segments that mix a listed memtable with others, whose rows were kept as they are
    /// (merges only take segments whose memtables were durably released, so this does not
    /// happen; keeping rows is the safe side, as the heap's visibility check still hides
    /// uncommitted ones).
    pub mixed: Vec<(u64, Vec<u64>)>,
}

/// Reconciles the files of an index with its recovered `status` pages ([`plan`]): drops the
/// segments the plan drops (every segment when `drop_all`: an unlogged index's init fork was
/// reset), marks deleted the rows of listed memtables' segments whose TIDs the status pages do
/// not list (bitmaps only ever gain rows: what VACUUM removed stays removed), and publishes both
/// in one manifest update. The caller holds the index's manifest lock.
///
/// Idempotent: after it succeeds, running it again with the same status changes nothing. When it
/// fails (or the process dies) part way, running it again completes it.
pub fn repair<S: SegmentType>(
    files: &IndexFiles<S>,
    status: &Status,
    drop_all: bool,
    next_id_floor: u64,
    publish: impl FnOnce(&crate::manifest::Manifest<S::Config>),
) -> Result<Repairs, FileError> {
    let manifest = files.manifest()?;
    let disk: Vec<DiskSegment> =
        manifest.segments.iter().map(|s| DiskSegment { id: s.id, covers: s.covers.clone() }).collect();
    let actions = plan(status, &disk);
    let mut repairs = Repairs::default();
    let mut drops: Vec<u64> = if drop_all { manifest.segments.iter().map(|s| s.id).collect() } else { Vec::new() };
    // Bitmap rebuilds grouped by segment: (memtable, keep set).
    let mut trims: BTreeMap<u64, Vec<(u64, &[u64])>> = BTreeMap::new();
    for action in &actions {
        match action {
            RecoveryAction::DropSegment(id) => drops.push(*id),
            RecoveryAction::RebuildBitmap { segment, memtable, keep } => {
                let entry = manifest.segments.iter().find(|s| s.id == *segment).expect("planned from the manifest");
                if entry.covers.len() != 1 || entry.covers[0] != *memtable {
                    repairs.mixed.push((*segment, entry.covers.clone()));
                    continue;
                }
                trims.entry(*segment).or_default().push((*memtable, keep));
            }
            RecoveryAction::RebuildMemtable { .. } => repairs.refill.push(action.clone()),
        }
    }
    drops.sort_unstable();
    drops.dedup();
    let mut new_bitmaps: Vec<(u64, u64, u64)> = Vec::new();
    // TIDs each trimmed memtable's kept segments hold (deleted rows included).
    let mut present: HashMap<u64, BTreeSet<u64>> = HashMap::new();
    for (segment_id, keeps) in &trims {
        if drops.contains(segment_id) {
            continue;
        }
        let entry = manifest.segments.iter().find(|s| s.id == *segment_id).expect("planned from the manifest");
        let segment = files.open_segment(entry, true)?;
        let mut deleted = files.deletions_or_empty(entry)?;
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
        files.write_deletions(*segment_id, generation, &deleted)?;
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
        files.update_manifest(
            |m| {
                m.segments.retain(|s| !drops.contains(&s.id));
                for (id, generation, deleted) in &new_bitmaps {
                    if let Some(entry) = m.segments.iter_mut().find(|s| s.id == *id) {
                        entry.deletion_generation = *generation;
                        entry.deleted = *deleted;
                    }
                }
            },
            next_id_floor,
            publish,
        )?;
        // Nothing reads these yet: recovery runs before the index is ready.
        for name in old_files {
            files.remove_quietly(&name);
        }
        repairs.dropped = drops.len() as u64;
    }
    // A listed memtable whose kept segments lack some of its TIDs (refilled over several slabs
    // and only partly flushed before another crash, or rows VACUUM left out of the flush whose
    // list update was lost) gets those TIDs refilled from the heap as well.
    let mut keep: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (segment, list) in &trims {
        if !drops.contains(segment) {
            for &(memtable, tids) in list {
                keep.insert(memtable, tids.to_vec());
            }
        }
    }
    let present: BTreeMap<u64, BTreeSet<u64>> = present.into_iter().collect();
    repairs.refill.extend(refill_gaps(&keep, &present));
    Ok(repairs)
}
