//! Merges and rebuilds of an index's segments, as chosen by [`crate::policy::choose`].
//!
//! A merge runs in three steps, so that flushes and VACUUM never wait for its build:
//!
//! 1. [`prepare`] (with the index's manifest lock held by the caller): choose the inputs and
//!    open them with their deletion bitmaps as they are now. When every input row is deleted,
//!    the inputs are dropped from the manifest at once.
//! 2. [`MergeWork::run`] (any thread, no lock): [`SegmentType::merge`] builds the segment of
//!    their live rows, and its file is written under the new id.
//! 3. [`finish`] (manifest lock again): if the inputs are still listed, rows VACUUM deleted from
//!    them meanwhile are marked, by TID, in a deletion bitmap of the new segment, and one
//!    manifest update swaps the inputs for it. Otherwise the new file is removed.
//!
//! Replaced files stay on disk for readers of an older manifest; they are garbage
//! ([`crate::garbage`]) once unlisted.

use std::collections::HashSet;

use strata_engine::bitset::Bitset;
use strata_engine::cancel::Cancel;

use crate::files::{FileError, IndexFiles};
use crate::manifest::{segment_file_name, Manifest, SegmentEntry};
use crate::policy::{self, Action, Policy, SegmentStats};
use crate::segment_type::{BuildWork, MergeInput, SegmentType};
use crate::slabs::SlabInfo;

/// The merge policy of an index whose memtables hold `memtable_rows` rows (a fresh segment's
/// size is the base of the tiers).
pub fn policy_for(memtable_rows: u32) -> Policy {
    Policy { base_rows: u64::from(memtable_rows.max(1)), ..Policy::default() }
}

/// No group is pending: every segment may be merged (the `pending` of [`choose`] and
/// [`prepare`] where nothing waits, and what [`choose_once_settled`] assumes).
pub const NOTHING_PENDING: u64 = u64::MAX;

/// The `pending` bound of [`choose`] for the index in directory slot `index` of a node: the
/// smallest of `listed` (the smallest group its status pages may still list as open, or
/// [`NOTHING_PENDING`]) and of the groups of its memtables whose rows are not in a segment yet
/// (`slabs`: every slab of the node). A standby's memtables of settled groups count: the
/// primary merged those groups' segments only after they existed.
pub fn pending_floor(listed: u64, slabs: &[SlabInfo], index: usize) -> u64 {
    slabs
        .iter()
        .filter(|info| info.index == index && info.state.holds_unflushed_rows())
        .map(|info| info.segment_id)
        .fold(listed, u64::min)
}

/// The policy's choice over the segments of `manifest` that may be merged now: those whose groups
/// are all older than `pending`, the oldest group this node may still hold outside a segment
/// (listed in the status pages, so that recovery may still trim it by TID, or in a memtable; see
/// [`pending_floor`]). Groups are numbered in the order the primary opened them, so every node
/// merges only an oldest-first prefix of the groups, whichever of them it flushed or built
/// first: the policy sees the same segments on every node, in the same canonical order
/// ([`SegmentStats::key`]), and chooses the same merges.
pub fn choose<C>(manifest: &Manifest<C>, memtable_rows: u32, pending: u64) -> Option<Action> {
    let stats: Vec<SegmentStats> = manifest
        .segments
        .iter()
        .filter(|s| s.covers.iter().all(|&group| group < pending))
        .map(|s| SegmentStats {
            id: s.id,
            key: s.covers.iter().copied().min().unwrap_or(u64::MAX),
            rows: s.rows,
            deleted: s.deleted,
        })
        .collect();
    policy::choose(&stats, &policy_for(memtable_rows))
}

/// The policy's choice once every segment of `manifest` may be merged: what the service will do
/// after the segments whose memtables are still listed have settled. `strata_wait_for_merges`
/// waits until this is `None`, so that it does not return while a flush's segments wait for
/// their settle before the merge they make due (a busy machine delays the settle).
pub fn choose_once_settled<C>(manifest: &Manifest<C>, memtable_rows: u32) -> Option<Action> {
    choose(manifest, memtable_rows, NOTHING_PENDING)
}

