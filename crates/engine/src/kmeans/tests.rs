//! k-means tests: monotone inertia, non-empty clusters, assignment against a brute-force oracle
//! (scalar `f64` reference kernels), determinism across thread counts, blob recovery, errors.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::kernels::scalar;
use crate::quant::testdata;
use crate::store::Elements;

/// `blobs` well-separated Gaussian blobs of `per` points each in `dims` dimensions.
fn blobs(blobs: usize, per: usize, dims: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let centres: Vec<Vec<f32>> = (0..blobs).map(|_| (0..dims).map(|_| rng.gen_range(-10.0..10.0)).collect()).collect();
    let mut out = Vec::new();
    for i in 0..blobs * per {
        let c = &centres[i % blobs];
        out.extend(c.iter().map(|&v| v + rng.gen_range(-0.5f32..0.5)));
    }
    out
}

/// Asserts that the inertia never grows by more than `f32` rounding of the centroids.
fn assert_monotone(stats: &TrainStats) {
    for w in stats.inertia.windows(2) {
        assert!(w[1] <= w[0] * (1.0 + 1e-5) + 1e-9, "inertia grew: {:?}", stats.inertia);
    }
}

/// Brute-force check: the assigned centroid is as near as the best one under the `f64` scalar
/// reference (tolerance 1e-5 relative, for SIMD-vs-scalar rounding on near ties).
fn assert_assignment(store: &VectorStore<'_>, centroids: &Centroids, assignment: &[u32]) {
    for (row, &a) in assignment.iter().enumerate() {
        let x = store.row_f32(row);
        let d = |c: usize| {
            if centroids.is_spherical() {
                1.0 - f64::from(scalar::dot_f32(&x, centroids.get(c)))
            } else {
                f64::from(scalar::l2_squared_f32(&x, centroids.get(c)))
            }
        };
        let best = (0..centroids.len()).map(d).fold(f64::INFINITY, f64::min);
        assert!(
            d(a as usize) <= best + 1e-5 * best.abs().max(1.0),
            "row {row}: assigned {a} at {} > best {best}",
            d(a as usize)
        );
    }
}

#[test]
fn blobs_are_recovered_with_monotone_inertia() {
    let (k, per, dims) = (8, 60, 13);
    let data = blobs(k, per, dims, 7);
    let store = VectorStore::new(Elements::F32(&data), dims, Metric::L2).unwrap();
    let centroids = train(&store, k, &KMeansParams::default()).unwrap();
    assert_eq!(centroids.len(), k);
    assert!(!centroids.is_spherical());
    assert_monotone(centroids.stats());
    let assignment = assign(&store, &centroids, 2).unwrap();
    assert_assignment(&store, &centroids, &assignment);
    // Every blob lands in exactly one cluster and every cluster holds one blob.
    for b in 0..k {
        let first = assignment[b];
        assert!((0..per).all(|i| assignment[i * k + b] == first), "blob {b} split");
    }
    let mut used: Vec<u32> = assignment.clone();
    used.sort_unstable();
    used.dedup();
    assert_eq!(used.len(), k);
}

