//! k-means clustering (Lloyd's algorithm) of the rows of a [`VectorStore`], used to build IVF lists.
//!
//! # Algorithm
//!
//! 1. **Training sample.** At most `max_points_per_centroid · k` rows are drawn uniformly without
//!    replacement with a seeded ChaCha8 generator (all rows when the store is smaller). Only their
//!    row *indices* are kept: rows are read from the store when needed, so memory is
//!    `O(sample + k · dims)` and the corpus is never copied.
//! 2. **k-means++ initialisation** on an evenly spaced part of the sample, [`seeding_rows`] of
//!    it (64 rows per centroid, fewer down to 16 for rows whose bytes outgrow the cache; D²
//!    sampling, seeded), with the distance updates after each pick computed in parallel.
//! 3. **Lloyd iterations**: a rayon-parallel assignment of every sample row to its nearest centroid
//!    (blocks of rows times the centroids as matrix products, `blocked`), then the update (means,
//!    accumulated in `f64`, sequentially in sample order so results do not depend on the thread
//!    count).
//! 4. **Empty-cluster repair**: an empty cluster is moved onto the sample row farthest from its
//!    centroid inside the currently largest cluster (which splits that cluster).
//!
//! Stops after `max_iterations` or when the inertia improves by less than `tolerance` (relative).
//!
//! # Spherical variant
//!
//! For [`Metric::Cosine`] and [`Metric::InnerProduct`] (or when forced with
//! [`KMeansParams::spherical`]) centroids are normalised to unit length after every update and a
//! row is assigned to the centroid with the largest inner product; the objective reported as
//! inertia is `Σ (1 − ⟨x, c⟩)`. Otherwise the objective is `Σ ‖x − c‖²`. Both decrease
//! monotonically over iterations (up to `f32` rounding of the centroids).

use rand::seq::index;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use thiserror::Error;

pub mod binary;
mod blocked;

use blocked::{nearest_of_rows, BlockedCentroids};

use crate::kernels;
use crate::metric::Metric;
use crate::store::{Query, VectorStore};

/// Parameters of [`train`].
#[derive(Debug, Clone, PartialEq)]
pub struct KMeansParams {
    /// Upper bound on Lloyd iterations (at least one assignment pass always runs).
    pub max_iterations: usize,
    /// The training sample holds at most `max_points_per_centroid · k` rows.
    pub max_points_per_centroid: usize,
    /// Seed of the ChaCha8 generator used for sampling and initialisation: equal seeds, stores and
    /// parameters give bit-identical centroids, whatever the thread count.
    pub seed: u64,
    /// Worker threads; `0` uses rayon's current pool.
    pub threads: usize,
    /// Force (`Some(true)`) or forbid (`Some(false)`) spherical k-means; `None` chooses by metric
    /// (spherical for cosine and inner product).
    pub spherical: Option<bool>,
    /// Stop when `(previous − current) ≤ tolerance · previous` inertia.
    pub tolerance: f64,
    /// Polled before every Lloyd iteration: once requested, [`train`] returns
    /// [`KMeansError::Cancelled`].
    pub cancel: crate::cancel::Cancel,
}

impl Default for KMeansParams {
    fn default() -> Self {
        Self {
            max_iterations: 25,
            max_points_per_centroid: 256,
            seed: 0x5EED_C1A5,
            threads: 0,
            spherical: None,
            tolerance: 1e-4,
            cancel: crate::cancel::Cancel::default(),
        }
    }
}

/// k-means++ seeds from at most this many sample rows per centroid.
pub const INIT_POINTS_PER_CENTROID: usize = 64;

/// k-means++ seeds from at least this many sample rows per centroid (when the sample has them).
pub const MIN_INIT_POINTS_PER_CENTROID: usize = 16;

/// The bytes of seeding rows k-means++ keeps itself to between the two bounds above.
///
/// Each of the `k` picks is a pass over every seeding row, so their bytes are the seeding's
/// cost once they outgrow the cache: at 100,000 MiniLM rows (384 dimensions, 316 lists, 2
/// threads) 64 rows a centroid (20k rows, 30 MB) took 1.42 s of a 2.95 s training, 16 (5k rows,
/// 7.5 MB) 0.13 s, and the sample's inertia after the 10 Lloyd updates differed by 0.15 %
/// (32,681 against 32,632; `cargo run --release -p strata-bench --example ivf_build_phases`).
/// Rows of few dimensions keep 64 a centroid: well-separated clusters need that many for the
/// seeds to land in every one (Lloyd's updates cannot move a seed out of a cluster it shares).
pub const SEEDING_BYTES: usize = 8 << 20;

