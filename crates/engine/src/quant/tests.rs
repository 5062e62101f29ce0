//! Quantized flat tests: recall on the demo data at the default oversampling (cosine and L2,
//! `f16` and `f32` stores), filters and deletions, estimates against a scalar reference on odd
//! sizes, serialised sections (round trip, truncation, corruption), errors.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::encode::Scheme;
use super::fastscan::{self, BLOCK};
use super::testdata::{self, brute_force, recall, Arena};
use super::*;
use crate::bitset::{Bitset, RowPredicate};
use crate::metric::Metric;
use crate::store::{prepare_rows, Elements, Query, VectorStore};
use crate::topk::Neighbor;

fn random_rows(rows: usize, dims: usize, seed: u64, metric: Metric) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let raw: Vec<f32> = (0..rows * dims).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
    prepare_rows(&raw, dims, metric).0
}

/// Asserts the search contract: accepted rows only, `min(k, accepted)` results, sorted, exact.
fn assert_contract(store: &VectorStore<'_>, query: &Query, found: &[Neighbor], k: usize, predicate: RowPredicate<'_>) {
    let accepted = predicate.count_accepted(store.len());
    assert_eq!(found.len(), k.min(accepted), "result count");
    for w in found.windows(2) {
        assert!(w[0].order(&w[1]).is_lt(), "sorted, no duplicates");
    }
    for n in found {
        assert!(predicate.accepts(n.row as usize), "row {} not accepted", n.row);
        assert_eq!(n.distance.to_bits(), store.distance(query, n.row as usize).to_bits(), "exact distance");
    }
}

#[test]
fn recall_at_default_oversample_on_demo_data() {
    let (base, _) = testdata::sizes();
    let widened: Vec<f32> = testdata::demo()[..base * testdata::DIMS].iter().map(|x| x.to_f32()).collect();
    for (metric, f32_rows) in [(Metric::Cosine, false), (Metric::L2, true), (Metric::InnerProduct, false)] {
        let store = if f32_rows {
            VectorStore::new(Elements::F32(&widened), testdata::DIMS, metric).unwrap()
        } else {
            testdata::base_store(metric)
        };
        for bits in [4u8, 2, 1] {
            let flat = QuantizedFlat::build(&store, &QuantizerParams { bits, ..QuantizerParams::default() }).unwrap();
            let oversample = default_oversample(bits);
            let queries = testdata::queries();
            let mut total = 0.0;
            for q in &queries {
                let query = Query::new(q, metric);
                let truth = brute_force(&store, &query, 10, RowPredicate::default());
                let found = flat.search(&store, &query, 10, oversample, RowPredicate::default()).unwrap();
                assert_contract(&store, &query, &found, 10, RowPredicate::default());
                total += recall(&found, &truth);
            }
            let mean = total / queries.len() as f64;
            println!(
                "{metric:?} {bits}-bit, oversample {oversample}: recall@10 {mean:.4} ({} queries, {base} rows)",
                queries.len()
            );
            assert!(mean >= 0.99, "{metric:?} {bits}-bit recall@10 {mean} < 0.99");
        }
    }
}

