//! Row-major vector storage that every segment kind searches, and queries prepared for it.
//!
//! A [`VectorStore`] borrows its elements (from memory or straight from an mmap'd segment file)
//! as `f32` or `f16` rows of `dims` elements. Distances follow the store's [`Metric`]:
//!
//! - `L2`: squared Euclidean distance;
//! - `InnerProduct`: negative inner product;
//! - `Cosine`: `1 − q·r` where **`f32` rows are stored L2-normalised** and the query is
//!   normalised by [`Query::new`]. **`f16` rows (`halfvec`) are stored as given** (a normalised
//!   row rounded to `f16` would move its distances by more than the gaps between near
//!   neighbours): their distance is `1 − q·r / (‖q‖‖r‖)`, computed from the query's and the row's
//!   own values as pgvector computes `<=>`, and [`VectorStore::row_f32`] hands them out
//!   normalised to whatever encodes or clusters them. Rows normalised before rounding (segments
//!   written before this rule) are read by the same formula. Zero vectors have no direction;
//!   like pgvector, cosine indexes do not store them ([`prepare_rows`] reports them so the caller
//!   can skip them).

use std::borrow::Cow;

use half::f16;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::kernels;
use crate::metric::Metric;

/// The element type of vectors: of a SQL type (`vector`, `halfvec`) and of stored vectors.
///
/// The discriminant is its code wherever it is stored as a byte (a segment's META section,
/// shared memory, opclass support codes); the serde name is the one manifests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum ElementKind {
    /// IEEE binary32 (`vector`).
    F32 = 0,
    /// IEEE binary16 (`halfvec`: half the bytes; ~3 significant digits, enough for normalised
    /// embeddings; values beyond ±65504 are out of range).
    F16 = 1,
    /// Packed sparse rows of `f32` words (`sparsevec` of more dimensions than a dense row may
    /// have): the non-zero count, the indices and the values, [`crate::sparse_rows`]. A row's
    /// "dimensions" are its words.
    SparseF32 = 2,
    /// Packed bit strings (`bit`): the bit length, then 32 bits per word ([`crate::bit_rows`]),
    /// kept in `f32` slots as raw bit patterns.
    Bits = 3,
}

crate::try_from_code!(ElementKind, "element type");

impl ElementKind {
    /// Every element type, in code order.
    pub const ALL: [ElementKind; 4] = [ElementKind::F32, ElementKind::F16, ElementKind::SparseF32, ElementKind::Bits];

    /// Rounds `value` to this precision (to nearest, ties to even) without a range check: an `f32`
    /// beyond the `f16` range becomes an infinity. The result is exactly representable in the
    /// element type.
    pub fn round(self, value: f32) -> f32 {
        match self {
            Self::F32 | Self::SparseF32 | Self::Bits => value,
            Self::F16 => f16::from_f32(value).to_f32(),
        }
    }
}

/// The SQL type of an indexed column, as an opclass names it. Each is stored as rows of one
/// [`ElementKind`] ([`ColumnType::stored_as`]): `vector` and `halfvec` as their own elements;
/// `bit(n)` as packed bit rows ([`ElementKind::Bits`]; indexes built before as `n` `f16` elements
/// `0`/`1`), ordered by [`Metric::Hamming`] or [`Metric::Jaccard`]; `sparsevec(n)` densified to
/// `n` `f32` elements (zeros where no element is stored), so its distances are `vector`'s, or
/// packed ([`ElementKind::SparseF32`]) beyond 16,000 dimensions.
///
/// The discriminant is its code in opclass support codes and shared memory; `vector` and
/// `halfvec` have the codes of their element types, so codes written before the other types
/// existed read back unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum ColumnType {
    /// `vector(n)`.
    Vector = 0,
    /// `halfvec(n)`.
    Halfvec = 1,
    /// `bit(n)`.
    Bit = 2,
    /// `sparsevec(n)`.
    Sparsevec = 3,
}

crate::try_from_code!(ColumnType, "column type");

impl ColumnType {
    /// Every column type, in code order.
    pub const ALL: [ColumnType; 4] = [ColumnType::Vector, ColumnType::Halfvec, ColumnType::Bit, ColumnType::Sparsevec];

