//! Flushing a sealed memtable into a segment: the one place rows move from a slab to a
//! published file.
//!
//! Under the index's manifest lock (held by the caller): the memtable goes SEALED → FLUSHING
//! ([`Slabs::begin_flush`]: sealed, unpinned, complete), its live rows are built into a segment
//! and written under a fresh file id, the manifest lists it as covering the memtable, and —
//! under one exclusive hold of the directory lock — the new generation is published and the
//! memtable becomes FLUSHED, so that a scan's snapshot sees the rows in the memtable or in the
//! segment, never in neither. When anything fails the memtable goes back to SEALED: its rows stay
//! searchable and it is flushed again later.

use strata_engine::segment::BuiltSegment;

use crate::files::{FileError, IndexFiles};
use crate::manifest::{Manifest, SegmentEntry};
use crate::memtable::Memtable;
use crate::segment_type::SegmentType;
use crate::slabs::{DirectoryLock, LockMode, NotFlushable, SlabMemory, Slabs};
use crate::vector::{VectorFiles, VectorRows};

/// The memtable to flush: the slab holding it, its index's directory slot and its SegmentID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushTarget {
    /// The slab.
    pub slab: usize,
    /// The index's slot.
    pub index: usize,
    /// The memtable's SegmentID.
    pub segment_id: u64,
}

/// What [`flush`] did.
#[derive(Debug)]
pub enum Flushed {
    /// The memtable's rows were published as this segment.
    Published(SegmentEntry),
    /// The memtable had no live rows: it is FLUSHED without a segment.
    Empty,
    /// The slab no longer holds a flushable memtable (flushed meanwhile, or not yet ready).
    Skipped(NotFlushable),
}

/// Flushes `target` (see the module docs), an index of `dims` dimensions (its memtable rows
/// hold the vector, then the filter words): [`flush_rows`] over vector segments.
#[allow(clippy::too_many_arguments)]
pub fn flush<M: SlabMemory + ?Sized, L: DirectoryLock + ?Sized>(
    slabs: Slabs<'_, M, L>,
    files: &VectorFiles,
    dims: usize,
    target: FlushTarget,
    file_id: impl FnOnce() -> u64,
    next_id_floor: impl FnOnce() -> u64,
    build: impl FnOnce(VectorRows) -> Result<BuiltSegment, FileError>,
    on_flushed_locked: impl FnOnce(Option<&Manifest>),
) -> Result<Flushed, FileError> {
    let collect = |memtable: &Memtable<'_, M>| {
        let mut rows = VectorRows::default();
        memtable.for_each_live(|tid, row| rows.push_row(dims, tid, row));
        Ok((!rows.ids.is_empty()).then_some(rows))
    };
    flush_rows(slabs, files, target, collect, file_id, next_id_floor, build, on_flushed_locked)
}

/// Flushes `target` (see the module docs) into a segment of any [`SegmentType`]. `collect`
/// reads the FLUSHING memtable's live rows (`None` when it has none; an error leaves the
/// memtable SEALED, as a failed build does); `file_id` hands out the segment's id, called only
/// when there are rows; `next_id_floor` is as for [`crate::files::IndexFiles::update_manifest`]
/// and is read after `file_id`; `build` builds the segment from the rows (where the caller wants
/// it built: pg_strata uses a helper thread that checks for interrupts); `on_flushed_locked` runs
/// under the exclusive directory lock at the moment the memtable becomes FLUSHED, with the
/// published manifest (`None` for an empty memtable). The caller holds the index's manifest lock.
#[allow(clippy::too_many_arguments)]
pub fn flush_rows<'r, S: SegmentType, M: SlabMemory + ?Sized, L: DirectoryLock + ?Sized>(
    slabs: Slabs<'r, M, L>,
    files: &IndexFiles<S>,
    target: FlushTarget,
    collect: impl FnOnce(&Memtable<'r, M>) -> Result<Option<S::Rows>, FileError>,
    file_id: impl FnOnce() -> u64,
    next_id_floor: impl FnOnce() -> u64,
    build: impl FnOnce(S::Rows) -> Result<S::Built, FileError>,
    on_flushed_locked: impl FnOnce(Option<&Manifest<S::Config>>),
) -> Result<Flushed, FileError> {
    let memtable = match slabs.begin_flush(target.slab, target.index, target.segment_id) {
        Ok(memtable) => memtable,
        Err(reason) => return Ok(Flushed::Skipped(reason)),
    };
    let rows = match collect(&memtable) {
        Ok(Some(rows)) => rows,
        Ok(None) => {
            let _lock = slabs.lock().lock(LockMode::Exclusive);
            slabs.finish_flush_locked(&memtable);
            on_flushed_locked(None);
            return Ok(Flushed::Empty);
        }
        Err(e) => {
            slabs.abort_flush(&memtable);
            return Err(e);
        }
    };
    // A fresh file id: one memtable may be flushed as several segments (recovery can refill it
    // in more than one slab), and a segment id is never reused.
    let id = file_id();
    let published = build(rows).and_then(|built| {
        files.publish_segment(&built, id, vec![target.segment_id], next_id_floor(), |manifest| {
            let _lock = slabs.lock().lock(LockMode::Exclusive);
            slabs.finish_flush_locked(&memtable);
            on_flushed_locked(Some(manifest));
        })
    });
    match published {
        Ok(entry) => Ok(Flushed::Published(entry)),
        Err(e) => {
            slabs.abort_flush(&memtable);
            Err(e)
        }
    }
}