#[test]
fn filters_and_deletions_are_respected_at_every_selectivity() {
    let store = testdata::base_store(Metric::Cosine);
    let rows = store.len();
    let flat = QuantizedFlat::build(&store, &QuantizerParams::default()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut deleted = Bitset::new(rows);
    for _ in 0..rows / 20 {
        deleted.insert(rng.gen_range(0..rows));
    }
    for selectivity in [0.5, 0.1, 0.01, 0.001] {
        let mut filter = Bitset::new(rows);
        for r in 0..rows {
            if rng.gen::<f64>() < selectivity {
                filter.insert(r);
            }
        }
        let mut total = 0.0;
        let queries = testdata::queries();
        for q in &queries {
            let query = Query::new(q, Metric::Cosine);
            for predicate in [
                RowPredicate { filter: Some(&filter), deleted: None },
                RowPredicate { filter: Some(&filter), deleted: Some(&deleted) },
            ] {
                let found = flat.search(&store, &query, 10, 4.0, predicate).unwrap();
                assert_contract(&store, &query, &found, 10, predicate);
                total += recall(&found, &brute_force(&store, &query, 10, predicate)) / 2.0;
            }
        }
        let mean = total / queries.len() as f64;
        println!("filter {:.1} % ({} rows accepted): recall@10 {mean:.4}", selectivity * 100.0, filter.count());
        assert!(mean >= 0.98, "selectivity {selectivity}: recall {mean}");
    }
    // Deletions only, and a predicate accepting nothing.
    let query = Query::new(&testdata::queries()[0], Metric::Cosine);
    let predicate = RowPredicate { filter: None, deleted: Some(&deleted) };
    assert_contract(&store, &query, &flat.search(&store, &query, 25, 4.0, predicate).unwrap(), 25, predicate);
    let nothing = Bitset::new(rows);
    assert!(flat
        .search(&store, &query, 10, 4.0, RowPredicate { filter: Some(&nothing), deleted: None })
        .unwrap()
        .is_empty());
    // k beyond the rows, oversample below one or NaN.
    let small_rows = random_rows(7, 5, 1, Metric::L2);
    let small = VectorStore::new(Elements::F32(&small_rows), 5, Metric::L2).unwrap();
    let tiny = QuantizedFlat::build(&small, &QuantizerParams::default()).unwrap();
    let q = Query::new(&[0.1, 0.2, 0.3, 0.4, 0.5], Metric::L2);
    for oversample in [0.0, f32::NAN, 1e30] {
        let found = tiny.search(&small, &q, 20, oversample, RowPredicate::default()).unwrap();
        assert_eq!(found, brute_force(&small, &q, 20, RowPredicate::default()));
    }
}

/// Estimates from the blocked scan equal a scalar reference that decodes every code, within the
/// table rounding bound `|scale| · (delta/2) · sub-codes` (plus `f32` slack).
#[test]
fn scan_estimates_match_a_decoding_reference_on_odd_sizes() {
    for (dims, bits, rows) in [(37usize, 4u8, 1usize), (37, 2, 31), (37, 1, 33), (5, 4, 100), (64, 2, 64), (129, 1, 95)]
    {
        for metric in [Metric::L2, Metric::Cosine, Metric::InnerProduct] {
            let data = random_rows(rows, dims, dims as u64 + rows as u64, metric);
            let store = VectorStore::new(Elements::F32(&data), dims, metric).unwrap();
            let flat = QuantizedFlat::build(&store, &QuantizerParams { bits, seed: 3 }).unwrap();
            let quantizer = flat.quantizer();
            let query = Query::new(&random_rows(1, dims, 99, metric), metric);
            let prepared = quantizer.prepare(&query);
            let constant = quantizer.center_constant(&prepared, quantizer.center());
            let estimates = flat.view().estimates(&query);
            assert_eq!(estimates.len(), rows);
            let levels = Scheme::DEFAULT.levels(bits, dims);
            let nibbles = fastscan::nibbles(dims, bits);
            let per = 4 / usize::from(bits);
            let centered: Vec<f32> = prepared.rotated.iter().zip(quantizer.center()).map(|(a, b)| a - b).collect();
            let codes = flat.codes().code_blocks();
            let factors = flat.codes().factors();
            for (pos, &est) in estimates.iter().enumerate() {
                let block = &codes[pos / BLOCK * (nibbles / 2) * BLOCK..];
                let mut s = 0f64;
                for (d, &c) in centered.iter().enumerate().take(dims) {
                    let nibble = fastscan::get_nibble(block, pos % BLOCK, d / per);
                    let k = (nibble >> ((d % per) * usize::from(bits))) & ((1 << bits) - 1);
                    s += f64::from(c) * f64::from(levels[usize::from(k)]);
                }
                let want = f64::from(prepared.base + constant + factors[2 * pos]) + f64::from(factors[2 * pos + 1]) * s;
                let bound = f64::from(factors[2 * pos + 1].abs() * prepared.lut.delta) * 0.5 * nibbles as f64 + 1e-4;
                assert!(
                    (f64::from(est) - want).abs() <= bound,
                    "d={dims} b={bits} n={rows} {metric:?} pos {pos}: {est} vs {want}"
                );
            }
        }
    }
}

fn small_flat(metric: Metric, bits: u8) -> (Vec<f32>, QuantizedFlat) {
    let data = random_rows(203, 24, 5, metric);
    let store = VectorStore::new(Elements::F32(&data), 24, metric).unwrap();
    let flat = QuantizedFlat::build(&store, &QuantizerParams { bits, seed: 8 }).unwrap();
    (data, flat)
}

#[test]
fn sections_round_trip_with_identical_results() {
    for (metric, bits) in [(Metric::L2, 4u8), (Metric::Cosine, 2), (Metric::InnerProduct, 1)] {
        let (data, flat) = small_flat(metric, bits);
        let store = VectorStore::new(Elements::F32(&data), 24, metric).unwrap();
        let arena = Arena::pack(&flat.sections());
        let view = QuantizedFlat::from_sections(|t| arena.get(t), 203, 24).unwrap();
        assert_eq!(view.size_bytes(), flat.sections().iter().map(|s| s.1.len()).sum::<usize>());
        for seed in 0..10 {
            let query = Query::new(&random_rows(1, 24, 1000 + seed, metric), metric);
            let a = flat.search(&store, &query, 7, 2.0, RowPredicate::default()).unwrap();
            let b = view.search(&store, &query, 7, 2.0, RowPredicate::default()).unwrap();
            assert_eq!(a, b);
            assert_eq!(flat.view().estimates(&query), view.estimates(&query));
        }
        // Wrong shape, missing and misaligned sections.
        assert!(matches!(
            QuantizedFlat::from_sections(|t| arena.get(t), 202, 24),
            Err(SectionError::Mismatch { field: "rows", .. })
        ));
        assert!(matches!(
            QuantizedFlat::from_sections(|t| arena.get(t), 203, 25),
            Err(SectionError::Mismatch { field: "dims", .. })
        ));
        assert!(matches!(
            QuantizedFlat::from_sections(|t| (t != TAG_QFLAT_CODES).then(|| arena.get(t)).flatten(), 203, 24),
            Err(SectionError::Missing { tag: TAG_QFLAT_CODES })
        ));
        let mut shifted = [0u8; 4 * 24 + 1];
        shifted[1..].copy_from_slice(&flat.sections()[1].1);
        let misaligned = |t: u32| {
            if t == TAG_QFLAT_CENTER {
                Some(&shifted[1..])
            } else {
                arena.get(t)
            }
        };
        assert_eq!(
            QuantizedFlat::from_sections(misaligned, 203, 24).unwrap_err(),
            SectionError::Misaligned { tag: TAG_QFLAT_CENTER }
        );
        // The view refuses another store.
        let other = VectorStore::new(Elements::F32(&data[..24 * 200]), 24, metric).unwrap();
        let q = Query::new(&data[..24], metric);
        assert!(matches!(
            view.search(&other, &q, 3, 1.0, RowPredicate::default()),
            Err(SearchError::StoreMismatch { .. })
        ));
    }
}

#[test]
fn header_bit_flips_are_rejected() {
    let (data, flat) = small_flat(Metric::Cosine, 4);
    let store = VectorStore::new(Elements::F32(&data), 24, Metric::Cosine).unwrap();
    let sections = flat.sections();
    for byte in 0..HEADER_BYTES {
        for bit in 0..8 {
            let mut corrupt = sections.clone();
            corrupt[0].1[byte] ^= 1 << bit;
            let arena = Arena::pack(&corrupt);
            let result = QuantizedFlat::from_sections(|t| arena.get(t), 203, 24);
            match byte {
                // The seed is any u64 (the container's CRC covers it); a metric flip to another
                // valid metric is caught when searching.
                24..=31 => assert!(result.is_ok()),
                13 => {
                    if let Ok(view) = result {
                        let q = Query::new(&data[..24], Metric::Cosine);
                        assert_eq!(
                            view.search(&store, &q, 3, 1.0, RowPredicate::default()).unwrap_err(),
                            SearchError::MetricMismatch
                        );
                    }
                }
                _ => assert!(result.is_err(), "flip of header byte {byte} bit {bit} accepted"),
            }
        }
    }
}

proptest! {
    #![proptest_config(Config { cases: 96, ..Config::default() })]

    /// Truncating any section is an error; flipping bytes anywhere never panics, and a view that
    /// opens still honours the search contract (accepted rows in range, `min(k, accepted)`).
    #[test]
    fn corrupt_sections_give_errors_never_panics(section in 0usize..4, cut in any::<prop::sample::Index>(), flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..8)) {
        let (data, flat) = small_flat(Metric::L2, 4);
        let store = VectorStore::new(Elements::F32(&data), 24, Metric::L2).unwrap();
        let mut truncated = flat.sections();
        let len = truncated[section].1.len();
        truncated[section].1.truncate(cut.index(len));
        let arena = Arena::pack(&truncated);
        prop_assert!(QuantizedFlat::from_sections(|t| arena.get(t), 203, 24).is_err());

        let mut flipped = flat.sections();
        for (at, xor) in &flips {
            let bytes = &mut flipped[section].1;
            let i = at.index(bytes.len());
            bytes[i] ^= xor;
        }
        let arena = Arena::pack(&flipped);
        if let Ok(view) = QuantizedFlat::from_sections(|t| arena.get(t), 203, 24) {
            let mut filter = Bitset::new(203);
            (0..203).step_by(3).for_each(|r| filter.insert(r));
            let predicate = RowPredicate { filter: Some(&filter), deleted: None };
            let query = Query::new(&data[24..48], Metric::L2);
            if let Ok(found) = view.search(&store, &query, 9, 3.0, predicate) {
                prop_assert_eq!(found.len(), 9);
                prop_assert!(found.iter().all(|n| (n.row as usize) < 203 && predicate.accepts(n.row as usize)));
            }
        }
    }
}

