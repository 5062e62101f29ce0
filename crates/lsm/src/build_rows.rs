//! CREATE INDEX's rows: collected into segments' worth of rows within a memory budget.
//!
//! A build needs every row of a segment at once (HNSW links each row to its neighbours among
//! all of them). The budget (`maintenance_work_mem`) bounds the build's private memory:
//! - the rows' ids and filter words and the build's private structures for them
//!   ([`BuildMemory::private`]) always count, so they bound the rows of one segment
//!   ([`BuildBudget::segment_rows`]); a larger table is built into several segments;
//! - the vectors, and the build's arrays that live beside them ([`BuildMemory::spillable`]:
//!   HNSW's links and traversal codes), stay in memory while everything fits
//!   ([`BuildBudget::memory_rows`]); past that the vectors go to a spill file in the index's
//!   directory, which the build then reads and writes through the page cache
//!   ([`RowBuffer::map_spill_file`]), and the build puts those arrays in unnamed files beside
//!   it, so the kernel writes back and evicts those pages as it needs instead of the process
//!   holding them. An HNSW index of 1M × 384 rows thus builds as one segment at the default
//!   64 MB.
//!
//! A spill file is unnamed (created and unlinked at once, `tempfile`), so neither an error nor
//! a crash leaves it behind; its disk space is freed when the segment built from it is dropped.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use strata_engine::row_buffer::RowBuffer;
use strata_engine::segment::build_memory_per_row;
use thiserror::Error;

use crate::manifest::IndexConfig;
use crate::rows::WrongDimensions;
use crate::vector::VectorRows;

/// How many rows a build holds, from its memory budget (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildBudget {
    /// Rows per segment: at least 1,000.
    pub segment_rows: usize,
    /// Rows whose vectors are held in memory before the rest spill: at least 1,000 (and never
    /// more than `segment_rows`).
    pub memory_rows: usize,
}

impl BuildBudget {
    /// The budget of `budget_bytes` for a vector index configured as `config` (it panics for a
    /// text index, as [`IndexConfig::vector_kind`]): a row always costs its
    /// id (8 bytes), its filter words (4 bytes each) and the build's private memory for its
    /// kind; in memory, also its vector (4 bytes per word) and the build's spillable arrays.
    pub fn new(config: &IndexConfig, budget_bytes: usize) -> Self {
        let dims = config.dims as usize;
        let memory = build_memory_per_row(config.vector_kind(), dims);
        let always = 8 + 4 * config.filters.row_words() + memory.private;
        let segment_rows = (budget_bytes / always).max(1000);
        let memory_rows = (budget_bytes / (always + 4 * dims + memory.spillable)).clamp(1000, segment_rows);
        Self { segment_rows, memory_rows }
    }
}

/// Why collecting a build's rows failed.
#[derive(Debug, Error)]
pub enum BuildRowsError {
    /// A row that is not a row of the index.
    #[error(transparent)]
    WrongDimensions(#[from] WrongDimensions),
    /// The spill file could not be created, written or mapped (ENOSPC, EIO).
    #[error("build spill file in {dir}: {source}")]
    Spill {
        /// The directory it lives in.
        dir: String,
        /// The failure.
        #[source]
        source: io::Error,
    },
}

/// A spill file being written: the vectors of the current chunk past its memory rows.
struct Spill {
    writer: BufWriter<File>,
    words: usize,
}

/// The rows of a CREATE INDEX, collected into chunks of at most
/// [`BuildBudget::segment_rows`] rows, each built into one segment.
pub struct BuildChunks {
    dims: usize,
    row_words: usize,
    budget: BuildBudget,
    spill_dir: Option<PathBuf>,
    rows: VectorRows,
    spill: Option<Spill>,
    spilled_chunks: usize,
}

impl std::fmt::Debug for BuildChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildChunks")
            .field("budget", &self.budget)
            .field("rows", &self.rows.ids.len())
            .field("spilling", &self.spill.is_some())
            .finish_non_exhaustive()
    }
}

impl BuildChunks {
    /// Chunks of the rows of an index configured as `config` ([`memtable_row`] form), within
    /// `budget`; vectors past its memory rows spill to an unnamed file in `spill_dir` (`None`:
    /// they stay in memory, for callers whose rows are few).
    ///
    /// [`memtable_row`]: crate::rows::memtable_row
    pub fn new(config: &IndexConfig, budget: BuildBudget, spill_dir: Option<PathBuf>) -> Self {
        Self {
            dims: config.dims as usize,
            row_words: config.row_words(),
            budget,
            spill_dir,
            rows: VectorRows::default(),
            spill: None,
            spilled_chunks: 0,
        }
    }