    /// The element type its rows are stored as.
    pub fn stored_as(self) -> ElementKind {
        match self {
            Self::Vector | Self::Sparsevec => ElementKind::F32,
            Self::Halfvec => ElementKind::F16,
            Self::Bit => ElementKind::Bits,
        }
    }

    /// The column type whose rows a `vector` / `halfvec` index of `element` stores (indexes
    /// written before other column types existed).
    pub fn of_element(element: ElementKind) -> Self {
        match element {
            ElementKind::F32 => Self::Vector,
            ElementKind::F16 => Self::Halfvec,
            ElementKind::SparseF32 => Self::Sparsevec,
            ElementKind::Bits => Self::Bit,
        }
    }

    /// Its SQL name.
    pub fn sql_name(self) -> &'static str {
        match self {
            Self::Vector => "vector",
            Self::Halfvec => "halfvec",
            Self::Bit => "bit",
            Self::Sparsevec => "sparsevec",
        }
    }

    /// Whether an index of this column type may use `metric`: bit strings are compared by
    /// Hamming or Jaccard distance and nothing else; the other types by every other metric.
    pub fn allows(self, metric: Metric) -> bool {
        let bit_metric = matches!(metric, Metric::Hamming | Metric::Jaccard);
        (self == Self::Bit) == bit_metric
    }
}

/// Borrowed elements of a store.
#[derive(Debug, Clone, Copy)]
pub enum Elements<'a> {
    /// `f32` rows.
    F32(&'a [f32]),
    /// `f16` rows.
    F16(&'a [f16]),
    /// Packed sparse rows ([`crate::sparse_rows`]).
    Sparse(&'a [f32]),
    /// Packed bit rows ([`crate::bit_rows`]).
    Bits(&'a [f32]),
}

impl Elements<'_> {
    /// Hints that row `row` of `dims` words will be read soon (a cache prefetch; nothing when
    /// out of range).
    #[inline]
    pub(crate) fn prefetch(&self, row: usize, dims: usize) {
        let start = row.saturating_mul(dims);
        match *self {
            Elements::F32(e) | Elements::Sparse(e) | Elements::Bits(e) => crate::hnsw::prefetch_row(e, start, dims),
            Elements::F16(e) => crate::hnsw::prefetch_row(e, start, dims),
        }
    }
}

/// Errors constructing a store.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// Zero dimensions.
    #[error("vectors must have at least one dimension")]
    ZeroDimensions,
    /// The element count is not a multiple of `dims`.
    #[error("{elements} elements do not form whole rows of {dims} dimensions")]
    RaggedRows {
        /// Elements supplied.
        elements: usize,
        /// Dimensions per row.
        dims: usize,
    },
}

/// `rows × dims` vectors with a metric.
#[derive(Debug, Clone, Copy)]
pub struct VectorStore<'a> {
    elements: Elements<'a>,
    dims: usize,
    rows: usize,
    metric: Metric,
}

impl<'a> VectorStore<'a> {
    /// A store over `elements`, `dims` per row. For [`Metric::Cosine`] `f32` rows must already be
    /// L2-normalised (see [`prepare_rows`]); `f16` rows may have any non-zero norm.
    pub fn new(elements: Elements<'a>, dims: usize, metric: Metric) -> Result<Self, StoreError> {
        if dims == 0 {
            return Err(StoreError::ZeroDimensions);
        }
        let count = match elements {
            Elements::F32(e) | Elements::Sparse(e) | Elements::Bits(e) => e.len(),
            Elements::F16(e) => e.len(),
        };
        if count % dims != 0 {
            return Err(StoreError::RaggedRows { elements: count, dims });
        }
        Ok(Self { elements, dims, rows: count / dims, metric })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether the store holds no rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Dimensions per row.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Bytes one row occupies in the store's elements (`dims` elements of 4 bytes, 2 for `f16`;
    /// packed sparse and bit rows count their `f32` words).
    pub fn row_bytes(&self) -> usize {
        let element = match self.elements {
            Elements::F16(_) => std::mem::size_of::<f16>(),
            Elements::F32(_) | Elements::Sparse(_) | Elements::Bits(_) => std::mem::size_of::<f32>(),
        };
        self.dims * element
    }

    /// The metric distances are computed under.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// The element type.
    pub fn element_kind(&self) -> ElementKind {
        match self.elements {
            Elements::F32(_) => ElementKind::F32,
            Elements::F16(_) => ElementKind::F16,
            Elements::Sparse(_) => ElementKind::SparseF32,
            Elements::Bits(_) => ElementKind::Bits,
        }
    }

    /// The borrowed elements.
    pub fn elements(&self) -> Elements<'a> {
        self.elements
    }

