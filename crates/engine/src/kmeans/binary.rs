//! k-means over packed bit rows ([`crate::bit_rows`]): the list centroids of IVF segments of
//! `bit` columns, which are themselves bit strings compared by the index's metric (Hamming or
//! Jaccard), so that a row is assigned to, and a query probes, lists by the distance it is
//! searched by.
//!
//! # Algorithm
//!
//! The steps of [`super::train`] over a sample of at most `max_points_per_centroid · k` rows
//! (seeded ChaCha8, row indices only), with bit-string centroids:
//!
//! 1. **k-means++ seeds** from an evenly spaced part of the sample ([`super::seeding_rows`] of
//!    it), D² sampling under the metric; when
//!    every remaining row equals a chosen seed (distance 0 everywhere) a seed is drawn uniformly.
//! 2. **Lloyd iterations**: every sample row goes to its nearest centroid (ties: lowest index;
//!    rayon-parallel, each row independent), then each centroid is recomputed from its members'
//!    per-bit counts:
//!    - Hamming: a bit is set when more than half of the members have it (the bitwise majority,
//!      which minimises the sum of Hamming distances to the members; pgvector's ivfflat also
//!      binarises its float centres at 0.5);
//!    - Jaccard: the `m` bits most members have (ties: lower bit first, only bits some member
//!      has), `m` the members' mean popcount rounded — a majority would leave sparse rows'
//!      centroids empty, and an empty centroid is at distance 1 from every row.
//! 3. **Empty-cluster repair**: an empty cluster takes the member farthest from its centroid in
//!    the currently largest cluster.
//!
//! Stops when an assignment pass changes no row's cluster, or after `max_iterations` updates.
//! The result depends only on the store, `k` and the seed, not on the thread count.

use rand::seq::index;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::{KMeansError, KMeansParams};
use crate::bit_rows;
use crate::metric::Metric;
use crate::store::{ElementKind, VectorStore};

/// `k` bit-string centroids, each a packed bit row of the store's width.
#[derive(Debug, Clone, PartialEq)]
pub struct BitCentroids {
    words: usize,
    metric: Metric,
    data: Vec<f32>,
    iterations: usize,
}

impl BitCentroids {
    /// Wraps packed centroids of `words` words each, compared under `metric`.
    ///
    /// Guarantees `len() == data.len() / words`; an error when `words` is zero or `data` is not
    /// whole rows.
    pub fn from_vec(data: Vec<f32>, words: usize, metric: Metric) -> Result<Self, KMeansError> {
        if words == 0 || !data.len().is_multiple_of(words) {
            return Err(KMeansError::DimensionMismatch { expected: words, actual: data.len() });
        }
        Ok(Self { words, metric, data, iterations: 0 })
    }

    /// Number of centroids.
    pub fn len(&self) -> usize {
        self.data.len() / self.words
    }

    /// Whether there are no centroids.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Words of each packed centroid (the rows' width).
    pub fn words(&self) -> usize {
        self.words
    }

    /// Centroid `i` as a packed bit row. Panics when `i >= len()`.
    pub fn get(&self, i: usize) -> &[f32] {
        &self.data[i * self.words..(i + 1) * self.words]
    }

    /// Every centroid, packed, row after row.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// The packed centroids, moved out.
    pub fn into_vec(self) -> Vec<f32> {
        self.data
    }

    /// Lloyd updates the training ran (0 for [`BitCentroids::from_vec`]).
    pub fn iterations(&self) -> usize {
        self.iterations
    }

    /// The nearest centroid to packed row `row` under the metric and its distance; the lowest
    /// index among ties.
    pub fn nearest(&self, row: &[f32]) -> (usize, f32) {
        nearest(&self.data, self.words, self.metric, row)
    }
}

/// Rows [`assign`] hands to a worker at a time (and between polls of its cancellation).
const BLOCK: usize = 1024;

