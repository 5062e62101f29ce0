//! Segments without vectors: estimates reranked by the caller, and merges that copy codes.
//! Oracles: exact distances from the raw vectors (brute force), and the input segments' own
//! estimates (a merge must not change any).

use std::collections::HashMap;

use super::tests::{oracle, recall_at_10, DIMS};
use super::*;
use crate::bitset::Bitset;
use crate::metric::Metric;
use crate::testdata::demo_rows;

fn options(lists: u32, store_vectors: bool) -> BuildOptions {
    BuildOptions {
        kind: IndexKind::Ivf { lists, bits: 4 },
        metric: Metric::Cosine,
        element: ElementKind::F32,
        seed: 9,
        threads: 2,
        store_vectors,
        cancel: crate::cancel::Cancel::default(),
    }
}

/// Reranks candidates with exact distances from `raw`, as a caller holding the vectors does.
fn rerank_from(
    raw: &[f32],
    query: &[f32],
    candidates: &[Neighbor],
    ids_to_rows: impl Fn(u64) -> usize,
) -> Vec<Neighbor> {
    let mut exact: Vec<Neighbor> = candidates
        .iter()
        .map(|c| {
            let row = ids_to_rows(c.row);
            let d = oracle(&raw[row * DIMS..(row + 1) * DIMS], query, Metric::Cosine, RowPredicate::default(), 1)[0].1;
            Neighbor::new(row as u64, d)
        })
        .collect();
    exact.sort_by(|a, b| a.distance.total_cmp(&b.distance).then(a.row.cmp(&b.row)));
    exact.truncate(10);
    exact
}

#[test]
fn compact_ivf_keeps_no_vectors_and_returns_reranked_candidates() {
    let (raw, queries) = demo_rows(3000, 20);
    let full = Segment::from_bytes(
        &build_segment(&options(16, true), (0..3000).collect(), raw.clone(), DIMS).unwrap().to_bytes(),
    )
    .unwrap();
    let built = build_segment(&options(16, false), (0..3000).collect(), raw.clone(), DIMS).unwrap();
    assert!(!built.sections().iter().any(|(tag, _)| *tag == TAG_VECTORS));
    let compact = Segment::from_bytes(&built.to_bytes()).unwrap();
    assert!(!compact.stores_vectors() && compact.store().is_none() && full.stores_vectors());
    // 4-bit codes of 384 dimensions are 192 bytes against 1,536 for the f32 vector.
    assert!(compact.byte_len() * 5 < full.byte_len(), "{} vs {}", compact.byte_len(), full.byte_len());
    let params = SearchParams { ef_search: 10, probes: 16, oversample: 4.0 };
    let mut total = 0.0;
    for query in queries.chunks_exact(DIMS) {
        let candidates = compact.search(query, 10, &params, RowPredicate::default());
        assert_eq!(candidates.len(), 40, "⌈oversample · k⌉ candidates");
        assert!(candidates.windows(2).all(|w| w[0].distance <= w[1].distance), "sorted by estimate");
        let got = rerank_from(&raw, query, &candidates, |id| id as usize);
        total += recall_at_10(&got, &oracle(&raw, query, Metric::Cosine, RowPredicate::default(), 10));
    }
    // Tolerance: the same codes and rerank depth as the stored-vector IVF test (0.99).
    assert!(total / 20.0 >= 0.99, "recall {}", total / 20.0);
}