    /// Row `row` widened to `f32` in the form codes, centroids and graphs are computed over:
    /// L2-normalised under [`Metric::Cosine`] (`f16` rows are stored as given and normalised
    /// here), as stored otherwise (borrowed when stored as `f32`).
    ///
    /// # Panics
    /// When `row >= len()`.
    pub fn row_f32(&self, row: usize) -> Cow<'a, [f32]> {
        let mut widened = self.stored_row_f32(row);
        if self.metric == Metric::Cosine && self.element_kind() == ElementKind::F16 {
            crate::vector_math::normalize_in_place(widened.to_mut());
        }
        widened
    }

    /// Row `row` widened to `f32` exactly as stored (a merge copies rows this way, so `f16`
    /// rows under cosine keep their own values).
    ///
    /// # Panics
    /// When `row >= len()`.
    pub fn stored_row_f32(&self, row: usize) -> Cow<'a, [f32]> {
        let range = row * self.dims..(row + 1) * self.dims;
        match self.elements {
            Elements::F32(e) | Elements::Sparse(e) | Elements::Bits(e) => Cow::Borrowed(&e[range]),
            Elements::F16(e) => Cow::Owned(e[range].iter().map(|x| x.to_f32()).collect()),
        }
    }

    /// Distance from a prepared query to row `row`.
    ///
    /// # Panics
    /// When `row >= len()` or the query has other dimensions.
    #[inline]
    pub fn distance(&self, query: &Query, row: usize) -> f32 {
        let range = row * self.dims..(row + 1) * self.dims;
        match self.elements {
            Elements::F32(e) | Elements::Sparse(e) | Elements::Bits(e) => query.distance_f32(&e[range]),
            Elements::F16(e) => query.distance_f16(&e[range]),
        }
    }

    /// Calls `each(row, distance)` for every row in order, with the distance
    /// [`VectorStore::distance`] gives (the same kernels on the same slices), choosing the row
    /// layout, the metric's kernel and the CPU's kernel table once instead of once per row: what
    /// exact scans of a whole segment use.
    #[inline]
    pub fn for_each_distance(&self, query: &Query, mut each: impl FnMut(usize, f32)) {
        match self.elements {
            Elements::F32(e) if query.dims() == self.dims => {
                let Some(kernel) = query.dense_kernel() else {
                    for (row, values) in e.chunks_exact(self.dims).take(self.rows).enumerate() {
                        each(row, query.distance_f32(values));
                    }
                    return;
                };
                // Blocks of rows through the batch kernels: the same values as one call a row.
                let mut out = [0f32; DISTANCE_BLOCK];
                let rows = &e[..self.rows * self.dims];
                for (block, values) in rows.chunks(DISTANCE_BLOCK * self.dims).enumerate() {
                    let out = &mut out[..values.len() / self.dims];
                    match kernel {
                        DenseKernel::L2 => kernels::l2_squared_rows(&query.values, values, out),
                        DenseKernel::NegativeDot | DenseKernel::OneMinusDot => {
                            kernels::dot_rows(&query.values, values, out);
                        }
                    }
                    for (i, &value) in out.iter().enumerate() {
                        let distance = match kernel {
                            DenseKernel::L2 => value,
                            DenseKernel::NegativeDot => -value,
                            DenseKernel::OneMinusDot => 1.0 - value,
                        };
                        each(block * DISTANCE_BLOCK + i, distance);
                    }
                }
            }
            Elements::F32(e) | Elements::Sparse(e) | Elements::Bits(e) => {
                for (row, values) in e.chunks_exact(self.dims).take(self.rows).enumerate() {
                    each(row, query.distance_f32(values));
                }
            }
            Elements::F16(e) => {
                for (row, values) in e.chunks_exact(self.dims).take(self.rows).enumerate() {
                    each(row, query.distance_f16(values));
                }
            }
        }
    }

    /// Hints that row `row` will be read soon (a cache prefetch; nothing when out of range).
    #[inline]
    pub(crate) fn prefetch(&self, row: usize) {
        self.elements.prefetch(row, self.dims);
    }

    /// Whether the Euclidean norms of a sample of the rows (up to [`NORM_SAMPLE`], evenly
    /// strided; zero rows left out) differ by more than 1 %: rows searched by inner product that
    /// are not normalised, where inner product is not cosine (maximum inner-product search).
    /// False for packed bit rows and for fewer than two rows.
    pub fn norms_differ(&self) -> bool {
        let rows = self.len();
        if rows < 2 || self.element_kind() == ElementKind::Bits {
            return false;
        }
        let take = rows.min(NORM_SAMPLE);
        let (mut least, mut most) = (f32::INFINITY, 0f32);
        for i in 0..take {
            let row = i * rows / take;
            let query = Query::prepared_for(self.row_f32(row).into_owned(), Metric::InnerProduct, self.element_kind());
            // Under inner product a row's distance to itself is minus its squared norm.
            let squared = -self.distance(&query, row);
            if squared > 0.0 && squared.is_finite() {
                least = least.min(squared);
                most = most.max(squared);
            }
        }
        most > least * 1.01 * 1.01
    }

    /// Distance between two stored rows (used while building graphs and clusters).
    pub fn distance_between(&self, a: usize, b: usize) -> f32 {
        let query = Query::prepared_for(self.row_f32(a).into_owned(), self.metric, self.element_kind());
        self.distance(&query, b)
    }
}

