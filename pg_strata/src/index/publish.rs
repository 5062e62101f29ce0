//! Building segments and publishing them in the manifest.
//!
//! Publishing order, which every writer (CREATE INDEX, the service's flush, VACUUM) follows:
//! 1. write the new file (`{id}.seg` or `{id}.del.{g}`) crash-safely;
//! 2. under the index's manifest lock, rewrite the manifest (new generation) crash-safely;
//! 3. under the directory lock, store the new generation in shared memory together with any
//!    memtable state change, so scans see the old set or the new set, never a mix.
//!
//! A crash between steps leaves an unlisted file, which is garbage.

use std::sync::atomic::Ordering;

use pgrx::PgSqlErrorCode;
use strata_engine::bitset::Bitset;
use strata_engine::cancel::Cancel;
use strata_engine::format::SegmentFile;
use strata_engine::quant::Quantizer;
use strata_engine::segment::{build_segment_with_quantizer, BuildError, BuildOptions, BuiltSegment, Segment};
use strata_lsm::manifest::{deletion_file_name, segment_file_name, Manifest, SegmentEntry};

use super::state::IndexHandle;
use super::TAG_DELETIONS;
use crate::shmem;

/// Why building or publishing a segment did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    /// The build was cancelled (the index service is shutting down); nothing was published.
    #[error("cancelled")]
    Cancelled,
    /// Building, writing or publishing failed; the text says what and where.
    #[error("{0}")]
    Failed(String),
}

impl From<String> for PublishError {
    fn from(text: String) -> Self {
        Self::Failed(text)
    }
}

impl From<PublishError> for String {
    fn from(error: PublishError) -> Self {
        error.to_string()
    }
}

/// Builds a segment from `(ids, stored vectors)` with the index's configuration, on a helper
/// thread; `between` runs on the calling thread while the build goes on (see
/// [`crate::threads::run_on_helper`]: a backend checks for interrupts there, the service for
/// shutdown).
pub fn build(
    handle: &IndexHandle,
    ids: Vec<u64>,
    vectors: Vec<f32>,
    threads: usize,
    between: impl FnMut(&Cancel),
) -> Result<BuiltSegment, PublishError> {
    let rows = ids.len();
    let options = build_options(handle, rows, threads);
    let quantizer = shared_quantizer(handle);
    let cancel = options.cancel.clone();
    let dims = handle.config.dims as usize;
    let work = || build_segment_with_quantizer(&options, ids, vectors, dims, quantizer.as_ref());
    match crate::threads::run_on_helper(&cancel, work, between)? {
        Ok(built) => Ok(built),
        Err(BuildError::Cancelled(_)) => Err(PublishError::Cancelled),
        Err(e) => Err(format!("building a {} segment: {e}", handle.config.index_kind(rows).name()).into()),
    }
}

/// The quantizer every segment of an index without stored vectors is encoded with, so that its
/// segments can be merged by copying codes: the one of the first segment in the manifest; `None`
/// for other indexes, or when the index has no segment yet (the build then trains one). Retries
/// when a merge replaced the listed files meanwhile.
fn shared_quantizer(handle: &IndexHandle) -> Option<Quantizer> {
    if !handle.config.rerank_from_heap {
        return None;
    }
    let dir = handle.dir();
    for _attempt in 0..5 {
        let manifest = Manifest::load(&dir).ok().flatten()?;
        if manifest.segments.is_empty() {
            return None;
        }
        for entry in &manifest.segments {
            // Checksums were verified by the segment's writer; only the quantizer is read here.
            let opened =
                SegmentFile::open(&dir.join(entry.file_name()), false).ok().and_then(|f| Segment::from_file(f).ok());
            if let Some(quantizer) = opened.and_then(|segment| segment.quantizer()) {
                return Some(quantizer);
            }
        }
    }
    None
}

/// How a segment of `rows` rows of `handle`'s index is built, with `threads` threads.
pub fn build_options(handle: &IndexHandle, rows: usize, threads: usize) -> BuildOptions {
    BuildOptions {
        kind: handle.config.index_kind(rows),
        metric: handle.config.metric,
        element: handle.config.element,
        seed: 0x5354_5241 ^ rows as u64,
        threads: threads.max(1),
        store_vectors: !handle.config.rerank_from_heap,
        cancel: Cancel::new(),
    }
}