#[test]
fn merging_compact_segments_copies_codes_and_leaves_deleted_rows_out() {
    let (raw, queries) = demo_rows(3000, 10);
    let first = build_segment(&options(12, false), (0..1800).collect(), raw[..1800 * DIMS].to_vec(), DIMS).unwrap();
    let first = Segment::from_bytes(&first.to_bytes()).unwrap();
    let quantizer = first.quantizer().unwrap();
    let second = build_segment_with_quantizer(
        &options(9, false),
        (1800..3000).collect(),
        raw[1800 * DIMS..].to_vec(),
        DIMS,
        Some(&quantizer),
    )
    .unwrap();
    let second = Segment::from_bytes(&second.to_bytes()).unwrap();
    assert_eq!(second.quantizer().unwrap(), quantizer);
    let mut deleted = Bitset::new(1800);
    for row in (0..1800).step_by(7) {
        deleted.insert(row);
    }
    let sources =
        [MergeSource { segment: &first, deleted: Some(&deleted) }, MergeSource { segment: &second, deleted: None }];
    let merged = merge_segments(&options(20, false), &sources).unwrap();
    let merged = Segment::from_bytes(&merged.to_bytes()).unwrap();
    let kept = 3000 - deleted.count();
    assert_eq!(merged.len(), kept);
    assert!(matches!(merged.meta().kind, IndexKind::Ivf { lists, .. } if lists <= 20));
    let mut ids: Vec<u64> = merged.ids().to_vec();
    ids.sort_unstable();
    let want: Vec<u64> = (0..3000u64).filter(|&id| id >= 1800 || !deleted.contains(id as usize)).collect();
    assert_eq!(ids, want, "every kept row once, no deleted row");

    // Every estimate is unchanged: probing every list with a pool of all rows returns each
    // row's estimate, which must equal the input's bit for bit.
    let all = SearchParams { ef_search: 10, probes: usize::MAX, oversample: 1.0 };
    for query in queries.chunks_exact(DIMS).take(3) {
        let mut before: HashMap<u64, u32> = HashMap::new();
        for (segment, rows) in [(&first, 1800), (&second, 1200)] {
            for n in segment.search(query, rows, &all, RowPredicate::default()) {
                before.insert(segment.id(n.row as usize), n.distance.to_bits());
            }
        }
        let after = merged.search(query, kept, &all, RowPredicate::default());
        assert_eq!(after.len(), kept);
        for n in after {
            let id = merged.id(n.row as usize);
            assert_eq!(before[&id], n.distance.to_bits(), "estimate of id {id} changed");
        }
    }

    // Merged lists still find the neighbours: recall at automatic probes, reranked exactly,
    // within 0.05 of a segment clustered from scratch over the same rows.
    let rows: Vec<usize> = want.iter().map(|&id| id as usize).collect();
    let kept_raw: Vec<f32> = rows.iter().flat_map(|&r| raw[r * DIMS..(r + 1) * DIMS].to_vec()).collect();
    let fresh = build_segment(&options(20, false), want.clone(), kept_raw, DIMS).unwrap();
    let fresh = Segment::from_bytes(&fresh.to_bytes()).unwrap();
    let auto = SearchParams { ef_search: 10, probes: 0, oversample: 4.0 };
    let mut deleted_all = Bitset::new(3000);
    for row in (0..1800).step_by(7) {
        deleted_all.insert(row);
    }
    let live = RowPredicate { filter: None, deleted: Some(&deleted_all) };
    let (mut merged_recall, mut fresh_recall) = (0.0, 0.0);
    for query in queries.chunks_exact(DIMS) {
        let want = oracle(&raw, query, Metric::Cosine, live, 10);
        for (segment, total) in [(&merged, &mut merged_recall), (&fresh, &mut fresh_recall)] {
            let candidates = segment.search(query, 10, &auto, RowPredicate::default());
            let got = rerank_from(&raw, query, &candidates, |row| segment.id(row as usize) as usize);
            *total += recall_at_10(&got, &want) / 10.0;
        }
    }
    assert!(merged_recall >= fresh_recall - 0.05, "merged {merged_recall} vs fresh {fresh_recall}");
}

#[test]
fn merges_refuse_mixed_quantizers_and_segments_with_vectors() {
    let (raw, _) = demo_rows(600, 1);
    let a = build_segment(&options(4, false), (0..300).collect(), raw[..300 * DIMS].to_vec(), DIMS).unwrap();
    let b = build_segment(&options(4, false), (300..600).collect(), raw[300 * DIMS..].to_vec(), DIMS).unwrap();
    let (a, b) = (Segment::from_bytes(&a.to_bytes()).unwrap(), Segment::from_bytes(&b.to_bytes()).unwrap());
    assert_ne!(a.quantizer(), b.quantizer(), "trained on different rows");
    let err = merge_segments(
        &options(8, false),
        &[MergeSource { segment: &a, deleted: None }, MergeSource { segment: &b, deleted: None }],
    )
    .unwrap_err();
    assert!(err.to_string().contains("another quantizer"), "{err}");
    let full = build_segment(&options(4, true), (0..300).collect(), raw[..300 * DIMS].to_vec(), DIMS).unwrap();
    let full = Segment::from_bytes(&full.to_bytes()).unwrap();
    let err = merge_segments(&options(8, false), &[MergeSource { segment: &full, deleted: None }]).unwrap_err();
    assert!(err.to_string().contains("without vectors"), "{err}");
    let mut all = Bitset::new(300);
    (0..300).for_each(|r| all.insert(r));
    let err = merge_segments(&options(8, false), &[MergeSource { segment: &a, deleted: Some(&all) }]).unwrap_err();
    assert!(err.to_string().contains("at least one kept row"), "{err}");
    let flat = BuildOptions { kind: IndexKind::Flat, ..options(0, false) };
    let err = build_segment(&flat, vec![1], raw[..DIMS].to_vec(), DIMS).unwrap_err();
    assert!(err.to_string().contains("only IVF"), "{err}");
}

#[test]
fn meta_and_sections_must_agree_about_vectors() {
    let (raw, _) = demo_rows(100, 1);
    let full = build_segment(&options(4, true), (0..100).collect(), raw.clone(), DIMS).unwrap();
    let compact = build_segment(&options(4, false), (0..100).collect(), raw, DIMS).unwrap();
    // A compact META over a file that has VECTORS, and a full META over one that has none.
    let swap_meta = |donor: &BuiltSegment, body: &BuiltSegment| {
        let mut sections: Vec<(u32, Vec<u8>)> = body.sections().into_iter().map(|(t, b)| (t, b.into_owned())).collect();
        sections[0].1 = donor.meta().encode().to_vec();
        let refs: Vec<(u32, &[u8])> = sections.iter().map(|(t, b)| (*t, b.as_slice())).collect();
        Segment::from_bytes(&crate::format::encode(&refs).unwrap())
    };
    let err = swap_meta(&compact, &full).unwrap_err();
    assert!(err.to_string().contains("VECTORS section present"), "{err}");
    assert!(swap_meta(&full, &compact).is_err(), "a full META needs the VECTORS section");
}
