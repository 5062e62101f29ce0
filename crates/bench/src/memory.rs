//! `strata-bench memory`: the memory a build and a merge of every segment kind take, against
//! the budget of the f32 data plus a fixed margin.
//!
//! Each kind is built from the whole dataset the way CREATE INDEX hands rows over (one owned
//! buffer of f32 rows), then two halves are built, written to files, mapped, and merged through
//! strata-lsm's `SegmentType::merge` (the code the index service runs). The counting allocator
//! gives the peak of live heap bytes from just before the call until it returns, the input
//! buffer included; the mapped input segments of a merge are page cache, not heap, and are
//! reported apart.

use std::io::Read;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use strata_engine::filter::FilterSchema;
use strata_engine::metric::Metric;
use strata_engine::segment::{build_segment, IndexKind, Segment};
use strata_engine::store::ElementKind;
use strata_lsm::directory::fs::FsDirectory;
use strata_lsm::directory::write_file;
use strata_lsm::manifest::IndexConfig;
use strata_lsm::segment_type::{BuildWork, MergeInput, SegmentType};

use crate::alloc;

/// The fixed margin the budget allows over the f32 data: 1.25 GiB. At 1M × 1024 the largest
/// need is HNSW's: its finished links (about 0.13 GiB) beside its 8-bit traversal codes
/// (0.95 GiB), or a merge's new graph beside them.
pub const MARGIN_BYTES: u64 = 5 << 28;

/// One build or merge measured.
#[derive(Debug, Serialize)]
pub struct Measured {
    /// Segment kind.
    pub kind: String,
    /// `build` (all rows) or `merge` (two halves).
    pub operation: &'static str,
    /// Rows.
    pub rows: usize,
    /// Wall seconds.
    pub seconds: f64,
    /// Peak live heap bytes during the call, the input buffer included.
    pub peak_heap_bytes: u64,
    /// The f32 data of the rows, `rows · dims · 4`.
    pub data_bytes: u64,
    /// Mapped input segment bytes (merges), page cache rather than heap.
    pub mapped_input_bytes: u64,
    /// Whether `peak_heap_bytes ≤ data_bytes + MARGIN_BYTES` and ≤ 16 GiB.
    pub within_budget: bool,
}

/// Reads the first `max_rows` rows of an `.fvecs` file into one buffer of f32 (no second copy).
pub fn read_fvecs(path: &Path, max_rows: usize) -> Result<(usize, Vec<f32>), String> {
    read_fvecs_rows(path, 0..max_rows)
}

/// Rows `rows` of an `.fvecs` file (clamped to the file) into one buffer of f32, reading only
/// those rows.
pub fn read_fvecs_rows(path: &Path, rows: std::ops::Range<usize>) -> Result<(usize, Vec<f32>), String> {
    use std::io::{Seek, SeekFrom};
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let length = file.metadata().map_err(|e| e.to_string())?.len() as usize;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut head = [0u8; 4];
    reader.read_exact(&mut head).map_err(|e| format!("{}: {e}", path.display()))?;
    let dims = u32::from_le_bytes(head) as usize;
    let stride = 4 + 4 * dims;
    let end = rows.end.min(length / stride);
    let start = rows.start.min(end);
    reader.seek(SeekFrom::Start((start * stride) as u64)).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity((end - start) * dims);
    let mut row = vec![0u8; 4 * dims];
    for _ in start..end {
        reader.read_exact(&mut head).map_err(|e| e.to_string())?;
        reader.read_exact(&mut row).map_err(|e| e.to_string())?;
        out.extend(row.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))));
    }
    Ok((dims, out))
}

fn config(kind: IndexKind, dims: usize) -> IndexConfig {
    IndexConfig {
        dims: dims as u32,
        metric: Metric::Cosine,
        element: ElementKind::F32,
        kind: kind.into(),
        memtable_rows: 10_000,
        rerank_from_heap: false,
        filters: FilterSchema::default(),
    }
}

fn budget_holds(peak: u64, data: u64) -> bool {
    peak <= data + MARGIN_BYTES && peak <= 16 << 30
}

