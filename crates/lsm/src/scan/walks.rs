//! The graph walks of a scan's segments, kept from one round to the next.

use std::collections::HashMap;
use std::sync::Arc;

use strata_engine::hnsw::ResumableSearch;

use crate::vector::OpenVectorSegment;

/// The graph walks of one scan's segments, kept across its rounds by segment id, so that a
/// deeper round continues each segment's walk instead of starting over
/// ([`ResumableSearch`]). A scan that starts over (a rescan, another query) takes a fresh one.
#[derive(Debug, Default)]
pub struct SegmentWalks {
    walks: HashMap<u64, ResumableSearch>,
}

impl SegmentWalks {
    /// No walk yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every walk (the scan starts over).
    pub fn clear(&mut self) {
        self.walks.clear();
    }

    /// The walks of `segments`, in their order (fresh ones for segments not walked yet); walks
    /// of segments no longer in the set are dropped.
    pub(super) fn take_for(&mut self, segments: &[Arc<OpenVectorSegment>]) -> Vec<ResumableSearch> {
        let walks: Vec<ResumableSearch> =
            segments.iter().map(|open| self.walks.remove(&open.entry.id).unwrap_or_default()).collect();
        self.walks.clear();
        walks
    }

    /// Keeps `walks` (aligned with `segments`) for the next round.
    pub(super) fn put_back(&mut self, segments: &[Arc<OpenVectorSegment>], walks: Vec<ResumableSearch>) {
        self.walks.extend(segments.iter().map(|open| open.entry.id).zip(walks));
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use strata_engine::metric::Metric;
    use strata_engine::segment::{IndexKind, SearchParams, Segment};
    use strata_engine::store::ElementKind;
    use strata_engine::topk::{Neighbor, TopK};

    use super::*;
    use crate::directory::memory::MemoryDirectory;
    use crate::manifest::IndexConfig;
    use crate::memtable::Memtable;
    use crate::scan::round::{search_continuing, search_with_codes};
    use crate::scan::{ScanQuery, Sharing};
    use crate::segment_type::{BuildWork, SegmentType};
    use crate::slabs::test_region::TestRegion;
    use crate::vector::{VectorFiles, VectorRows, VectorSegmentSet};

    const DIMS: usize = 8;

    fn vectors(rows: usize, seed: u64) -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..rows * DIMS).map(|_| rng.gen::<f32>()).collect()
    }

    /// Rounds 10, 20, …, 640 deep over one HNSW segment, continuing its walk, give lists as good
    /// as fresh searches at each depth (recall against brute force, tolerance 0.01), and the
    /// walk is kept between rounds.
    #[test]
    fn rounds_continuing_their_walks_find_what_fresh_rounds_find() {
        let rows = 4_000;
        let values = vectors(rows, 1);
        let config = IndexConfig {
            dims: DIMS as u32,
            metric: Metric::L2,
            element: ElementKind::F32,
            kind: IndexKind::Hnsw { m: 8, ef_construction: 32 }.into(),
            memtable_rows: 8,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        };
        let files = VectorFiles::new(Arc::new(MemoryDirectory::new()));
        let manifest = files.create(config).unwrap();
        let ids: Vec<u64> = (1..=rows as u64).collect();
        let built = Segment::build(
            &files,
            &config,
            VectorRows { ids: ids.clone(), vectors: values.clone().into(), filters: Vec::new() },
            &BuildWork::new(1),
        )
        .unwrap();
        files.publish_segment(&built, manifest.next_id, Vec::new(), 0, |_| {}).unwrap();
        let set = VectorSegmentSet::open(&files, None).unwrap();
        let no_memtables: &[Memtable<'_, TestRegion>] = &[];
        let (mut continued_hits, mut fresh_hits, mut total) = (0, 0, 0);
        for (q, query) in vectors(20, 2).chunks_exact(DIMS).enumerate() {
            let query = ScanQuery::l2_for_tests(query);
            let mut walks = SegmentWalks::new();
            for depth in [10, 20, 40, 80, 160, 320, 640] {
                let params = SearchParams { ef_search: depth, ..SearchParams::default() };
                let continued = search_continuing(
                    &set.segments,
                    no_memtables,
                    &[],
                    &query,
                    depth,
                    &params,
                    Sharing::Uniform,
                    None,
                    &mut walks,
                );
                assert_eq!(walks.walks.len(), 1, "the segment's walk is kept");
                let fresh =
                    search_with_codes(&set.segments, no_memtables, &[], &query, depth, &params, Sharing::Uniform, None);
                let (continued, fresh) = (&continued.candidates.exact[0], &fresh.candidates.exact[0]);
                assert_eq!(continued.len(), depth, "query {q} depth {depth}");
                assert!(continued.windows(2).all(|p| p[0].order(&p[1]).is_lt()), "sorted, no duplicates");
                let mut truth = TopK::new(depth);
                for (row, vector) in values.chunks_exact(DIMS).enumerate() {
                    truth.push(Neighbor::new(row as u64 + 1, query.prepared.distance_f32(vector)));
                }
                let truth: Vec<u64> = truth.into_sorted().iter().map(|n| n.row).collect();
                continued_hits += continued.iter().filter(|n| truth.contains(&(n.row))).count();
                fresh_hits += fresh.iter().filter(|n| truth.contains(&(n.row))).count();
                total += depth;
            }
        }
        let (continued, fresh) = (continued_hits as f64 / total as f64, fresh_hits as f64 / total as f64);
        assert!(continued >= fresh - 0.01, "recall continued {continued} against fresh {fresh}");
    }
}