/// Writes `built` as segment `id` (covering memtables `covers`) and publishes it; `on_publish`
/// runs under the directory lock at the moment the new generation becomes visible. The caller
/// holds the index's manifest lock.
pub fn publish_segment(
    handle: &IndexHandle,
    built: &BuiltSegment,
    id: u64,
    covers: Vec<u64>,
    on_publish: impl FnOnce(),
) -> Result<SegmentEntry, PublishError> {
    let dir = handle.dir();
    let name = segment_file_name(id);
    let path = built.write(&dir, &name).map_err(|e| format!("writing {}: {e}", dir.join(&name).display()))?;
    let bytes = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?.len();
    let entry = SegmentEntry { id, covers, rows: built.meta().rows, deleted: 0, deletion_generation: 0, bytes };
    let pushed = entry.clone();
    update_manifest_locked(handle, move |manifest| manifest.segments.push(pushed), on_publish)?;
    Ok(entry)
}

/// Applies `change` to the manifest, stores it and publishes the new generation. The caller
/// holds the index's manifest lock ([`shmem::manifest_lock`]), which serialises flushes, builds
/// and VACUUM of one index.
pub fn update_manifest_locked(
    handle: &IndexHandle,
    change: impl FnOnce(&mut Manifest),
    on_publish: impl FnOnce(),
) -> Result<Manifest, PublishError> {
    let dir = handle.dir();
    let mut manifest = Manifest::load(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .ok_or_else(|| format!("{}: manifest missing", dir.display()))?;
    change(&mut manifest);
    let shared_next = handle.shared().next_id.load(Ordering::Acquire);
    let highest = manifest.segments.iter().map(|s| s.id + 1).max().unwrap_or(1);
    manifest.next_id = manifest.next_id.max(shared_next).max(highest);
    manifest.generation += 1;
    if let Err(e) = manifest.store(&dir) {
        if e.is_unsynced() {
            // The new manifest is in place and every process reads it, but it may not survive
            // an operating-system crash, and it cannot be taken back. As PostgreSQL does when
            // an fsync of its own files fails, PANIC: the crash restart's recovery (status pages
            // ⋈ manifest) then makes the index equal to the heap again, whichever manifest the
            // disk keeps.
            pgrx::ereport!(PANIC, PgSqlErrorCode::ERRCODE_IO_ERROR, format!("pg_strata: {}: {e}", dir.display()));
        }
        return Err(format!("{}: {e}", dir.display()).into());
    }
    {
        let _directory = shmem::directory_lock(true);
        handle.shared().manifest_generation.store(manifest.generation, Ordering::Release);
        on_publish();
    }
    Ok(manifest)
}

/// Writes deletion bitmap generation `generation` of segment `id`.
pub fn write_deletions(handle: &IndexHandle, id: u64, generation: u64, deleted: &Bitset) -> Result<(), PublishError> {
    let dir = handle.dir();
    let name = deletion_file_name(id, generation);
    let bytes: Vec<u8> = deleted.words().iter().flat_map(|w| w.to_le_bytes()).collect();
    strata_engine::format::write_segment_file(&dir, &name, &[(TAG_DELETIONS, &bytes)])
        .map(|_| ())
        .map_err(|e| PublishError::Failed(format!("writing {}: {e}", dir.join(&name).display())))
}

/// The SQLSTATE of a failed file operation described by `text`: `ERRCODE_DISK_FULL` when the
/// disk was full, `ERRCODE_IO_ERROR` otherwise.
pub fn error_code(text: &str) -> PgSqlErrorCode {
    if text.contains(&std::io::Error::from_raw_os_error(libc::ENOSPC).to_string()) {
        PgSqlErrorCode::ERRCODE_DISK_FULL
    } else {
        PgSqlErrorCode::ERRCODE_IO_ERROR
    }
}

/// Raises a publish failure as an SQL error with the code [`error_code`] gives.
pub fn raise(e: &dyn std::fmt::Display) -> ! {
    let text = e.to_string();
    crate::fmgr::error(error_code(&text), format!("pg_strata: {text}"))
}