/// How many of `sample_rows` rows of `row_bytes` bytes k-means++ seeds `k` centroids from:
/// [`INIT_POINTS_PER_CENTROID`] a centroid while they fit in [`SEEDING_BYTES`], fewer down to
/// [`MIN_INIT_POINTS_PER_CENTROID`] when they do not, never more than the sample and at least one.
pub fn seeding_rows(k: usize, row_bytes: usize, sample_rows: usize) -> usize {
    let within_budget = SEEDING_BYTES / row_bytes.max(1);
    let floor = MIN_INIT_POINTS_PER_CENTROID.saturating_mul(k);
    INIT_POINTS_PER_CENTROID.saturating_mul(k).min(within_budget.max(floor)).min(sample_rows).max(1)
}

/// Errors of [`train`] and [`assign`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KMeansError {
    /// The training's cancellation token was requested.
    #[error("k-means training was cancelled")]
    Cancelled,
    /// `k` was zero.
    #[error("k-means needs at least one cluster")]
    ZeroClusters,
    /// Fewer rows than clusters.
    #[error("cannot form {k} clusters from {rows} rows")]
    TooFewRows {
        /// Rows in the store.
        rows: usize,
        /// Clusters requested.
        k: usize,
    },
    /// Centroids and store (or a vector) have different dimensions.
    #[error("centroids have {expected} dimensions, vectors have {actual}")]
    DimensionMismatch {
        /// Dimensions of the centroids.
        expected: usize,
        /// Dimensions supplied.
        actual: usize,
    },
    /// [`binary`] k-means over a store that does not hold packed bit rows under Hamming or
    /// Jaccard distance.
    #[error("binary k-means needs packed bit rows under Hamming or Jaccard distance")]
    NotBitRows,
    /// The worker pool could not be created.
    #[error("could not start {threads} worker threads: {message}")]
    ThreadPool {
        /// Threads requested.
        threads: usize,
        /// What rayon reported.
        message: String,
    },
}

/// How training went.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TrainStats {
    /// Lloyd updates performed.
    pub iterations: usize,
    /// Inertia of the sample after each assignment pass, in order (non-increasing up to `f32`
    /// rounding of the centroids).
    pub inertia: Vec<f64>,
    /// Rows in the training sample.
    pub sample_rows: usize,
    /// Empty clusters repaired.
    pub repaired: usize,
    /// Clusters left without a sample row (only possible when the sample holds fewer than `k`
    /// distinct vectors).
    pub empty_clusters: usize,
}

/// `k` centroids of `dims` dimensions, row-major `f32`, with how to measure distance to them.
#[derive(Debug, Clone, PartialEq)]
pub struct Centroids {
    dims: usize,
    spherical: bool,
    data: Vec<f32>,
    stats: TrainStats,
}

impl Centroids {
    /// Wraps row-major centroids. Guarantees `len() == data.len() / dims`.
    pub fn from_vec(data: Vec<f32>, dims: usize, spherical: bool) -> Result<Self, KMeansError> {
        if dims == 0 || !data.len().is_multiple_of(dims) {
            return Err(KMeansError::DimensionMismatch { expected: dims, actual: data.len() });
        }
        Ok(Self { dims, spherical, data, stats: TrainStats::default() })
    }

    /// Number of centroids.
    pub fn len(&self) -> usize {
        self.data.len() / self.dims
    }

    /// Whether there are no centroids.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Dimensions of each centroid.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Whether centroids are unit-length and compared by inner product.
    pub fn is_spherical(&self) -> bool {
        self.spherical
    }

    /// Centroid `i`. Panics when `i >= len()`.
    pub fn get(&self, i: usize) -> &[f32] {
        &self.data[i * self.dims..(i + 1) * self.dims]
    }

