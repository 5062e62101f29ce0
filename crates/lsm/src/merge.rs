//! Merges and rebuilds of an index's segments, as chosen by [`crate::policy::choose`].
//!
//! A merge runs in three steps, so that flushes and VACUUM never wait for its build:
//!
//! 1. [`prepare`] (with the index's manifest lock held by the caller): choose the inputs and
//!    copy their live rows in stored form, remembering which rows each input's deletion bitmap
//!    excluded. An HNSW merge extends the graph of its largest input that has no deletions (its
//!    rows go first), so it costs what the other inputs cost instead of a rebuild of everything;
//!    indexes without stored vectors merge codes bit for bit. When every input row is deleted,
//!    the inputs are dropped from the manifest at once.
//! 2. [`MergeWork::run`] (any thread, no lock): build the segment with its new id and write
//!    its file.
//! 3. [`finish`] (manifest lock again): if the inputs are still listed, rows VACUUM deleted from
//!    them meanwhile are marked, by TID, in a deletion bitmap of the new segment, and one
//!    manifest update swaps the inputs for it. Otherwise the new file is removed.
//!
//! Replaced files stay on disk for readers of an older manifest; they are garbage
//! ([`crate::garbage`]) once unlisted.

use std::collections::HashSet;

use strata_engine::bitset::Bitset;
use strata_engine::cancel::Cancel;
use strata_engine::segment::{
    build_segment, build_segment_extending, merge_segments, BuildOptions, IndexKind, MergeSource, Segment,
};

use crate::build::build_options;
use crate::files::{FileError, IndexFiles};
use crate::manifest::{segment_file_name, IndexConfig, Manifest, SegmentEntry};
use crate::policy::{self, Action, Policy, SegmentStats};

/// The merge policy of an index configured as `config`.
pub fn policy_for(config: &IndexConfig) -> Policy {
    Policy { base_rows: u64::from(config.memtable_rows.max(1)), ..Policy::default() }
}

/// The policy's choice over the segments of `manifest` that may be merged now: a segment whose
/// memtable `is_listed` in the status pages is left alone (recovery may still trim it by TID).
pub fn choose(manifest: &Manifest, is_listed: impl Fn(u64) -> bool) -> Option<Action> {
    let stats: Vec<SegmentStats> = manifest
        .segments
        .iter()
        .filter(|s| !s.covers.iter().any(|&memtable| is_listed(memtable)))
        .map(|s| SegmentStats { id: s.id, rows: s.rows, deleted: s.deleted })
        .collect();
    policy::choose(&stats, &policy_for(&manifest.config))
}

/// An input of a merge as it was when the merge was prepared.
#[derive(Debug, Clone)]
pub struct MergeInput {
    /// Its manifest entry then.
    pub entry: SegmentEntry,
    /// Rows its deletion bitmap excluded then.
    pub excluded: Option<Bitset>,
}

/// What [`finish`] needs to publish a merge.
#[derive(Debug, Clone)]
pub struct MergePlan {
    /// The inputs.
    pub inputs: Vec<MergeInput>,
    /// Memtables the new segment covers (the union of the inputs').
    pub covers: Vec<u64>,
    /// The new segment's id.
    pub new_id: u64,
}

/// The build of a merge: everything it reads, owned, so that it can run on another thread.
pub struct MergeWork {
    options: BuildOptions,
    dims: usize,
    ids: Vec<u64>,
    vectors: Vec<f32>,
    /// The HNSW input whose graph the merge extends.
    base: Option<Segment>,
    /// Inputs without stored vectors, merged from their codes.
    compact: Vec<(Segment, Option<Bitset>)>,
    new_id: u64,
    files: IndexFiles,
}

/// What [`prepare`] found to do.
pub enum Prepared {
    /// Nothing to merge now.
    Nothing,
    /// Every input row was deleted: the inputs were dropped from the manifest.
    Dropped,
    /// A merge to build ([`MergeWork::run`]) and then [`finish`].
    Build(MergePlan, Box<MergeWork>),
}

