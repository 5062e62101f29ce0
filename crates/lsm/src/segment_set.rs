//! [`SegmentSet`]: the open segments of one manifest generation, each with its deletion bitmap.
//!
//! Segments are opened by mapping their files (the page cache is shared by every process, so
//! memory does not multiply with readers). Opening a newer generation reuses the segments whose
//! file and bitmap generation did not change. Header and table checksums are verified on open;
//! section checksums were verified once by the writer, not by every reader.

use std::sync::Arc;

use strata_engine::bitset::Bitset;

use crate::files::{FileError, IndexFiles};
use crate::manifest::SegmentEntry;
use crate::segment_type::SegmentType;

/// One open segment with its deletion bitmap.
pub struct OpenSegment<S> {
    /// The manifest entry it was opened from.
    pub entry: SegmentEntry,
    /// The mapped segment.
    pub segment: S,
    /// Rows deleted by VACUUM (`None`: nothing deleted).
    pub deleted: Option<Bitset>,
}

impl<S> OpenSegment<S> {
    /// Rows not deleted.
    pub fn live_rows(&self) -> u64 {
        self.entry.rows - self.deleted.as_ref().map_or(0, |d| d.count() as u64)
    }
}

/// The open segments of one manifest generation, in manifest order.
pub struct SegmentSet<S> {
    /// The manifest generation they belong to.
    pub generation: u64,
    /// The segments.
    pub segments: Vec<Arc<OpenSegment<S>>>,
    /// The manifest's `group_generations` (a node deriving its index from the membership log).
    pub group_generations: std::collections::BTreeMap<u64, u64>,
}

impl<S: SegmentType> SegmentSet<S> {
    /// Opens the segments the current manifest lists, reusing those of `previous` that are
    /// unchanged (same segment, same deletion generation).
    pub fn open(files: &IndexFiles<S>, previous: Option<&SegmentSet<S>>) -> Result<Self, FileError> {
        let manifest = files.manifest()?;
        let mut segments = Vec::with_capacity(manifest.segments.len());
        for entry in &manifest.segments {
            let reuse = previous.and_then(|p| {
                p.segments
                    .iter()
                    .find(|s| s.entry.id == entry.id && s.entry.deletion_generation == entry.deletion_generation)
            });
            if let Some(open) = reuse {
                segments.push(Arc::clone(open));
            } else {
                let segment = files.open_segment(entry, false)?;
                let deleted = files.deletions(entry)?;
                segments.push(Arc::new(OpenSegment { entry: entry.clone(), segment, deleted }));
            }
        }
        Ok(Self { generation: manifest.generation, segments, group_generations: manifest.group_generations })
    }
}
