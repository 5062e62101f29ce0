//! VACUUM's part of the LSM: rows whose heap tuples are dead leave the index before PostgreSQL
//! removes the tuples (it does so only once the index's bulk delete returned), so that a TID
//! freed for reuse never reaches a scan from a stale index entry.
//!
//! Memtable rows get their deleted bit ([`vacuum_memtables`]); segment rows are recorded in a new
//! generation of their segment's deletion bitmap, written, synced and published in the manifest
//! ([`vacuum_segments`]). Bitmaps only ever gain rows. The replaced bitmap stays on disk for scans
//! that loaded the older manifest; it is garbage once unlisted ([`crate::garbage`]).

use strata_engine::bitset::Bitset;

use crate::files::{FileError, IndexFiles};
use crate::manifest::Manifest;
use crate::memtable::Memtable;
use crate::segment_set::SegmentSet;
use crate::segment_type::SegmentType;
use crate::slabs::SlabMemory;

/// Rows a VACUUM pass marked deleted, and rows it left.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Vacuumed {
    /// Rows newly marked deleted.
    pub removed: u64,
    /// Live rows left.
    pub remaining: u64,
}

impl std::ops::Add for Vacuumed {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self { removed: self.removed + other.removed, remaining: self.remaining + other.remaining }
    }
}

/// Marks deleted every live row of `memtables` whose TID `is_dead` reports. The caller holds the
/// memtables (a snapshot's reader counts) and the index's manifest lock, which orders this with
/// flushes: a memtable is flushed before this pass (and then handled as a segment) or after it
/// (and then leaves out the rows marked here).
pub fn vacuum_memtables<M: SlabMemory + ?Sized>(
    memtables: &[Memtable<'_, M>],
    is_dead: &mut impl FnMut(u64) -> bool,
) -> Vacuumed {
    let mut vacuumed = Vacuumed::default();
    for memtable in memtables {
        vacuumed.removed += memtable.delete_where(&mut *is_dead);
        vacuumed.remaining += memtable.live_rows();
    }
    vacuumed
}

/// Marks deleted every row of `set`'s segments whose TID `is_dead` reports, publishing a new
/// bitmap generation for each segment that gained rows (`publish` runs at each publication, as
/// for [`IndexFiles::update_manifest`]). The caller holds the index's manifest lock. On an error
/// the segments published so far keep their new bitmaps; the caller's VACUUM fails, and
/// PostgreSQL keeps the heap tuples, so a retry finds the rest.
pub fn vacuum_segments<S: SegmentType>(
    files: &IndexFiles<S>,
    set: &SegmentSet<S>,
    is_dead: &mut impl FnMut(u64) -> bool,
    next_id_floor: impl Fn() -> u64,
    mut publish: impl FnMut(&Manifest<S::Config>),
) -> Result<Vacuumed, FileError> {
    let mut vacuumed = Vacuumed::default();
    for open in &set.segments {
        let ids = open.segment.ids();
        let mut deleted = open.deleted.clone().unwrap_or_else(|| Bitset::new(ids.len()));
        let before = deleted.count();
        for (row, &tid) in ids.iter().enumerate() {
            if !deleted.contains(row) && is_dead(tid) {
                deleted.insert(row);
            }
        }
        let now = deleted.count();
        vacuumed.remaining += (ids.len() - now) as u64;
        if now == before {
            continue;
        }
        vacuumed.removed += (now - before) as u64;
        files.publish_deletions(&open.entry, &deleted, next_id_floor(), &mut publish)?;
    }
    Ok(vacuumed)
}
