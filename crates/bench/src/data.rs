//! Datasets in the texmex format (`.fvecs` / `.ivecs`) and exact ground truth.

use std::path::Path;

use rayon::prelude::*;
use strata_engine::kernels;

/// Vectors and held-out queries with exact top-100 ground truth.
pub struct Dataset {
    /// Dimensions.
    pub dims: usize,
    /// Base vectors, row-major.
    pub base: Vec<f32>,
    /// Query vectors, row-major.
    pub queries: Vec<f32>,
    /// Exact nearest base rows per query (cosine), nearest first.
    pub ground_truth: Vec<Vec<u32>>,
}

fn read_vecs(path: &Path, max_rows: usize) -> Result<(usize, Vec<u8>), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() < 4 {
        return Err(format!("{}: empty", path.display()));
    }
    let dims = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
    let row = 4 + 4 * dims;
    let rows = (bytes.len() / row).min(max_rows);
    let mut out = Vec::with_capacity(rows * 4 * dims);
    for r in 0..rows {
        out.extend_from_slice(&bytes[r * row + 4..(r + 1) * row]);
    }
    Ok((dims, out))
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()
}

/// Loads `rows` base vectors and `queries` queries from `dir`; ground truth is read from
/// `gt.ivecs` when the full base is used, otherwise recomputed by brute force (cosine).
pub fn load(dir: &Path, rows: usize, queries: usize) -> Result<Dataset, String> {
    let (dims, base) = read_vecs(&dir.join("base.fvecs"), rows)?;
    let (_, query_bytes) = read_vecs(&dir.join("query.fvecs"), queries)?;
    let base = floats(&base);
    let queries = floats(&query_bytes);
    let base_rows = base.len() / dims;
    let full_rows =
        std::fs::metadata(dir.join("base.fvecs")).map_err(|e| e.to_string())?.len() as usize / (4 + 4 * dims);
    let ground_truth = if base_rows == full_rows && dir.join("gt.ivecs").exists() {
        let (k, gt) = read_vecs(&dir.join("gt.ivecs"), queries.len() / dims)?;
        gt.chunks_exact(4 * k)
            .map(|row| row.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
            .collect()
    } else {
        brute_force(&base, &queries, dims, 100)
    };
    Ok(Dataset { dims, base, queries, ground_truth })
}

/// Exact top-`k` by cosine distance for every query.
pub fn brute_force(base: &[f32], queries: &[f32], dims: usize, k: usize) -> Vec<Vec<u32>> {
    queries
        .par_chunks_exact(dims)
        .map(|q| {
            let mut scored: Vec<(f32, u32)> =
                base.chunks_exact(dims).enumerate().map(|(i, v)| (kernels::cosine_distance(q, v), i as u32)).collect();
            let k = k.min(scored.len());
            scored.select_nth_unstable_by(k.saturating_sub(1), |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            scored.truncate(k);
            scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            scored.into_iter().map(|(_, i)| i).collect()
        })
        .collect()
}

/// Recall@k of `found` against the first `k` ground-truth rows.
pub fn recall(found: &[u32], truth: &[u32], k: usize) -> f64 {
    let truth = &truth[..k.min(truth.len())];
    found.iter().take(k).filter(|id| truth.contains(id)).count() as f64 / k as f64
}