/// The rows [`VectorStore::norms_differ`] compares at most.
pub const NORM_SAMPLE: usize = 1024;

/// A query prepared for a metric: normalised for cosine, widened copies cached for `f16` stores,
/// its non-zero pairs for packed sparse rows.
#[derive(Debug, Clone)]
pub struct Query {
    values: Vec<f32>,
    /// The query at `f16` precision for `f16` rows: under cosine the values as given (not
    /// normalised: distances to `f16` rows divide by both norms).
    halves: Vec<f16>,
    metric: Metric,
    /// Under cosine, whether the `f32` rows searched may have any norm (the memtable and heap rows
    /// of a `halfvec` index, kept as given): distances then divide by the row's norm.
    rows_of_any_norm: bool,
    /// A zero query under cosine distance: every distance is `NaN`.
    directionless: bool,
    /// How rows (and `values`) are laid out.
    layout: QueryLayout,
}

/// Rows [`VectorStore::for_each_distance`] hands to a batch kernel at once.
const DISTANCE_BLOCK: usize = 32;

/// The kernels [`Query::distance_f32`] reduces to for dense rows of one metric (see
/// [`Query::dense_kernel`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DenseKernel {
    /// `l2_squared(q, r)`.
    L2,
    /// `−dot(q, r)` (inner product).
    NegativeDot,
    /// `1 − dot(q, r)` (cosine over normalised rows).
    OneMinusDot,
}

/// The row layout a [`Query`] is prepared for.
#[derive(Debug, Clone)]
enum QueryLayout {
    /// Dense vectors.
    Dense,
    /// Packed sparse rows: the query's pairs (`values` is its packed form).
    Sparse(crate::sparse_rows::SparseQuery),
    /// Packed bit rows (`values` is the query's packed row).
    Bits,
}

impl Query {
    /// Prepares `values` for searching under `metric` (normalising for cosine).
    pub fn new(values: &[f32], metric: Metric) -> Self {
        let mut halves: Vec<f16> = values.iter().map(|&v| f16::from_f32(v)).collect();
        let mut values = values.to_vec();
        let mut directionless = false;
        if metric == Metric::Cosine {
            directionless = !crate::vector_math::normalize_in_place(&mut values);
            if halves.iter().any(|h| h.is_infinite()) {
                // Beyond the f16 range as given (not a halfvec): its direction at f16 precision.
                halves = values.iter().map(|&v| f16::from_f32(v)).collect();
            }
        }
        Self { values, halves, metric, rows_of_any_norm: false, directionless, layout: QueryLayout::Dense }
    }

