//! Four-bit walk codes: what a graph build walks on.
//!
//! A build inserts every row with a walk of `ef_construction` over the graph so far, ranking
//! nodes by code estimates and computing exact distances only for the rows the walk keeps. Like
//! a search, that walk is bound by memory traffic: one row of codes read at random per
//! estimate, and a profile of a 300,000-row MiniLM build walking on the 8-bit traversal codes
//! ([`super::codes`]) put about 40 % of its time in waiting for those reads. The build
//! therefore walks on codes of half their size, made from the rows when the build starts:
//!
//! - per dimension the range of the rows' values in 15 steps (`step = (max − min) / 15`), a
//!   value `x` coded `c = round((x − min) / step)` in `0..=15` and standing for
//!   `min + step · c`: the 8-bit codes' grid with every 17th level;
//! - two codes a byte in the [`crate::kernels::dot_u4`] layout, rows padded to whole blocks of
//!   32 dimensions with code 0 (the query's weights there are zero);
//! - for L2, each row's decoded squared norm; estimates as in [`super::codes`].
//!
//! The codes live only while the graph is built: the segment's 8-bit codes, which searches
//! walk on, are encoded after the graph, so the two never take memory at once. The rows the walk
//! keeps still get their exact distances before neighbours are chosen, so only the walk's
//! ranking is coarser. Measured on MiniLM rows (m 16, ef_construction 64, two threads, 1,000
//! held-out queries, searches on 8-bit codes):
//!
//! | rows | build, 8-bit walk | build, 4-bit walk | recall@10, 8-bit → 4-bit |
//! |---|---|---|---|
//! | 100,000 | 7.5 s | 6.4 s | ef 16 0.834 → 0.826, ef 32 0.902 → 0.904, ef 64 0.946 → 0.950 |
//! | 300,000 | 23.9, 25.0 s | 23.0, 21.1 s | ef 64 0.928 → 0.929, ef 100 0.952 → 0.950–0.952 |
//!
//! On the 9,900 rows of the unit tests (one thread, 100 queries) recall at `ef_search` 16 fell
//! from 0.914 to 0.893–0.905 and held at 64. Clipping each dimension's range to its 0.1–99.9 %
//! quantiles made no difference measurable at 100,000 rows.

use std::io;
use std::path::Path;

use super::codes::{coded_metric, CodedQuery, ScalarGrid};
use super::layer::Target;
use super::prefetch::prefetch_row;
use crate::kernels::{dot_u4, U4_BLOCK_BYTES};
use crate::metric::Metric;
use crate::spill::SpillBuffer;
use crate::store::{Query, VectorStore};

/// The dimensions one block of packed codes holds.
const BLOCK_DIMS: usize = 2 * U4_BLOCK_BYTES;

/// The largest code.
pub(super) const LEVELS: f32 = 15.0;

/// The bytes a row of walk codes takes: its dimensions rounded up to whole blocks, two codes a
/// byte.
pub(crate) fn row_bytes(dims: usize) -> usize {
    dims.div_ceil(BLOCK_DIMS) * U4_BLOCK_BYTES
}

/// Every row's 4-bit walk codes (see the module docs).
///
/// Guarantees: `rows` rows of `stride` bytes each (whole blocks), and for L2 a norm for every
/// row, so reading any row below `rows` never panics.
pub(crate) struct NibbleCodes {
    dims: usize,
    /// Per dimension, the value code 0 stands for.
    min: Vec<f32>,
    /// Per dimension, the value between neighbouring codes (`(max − min) / 15`).
    step: Vec<f32>,
    /// Bytes a row: the dimensions rounded up to whole blocks, two codes a byte.
    stride: usize,
    codes: SpillBuffer,
    /// `‖x̂‖²` of every row (L2 only).
    norms: Option<Vec<f32>>,
}