/// An input of a merge as it was when the merge was prepared.
#[derive(Debug, Clone)]
pub struct PlannedInput {
    /// Its manifest entry then.
    pub entry: SegmentEntry,
    /// Rows its deletion bitmap excluded then.
    pub excluded: Option<Bitset>,
}

/// What [`finish`] needs to publish a merge.
#[derive(Debug, Clone)]
pub struct MergePlan {
    /// The inputs.
    pub inputs: Vec<PlannedInput>,
    /// Memtables the new segment covers (the union of the inputs').
    pub covers: Vec<u64>,
    /// The new segment's id.
    pub new_id: u64,
}

/// The build of a merge: its inputs, owned, so that it can run on another thread.
pub struct MergeWork<S: SegmentType> {
    config: S::Config,
    inputs: Vec<MergeInput<S>>,
    work: BuildWork,
    new_id: u64,
    files: IndexFiles<S>,
}

/// What [`prepare`] found to do.
pub enum Prepared<S: SegmentType> {
    /// Nothing to merge now.
    Nothing,
    /// Every input row was deleted: the inputs were dropped from the manifest.
    Dropped,
    /// A merge to build ([`MergeWork::run`]) and then [`finish`].
    Build(MergePlan, Box<MergeWork<S>>),
}

/// Step 1: chooses a merge or rebuild and opens its inputs (in the policy's canonical order).
/// `memtable_rows` sizes the policy's tiers, `pending` is as for [`choose`], `new_id` hands out
/// the new segment's id (called only when there is something to build), `next_id_floor` and
/// `publish` are as for [`IndexFiles::update_manifest`] (`publish` runs only when every input
/// row was deleted and the inputs are dropped at once: readers then move to the manifest without
/// them, as after any other change). The caller holds the index's manifest lock.
pub fn prepare<S: SegmentType>(
    files: &IndexFiles<S>,
    memtable_rows: u32,
    pending: u64,
    threads: usize,
    new_id: impl FnOnce() -> u64,
    next_id_floor: u64,
    publish: impl FnOnce(&Manifest<S::Config>),
) -> Result<Prepared<S>, FileError> {
    let Some(manifest) = files.load_manifest()? else { return Ok(Prepared::Nothing) };
    let chosen = match choose(&manifest, memtable_rows, pending) {
        None => return Ok(Prepared::Nothing),
        Some(Action::Merge(ids)) => ids,
        Some(Action::Rebuild(id)) => vec![id],
    };
    let mut inputs = Vec::new();
    let mut plan_inputs = Vec::new();
    let mut covers = Vec::new();
    let mut kept_rows = 0;
    for entry in chosen.iter().filter_map(|id| manifest.segments.iter().find(|s| s.id == *id)) {
        let segment = files.open_segment(entry, true)?;
        let deleted = files.deletions(entry)?;
        kept_rows += segment.ids().len() - deleted.as_ref().map_or(0, Bitset::count);
        covers.extend_from_slice(&entry.covers);
        plan_inputs.push(PlannedInput { entry: entry.clone(), excluded: deleted.clone() });
        inputs.push(MergeInput { segment, deleted });
    }
    if kept_rows == 0 {
        let replaced: Vec<u64> = plan_inputs.iter().map(|i| i.entry.id).collect();
        files.update_manifest(|m| m.segments.retain(|s| !replaced.contains(&s.id)), next_id_floor, publish)?;
        return Ok(Prepared::Dropped);
    }
    let new_id = new_id();
    let work = Box::new(MergeWork {
        config: manifest.config,
        inputs,
        work: BuildWork::new(threads),
        new_id,
        files: files.clone(),
    });
    Ok(Prepared::Build(MergePlan { inputs: plan_inputs, covers, new_id }, work))
}

impl<S: SegmentType> MergeWork<S> {
    /// The build's cancellation token.
    pub fn cancel(&self) -> Cancel {
        self.work.cancel.clone()
    }

