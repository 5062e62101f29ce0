//! Building a segment of an index from rows (a flushed memtable, CREATE INDEX's chunks): the
//! index's configuration turned into the engine's build options, and the shared quantizer of
//! indexes whose segments keep only codes.

use strata_engine::cancel::Cancel;
use strata_engine::segment::{build_segment_with_quantizer, BuildError, BuildOptions, BuiltSegment};

use crate::files::{FileError, IndexFiles};
use crate::manifest::IndexConfig;

/// How a segment of `rows` rows of an index configured as `config` is built with `threads`
/// threads (a fresh cancellation token; the seed depends only on the row count, so equal input
/// builds equal segments).
pub fn build_options(config: &IndexConfig, rows: usize, threads: usize) -> BuildOptions {
    BuildOptions {
        kind: config.index_kind(rows),
        metric: config.metric,
        element: config.element,
        seed: 0x5354_5241 ^ rows as u64,
        threads: threads.max(1),
        store_vectors: !config.rerank_from_heap,
        cancel: Cancel::new(),
    }
}

/// Builds a segment of `files`' index from `ids` and their stored-form `vectors` (row-major)
/// with `options` (from [`build_options`]); an index without stored vectors encodes with the
/// quantizer its segments share. [`FileError::Cancelled`] when `options.cancel` was requested.
pub fn build_rows(
    files: &IndexFiles,
    config: &IndexConfig,
    options: &BuildOptions,
    ids: Vec<u64>,
    vectors: Vec<f32>,
) -> Result<BuiltSegment, FileError> {
    let rows = ids.len();
    let quantizer = files.shared_quantizer(config);
    build_segment_with_quantizer(options, ids, vectors, config.dims as usize, quantizer.as_ref()).map_err(|e| match e {
        BuildError::Cancelled(_) => FileError::Cancelled,
        other => FileError::Build { kind: config.index_kind(rows).name(), message: other.to_string() },
    })
}
