//! The backend-local cache of an index's open segments.
//!
//! Segments are opened by memory-mapping their files (the page cache is shared by every
//! backend, so memory does not multiply with connections) and kept open while the manifest
//! generation stays the same. Header and table checksums are verified on open; section checksums
//! are verified once by the process that wrote or first loaded the file, not by every backend.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use pgrx::PgSqlErrorCode;
use strata_engine::bitset::Bitset;
use strata_engine::format::SegmentFile;
use strata_engine::segment::Segment;
use strata_lsm::manifest::{Manifest, SegmentEntry};

use super::state::IndexHandle;
use crate::fmgr::error;
use crate::shmem::IndexKey;

/// One open segment with its deletion bitmap.
pub struct OpenSegment {
    /// The manifest entry it was opened from.
    pub entry: SegmentEntry,
    /// The mapped segment.
    pub segment: Segment,
    /// Rows deleted by VACUUM (`None`: nothing deleted).
    pub deleted: Option<Bitset>,
}

/// The open segments of one manifest generation.
pub struct SegmentSet {
    /// The manifest generation they belong to.
    pub generation: u64,
    /// The segments, in manifest order.
    pub segments: Vec<Arc<OpenSegment>>,
}

thread_local! {
    static CACHE: RefCell<HashMap<IndexKey, Arc<SegmentSet>>> = RefCell::new(HashMap::new());
}

/// Reads a deletion bitmap file (a segment-format file with one section of `u64` words).
pub fn read_deletions(path: &Path, rows: usize) -> Result<Bitset, String> {
    let file = SegmentFile::open(path, true).map_err(|e| e.to_string())?;
    let bytes = file.require(super::TAG_DELETIONS).map_err(|e| e.to_string())?;
    let words: Vec<u64> = bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
    Bitset::from_words(words, rows)
        .ok_or_else(|| format!("{}: deletion bitmap too short for {rows} rows", path.display()))
}

fn open_entry(dir: &Path, entry: &SegmentEntry, reuse: Option<&Arc<OpenSegment>>) -> Result<Arc<OpenSegment>, String> {
    let segment = match reuse {
        Some(old) if old.entry.id == entry.id && old.entry.deletion_generation == entry.deletion_generation => {
            return Ok(Arc::clone(old));
        }
        _ => {
            let path = dir.join(entry.file_name());
            let file = SegmentFile::open(&path, false).map_err(|e| format!("{}: {e}", path.display()))?;
            Segment::from_file(file).map_err(|e| format!("{}: {e}", path.display()))?
        }
    };
    if segment.len() as u64 != entry.rows {
        return Err(format!("segment {} holds {} rows, the manifest says {}", entry.id, segment.len(), entry.rows));
    }
    let deleted = match entry.deletion_file_name() {
        Some(name) => Some(read_deletions(&dir.join(name), segment.len())?),
        None => None,
    };
    Ok(Arc::new(OpenSegment { entry: entry.clone(), segment, deleted }))
}

/// The segment set of `handle` at manifest generation `generation` (or newer), loading and
/// opening what changed since the cached set.
pub fn segment_set(handle: &IndexHandle, generation: u64) -> Arc<SegmentSet> {
    if let Some(cached) = CACHE.with(|c| c.borrow().get(&handle.key).cloned()) {
        if cached.generation >= generation {
            return cached;
        }
    }
    let dir = handle.dir();
    let manifest = match Manifest::load(&dir) {
        Ok(Some(manifest)) => manifest,
        Ok(None) => error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("{}: manifest missing", dir.display())),
        Err(e) => error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("{}: {e}", dir.display())),
    };
    let previous = CACHE.with(|c| c.borrow().get(&handle.key).cloned());
    let mut segments = Vec::with_capacity(manifest.segments.len());
    for entry in &manifest.segments {
        let reuse = previous.as_ref().and_then(|p| p.segments.iter().find(|s| s.entry.id == entry.id));
        match open_entry(&dir, entry, reuse) {
            Ok(open) => segments.push(open),
            Err(e) => error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("pg_strata segment unreadable: {e}")),
        }
    }
    let set = Arc::new(SegmentSet { generation: manifest.generation, segments });
    CACHE.with(|c| c.borrow_mut().insert(handle.key, Arc::clone(&set)));
    set
}

/// Forgets the cached segments of `key` (after a rebuild of the index).
pub fn forget(key: IndexKey) {
    CACHE.with(|c| c.borrow_mut().remove(&key));
}