fn nearest(data: &[f32], words: usize, metric: Metric, row: &[f32]) -> (usize, f32) {
    let mut best = (0, f32::INFINITY);
    for (i, c) in data.chunks_exact(words).enumerate() {
        let d = bit_rows::distance_between(row, c, metric);
        if d < best.1 {
            best = (i, d);
        }
    }
    best
}

/// Checks that `store` holds packed bit rows under a bit metric.
fn check_store(store: &VectorStore<'_>) -> Result<(), KMeansError> {
    let bit_metric = matches!(store.metric(), Metric::Hamming | Metric::Jaccard);
    // A packed row of at least one bit has its length word and one word of bits.
    if store.element_kind() != ElementKind::Bits || !bit_metric || store.dims() < 2 {
        return Err(KMeansError::NotBitRows);
    }
    Ok(())
}

/// Trains `k` bit-string centroids on a sample of `store`'s packed bit rows (see the module
/// docs), honouring `params.max_iterations`, `max_points_per_centroid`, `seed`, `threads` and
/// `cancel` (`spherical` and `tolerance` do not apply).
///
/// Guarantees: exactly `k` centroids of the rows' width, each a valid packed row of the rows'
/// bit length (padding bits zero); deterministic for `(store, k, params)` whatever the thread
/// count. Errors: `k` zero or above the rows, a store of other rows or metric
/// ([`KMeansError::NotBitRows`]), cancellation.
pub fn train(store: &VectorStore<'_>, k: usize, params: &KMeansParams) -> Result<BitCentroids, KMeansError> {
    check_store(store)?;
    if k == 0 {
        return Err(KMeansError::ZeroClusters);
    }
    if store.len() < k {
        return Err(KMeansError::TooFewRows { rows: store.len(), k });
    }
    super::in_pool(params.threads, || train_in_pool(store, k, params))?
}

fn train_in_pool(store: &VectorStore<'_>, k: usize, params: &KMeansParams) -> Result<BitCentroids, KMeansError> {
    let (words, metric) = (store.dims(), store.metric());
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let limit = params.max_points_per_centroid.max(1).saturating_mul(k).min(store.len());
    let sample: Vec<usize> = if limit == store.len() {
        (0..store.len()).collect()
    } else {
        let mut s = index::sample(&mut rng, store.len(), limit).into_vec();
        s.sort_unstable();
        s
    };
    let seeding_rows = super::seeding_rows(k, store.row_bytes(), sample.len());
    let seeding: Vec<usize> = sample.iter().step_by(sample.len().div_ceil(seeding_rows).max(1)).copied().collect();
    let mut data = seeds(store, &seeding, k, &mut rng, &params.cancel)?;
    let mut assigned: Vec<u32> = Vec::new();
    let mut iterations = 0;
    loop {
        if params.cancel.is_requested() {
            return Err(KMeansError::Cancelled);
        }
        let next: Vec<(u32, f32)> = sample
            .par_iter()
            .with_min_len(64)
            .map(|&row| {
                let (c, d) = nearest(&data, words, metric, &store.row_f32(row));
                (c as u32, d)
            })
            .collect();
        let unchanged = next.iter().map(|&(c, _)| c).eq(assigned.iter().copied());
        assigned = next.iter().map(|&(c, _)| c).collect();
        if unchanged || iterations >= params.max_iterations.max(1) {
            break;
        }
        let mut members = members_of(&assigned, k);
        repair(store, &sample, &next, &mut members, &mut data);
        update(store, &sample, &members, &mut data);
        iterations += 1;
    }
    // Word 0 of a centroid is the rows' bit length (distances never read it); rows whose word 0
    // does not fit their width (not packed bit rows, e.g. fuzz input) give the width's.
    let bits = bit_rows::bit_len(&store.row_f32(0));
    let bits = if bit_rows::row_words(bits) == words { bits } else { 32 * (words as u32 - 1) };
    data.chunks_exact_mut(words).for_each(|centroid| centroid[0] = f32::from_bits(bits));
    Ok(BitCentroids { words, metric, data, iterations })
}