impl NibbleCodes {
    /// The walk codes of `store`'s rows, in an unnamed file in `spill_dir` when one is given
    /// ([`crate::spill`]): `None` when its rows get no codes (not dense `f32`, or a metric other
    /// than L2, inner product and cosine); an error only when that file cannot be made. The rows
    /// must be in stored form (L2-normalised for cosine), as the store's are.
    pub(crate) fn encode(store: &VectorStore<'_>, spill_dir: Option<&Path>) -> io::Result<Option<Self>> {
        let Some(grid) = ScalarGrid::over(store, LEVELS) else { return Ok(None) };
        let dims = grid.dims;
        let stride = row_bytes(dims);
        let mut codes = SpillBuffer::zeroed(store.len() * stride, spill_dir)?;
        let l2 = store.metric() == Metric::L2;
        let mut norms = l2.then(|| Vec::with_capacity(store.len()));
        for (row, packed) in grid.rows.chunks_exact(dims).zip(codes.bytes_mut().chunks_exact_mut(stride)) {
            let mut norm = 0.0f64;
            for (j, &value) in row.iter().enumerate() {
                let code = grid.code(j, value);
                let (block, lane) = (j / BLOCK_DIMS, j % BLOCK_DIMS);
                let byte = &mut packed[block * U4_BLOCK_BYTES + lane % U4_BLOCK_BYTES];
                *byte |= if lane < U4_BLOCK_BYTES { code as u8 } else { (code as u8) << 4 };
                if l2 {
                    let decoded = grid.decoded(j, code);
                    norm += decoded * decoded;
                }
            }
            if let Some(norms) = &mut norms {
                norms.push(norm as f32);
            }
        }
        let ScalarGrid { min, step, .. } = grid;
        Ok(Some(Self { dims, min, step, stride, codes, norms }))
    }

    /// `query` prepared for estimates against these codes, or `None` when they cannot serve it:
    /// other dimensions, a metric without codes, an L2 query on codes without norms, or a query
    /// that is not a dense vector with a direction (those walk on the rows).
    pub(crate) fn prepare(&self, query: &Query) -> Option<CodedQuery> {
        let serves = query.values().len() == self.dims
            && query.is_dense_with_direction()
            && coded_metric(query.metric())
            && (query.metric() != Metric::L2 || self.norms.is_some());
        serves.then(|| CodedQuery::new(query, &self.min, &self.step, 2 * self.stride))
    }

    /// Row `row`'s packed codes.
    #[inline]
    fn row(&self, row: usize) -> &[u8] {
        &self.codes[row * self.stride..(row + 1) * self.stride]
    }
}

/// Distance estimates from a prepared query ([`NibbleCodes::prepare`]) to rows' walk codes.
pub(crate) struct NibbleTarget<'a> {
    pub(crate) codes: &'a NibbleCodes,
    pub(crate) query: &'a CodedQuery,
}