    /// Whether the current chunk's vectors are going to a spill file.
    pub fn spilling(&self) -> bool {
        self.spill.is_some()
    }

    /// How many chunks handed out so far had spilled.
    pub fn spilled_chunks(&self) -> usize {
        self.spilled_chunks
    }

    fn spill_error(&self, source: io::Error) -> BuildRowsError {
        let dir = self.spill_dir.as_ref().map_or_else(String::new, |d| d.display().to_string());
        BuildRowsError::Spill { dir, source }
    }

    /// Adds row `tid` in its memtable form `row`; returns the chunk it completed, if it did. An
    /// error (and nothing added) when `row` is not a row of the index; an error of the spill
    /// file leaves the chunk unusable (the build fails).
    pub fn push(&mut self, tid: u64, row: &[f32]) -> Result<Option<VectorRows>, BuildRowsError> {
        if row.len() != self.row_words {
            return Err(WrongDimensions { expected: self.row_words, found: row.len() }.into());
        }
        let vector = &row[..self.dims];
        match &mut self.spill {
            Some(spill) => {
                let written = spill.writer.write_all(bytemuck::cast_slice(vector));
                written.map_err(|e| self.spill_error(e))?;
                if let Some(spill) = &mut self.spill {
                    spill.words += vector.len();
                }
            }
            None => self.rows.vectors.extend_from_slice(vector),
        }
        self.rows.ids.push(tid);
        self.rows.filters.extend(row[self.dims..].iter().map(|w| w.to_bits()));
        if self.spill.is_none() && self.spill_dir.is_some() && self.rows.ids.len() >= self.budget.memory_rows {
            self.start_spill()?;
        }
        if self.rows.ids.len() >= self.budget.segment_rows {
            return self.finish();
        }
        Ok(None)
    }

    /// Moves the chunk's vectors so far into a new spill file, which takes the rest.
    fn start_spill(&mut self) -> Result<(), BuildRowsError> {
        let Some(dir) = &self.spill_dir else { return Ok(()) };
        let file = tempfile::tempfile_in(dir).map_err(|e| self.spill_error(e))?;
        let mut writer = BufWriter::with_capacity(1 << 20, file);
        let in_memory = std::mem::take(&mut self.rows.vectors);
        writer.write_all(bytemuck::cast_slice(&in_memory)).map_err(|e| self.spill_error(e))?;
        self.spill = Some(Spill { writer, words: in_memory.len() });
        Ok(())
    }