    /// All centroids, row-major.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// Statistics of the training run (default for [`Centroids::from_vec`]).
    pub fn stats(&self) -> &TrainStats {
        &self.stats
    }

    /// The clustering distance from `x` to centroid `i`: `‖x − c‖²`, or `1 − ⟨x, c⟩` when
    /// spherical. Panics when `x` has other dimensions.
    #[inline]
    pub fn distance(&self, x: &[f32], i: usize) -> f32 {
        distance(self.spherical, x, self.get(i))
    }

    /// The nearest centroid to `x` and its distance (lowest index among exact ties; a `NaN`
    /// distance only when every distance is `NaN`, i.e. for non-finite inputs). Panics when `x`
    /// has other dimensions.
    pub fn nearest(&self, x: &[f32]) -> (usize, f32) {
        nearest(self.spherical, &self.data, self.dims, x)
    }
}

#[inline]
fn distance(spherical: bool, x: &[f32], c: &[f32]) -> f32 {
    if spherical {
        1.0 - kernels::dot(x, c)
    } else {
        kernels::l2_squared(x, c)
    }
}

fn nearest(spherical: bool, data: &[f32], dims: usize, x: &[f32]) -> (usize, f32) {
    let mut best = (0, f32::NAN);
    for (i, c) in data.chunks_exact(dims).enumerate() {
        let d = distance(spherical, x, c);
        // `NaN` (only from non-finite inputs) never beats a number.
        if d < best.1 || (best.1.is_nan() && !d.is_nan()) {
            best = (i, d);
        }
    }
    best
}

/// Runs `f` in a pool of `threads` workers (`0`: the current pool).
pub(crate) fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> Result<T, KMeansError> {
    if threads == 0 {
        return Ok(f());
    }
    let pool = crate::pool::JoinedPool::new(threads)
        .map_err(|e| KMeansError::ThreadPool { threads, message: e.to_string() })?;
    Ok(pool.install(f))
}

/// Whether `metric` clusters spherically under `params`.
pub fn is_spherical(metric: Metric, params: &KMeansParams) -> bool {
    params.spherical.unwrap_or(matches!(metric, Metric::Cosine | Metric::InnerProduct))
}

/// Trains `k` centroids on a sample of `store` (see the module docs).
///
/// Guarantees: exactly `k` centroids of `store.dims()` dimensions; deterministic for a given
/// `(store, k, params)` whatever `params.threads`; after return every centroid owns at least one
/// sample row unless the sample holds fewer than `k` distinct vectors (then
/// [`TrainStats::empty_clusters`] counts the rest).
pub fn train(store: &VectorStore<'_>, k: usize, params: &KMeansParams) -> Result<Centroids, KMeansError> {
    if k == 0 {
        return Err(KMeansError::ZeroClusters);
    }
    if store.len() < k {
        return Err(KMeansError::TooFewRows { rows: store.len(), k });
    }
    let spherical = is_spherical(store.metric(), params);
    in_pool(params.threads, || train_in_pool(store, k, params, spherical))?
}