/// In a real segment file (the container's CRC-32 per section), every single-byte corruption of
/// the quantized sections is an error at open.
#[test]
fn segment_container_detects_every_flip_in_quantized_sections() {
    use crate::format::{encode, SegmentBytes, SegmentFile};
    let (_, flat) = small_flat(Metric::L2, 1);
    let sections = flat.sections();
    let refs: Vec<(u32, &[u8])> = sections.iter().map(|(t, b)| (*t, b.as_slice())).collect();
    let file_bytes = encode(&refs).unwrap();
    let file = SegmentFile::from_bytes(SegmentBytes::copy_from(&file_bytes), true).unwrap();
    assert!(QuantizedFlat::from_sections(|t| file.section(t), 203, 24).is_ok());
    let mut runner = TestRunner::new(Config { cases: 64, ..Config::default() });
    runner
        .run(&(any::<prop::sample::Index>(), 1u8..=255), |(at, xor)| {
            let mut bytes = file_bytes.clone();
            let i = at.index(bytes.len());
            bytes[i] ^= xor;
            let opened = SegmentFile::from_bytes(SegmentBytes::copy_from(&bytes), true)
                .map(|f| QuantizedFlat::from_sections(|t| f.section(t), 203, 24).is_ok());
            prop_assert!(!matches!(opened, Ok(true)), "flip at byte {i} went unnoticed");
            Ok(())
        })
        .unwrap();
}

