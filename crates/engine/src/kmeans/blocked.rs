//! Nearest centroids of many rows at once, by matrix products: a block of rows times the
//! centroids gives every inner product `⟨x, c⟩` of the block in one `sgemm` call
//! ([`matrixmultiply`], which picks its AVX / FMA kernels at run time), as faiss assigns rows
//! with BLAS. For L2 the nearest centroid maximises `⟨x, c⟩ − ‖c‖²/2`, for spherical k-means
//! `⟨x, c⟩`. The distance returned for the chosen centroid is recomputed with the exact kernel
//! ([`super::distance`]), so distances and inertia mean what [`super::Centroids::distance`]
//! says.
//!
//! The choice is the exact nearest up to `f32` rounding of the products: where two centroids are
//! within rounding of each other, either may be chosen (the lower index on exact ties of the
//! scores). Results depend only on the rows and centroids, never on how blocks are spread over
//! threads.

use rayon::prelude::*;

use crate::cancel::Cancel;
use crate::store::VectorStore;

/// Rows per matrix product at most: fewer products repack the centroids less often.
const MAX_ROWS_PER_BLOCK: usize = 1024;

/// A block's products take at most this many floats (4 MiB a thread), so many centroids make
/// shorter blocks.
const MAX_PRODUCTS_PER_BLOCK: usize = 1 << 20;

/// Rows per block for `k` centroids: at most [`MAX_ROWS_PER_BLOCK`], at least 16, and within
/// [`MAX_PRODUCTS_PER_BLOCK`] products where that allows 16 rows.
pub(crate) fn rows_per_block(k: usize) -> usize {
    (MAX_PRODUCTS_PER_BLOCK / k.max(1)).clamp(16, MAX_ROWS_PER_BLOCK)
}

/// Centroids prepared for blocked assignment.
pub(crate) struct BlockedCentroids<'c> {
    data: &'c [f32],
    dims: usize,
    spherical: bool,
    /// What each centroid's product loses in its score: `‖c‖²/2` for L2, 0 when spherical.
    half_norms: Vec<f32>,
}

impl<'c> BlockedCentroids<'c> {
    /// Prepares `data` (row-major, `dims` wide). Panics when `dims` is zero or does not divide
    /// `data.len()`.
    pub(crate) fn new(data: &'c [f32], dims: usize, spherical: bool) -> Self {
        assert!(dims > 0 && data.len().is_multiple_of(dims), "centroids must be whole rows");
        let half_norm = |c: &[f32]| if spherical { 0.0 } else { 0.5 * crate::kernels::dot(c, c) };
        let half_norms = data.chunks_exact(dims).map(half_norm).collect();
        Self { data, dims, spherical, half_norms }
    }

    fn len(&self) -> usize {
        self.data.len() / self.dims
    }

    /// The nearest centroid of each row of `rows` (row-major, whole rows of `dims`) and its exact
    /// distance, written to `out` (one entry per row). `products` is scratch space, reused across
    /// calls. A row with a `NaN` gets centroid 0 and a `NaN` distance, a row with an infinite value
    /// some centroid and a non-finite distance (builds refuse such rows before they get here).
    /// Panics when `rows` is not whole rows or `out` has another length.
    pub(crate) fn nearest_of_block(&self, rows: &[f32], out: &mut [(u32, f32)], products: &mut Vec<f32>) {
        let (dims, k) = (self.dims, self.len());
        assert!(rows.len().is_multiple_of(dims) && rows.len() / dims == out.len(), "one output per whole row");
        let m = out.len();
        if m == 0 || k == 0 {
            return;
        }
        products.clear();
        products.resize(m * k, 0.0);
        // products (m × k) = rows (m × dims) · centroidsᵀ (dims × k).
        // SAFETY: `rows` holds m·dims floats read with row stride dims and column stride 1;
        // `self.data` holds k·dims floats read as a dims × k matrix with row stride 1 and column
        // stride dims (its transpose); `products` was just resized to m·k floats, written with
        // row stride k and column stride 1. The three slices are distinct borrows, so the output
        // aliases neither input, and every index stays below the lengths just checked.
        unsafe {
            matrixmultiply::sgemm(
                m,
                dims,
                k,
                1.0,
                rows.as_ptr(),
                dims as isize,
                1,
                self.data.as_ptr(),
                1,
                dims as isize,
                0.0,
                products.as_mut_ptr(),
                k as isize,
                1,
            );
        }
        for ((row, scores), best) in rows.chunks_exact(dims).zip(products.chunks_exact(k)).zip(out.iter_mut()) {
            let mut chosen = 0usize;
            let mut top = f32::NEG_INFINITY;
            for (c, (&product, &half_norm)) in scores.iter().zip(&self.half_norms).enumerate() {
                let score = product - half_norm;
                // NaN (from non-finite rows) never beats a number: such a row keeps centroid 0.
                if score > top {
                    top = score;
                    chosen = c;
                }
            }
            *best =
                (chosen as u32, super::distance(self.spherical, row, &self.data[chosen * dims..(chosen + 1) * dims]));
        }
    }
}

/// The nearest centroid and its exact distance for `count` rows of `store` (`row_at(i)` is the
/// store row of the `i`-th), in order, computed in blocks of [`rows_per_block`] on the current
/// rayon pool. `None` once `cancel` is requested (polled before every block).
pub(crate) fn nearest_of_rows(
    store: &VectorStore<'_>,
    count: usize,
    row_at: impl Fn(usize) -> usize + Sync,
    centroids: &BlockedCentroids<'_>,
    cancel: &Cancel,
) -> Option<Vec<(u32, f32)>> {
    let block_rows = rows_per_block(centroids.len());
    let mut out = vec![(0u32, 0f32); count];
    out.par_chunks_mut(block_rows).enumerate().try_for_each_init(
        || (Vec::new(), Vec::new()),
        |(rows, products), (block, out)| {
            if cancel.is_requested() {
                return None;
            }
            rows.clear();
            let first = block * block_rows;
            for i in first..first + out.len() {
                rows.extend_from_slice(&store.row_f32(row_at(i)));
            }
            centroids.nearest_of_block(rows, out, products);
            Some(())
        },
    )?;
    Some(out)
}