/// Builds `kind` over all rows of `data`, then merges two half segments; returns both figures.
pub fn measure_kind(
    data: &Path,
    rows: usize,
    kind: IndexKind,
    threads: usize,
    scratch: &Path,
) -> Result<Vec<Measured>, String> {
    let work = BuildWork::new(threads);
    let (dims, vectors) = read_fvecs(&data.join("base.fvecs"), rows)?;
    let config = config(kind, dims);
    let rows = vectors.len() / dims;
    let data_bytes = (rows * dims * 4) as u64;
    let options = strata_lsm::vector::build_options(&config, rows, &work);
    let name = format!("{kind:?}");
    let mut out = Vec::new();

    let baseline = alloc::reset_peak() as u64;
    let started = Instant::now();
    let built = build_segment(&options, (0..rows as u64).collect(), vectors, dims).map_err(|e| e.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    // The input buffer was live before the call: it counts as the build's, as CREATE INDEX's
    // collected rows do.
    let peak = alloc::peak() as u64 - baseline + data_bytes;
    drop(built);
    eprintln!(
        "  {name} build of {rows} rows: {seconds:.1} s, peak heap {:.2} GiB (data {:.2} GiB)",
        gib(peak),
        gib(data_bytes)
    );
    out.push(Measured {
        kind: name.clone(),
        operation: "build",
        rows,
        seconds,
        peak_heap_bytes: peak,
        data_bytes,
        mapped_input_bytes: 0,
        within_budget: budget_holds(peak, data_bytes),
    });

    std::fs::create_dir_all(scratch).map_err(|e| e.to_string())?;
    let directory = FsDirectory::new(scratch);
    let half = rows / 2;
    let mut inputs = Vec::new();
    let mut mapped = 0u64;
    for (part, range) in [(0, 0..half), (1, half..rows)] {
        let (_, piece) = read_fvecs_rows(&data.join("base.fvecs"), range.clone())?;
        let options = strata_lsm::vector::build_options(&config, range.len(), &work);
        let built = build_segment(&options, range.clone().map(|r| r as u64).collect(), piece, dims)
            .map_err(|e| e.to_string())?;
        let sections = built.sections();
        let borrowed: Vec<(u32, &[u8])> = sections.iter().map(|(tag, bytes)| (*tag, bytes.as_ref())).collect();
        let file = format!("half-{part}.seg");
        mapped += write_file(&directory, &file, &borrowed).map_err(|e| e.to_string())?;
        drop(sections);
        drop(built);
        let segment = Segment::open(&scratch.join(&file)).map_err(|e| e.to_string())?;
        inputs.push(MergeInput { segment, deleted: None });
    }
    let baseline = alloc::reset_peak() as u64;
    let started = Instant::now();
    let merged = <Segment as SegmentType>::merge(&config, inputs, &work).map_err(|e| e.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    let peak = alloc::peak() as u64 - baseline;
    drop(merged);
    let _ = std::fs::remove_dir_all(scratch);
    eprintln!(
        "  {name} merge of 2 × {half} rows: {seconds:.1} s, peak heap {:.2} GiB (mapped inputs {:.2} GiB)",
        gib(peak),
        gib(mapped)
    );
    out.push(Measured {
        kind: name,
        operation: "merge",
        rows,
        seconds,
        peak_heap_bytes: peak,
        data_bytes,
        mapped_input_bytes: mapped,
        within_budget: budget_holds(peak, data_bytes),
    });
    Ok(out)
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 30)
}

/// The markdown report of `results`.
pub fn markdown(results: &[Measured], dims: usize, peak_rss: u64) -> String {
    let mut lines = vec![
        "# Build and merge memory".to_owned(),
        String::new(),
        format!(
            "Produced by `cargo xtask bench --memory` (`strata-bench memory`): every segment kind built from {} rows × {dims} \
             (the synthetic set of `cargo xtask data synthetic`), then two halves merged by strata-lsm's merge. Peak = live heap \
             bytes during the call (counting allocator), the input buffer included. Budget: the f32 data plus {:.2} GiB, and never \
             more than 16 GiB. Peak resident set of the whole process (dataset reads included): {:.2} GiB.",
            results.first().map_or(0, |r| r.rows),
            gib(MARGIN_BYTES),
            gib(peak_rss)
        ),
        String::new(),
        "| kind | operation | rows | seconds | peak heap GiB | data GiB | peak − data GiB | mapped inputs GiB | within budget |".to_owned(),
        "|---|---|---|---|---|---|---|---|---|".to_owned(),
    ];
    for r in results {
        lines.push(format!(
            "| {} | {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
            r.kind,
            r.operation,
            r.rows,
            r.seconds,
            gib(r.peak_heap_bytes),
            gib(r.data_bytes),
            gib(r.peak_heap_bytes) - gib(r.data_bytes),
            gib(r.mapped_input_bytes),
            if r.within_budget { "yes" } else { "**no**" }
        ));
    }
    lines.join("\n") + "\n"
}