#[test]
fn errors_and_empty_stores() {
    let data = random_rows(10, 4, 2, Metric::L2);
    let store = VectorStore::new(Elements::F32(&data), 4, Metric::L2).unwrap();
    assert_eq!(
        QuantizedFlat::build(&store, &QuantizerParams { bits: 3, seed: 0 }).unwrap_err(),
        QuantError::UnsupportedBits(3)
    );
    let cos = VectorStore::new(Elements::F32(&data), 4, Metric::Cosine).unwrap();
    let quantizer = Quantizer::train(&store, &QuantizerParams::default()).unwrap();
    assert_eq!(QuantizedFlat::with_quantizer(&cos, quantizer).unwrap_err(), QuantError::MetricMismatch);
    let flat = QuantizedFlat::build(&store, &QuantizerParams::default()).unwrap();
    let q = Query::new(&[1.0, 2.0, 3.0], Metric::L2);
    assert_eq!(
        flat.search(&store, &q, 3, 1.0, RowPredicate::default()).unwrap_err(),
        SearchError::QueryDimensions { expected: 4, actual: 3 }
    );
    let empty = VectorStore::new(Elements::F32(&[]), 4, Metric::L2).unwrap();
    let flat = QuantizedFlat::build(&empty, &QuantizerParams::default()).unwrap();
    assert!(flat
        .search(&empty, &Query::new(&[0.0; 4], Metric::L2), 5, 4.0, RowPredicate::default())
        .unwrap()
        .is_empty());
    let arena = Arena::pack(&flat.sections());
    assert!(QuantizedFlat::from_sections(|t| arena.get(t), 0, 4).unwrap().is_empty());
}