/// k-means++ seeds (D² sampling under the store's metric) from the rows `seeding`.
fn seeds(
    store: &VectorStore<'_>,
    seeding: &[usize],
    k: usize,
    rng: &mut ChaCha8Rng,
    cancel: &crate::cancel::Cancel,
) -> Result<Vec<f32>, KMeansError> {
    let (words, metric) = (store.dims(), store.metric());
    let mut data = Vec::with_capacity(k * words);
    data.extend_from_slice(&store.row_f32(seeding[rng.gen_range(0..seeding.len())]));
    let weight = |row: usize, centre: &[f32]| {
        let d = f64::from(bit_rows::distance_between(&store.row_f32(row), centre, metric));
        d * d
    };
    let mut d2: Vec<f64> = seeding.par_iter().with_min_len(64).map(|&row| weight(row, &data[..words])).collect();
    for j in 1..k {
        if cancel.is_requested() {
            return Err(KMeansError::Cancelled);
        }
        let total: f64 = d2.iter().sum();
        let pick = if total > 0.0 {
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
            rng.gen_range(0..seeding.len())
        };
        data.extend_from_slice(&store.row_f32(seeding[pick]));
        let centre = &data[j * words..(j + 1) * words];
        d2.par_iter_mut().zip(seeding.par_iter()).with_min_len(64).for_each(|(w, &row)| {
            *w = w.min(weight(row, centre));
        });
    }
    Ok(data)
}

/// The sample positions of each cluster, in sample order.
fn members_of(assigned: &[u32], k: usize) -> Vec<Vec<usize>> {
    let mut members = vec![Vec::new(); k];
    for (i, &c) in assigned.iter().enumerate() {
        members[c as usize].push(i);
    }
    members
}

/// Moves each empty cluster's centroid onto the member farthest from its centroid in the
/// currently largest cluster (that member changes cluster).
fn repair(
    store: &VectorStore<'_>,
    sample: &[usize],
    assigned: &[(u32, f32)],
    members: &mut [Vec<usize>],
    data: &mut [f32],
) {
    let words = store.dims();
    for empty in 0..members.len() {
        if !members[empty].is_empty() {
            continue;
        }
        let largest = (0..members.len()).max_by_key(|&c| (members[c].len(), std::cmp::Reverse(c))).unwrap_or(0);
        if members[largest].len() < 2 {
            return;
        }
        let (at, _) = members[largest]
            .iter()
            .enumerate()
            .max_by(|a, b| assigned[*a.1].1.total_cmp(&assigned[*b.1].1).then(b.0.cmp(&a.0)))
            .expect("the largest cluster has members");
        let moved = members[largest].remove(at);
        data[empty * words..(empty + 1) * words].copy_from_slice(&store.row_f32(sample[moved]));
        members[empty].push(moved);
    }
}

/// Recomputes every non-empty cluster's centroid from its members' per-bit counts (module docs).
fn update(store: &VectorStore<'_>, sample: &[usize], members: &[Vec<usize>], data: &mut [f32]) {
    let (words, metric) = (store.dims(), store.metric());
    data.par_chunks_exact_mut(words).zip(members.par_iter()).for_each_init(
        || vec![0u32; 32 * (words - 1)],
        |counts, (centroid, members)| {
            if members.is_empty() {
                return;
            }
            counts.fill(0);
            let mut ones = 0u64;
            for &i in members {
                let row = store.row_f32(sample[i]);
                for (w, word) in row[1..].iter().enumerate() {
                    let mut bits = word.to_bits();
                    ones += u64::from(bits.count_ones());
                    while bits != 0 {
                        // Counts are kept in string order: bit 0 is the word's most significant.
                        let at = bits.leading_zeros();
                        counts[32 * w + at as usize] += 1;
                        bits &= !(0x8000_0000u32 >> at);
                    }
                }
            }
            let size = members.len() as u64;
            let set: Vec<usize> = match metric {
                Metric::Jaccard => {
                    let m = ((ones + size / 2) / size) as usize;
                    let mut ranked: Vec<usize> = (0..counts.len()).filter(|&b| counts[b] > 0).collect();
                    ranked.sort_by_key(|&b| (std::cmp::Reverse(counts[b]), b));
                    ranked.truncate(m);
                    ranked
                }
                _ => (0..counts.len()).filter(|&b| 2 * u64::from(counts[b]) > size).collect(),
            };
            let mut packed = vec![0u32; words];
            for b in set {
                packed[1 + b / 32] |= 0x8000_0000 >> (b % 32);
            }
            for (slot, word) in centroid.iter_mut().zip(packed) {
                *slot = f32::from_bits(word);
            }
        },
    );
}