    /// Prepares `values` for searching rows of `element` under `metric`: as [`Query::new`], or,
    /// for packed sparse rows, `values` being the query's packed form (normalised here for cosine).
    pub fn new_for(values: &[f32], metric: Metric, element: ElementKind) -> Self {
        match element {
            ElementKind::SparseF32 => {
                let mut values = values.to_vec();
                let directionless = metric == Metric::Cosine && !crate::sparse_rows::normalize_in_place(&mut values);
                let layout = QueryLayout::Sparse(crate::sparse_rows::SparseQuery::from_packed(&values));
                Self { values, halves: Vec::new(), metric, rows_of_any_norm: false, directionless, layout }
            }
            ElementKind::Bits => Self::prepared_for(values.to_vec(), metric, element),
            ElementKind::F32 => Self::new(values, metric),
            ElementKind::F16 => Self { rows_of_any_norm: true, ..Self::new(values, metric) },
        }
    }

    /// A query whose values are already in stored form (normalised for cosine).
    pub fn prepared(values: Vec<f32>, metric: Metric) -> Self {
        Self::build(values, metric, false)
    }

    /// [`Query::prepared`] for rows of `element` (packed sparse rows: `values` is a packed row).
    pub fn prepared_for(values: Vec<f32>, metric: Metric, element: ElementKind) -> Self {
        let layout = match element {
            ElementKind::SparseF32 => QueryLayout::Sparse(crate::sparse_rows::SparseQuery::from_packed(&values)),
            ElementKind::Bits => QueryLayout::Bits,
            ElementKind::F32 => return Self::prepared(values, metric),
            ElementKind::F16 => return Self { rows_of_any_norm: true, ..Self::prepared(values, metric) },
        };
        Self { values, halves: Vec::new(), metric, rows_of_any_norm: false, directionless: false, layout }
    }

    fn build(values: Vec<f32>, metric: Metric, directionless: bool) -> Self {
        let halves = values.iter().map(|&v| f16::from_f32(v)).collect();
        Self { values, halves, metric, rows_of_any_norm: false, directionless, layout: QueryLayout::Dense }
    }

    /// The prepared values.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// The metric.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// Whether this is a dense query with a direction (not a zero query under cosine, not a
    /// packed sparse or bit row).
    pub(crate) fn is_dense_with_direction(&self) -> bool {
        !self.directionless && matches!(self.layout, QueryLayout::Dense)
    }

    /// Words of the query's row form (its dimensions for dense rows).
    fn dims(&self) -> usize {
        self.values.len()
    }

    /// The kernel [`Query::distance_f32`] computes for a dense `f32` row, when it is one kernel
    /// call on the row as it is (`None`: another layout, a directionless query, or a metric that
    /// needs more).
    fn dense_kernel(&self) -> Option<DenseKernel> {
        if self.directionless || !matches!(self.layout, QueryLayout::Dense) {
            return None;
        }
        match self.metric {
            Metric::L2 => Some(DenseKernel::L2),
            Metric::InnerProduct => Some(DenseKernel::NegativeDot),
            Metric::Cosine if !self.rows_of_any_norm => Some(DenseKernel::OneMinusDot),
            _ => None,
        }
    }

    /// Distance to an `f32` row in stored form (under cosine, a row of any norm when the query
    /// was prepared for `f16` rows: the rows of a `halfvec` index before they reach a segment).
    #[inline]
    pub fn distance_f32(&self, row: &[f32]) -> f32 {
        if self.directionless {
            return f32::NAN;
        }
        match &self.layout {
            QueryLayout::Dense => {}
            QueryLayout::Sparse(sparse) => return sparse.distance(row, self.metric),
            QueryLayout::Bits => return crate::bit_rows::distance_between(&self.values, row, self.metric),
        }
        match self.metric {
            Metric::L2 => kernels::l2_squared(&self.values, row),
            Metric::InnerProduct => -kernels::dot(&self.values, row),
            Metric::Cosine if self.rows_of_any_norm => kernels::cosine_distance(&self.values, row),
            Metric::Cosine => 1.0 - kernels::dot(&self.values, row),
            Metric::L1 | Metric::Hamming => kernels::l1(&self.values, row),
            Metric::Jaccard => crate::metric::jaccard_from(kernels::dot_and_norms(&self.values, row)),
        }
    }