fn train_in_pool(
    store: &VectorStore<'_>,
    k: usize,
    params: &KMeansParams,
    spherical: bool,
) -> Result<Centroids, KMeansError> {
    let dims = store.dims();
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let limit = params.max_points_per_centroid.max(1).saturating_mul(k).min(store.len());
    let sample: Vec<usize> = if limit == store.len() {
        (0..store.len()).collect()
    } else {
        let mut s = index::sample(&mut rng, store.len(), limit).into_vec();
        s.sort_unstable();
        s
    };
    // k-means++ picks its k seeds one after another, each pick a pass over its rows: it reads an
    // evenly spaced part of the (already random) sample, which seeds as well for far less work.
    let seeding_rows = seeding_rows(k, store.row_bytes(), sample.len());
    let seeding: Vec<usize> = sample.iter().step_by(sample.len().div_ceil(seeding_rows).max(1)).copied().collect();
    let mut data =
        init_plus_plus(store, &seeding, k, spherical, &mut rng, &params.cancel).ok_or(KMeansError::Cancelled)?;
    let mut stats = TrainStats { sample_rows: sample.len(), ..TrainStats::default() };
    let mut extra_passes = 0;
    loop {
        if params.cancel.is_requested() {
            return Err(KMeansError::Cancelled);
        }
        let assigned = {
            let centroids = BlockedCentroids::new(&data, dims, spherical);
            nearest_of_rows(store, sample.len(), |i| sample[i], &centroids, &params.cancel)
                .ok_or(KMeansError::Cancelled)?
        };
        let inertia: f64 = assigned.iter().map(|&(_, d)| f64::from(d)).sum();
        let converged = stats.inertia.last().is_some_and(|&prev: &f64| prev - inertia <= params.tolerance * prev.abs());
        stats.inertia.push(inertia);
        let mut counts = vec![0usize; k];
        for &(c, _) in &assigned {
            counts[c as usize] += 1;
        }
        let empties: Vec<usize> = (0..k).filter(|&c| counts[c] == 0).collect();
        let done = converged || stats.iterations + 1 >= params.max_iterations.max(1);
        if done && (empties.is_empty() || extra_passes >= 4) {
            stats.empty_clusters = empties.len();
            break;
        }
        if done {
            extra_passes += 1;
        } else {
            update(store, &sample, &assigned, &counts, spherical, &mut data);
            stats.iterations += 1;
        }
        stats.repaired += repair(store, &sample, &assigned, &mut counts, &empties, spherical, &mut data);
    }
    Ok(Centroids { dims, spherical, data, stats })
}