/// The nearest centroid of every row of `store` (packed bit rows), in row order, rayon-parallel
/// (`threads` workers, `0`: the current pool), polling `cancel` every 1,024 rows.
///
/// Guarantees: `result[r]` is the lowest-index centroid at the least distance from row `r` under
/// the store's metric (exact: distances are popcounts), whatever the thread count. Errors: a
/// store of other rows or metric, centroids of another width, no centroids, cancellation.
pub fn assign(
    store: &VectorStore<'_>,
    centroids: &BitCentroids,
    threads: usize,
    cancel: &crate::cancel::Cancel,
) -> Result<Vec<u32>, KMeansError> {
    check_store(store)?;
    if centroids.words() != store.dims() {
        return Err(KMeansError::DimensionMismatch { expected: centroids.words(), actual: store.dims() });
    }
    if centroids.is_empty() {
        return Err(KMeansError::ZeroClusters);
    }
    let words = store.dims();
    let metric = store.metric();
    let blocks = super::in_pool(threads, || {
        (0..store.len().div_ceil(BLOCK))
            .into_par_iter()
            .map(|block| {
                if cancel.is_requested() {
                    return None;
                }
                let rows = block * BLOCK..((block + 1) * BLOCK).min(store.len());
                Some(
                    rows.map(|r| nearest(centroids.as_slice(), words, metric, &store.row_f32(r)).0 as u32)
                        .collect::<Vec<u32>>(),
                )
            })
            .collect::<Option<Vec<Vec<u32>>>>()
    })?;
    Ok(blocks.ok_or(KMeansError::Cancelled)?.concat())
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::bit_value::Bits;
    use crate::store::Elements;

    fn packed(strings: &[&str]) -> (Vec<f32>, usize) {
        let len = strings[0].len() as u32;
        let rows = strings
            .iter()
            .flat_map(|s| {
                let mut bytes = vec![0u8; len.div_ceil(8) as usize];
                for (i, c) in s.chars().enumerate() {
                    if c == '1' {
                        bytes[i / 8] |= 0x80 >> (i % 8);
                    }
                }
                bit_rows::pack(Bits::new(len, &bytes).unwrap())
            })
            .collect();
        (rows, bit_rows::row_words(len))
    }

    fn as_string(row: &[f32]) -> String {
        let len = bit_rows::bit_len(row) as usize;
        (0..len).map(|i| if row[1 + i / 32].to_bits() & (0x8000_0000 >> (i % 32)) != 0 { '1' } else { '0' }).collect()
    }

    /// One cluster: Hamming's centroid is the bitwise majority (ties clear), Jaccard's the `m`
    /// most common bits for the members' mean popcount `m` (ties: lower bit first).
    #[test]
    fn centroids_are_the_majority_or_the_most_common_bits() {
        let (rows, words) = packed(&["110000", "101000", "100100", "100011"]);
        for (metric, expected) in [(Metric::Hamming, "100000"), (Metric::Jaccard, "110000")] {
            let store = VectorStore::new(Elements::Bits(&rows), words, metric).unwrap();
            let centroids = train(&store, 1, &KMeansParams::default()).unwrap();
            assert_eq!(as_string(centroids.get(0)), expected, "{metric:?}");
        }
        // Half the members is no majority.
        let (rows, words) = packed(&["1100", "1010"]);
        let store = VectorStore::new(Elements::Bits(&rows), words, Metric::Hamming).unwrap();
        assert_eq!(as_string(train(&store, 1, &KMeansParams::default()).unwrap().get(0)), "1000");
        // Sparse rows: a majority would be empty (distance 1 from every row under Jaccard).
        let (rows, words) = packed(&["1100000000", "0110000000", "0011000000", "1001000000"]);
        let store = VectorStore::new(Elements::Bits(&rows), words, Metric::Jaccard).unwrap();
        assert_eq!(as_string(train(&store, 1, &KMeansParams::default()).unwrap().get(0)), "1100000000");
    }

    /// Separated groups get one centroid each; every row's assignment is the brute-force
    /// nearest centroid (lowest index on ties); training does not depend on the thread count.
    #[test]
    fn clusters_separate_groups_and_assignment_is_nearest() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let len = 70u32;
        let words = bit_rows::row_words(len);
        let prototypes: Vec<Vec<u8>> =
            (0..4).map(|_| (0..len.div_ceil(8)).map(|_| rng.gen::<u8>()).collect()).collect();
        // Groups drawn at random: seeding reads an evenly spaced part of the sample, which a
        // periodic layout would alias.
        let groups: Vec<usize> = (0..400).map(|_| rng.gen_range(0..4)).collect();
        let mut rows = Vec::new();
        for &group in &groups {
            let mut bytes = prototypes[group].clone();
            bytes[rng.gen_range(0..8)] ^= 1 << rng.gen_range(0..8);
            *bytes.last_mut().unwrap() &= 0xC0;
            rows.extend(bit_rows::pack(Bits::new(len, &bytes).unwrap()));
        }
        for metric in [Metric::Hamming, Metric::Jaccard] {
            let store = VectorStore::new(Elements::Bits(&rows), words, metric).unwrap();
            let params = KMeansParams { threads: 1, ..KMeansParams::default() };
            let centroids = train(&store, 4, &params).unwrap();
            assert_eq!(centroids, train(&store, 4, &KMeansParams { threads: 3, ..params.clone() }).unwrap());
            let cancel = crate::cancel::Cancel::default();
            let assigned = assign(&store, &centroids, 2, &cancel).unwrap();
            for (row, &c) in assigned.iter().enumerate() {
                let distances: Vec<f32> =
                    (0..4).map(|i| bit_rows::distance_between(&store.row_f32(row), centroids.get(i), metric)).collect();
                let best = (0..4).min_by(|&a, &b| distances[a].total_cmp(&distances[b]).then(a.cmp(&b))).unwrap();
                assert_eq!(c as usize, best);
            }
            // Rows of one prototype share a list, and the four prototypes have four lists.
            for group in 0..4 {
                let lists: std::collections::BTreeSet<u32> =
                    (0..400).filter(|&r| groups[r] == group).map(|r| assigned[r]).collect();
                assert_eq!(lists.len(), 1, "{metric:?}: group {group} is split over {lists:?}");
            }
            let distinct: std::collections::BTreeSet<u32> = assigned.iter().copied().collect();
            assert_eq!(distinct.len(), 4, "{metric:?}");
            assert!(centroids.as_slice().chunks_exact(words).all(|c| bit_rows::bit_len(c) == len));
        }
    }

    #[test]
    fn refuses_other_rows_and_too_many_clusters() {
        let (rows, words) = packed(&["1010", "0101"]);
        let floats = VectorStore::new(Elements::F32(&rows), words, Metric::Hamming).unwrap();
        assert_eq!(train(&floats, 1, &KMeansParams::default()), Err(KMeansError::NotBitRows));
        let l2 = VectorStore::new(Elements::Bits(&rows), words, Metric::L2).unwrap();
        assert_eq!(train(&l2, 1, &KMeansParams::default()), Err(KMeansError::NotBitRows));
        let store = VectorStore::new(Elements::Bits(&rows), words, Metric::Hamming).unwrap();
        assert_eq!(train(&store, 3, &KMeansParams::default()), Err(KMeansError::TooFewRows { rows: 2, k: 3 }));
        assert_eq!(train(&store, 0, &KMeansParams::default()), Err(KMeansError::ZeroClusters));
    }
}