    /// Distance to an `f16` row in stored form. The query is used at `f16` precision only for
    /// `f16` kernels; distances are accumulated in `f32`. Under cosine the row may have any norm
    /// (`1 − q·r / (‖q‖‖r‖)` over the query as given).
    #[inline]
    pub fn distance_f16(&self, row: &[f16]) -> f32 {
        if self.directionless {
            return f32::NAN;
        }
        match self.metric {
            Metric::L2 => kernels::l2_squared_f16(&self.halves, row),
            Metric::InnerProduct => -kernels::dot_f16(&self.halves, row),
            Metric::Cosine => kernels::cosine_distance_f16(&self.halves, row),
            Metric::L1 | Metric::Hamming => kernels::l1_f16(&self.halves, row),
            Metric::Jaccard => crate::metric::jaccard_from(kernels::dot_and_norms_f16(&self.halves, row)),
        }
    }
}

/// Converts raw rows into stored form for `metric`: for cosine every row is L2-normalised.
/// Returns the stored rows and the indexes of rows that cannot be stored (zero vectors under
/// cosine), which are left as zeros and must not be indexed.
pub fn prepare_rows(raw: &[f32], dims: usize, metric: Metric) -> (Vec<f32>, Vec<usize>) {
    prepare_rows_of(raw, dims, metric, ElementKind::F32)
}

/// [`prepare_rows`] for rows of `element` (packed sparse rows normalise their values).
pub fn prepare_rows_of(raw: &[f32], dims: usize, metric: Metric, element: ElementKind) -> (Vec<f32>, Vec<usize>) {
    let mut rows = raw.to_vec();
    let mut unindexable = Vec::new();
    if metric == Metric::Cosine && dims > 0 {
        for (index, row) in rows.chunks_exact_mut(dims).enumerate() {
            let normalised = if element == ElementKind::SparseF32 {
                crate::sparse_rows::normalize_in_place(row)
            } else {
                crate::vector_math::normalize_in_place(row)
            };
            if !normalised {
                unindexable.push(index);
            }
        }
    }
    (rows, unindexable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_follow_the_metric() {
        let raw = [3.0f32, 4.0, 0.0, 0.0, 1.0, 0.0];
        let l2 = VectorStore::new(Elements::F32(&raw), 2, Metric::L2).unwrap();
        assert_eq!(l2.len(), 3);
        let q = Query::new(&[0.0, 0.0], Metric::L2);
        assert!((l2.distance(&q, 0) - 25.0).abs() < 1e-6);
        let ip = VectorStore::new(Elements::F32(&raw), 2, Metric::InnerProduct).unwrap();
        assert!((ip.distance(&Query::new(&[1.0, 1.0], Metric::InnerProduct), 0) + 7.0).abs() < 1e-6);

        let (stored, zero_rows) = prepare_rows(&raw, 2, Metric::Cosine);
        assert_eq!(zero_rows, vec![1]);
        let cos = VectorStore::new(Elements::F32(&stored), 2, Metric::Cosine).unwrap();
        let q = Query::new(&[6.0, 8.0], Metric::Cosine);
        assert!(cos.distance(&q, 0).abs() < 1e-6);
        assert!((cos.distance(&q, 2) - (1.0 - 0.6)).abs() < 1e-6);
        assert!(cos.distance(&Query::new(&[0.0, 0.0], Metric::Cosine), 0).is_nan());

        let halves: Vec<f16> = stored.iter().map(|&v| f16::from_f32(v)).collect();
        let cos16 = VectorStore::new(Elements::F16(&halves), 2, Metric::Cosine).unwrap();
        assert!((cos16.distance(&q, 2) - 0.4).abs() < 1e-3);
        assert_eq!(
            VectorStore::new(Elements::F32(&raw), 4, Metric::L2).unwrap_err(),
            StoreError::RaggedRows { elements: 6, dims: 4 }
        );
    }
}