#[test]
fn a_requested_cancel_skips_the_encoding_of_a_quantized_flat_build() {
    let store = testdata::base_store(Metric::L2);
    let params = QuantizerParams::default();
    let whole = QuantizedFlat::build(&store, &params).unwrap();
    assert!(whole.codes().factors().iter().any(|&f| f != 0.0), "an encoded row has non-zero factors");
    let cancel = crate::cancel::Cancel::new();
    cancel.request();
    let skipped = QuantizedFlat::build_cancellable(&store, &params, &cancel).unwrap();
    assert_eq!(skipped.codes().len(), whole.codes().len());
    assert!(skipped.codes().factors().iter().all(|&f| f == 0.0), "no block was encoded after the request");
    assert!(skipped.codes().code_blocks().iter().all(|&b| b == 0));
    let quantizer = whole.quantizer().clone();
    let again = QuantizedFlat::with_quantizer_cancellable(&store, quantizer, &crate::cancel::Cancel::new()).unwrap();
    assert_eq!(again, whole, "an unrequested token encodes every row as before");
}

/// The lower bounds hold: on the demo rows (and on 3-d rows, where the worst case is the only
/// bound) no estimate's error exceeds its worst-case bound, and at most one estimate in 1,000
/// errs beyond the probable bound (a normal deviate beyond [`PROBABLE_DEVIATIONS`]: 6·10⁻⁵;
/// measured: up to 4.1 deviations over 80,000 estimates, as a normal sample of that size has).
#[test]
fn estimation_errors_stay_within_their_bounds() {
    let widened: Vec<f32> = testdata::demo()[..4_000 * testdata::DIMS].iter().map(|x| x.to_f32()).collect();
    let low: Vec<f32> = random_rows(4_000, 3, 9, Metric::L2);
    for (rows, dims) in [(&widened, testdata::DIMS), (&low, 3)] {
        for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
            let (stored, _) = prepare_rows(rows, dims, metric);
            let store = VectorStore::new(Elements::F32(&stored), dims, metric).unwrap();
            for bits in [4u8, 2, 1] {
                let flat =
                    QuantizedFlat::build(&store, &QuantizerParams { bits, ..QuantizerParams::default() }).unwrap();
                let (quantizer, codes) = (flat.quantizer(), flat.codes().view());
                let (mut worst_probable, mut beyond, mut estimates) = (0f32, 0usize, 0usize);
                for q in 0..20 {
                    let query = Query::new(&rows[q * 97 * dims..(q * 97 + 1) * dims], metric);
                    let prepared = quantizer.prepare(&query);
                    let constant = quantizer.center_constant(&prepared, quantizer.center());
                    let exact_bounds = codes.lower_bounds(&prepared, constant, Certainty::Exact).unwrap();
                    let probable = codes.lower_bounds(&prepared, constant, Certainty::Probable).unwrap();
                    codes.scan(&prepared, constant, 0..store.len(), |pos, estimate| {
                        let distance = store.distance(&query, pos);
                        assert!(
                            exact_bounds.of(pos, estimate) <= distance,
                            "{metric:?} {bits}-bit {dims}-d row {pos}: bound {} above distance {distance}",
                            exact_bounds.of(pos, estimate)
                        );
                        let allowed = estimate - probable.of(pos, estimate);
                        estimates += 1;
                        beyond += usize::from(probable.of(pos, estimate) > distance);
                        if allowed > 0.0 {
                            worst_probable = worst_probable.max((estimate - distance) / allowed * PROBABLE_DEVIATIONS);
                        }
                    });
                }
                println!(
                    "{metric:?} {bits}-bit {dims}-d: largest error {worst_probable:.2} probable deviations, \
                     {beyond} of {estimates} beyond"
                );
                assert!(beyond * 1_000 <= estimates, "{metric:?} {bits}-bit {dims}-d: {beyond} of {estimates}");
            }
        }
    }
}