    /// The rows collected since the last chunk, if any (the last chunk of a build); spilled
    /// vectors come back mapped from their file.
    pub fn finish(&mut self) -> Result<Option<VectorRows>, BuildRowsError> {
        if self.rows.ids.is_empty() {
            return Ok(None);
        }
        let mut rows = std::mem::take(&mut self.rows);
        if let Some(Spill { writer, words }) = self.spill.take() {
            let file = writer.into_inner().map_err(|e| self.spill_error(e.into_error()))?;
            let dir = self.spill_dir.clone().unwrap_or_default();
            rows.vectors = RowBuffer::map_spill_file(&file, words, &dir).map_err(|e| self.spill_error(e))?;
            self.spilled_chunks += 1;
        }
        Ok(Some(rows))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use strata_engine::metric::Metric;
    use strata_engine::segment::IndexKind;
    use strata_engine::store::ElementKind;

    use super::*;

    fn config(kind: IndexKind, dims: u32) -> IndexConfig {
        IndexConfig {
            dims,
            metric: Metric::L2,
            element: ElementKind::F32,
            kind: kind.into(),
            memtable_rows: 8,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        }
    }

    #[test]
    fn the_budget_counts_working_memory_always_and_vectors_while_in_memory() {
        let hnsw = config(IndexKind::Hnsw { m: 16, ef_construction: 64 }, 384);
        // 64 MB: 8 + 39 bytes per row always; in memory also the vector (1,536), the layer-0
        // links (128) and codes (384: the 4-bit walk codes, 192, are gone before the traversal
        // codes are made).
        let budget = BuildBudget::new(&hnsw, 64 << 20);
        assert_eq!(budget.segment_rows, (64 << 20) / 47);
        assert!(budget.segment_rows > 1_000_000, "1M rows of 384 dimensions build as one segment at the default");
        assert_eq!(budget.memory_rows, (64 << 20) / (47 + 1536 + 128 + 384));
        // Below 32 dimensions the walk codes' whole block is the larger.
        assert_eq!(build_memory_per_row(hnsw.vector_kind(), 3).spillable, 8 * 16 + 16);
        // Kinds whose build memory does not spill are bounded by it.
        let ivf = config(IndexKind::Ivf { lists: 100, bits: 4 }, 384);
        assert_eq!(BuildBudget::new(&ivf, 64 << 20).segment_rows, (64 << 20) / (8 + 192 + 200));
        // A flat build is bounded by its ids alone; tiny budgets keep 1,000 rows.
        assert_eq!(BuildBudget::new(&config(IndexKind::Flat, 384), 64 << 20).segment_rows, (64 << 20) / 8);
        let tiny = BuildBudget::new(&hnsw, 1024);
        assert_eq!((tiny.segment_rows, tiny.memory_rows), (1000, 1000));
    }

    #[test]
    fn a_row_of_other_dimensions_is_refused() {
        let mut chunks =
            BuildChunks::new(&config(IndexKind::Flat, 2), BuildBudget::new(&config(IndexKind::Flat, 2), 0), None);
        let error = chunks.push(1, &[1.0]).unwrap_err();
        assert!(matches!(error, BuildRowsError::WrongDimensions(WrongDimensions { expected: 2, found: 1 })));
        assert!(chunks.finish().unwrap().is_none(), "nothing added");
    }

    #[test]
    fn a_spill_directory_that_cannot_hold_files_fails_the_build_with_its_name() {
        let config = config(IndexKind::Flat, 2);
        let budget = BuildBudget { segment_rows: 10, memory_rows: 2 };
        let mut chunks = BuildChunks::new(&config, budget, Some(PathBuf::from("/nonexistent/strata")));
        chunks.push(1, &[1.0, 2.0]).unwrap();
        let error = chunks.push(2, &[1.0, 2.0]).unwrap_err();
        assert!(error.to_string().contains("/nonexistent/strata"), "{error}");
    }

    proptest! {
        /// The chunks, in order, are exactly the rows pushed, vectors and filter words; each but
        /// the last holds the segment's rows; chunks past the memory rows come from a spill file.
        #[test]
        fn chunks_hold_every_row_once(
            rows in 0usize..60,
            segment_rows in 1usize..20,
            memory_rows in 1usize..20,
            spill in any::<bool>(),
        ) {
            let mut config = config(IndexKind::Flat, 2);
            let int4 = strata_engine::filter::FilterSpec::new(strata_engine::filter::ColumnType::Int4);
            config.filters = strata_engine::filter::FilterSchema::new(&[int4]).unwrap();
            let words = config.filters.row_words() as u32;
            let filter_words = |tid: u32| (0..words).map(move |w| tid * 7 + w);
            let budget = BuildBudget { segment_rows, memory_rows: memory_rows.min(segment_rows) };
            let dir = tempfile::tempdir().unwrap();
            let mut chunks = BuildChunks::new(&config, budget, spill.then(|| dir.path().to_path_buf()));
            let mut built = Vec::new();
            for tid in 0..rows as u64 {
                let mut row = vec![tid as f32, -(tid as f32)];
                row.extend(filter_words(tid as u32).map(f32::from_bits));
                built.extend(chunks.push(tid, &row).unwrap());
            }
            built.extend(chunks.finish().unwrap());
            prop_assert!(chunks.finish().unwrap().is_none());
            prop_assert_eq!(built.len(), rows.div_ceil(segment_rows));
            for chunk in &built[..built.len().saturating_sub(1)] {
                prop_assert_eq!(chunk.ids.len(), segment_rows);
            }
            for chunk in &built {
                let expect_mapped = spill && chunk.ids.len() >= budget.memory_rows;
                prop_assert_eq!(chunk.vectors.is_mapped(), expect_mapped);
            }
            prop_assert_eq!(chunks.spilled_chunks(), built.iter().filter(|c| c.vectors.is_mapped()).count());
            let ids: Vec<u64> = built.iter().flat_map(|c| c.ids.clone()).collect();
            let vectors: Vec<f32> = built.iter().flat_map(|c| c.vectors.to_vec()).collect();
            let filters: Vec<u32> = built.iter().flat_map(|c| c.filters.clone()).collect();
            prop_assert_eq!(ids, (0..rows as u64).collect::<Vec<_>>());
            let expected: Vec<f32> = (0..rows).flat_map(|t| [t as f32, -(t as f32)]).collect();
            prop_assert_eq!(vectors, expected);
            prop_assert_eq!(filters, (0..rows as u32).flat_map(filter_words).collect::<Vec<_>>());
            prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "spill files are unnamed");
        }
    }
}