/// Step 1: chooses a merge or rebuild and gathers its rows. `new_id` hands out the new
/// segment's id (called only when there is something to build), `next_id_floor` is as for
/// [`IndexFiles::update_manifest`], and `stop` is polled between inputs (a shutdown does not
/// wait for a large copy). The caller holds the index's manifest lock.
pub fn prepare(
    files: &IndexFiles,
    is_listed: impl Fn(u64) -> bool,
    threads: usize,
    new_id: impl FnOnce() -> u64,
    next_id_floor: u64,
    stop: impl Fn() -> bool,
) -> Result<Prepared, FileError> {
    let Some(manifest) = files.load_manifest()? else { return Ok(Prepared::Nothing) };
    let chosen = match choose(&manifest, is_listed) {
        None => return Ok(Prepared::Nothing),
        Some(Action::Merge(ids)) => ids,
        Some(Action::Rebuild(id)) => vec![id],
    };
    let config = manifest.config;
    let mut opened = Vec::new();
    for entry in chosen.iter().filter_map(|id| manifest.segments.iter().find(|s| s.id == *id)) {
        let segment = files.open_segment(entry, true)?;
        let excluded = files.deletions(entry)?;
        opened.push((entry.clone(), segment, excluded));
    }
    let base = matches!(config.kind, IndexKind::Hnsw { .. })
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
    let (mut ids, mut vectors, mut covers, mut compact) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut base_segment = None;
    let mut kept_rows = 0usize;
    for (position, (entry, segment, excluded)) in opened.into_iter().enumerate() {
        if stop() {
            return Ok(Prepared::Nothing);
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
            None => compact.push((segment, excluded.clone())),
        }
        inputs.push(MergeInput { entry, excluded });
    }
    if !compact.is_empty() && !vectors.is_empty() {
        return Err(FileError::Inconsistent("cannot merge segments with and without stored vectors".into()));
    }
    let replaced: Vec<u64> = inputs.iter().map(|i| i.entry.id).collect();
    if kept_rows == 0 {
        files.update_manifest(|m| m.segments.retain(|s| !replaced.contains(&s.id)), next_id_floor, |_| {})?;
        return Ok(Prepared::Dropped);
    }
    let new_id = new_id();
    let work = Box::new(MergeWork {
        options: build_options(&config, kept_rows, threads),
        dims: config.dims as usize,
        ids,
        vectors,
        base: base_segment,
        compact,
        new_id,
        files: files.clone(),
    });
    Ok(Prepared::Build(MergePlan { inputs, covers, new_id }, work))
}

impl MergeWork {
    /// The build's cancellation token.
    pub fn cancel(&self) -> Cancel {
        self.options.cancel.clone()
    }

    /// Step 2: builds the merged segment and writes its file (not yet listed); returns its rows.
    /// [`FileError::Cancelled`] when cancelled before the file was written.
    pub fn run(self) -> Result<u64, FileError> {
        let Self { options, dims, ids, vectors, base, compact, new_id, files } = self;
        let built = if let Some(base) = base {
            build_segment_extending(&options, ids, vectors, dims, &base)
        } else if compact.is_empty() {
            build_segment(&options, ids, vectors, dims)
        } else {
            let sources: Vec<MergeSource<'_>> =
                compact.iter().map(|(segment, deleted)| MergeSource { segment, deleted: deleted.as_ref() }).collect();
            merge_segments(&options, &sources)
        };
        let built = built.map_err(|e| match e {
            strata_engine::segment::BuildError::Cancelled(_) => FileError::Cancelled,
            other => FileError::Build { kind: "merged", message: other.to_string() },
        })?;
        if options.cancel.is_requested() {
            return Err(FileError::Cancelled);
        }
        files.write_segment(new_id, &built)?;
        Ok(built.meta().rows)
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
pub fn finish(
    files: &IndexFiles,
    plan: MergePlan,
    rows: u64,
    next_id_floor: u64,
    publish: impl FnOnce(&Manifest),
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
        for row in 0..segment.len() {
            if now.contains(row) && !input.excluded.as_ref().is_some_and(|d| d.contains(row)) {
                newly_deleted.insert(segment.id(row));
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
        let mut deleted = Bitset::new(merged.len());
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