    /// Step 2: builds the merged segment and writes its file (not yet listed); returns its rows.
    /// [`FileError::Cancelled`] when cancelled before the file was written.
    pub fn run(self) -> Result<u64, FileError> {
        let Self { config, inputs, work, new_id, files } = self;
        let built = S::merge(&config, inputs, &work)?;
        if work.cancel.is_requested() {
            return Err(FileError::Cancelled);
        }
        files.write_segment(new_id, &built)?;
        Ok(S::built_rows(&built))
    }
}

/// What [`finish`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// The new segment replaced its inputs.
    Published,
    /// An input changed meanwhile (dropped or merged elsewhere): the new file was removed and
    /// the policy chooses again.
    Discarded,
}

/// Step 3: publishes the merge built as `plan.new_id` with `rows` rows, carrying over deletions
/// VACUUM made meanwhile. The caller holds the index's manifest lock.
pub fn finish<S: SegmentType>(
    files: &IndexFiles<S>,
    plan: MergePlan,
    rows: u64,
    next_id_floor: u64,
    publish: impl FnOnce(&Manifest<S::Config>),
) -> Result<Finished, FileError> {
    let MergePlan { inputs, covers, new_id } = plan;
    let name = segment_file_name(new_id);
    let manifest = files.manifest()?;
    // TIDs deleted from the inputs since the merge was prepared.
    let mut newly_deleted: HashSet<u64> = HashSet::new();
    for input in &inputs {
        let Some(current) = manifest.segments.iter().find(|s| s.id == input.entry.id) else {
            files.remove_quietly(&name);
            return Ok(Finished::Discarded);
        };
        if current.deletion_generation == input.entry.deletion_generation {
            continue;
        }
        let Some(now) = files.deletions(current)? else { continue };
        let segment = files.open_segment(current, false)?;
        for (row, &tid) in segment.ids().iter().enumerate() {
            if now.contains(row) && !input.excluded.as_ref().is_some_and(|d| d.contains(row)) {
                newly_deleted.insert(tid);
            }
        }
    }
    let bytes = files
        .directory()
        .file_len(&name)
        .map_err(|source| strata_engine::format::FormatError::Io { path: files.directory().describe(&name), source })?;
    let mut new_entry = SegmentEntry { id: new_id, covers, rows, deleted: 0, deletion_generation: 0, bytes };
    if !newly_deleted.is_empty() {
        let merged = files.open_segment(&new_entry, true)?;
        let mut deleted = Bitset::new(merged.ids().len());
        for (row, tid) in merged.ids().iter().enumerate() {
            if newly_deleted.contains(tid) {
                deleted.insert(row);
            }
        }
        files.write_deletions(new_id, 1, &deleted)?;
        new_entry.deletion_generation = 1;
        new_entry.deleted = deleted.count() as u64;
    }
    let replaced: Vec<u64> = inputs.iter().map(|i| i.entry.id).collect();
    files.update_manifest(
        |m| {
            m.segments.retain(|s| !replaced.contains(&s.id));
            m.segments.push(new_entry);
        },
        next_id_floor,
        publish,
    )?;
    Ok(Finished::Published)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Segments whose memtables are listed are left out of the choice now, not of the choice once
    /// they have settled.
    #[test]
    fn listed_segments_wait_for_their_settle() {
        let mut manifest = Manifest::new(crate::manifest::IndexConfig {
            dims: 2,
            metric: strata_engine::metric::Metric::L2,
            element: strata_engine::store::ElementKind::F32,
            kind: strata_engine::segment::IndexKind::Flat.into(),
            memtable_rows: 100,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        });
        for id in 1..=4 {
            manifest.segments.push(SegmentEntry {
                id,
                covers: vec![id],
                rows: 100,
                deleted: 0,
                deletion_generation: 0,
                bytes: 1,
            });
        }
        assert!(choose(&manifest, 100, NOTHING_PENDING).is_some(), "four fresh segments: a merge");
        assert_eq!(choose(&manifest, 100, 2), None, "three still listed");
        assert_eq!(choose_once_settled(&manifest, 100), choose(&manifest, 100, NOTHING_PENDING));
        manifest.segments.truncate(1);
        assert_eq!(choose_once_settled(&manifest, 100), None);
    }
}
