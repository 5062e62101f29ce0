//! Vector segments through the [`SegmentType`] contract: IVF segments of a `bit` column (lists
//! of packed bit rows) build and merge like other IVF segments and answer exactly when every
//! list is probed.

use std::sync::Arc;

use strata_engine::bit_rows::{distance_between, pack};
use strata_engine::bit_value::Bits;
use strata_engine::bitset::Bitset;
use strata_engine::metric::Metric;
use strata_engine::segment::{IndexKind, SearchParams, Segment};
use strata_engine::store::{ColumnType, ElementKind};

use super::*;
use crate::directory::memory::MemoryDirectory;
use crate::options::IndexOptions;
use crate::segment_type::{BuildWork, MergeInput, SegmentType};

const BITS: u32 = 100;

/// The packed row of TID `tid`: 100 bits from a xorshift of the TID, so rows differ.
fn row_of(tid: u64) -> Vec<f32> {
    let mut state = tid.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let bytes: Vec<u8> = (0..BITS.div_ceil(8))
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    pack(Bits::new(BITS, &bytes).unwrap())
}

fn rows(tids: impl IntoIterator<Item = u64>) -> VectorRows {
    let ids: Vec<u64> = tids.into_iter().collect();
    let vectors: Vec<f32> = ids.iter().flat_map(|&t| row_of(t)).collect();
    VectorRows { ids, vectors: vectors.into(), filters: Vec::new() }
}

/// The `k` smallest distances from `query` to the rows of `tids`, ascending.
fn oracle(tids: impl IntoIterator<Item = u64>, query: &[f32], metric: Metric, k: usize) -> Vec<f32> {
    let mut d: Vec<f32> = tids.into_iter().map(|t| distance_between(query, &row_of(t), metric)).collect();
    d.sort_by(f32::total_cmp);
    d.truncate(k);
    d
}

#[test]
fn bit_ivf_segments_build_and_merge_like_other_ivf_segments() {
    for metric in [Metric::Hamming, Metric::Jaccard] {
        let options = IndexOptions { kind: Some("ivf".into()), lists: Some(6), ..IndexOptions::default() };
        let config = IndexConfig::from_options(BITS, metric, ColumnType::Bit, &options).unwrap();
        assert_eq!((config.element, config.vector_kind()), (ElementKind::Bits, IndexKind::Ivf { lists: 6, bits: 0 }));
        let files = VectorFiles::new(Arc::new(MemoryDirectory::new()));
        files.create(config).unwrap();
        let work = BuildWork::new(2);
        let first = Segment::build(&files, &config, rows(0..300), &work).unwrap();
        let second = Segment::build(&files, &config, rows(300..500), &work).unwrap();
        let open = |built: &strata_engine::segment::BuiltSegment| Segment::from_bytes(&built.to_bytes()).unwrap();
        let (first, second) = (open(&first), open(&second));
        assert_eq!(first.meta().kind, IndexKind::Ivf { lists: 6, bits: 0 });
        let mut deleted = Bitset::new(first.len());
        (0..first.len()).filter(|r| r % 7 == 0).for_each(|r| deleted.insert(r));
        let gone: Vec<u64> = deleted.iter().map(|r| first.id(r)).collect();
        let inputs =
            vec![MergeInput { segment: first, deleted: Some(deleted) }, MergeInput { segment: second, deleted: None }];
        let merged = open(&Segment::merge(&config, inputs, &work).unwrap());
        assert_eq!(merged.len(), 500 - gone.len());
        assert!(matches!(merged.meta().kind, IndexKind::Ivf { bits: 0, .. }));
        assert!(merged.stores_vectors(), "{metric:?}: bit IVF segments keep their rows");
        let live = || (0..500).filter(|t| !gone.contains(t));
        let all = SearchParams { probes: 1000, ..SearchParams::default() };
        for q in [7u64, 1_000, 2_000, 3_000] {
            let query = row_of(q);
            let found = SegmentType::search(&merged, &query, 10, &all, None);
            let distances: Vec<f32> = found.iter().map(|n| n.distance).collect();
            assert_eq!(distances, oracle(live(), &query, metric, 10), "{metric:?}: query {q}");
            assert!(found.iter().all(|n| !gone.contains(&merged.id(n.row as usize))));
        }
    }
}