impl Target for NibbleTarget<'_> {
    #[inline]
    fn distance(&self, id: u32) -> f32 {
        let row = id as usize;
        let norm = self.codes.norms.as_ref().map_or(0.0, |norms| norms[row]);
        self.query.estimate(dot_u4(self.query.weights(), self.codes.row(row)), norm)
    }

    #[inline]
    fn prefetch(&self, id: u32) {
        prefetch_row(&self.codes.codes, id as usize * self.codes.stride, self.codes.stride);
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::store::Elements;

    /// For each metric and an odd dimension count (a padded last block): every row's estimate
    /// equals the distance to the row decoded from 16 levels per dimension, computed in `f64`
    /// from the rows alone, and stays within the quantisation error of the exact distance.
    #[test]
    fn estimates_equal_the_decoded_rows_distances() {
        let (rows, dims) = (60, 45);
        let mut rng = ChaCha8Rng::seed_from_u64(0x4E1B);
        let values: Vec<f32> = (0..rows * dims).map(|_| rng.gen_range(-1.0..1.0)).collect();
        for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
            let mut stored = values.clone();
            if metric == Metric::Cosine {
                for row in stored.chunks_exact_mut(dims) {
                    let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
                    for v in row.iter_mut() {
                        *v /= norm;
                    }
                }
            }
            let store = VectorStore::new(Elements::F32(&stored), dims, metric).unwrap();
            let codes = NibbleCodes::encode(&store, None).unwrap().unwrap();
            assert_eq!(codes.stride, 32, "45 dimensions take two blocks");
            let column = |j: usize| stored.chunks_exact(dims).map(move |row| f64::from(row[j]));
            let low: Vec<f64> = (0..dims).map(|j| column(j).fold(f64::INFINITY, f64::min)).collect();
            let high: Vec<f64> = (0..dims).map(|j| column(j).fold(f64::NEG_INFINITY, f64::max)).collect();
            let query_values = store.row_f32(7).to_vec();
            let query = Query::new(&query_values, metric);
            let prepared = codes.prepare(&query).unwrap();
            let target = NibbleTarget { codes: &codes, query: &prepared };
            let q: Vec<f64> = query.values().iter().map(|&v| f64::from(v)).collect();
            for (row, x) in stored.chunks_exact(dims).enumerate() {
                let decoded: Vec<f64> = (0..dims)
                    .map(|j| {
                        let step = (high[j] - low[j]) / 15.0;
                        low[j] + step * ((f64::from(x[j]) - low[j]) / step).round()
                    })
                    .collect();
                let dot: f64 = q.iter().zip(&decoded).map(|(a, b)| a * b).sum();
                let want = match metric {
                    Metric::L2 => q.iter().zip(&decoded).map(|(a, b)| (a - b) * (a - b)).sum::<f64>(),
                    Metric::InnerProduct => -dot,
                    _ => 1.0 - dot,
                };
                let got = f64::from(target.distance(row as u32));
                assert!((got - want).abs() < 1e-4, "{metric:?} row {row}: {got} against {want}");
                // Each decoded value is within half a step of the value.
                let error: f64 = (0..dims).map(|j| (high[j] - low[j]) / 30.0).sum();
                let exact = f64::from(store.distance_between(7, row));
                assert!(
                    (got - exact).abs() <= 4.0 * error + error * error,
                    "{metric:?} row {row}: {got} against {exact}"
                );
            }
        }
    }

    #[test]
    fn rows_and_queries_without_codes_get_none() {
        let values = [1.0f32, 0.0, 0.0, 1.0];
        let store = VectorStore::new(Elements::F32(&values), 2, Metric::Cosine).unwrap();
        let codes = NibbleCodes::encode(&store, None).unwrap().unwrap();
        assert!(codes.prepare(&Query::new(&[0.0, 0.0], Metric::Cosine)).is_none(), "no direction");
        assert!(codes.prepare(&Query::new(&[1.0, 0.0, 0.0], Metric::Cosine)).is_none(), "other dimensions");
        assert!(codes.prepare(&Query::new(&[1.0, 0.0], Metric::Cosine)).is_some());
        let l1 = VectorStore::new(Elements::F32(&values), 2, Metric::L1).unwrap();
        assert!(NibbleCodes::encode(&l1, None).unwrap().is_none(), "L1 rows walk on the rows");
    }

    #[test]
    fn a_spilled_copy_holds_the_same_codes() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let values: Vec<f32> = (0..40 * 70).map(|_| rng.gen_range(-3.0..3.0)).collect();
        let store = VectorStore::new(Elements::F32(&values), 70, Metric::L2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let in_memory = NibbleCodes::encode(&store, None).unwrap().unwrap();
        let spilled = NibbleCodes::encode(&store, Some(dir.path())).unwrap().unwrap();
        assert!(spilled.codes.is_mapped() && !in_memory.codes.is_mapped());
        assert_eq!(&in_memory.codes[..], &spilled.codes[..]);
        assert_eq!(in_memory.norms, spilled.norms);
    }
}