#[test]
fn demo_spherical_and_l2_clusters_are_non_empty_and_nearest() {
    let store = testdata::base_store(Metric::Cosine);
    for metric in [Metric::Cosine, Metric::L2] {
        let store = VectorStore::new(store.elements(), store.dims(), metric).unwrap();
        let k = 24;
        let params = KMeansParams { max_iterations: 10, ..KMeansParams::default() };
        let centroids = train(&store, k, &params).unwrap();
        assert_eq!(centroids.is_spherical(), metric == Metric::Cosine);
        let stats = centroids.stats();
        assert!(stats.inertia.len() >= 2);
        assert_monotone(stats);
        assert!(stats.inertia.last().unwrap() < &stats.inertia[0], "{:?}", stats.inertia);
        assert_eq!(stats.empty_clusters, 0);
        if centroids.is_spherical() {
            for c in 0..k {
                let norm: f32 = centroids.get(c).iter().map(|v| v * v).sum();
                assert!((norm - 1.0).abs() < 1e-4);
            }
        }
        let assignment = assign(&store, &centroids, 0).unwrap();
        assert_assignment(&store, &centroids, &assignment);
        let mut counts = vec![0; k];
        for &a in &assignment {
            counts[a as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
    }
}

#[test]
fn deterministic_across_thread_counts_and_sampled() {
    let data = blobs(5, 200, 8, 3);
    let store = VectorStore::new(Elements::F32(&data), 8, Metric::L2).unwrap();
    let params = KMeansParams { max_points_per_centroid: 40, threads: 1, ..KMeansParams::default() };
    let one = train(&store, 5, &params).unwrap();
    let two = train(&store, 5, &KMeansParams { threads: 2, ..params.clone() }).unwrap();
    assert_eq!(one, two);
    assert_eq!(one.stats().sample_rows, 200);
    let other_seed = train(&store, 5, &KMeansParams { seed: 99, ..params }).unwrap();
    assert_eq!(other_seed.len(), 5);
}

#[test]
fn repair_moves_an_empty_centroid_onto_the_farthest_row_of_the_largest_cluster() {
    let data = [0.0f32, 0.0, 1.0, 0.0, 5.0, 0.0, 100.0, 0.0];
    let store = VectorStore::new(Elements::F32(&data), 2, Metric::L2).unwrap();
    let sample = vec![0, 1, 2, 3];
    let assigned = vec![(0, 0.0), (0, 1.0), (0, 25.0), (1, 0.0)];
    let mut counts = vec![3, 1, 0];
    let mut centroids = vec![0.0, 0.0, 100.0, 0.0, 50.0, 50.0];
    let repaired = repair(&store, &sample, &assigned, &mut counts, &[2], false, &mut centroids);
    assert_eq!(repaired, 1);
    assert_eq!(&centroids[4..], &[5.0, 0.0]);
    assert_eq!(counts, vec![2, 1, 1]);
}

#[test]
fn errors_and_degenerate_inputs() {
    let data = [1.0f32, 2.0, 3.0, 4.0];
    let store = VectorStore::new(Elements::F32(&data), 2, Metric::L2).unwrap();
    assert_eq!(train(&store, 0, &KMeansParams::default()).unwrap_err(), KMeansError::ZeroClusters);
    assert_eq!(train(&store, 3, &KMeansParams::default()).unwrap_err(), KMeansError::TooFewRows { rows: 2, k: 3 });
    let c = train(&store, 2, &KMeansParams::default()).unwrap();
    assert_eq!(assign(&store, &c, 1).unwrap().len(), 2);
    let wrong = Centroids::from_vec(vec![0.0; 3], 3, false).unwrap();
    assert!(matches!(assign(&store, &wrong, 0), Err(KMeansError::DimensionMismatch { .. })));
    // Duplicates only: two distinct vectors cannot fill three clusters; reported, no panic.
    let dup = [1.0f32, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0];
    let store = VectorStore::new(Elements::F32(&dup), 2, Metric::L2).unwrap();
    let c = train(&store, 3, &KMeansParams::default()).unwrap();
    assert_eq!(c.len(), 3);
    assert_eq!(c.stats().empty_clusters, 1);
}

/// Random rows of `dims` dimensions with values in [-1, 1).
fn uniform_rows(rows: usize, dims: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..rows * dims).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

#[test]
fn blocked_assignment_is_the_nearest_centroid_over_several_and_partial_blocks() {
    // 37 dimensions (no SIMD width), 2,100 rows: blocks of 1,024, the last one partial; many
    // centroids make shorter blocks (rows_per_block(3,000) = 349).
    let dims = 37;
    let data = uniform_rows(2_100, dims, 21);
    let halves: Vec<half::f16> = data.iter().map(|&v| half::f16::from_f32(v)).collect();
    for k in [1, 29, 3_000] {
        assert!(blocked::rows_per_block(k) < 2_100);
        let centres = uniform_rows(k, dims, 22 + k as u64);
        for (metric, spherical) in [(Metric::L2, false), (Metric::Cosine, true)] {
            let mut centres = centres.clone();
            if spherical {
                centres.chunks_exact_mut(dims).for_each(normalize);
            }
            let centroids = Centroids::from_vec(centres, dims, spherical).unwrap();
            for store in [
                VectorStore::new(Elements::F32(&data), dims, metric).unwrap(),
                VectorStore::new(Elements::F16(&halves), dims, metric).unwrap(),
            ] {
                let one = assign(&store, &centroids, 1).unwrap();
                assert_eq!(one.len(), 2_100);
                assert_assignment(&store, &centroids, &one);
                assert_eq!(one, assign(&store, &centroids, 3).unwrap(), "same result on 1 and 3 threads");
            }
        }
    }
}

#[test]
fn blocked_assignment_gives_rows_with_a_nan_the_first_centroid_and_infinite_rows_some_centroid() {
    let dims = 5;
    let mut data = uniform_rows(40, dims, 5);
    data[7 * dims + 2] = f32::NAN;
    data[30 * dims] = f32::INFINITY;
    let store = VectorStore::new(Elements::F32(&data), dims, Metric::L2).unwrap();
    let centroids = Centroids::from_vec(uniform_rows(6, dims, 6), dims, false).unwrap();
    let assignment = assign(&store, &centroids, 2).unwrap();
    assert_eq!(assignment[7], 0);
    assert!(assignment[30] < 6);
    let finite: Vec<usize> = (0..40).filter(|&r| r != 7 && r != 30).collect();
    for r in finite {
        let x = store.row_f32(r);
        assert_eq!(assignment[r] as usize, centroids.nearest(&x).0, "row {r}");
    }
}

#[test]
fn seeding_reads_a_part_of_a_large_sample_and_training_stays_deterministic() {
    // 4 centroids, a sample of 1,000 rows: k-means++ seeds from 256 of them (64 per centroid).
    let data = blobs(4, 250, 6, 9);
    let store = VectorStore::new(Elements::F32(&data), 6, Metric::L2).unwrap();
    let params = KMeansParams { threads: 1, ..KMeansParams::default() };
    let one = train(&store, 4, &params).unwrap();
    assert_eq!(one.stats().sample_rows, 1_000);
    assert_eq!(one, train(&store, 4, &KMeansParams { threads: 2, ..params }).unwrap());
    assert_monotone(one.stats());
    assert_eq!(one.stats().empty_clusters, 0);
    assert_assignment(&store, &one, &assign(&store, &one, 2).unwrap());
}

#[test]
fn seeding_keeps_64_rows_a_centroid_within_the_byte_budget_and_16_beyond_it() {
    // Few dimensions: 64 a centroid, bounded by the sample.
    assert_eq!(seeding_rows(8, 13 * 4, 480), 480);
    assert_eq!(seeding_rows(316, 3 * 4, 100_000), 64 * 316);
    // 384 f32 dimensions, 316 lists: the budget's rows, more than 16 a centroid.
    assert_eq!(seeding_rows(316, 384 * 4, 80_896), SEEDING_BYTES / (384 * 4));
    // Wide rows and many lists: never fewer than 16 a centroid.
    assert_eq!(seeding_rows(4096, 1536 * 4, 1_000_000), 16 * 4096);
    assert_eq!(seeding_rows(0, 0, 0), 1);
}