/// k-means++ (D² sampling) over the sample rows.
fn init_plus_plus(
    store: &VectorStore<'_>,
    sample: &[usize],
    k: usize,
    spherical: bool,
    rng: &mut ChaCha8Rng,
    cancel: &crate::cancel::Cancel,
) -> Option<Vec<f32>> {
    let dims = store.dims();
    let mut data = Vec::with_capacity(k * dims);
    let seed_row = |row: usize| -> Vec<f32> {
        let mut c = store.row_f32(row).into_owned();
        if spherical {
            normalize(&mut c);
        }
        c
    };
    let first = sample[rng.gen_range(0..sample.len())];
    data.extend(seed_row(first));
    // D² weight: squared distance to the nearest chosen centre; for spherical k-means between
    // directions, 2 − 2·⟨x, c⟩/‖x‖ (c is unit). Distances go through the store's own kernels
    // (f16 rows are not widened once per pick), with the centre as a prepared query.
    let metric = if spherical { Metric::InnerProduct } else { Metric::L2 };
    let view = VectorStore::new(store.elements(), dims, metric).expect("same shape as the store");
    let inv_norms: Vec<f32> = if spherical {
        sample
            .par_iter()
            .with_min_len(32)
            .map(|&row| {
                let norm = store.row_f32(row).iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>().sqrt();
                if norm > 0.0 {
                    (1.0 / norm) as f32
                } else {
                    0.0
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let weights = |i: usize, row: usize, query: &Query| -> f64 {
        let d = f64::from(view.distance(query, row));
        if spherical {
            (2.0 + 2.0 * d * f64::from(inv_norms[i])).max(0.0)
        } else {
            d.max(0.0)
        }
    };
    let query = Query::prepared(data.clone(), metric);
    let mut d2: Vec<f64> =
        sample.par_iter().enumerate().with_min_len(32).map(|(i, &row)| weights(i, row, &query)).collect();
    for j in 1..k {
        if cancel.is_requested() {
            return None;
        }
        let total: f64 = d2.iter().sum();
        let pick = if total > 0.0 && total.is_finite() {
            let mut target = rng.gen::<f64>() * total;
            let mut pick = d2.len() - 1;
            for (i, &w) in d2.iter().enumerate() {
                if target < w {
                    pick = i;
                    break;
                }
                target -= w;
            }
            pick
        } else {
            rng.gen_range(0..sample.len())
        };
        data.extend(seed_row(sample[pick]));
        let query = Query::prepared(data[j * dims..(j + 1) * dims].to_vec(), metric);
        d2.par_iter_mut().zip(sample.par_iter()).enumerate().with_min_len(32).for_each(|(i, (w, &row))| {
            *w = w.min(weights(i, row, &query));
        });
    }
    Some(data)
}

/// Moves every centroid to the mean (normalised when spherical) of its sample rows; centroids of
/// empty clusters (and spherical clusters whose rows sum to zero) stay where they are.
fn update(
    store: &VectorStore<'_>,
    sample: &[usize],
    assigned: &[(u32, f32)],
    counts: &[usize],
    spherical: bool,
    data: &mut [f32],
) {
    let dims = store.dims();
    let mut sums = vec![0f64; data.len()];
    for (&row, &(c, _)) in sample.iter().zip(assigned) {
        let x = store.row_f32(row);
        let sum = &mut sums[c as usize * dims..(c as usize + 1) * dims];
        for (s, &v) in sum.iter_mut().zip(x.iter()) {
            *s += f64::from(v);
        }
    }
    for (c, (centroid, sum)) in data.chunks_exact_mut(dims).zip(sums.chunks_exact(dims)).enumerate() {
        if counts[c] == 0 {
            continue;
        }
        let scale = if spherical {
            let norm = sum.iter().map(|s| s * s).sum::<f64>().sqrt();
            if norm.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                continue;
            }
            1.0 / norm
        } else {
            1.0 / counts[c] as f64
        };
        for (v, s) in centroid.iter_mut().zip(sum) {
            *v = (s * scale) as f32;
        }
    }
}

/// Moves each empty centroid onto the sample row farthest from its centroid in the largest
/// cluster. Returns the number of clusters repaired.
fn repair(
    store: &VectorStore<'_>,
    sample: &[usize],
    assigned: &[(u32, f32)],
    counts: &mut [usize],
    empties: &[usize],
    spherical: bool,
    data: &mut [f32],
) -> usize {
    let dims = store.dims();
    let mut taken = vec![false; sample.len()];
    let mut repaired = 0;
    for &empty in empties {
        let largest = (0..counts.len()).max_by_key(|&c| (counts[c], std::cmp::Reverse(c))).unwrap_or(0);
        if counts[largest] < 2 {
            break;
        }
        let farthest = assigned
            .iter()
            .enumerate()
            .filter(|&(i, &(c, _))| c as usize == largest && !taken[i])
            .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1).then(b.0.cmp(&a.0)))
            .map(|(i, _)| i);
        let Some(i) = farthest else { break };
        taken[i] = true;
        let mut x = store.row_f32(sample[i]).into_owned();
        if spherical {
            normalize(&mut x);
        }
        data[empty * dims..(empty + 1) * dims].copy_from_slice(&x);
        counts[largest] -= 1;
        counts[empty] = 1;
        repaired += 1;
    }
    repaired
}

fn normalize(x: &mut [f32]) {
    let norm = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>().sqrt();
    if norm > 0.0 {
        for v in x.iter_mut() {
            *v = (f64::from(*v) / norm) as f32;
        }
    }
}

/// The nearest centroid of every row of `store`, in row order (rayon-parallel over blocks of
/// rows, `threads` workers, `0` = current pool), by matrix products of blocks of rows with the
/// centroids. Guarantees `result[r]` minimises [`Centroids::distance`] for row `r` up to `f32`
/// rounding of the products (near ties may go either way), whatever the thread count.
pub fn assign(store: &VectorStore<'_>, centroids: &Centroids, threads: usize) -> Result<Vec<u32>, KMeansError> {
    assign_cancellable(store, centroids, threads, &crate::cancel::Cancel::default())
}

/// [`assign`], polling `cancel` before every block of rows: once requested it returns
/// [`KMeansError::Cancelled`].
pub fn assign_cancellable(
    store: &VectorStore<'_>,
    centroids: &Centroids,
    threads: usize,
    cancel: &crate::cancel::Cancel,
) -> Result<Vec<u32>, KMeansError> {
    if centroids.dims() != store.dims() {
        return Err(KMeansError::DimensionMismatch { expected: centroids.dims(), actual: store.dims() });
    }
    if centroids.is_empty() {
        return Err(KMeansError::ZeroClusters);
    }
    let blocked = BlockedCentroids::new(centroids.as_slice(), centroids.dims(), centroids.is_spherical());
    let nearest = in_pool(threads, || nearest_of_rows(store, store.len(), |row| row, &blocked, cancel))?;
    Ok(nearest.ok_or(KMeansError::Cancelled)?.into_iter().map(|(c, _)| c).collect())
}

#[cfg(test)]
mod tests;
