//! One round of an ordered scan over an index's vector segments and memtables: what
//! pg_strata's [`Sources`](super::Sources) implementation runs on each snapshot.
//!
//! Each segment is searched for its `depth` nearest live rows (deleted rows left out, rows named
//! by their TIDs), the memtables together for theirs (exact distances to the prepared query).
//! With a [`Parallel`] runner and more than one segment, every segment and the memtables are
//! searched as separate jobs; the result is the same either way. Lists of segments that keep
//! vectors are exact, those of segments with codes only are estimated (reranked by the scan);
//! the memtables' list is exact and comes last among the exact lists.

use std::sync::Arc;

use strata_engine::bitset::RowPredicate;
use strata_engine::segment::SearchParams;
use strata_engine::store::Query;
use strata_engine::topk::{Neighbor, TopK};

use super::Candidates;
use crate::memtable::Memtable;
use crate::slabs::SlabMemory;
use crate::vector::OpenVectorSegment;

/// Runs independent jobs, possibly on other threads (pg_strata: the search pool's helper
/// threads, which make no PostgreSQL calls).
pub trait Parallel {
    /// Runs every job of `jobs` once and returns when all have finished.
    fn run_all<'s>(&self, jobs: Vec<Box<dyn FnOnce() + Send + 's>>);
}

/// What one round found.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// The lists for [`Scan`](super::Scan): per segment (in the order given), exact or
    /// estimated, then the memtables' exact list.
    pub candidates: Candidates,
    /// Memtable rows examined (EXPLAIN reports it).
    pub memtable_rows: u64,
}

/// The `depth` nearest live rows of one segment to `query`, as (TID, distance), nearest first.
pub fn search_segment(open: &OpenVectorSegment, query: &[f32], depth: usize, params: &SearchParams) -> Vec<Neighbor> {
    let predicate = RowPredicate { filter: None, deleted: open.deleted.as_ref() };
    open.segment
        .search(query, depth, params, predicate)
        .into_iter()
        .map(|n| Neighbor::new(open.segment.id(n.row as usize), n.distance))
        .collect()
}

/// The `depth` nearest live rows of all `memtables` to `query` (exact), nearest first, and the
/// number of rows examined.
pub fn search_memtables<M: SlabMemory + ?Sized>(
    memtables: &[Memtable<'_, M>],
    query: &Query,
    depth: usize,
) -> (Vec<Neighbor>, u64) {
    let mut top = TopK::new(depth);
    let mut rows = 0;
    for memtable in memtables {
        memtable.for_each_live(|tid, vector| {
            rows += 1;
            top.push(Neighbor::new(tid, query.distance_f32(vector)));
        });
    }
    (top.into_sorted(), rows)
}

/// Searches `segments` and `memtables` for their `depth` nearest rows to the query (`values` as
/// given, for segments; `prepared` for the metric, for memtables), in parallel on `parallel`
/// when there is more than one segment.
pub fn search<M: SlabMemory + Sync + ?Sized>(
    segments: &[Arc<OpenVectorSegment>],
    memtables: &[Memtable<'_, M>],
    values: &[f32],
    prepared: &Query,
    depth: usize,
    params: &SearchParams,
    parallel: Option<&dyn Parallel>,
) -> Found {
    let mut lists: Vec<Vec<Neighbor>> = vec![Vec::new(); segments.len()];
    let (memtable_list, memtable_rows) = if let Some(parallel) = parallel.filter(|_| segments.len() > 1) {
        let mut memtable_result = (Vec::new(), 0);
        let mut jobs: Vec<Box<dyn FnOnce() + Send + '_>> = Vec::with_capacity(segments.len() + 1);
        for (open, out) in segments.iter().zip(lists.iter_mut()) {
            jobs.push(Box::new(move || *out = search_segment(open, values, depth, params)));
        }
        let memtable_out = &mut memtable_result;
        jobs.push(Box::new(move || *memtable_out = search_memtables(memtables, prepared, depth)));
        parallel.run_all(jobs);
        memtable_result
    } else {
        for (open, out) in segments.iter().zip(lists.iter_mut()) {
            *out = search_segment(open, values, depth, params);
        }
        search_memtables(memtables, prepared, depth)
    };
    let mut candidates = Candidates::default();
    for (list, open) in lists.into_iter().zip(segments) {
        if open.segment.stores_vectors() {
            candidates.exact.push(list);
        } else {
            candidates.estimated.push(list);
        }
    }
    candidates.exact.push(memtable_list);
    Found { candidates, memtable_rows }
}

#[cfg(all(test, feature = "shuttle"))]
mod tests {
    use strata_engine::metric::Metric;
    use strata_engine::segment::{IndexKind, Segment};
    use strata_engine::store::ElementKind;

    use super::*;
    use crate::directory::memory::MemoryDirectory;
    use crate::manifest::IndexConfig;
    use crate::memtable::{Insert, MemtableLayout};
    use crate::segment_type::{BuildWork, SegmentType};
    use crate::slabs::test_region::{TestLock, TestRegion};
    use crate::slabs::Slabs;
    use crate::vacuum::vacuum_segments;
    use crate::vector::{VectorFiles, VectorRows, VectorSegmentSet};

    fn vector_of(tid: u64) -> [f32; 2] {
        [(tid % 13) as f32 + tid as f32 / 1000.0, (tid % 7) as f32]
    }

    /// An index's segments holding `segments` (TIDs each), VACUUM having removed `dead`: flat
    /// (exact), or IVF without vectors (estimated) when `rerank_from_heap`.
    fn segment_set(rerank_from_heap: bool, segments: &[Vec<u64>], dead: u64) -> VectorSegmentSet {
        let config = IndexConfig {
            dims: 2,
            metric: Metric::L2,
            element: ElementKind::F32,
            kind: if rerank_from_heap { IndexKind::Ivf { lists: 1, bits: 4 } } else { IndexKind::Flat },
            memtable_rows: 8,
            rerank_from_heap,
        };
        let files = VectorFiles::new(Arc::new(MemoryDirectory::new()));
        let manifest = files.create(config).unwrap();
        for (n, tids) in segments.iter().enumerate() {
            let rows = VectorRows { ids: tids.clone(), vectors: tids.iter().flat_map(|&t| vector_of(t)).collect() };
            let built = Segment::build(&files, &config, rows, &BuildWork::new(1)).unwrap();
            files.publish_segment(&built, manifest.next_id + n as u64, Vec::new(), 0, |_| {}).unwrap();
        }
        let set = VectorSegmentSet::open(&files, None).unwrap();
        vacuum_segments(&files, &set, &mut |tid| tid == dead, || 0, |_| {}).unwrap();
        VectorSegmentSet::open(&files, None).unwrap()
    }

    /// The `depth` nearest of `tids` by exact distance.
    fn nearest(tids: impl IntoIterator<Item = u64>, query: &Query, depth: usize) -> Vec<u64> {
        let mut top = TopK::new(depth);
        for tid in tids {
            top.push(Neighbor::new(tid, query.distance_f32(&vector_of(tid))));
        }
        top.into_sorted().into_iter().map(|n| n.row).collect()
    }

    fn rows(list: &[Neighbor]) -> Vec<u64> {
        list.iter().map(|n| n.row).collect()
    }

    /// Runs the jobs one by one, last first: results must not depend on the order.
    struct Backwards;

    impl Parallel for Backwards {
        fn run_all<'s>(&self, jobs: Vec<Box<dyn FnOnce() + Send + 's>>) {
            for job in jobs.into_iter().rev() {
                job();
            }
        }
    }

    /// Each segment's list is its `depth` nearest live rows by TID (brute force), exact for
    /// segments with vectors and estimated for the others; the memtables' list comes last and is
    /// their `depth` nearest rows; a parallel runner finds the same.
    #[test]
    fn a_round_returns_each_sources_nearest_live_rows() {
        // Segment searches need more stack than shuttle's default of 32 KiB per thread (HNSW and
        // filtered-search frames overflow it, which shows as a SIGSEGV).
        let mut config = shuttle::Config::new();
        config.stack_size = 1 << 20;
        let runner = shuttle::Runner::new(shuttle::scheduler::RandomScheduler::new(1), config);
        runner.run(|| {
            let (region, lock) = (TestRegion::new(2, 8, 2, 1), TestLock::default());
            let slabs = Slabs::new(&region, &lock);
            let allocation = slabs.allocate(0, MemtableLayout::new(8, 2), || 1).unwrap();
            allocation.activate();
            let pin = slabs.pin_active(0).unwrap();
            for tid in 1..=6 {
                assert_eq!(pin.insert(tid, &vector_of(tid)), Insert::Done);
            }
            drop(pin);
            let exact = segment_set(false, &[(100..130).collect(), (200..240).collect()], 107);
            let estimated = segment_set(true, &[(300..340).collect(), (400..440).collect()], 0);
            let (memtables, ()) = slabs.snapshot(0, || ());
            let values = [3.0, 2.0];
            let query = Query::new(&values, Metric::L2);
            let (depth, params) = (5, SearchParams::default());
            let round = |set: &VectorSegmentSet, memtables: &[Memtable<'_, TestRegion>], parallel| {
                search(&set.segments, memtables, &values, &query, depth, &params, parallel)
            };
            let sequential = round(&exact, &memtables, None);
            let parallel = round(&exact, &memtables, Some(&Backwards));
            for found in [&sequential, &parallel] {
                assert_eq!(found.memtable_rows, 6);
                assert!(found.candidates.estimated.is_empty());
                let lists: Vec<Vec<u64>> = found.candidates.exact.iter().map(|l| rows(l)).collect();
                assert_eq!(
                    lists,
                    vec![
                        nearest((100..130).filter(|&t| t != 107), &query, depth),
                        nearest(200..240, &query, depth),
                        nearest(1..=6, &query, depth),
                    ]
                );
            }
            let sequential = round(&estimated, &[], None);
            let parallel = round(&estimated, &[], Some(&Backwards));
            for found in [&sequential, &parallel] {
                assert_eq!((found.memtable_rows, found.candidates.exact.as_slice()), (0, &[Vec::new()][..]));
                assert_eq!(found.candidates.estimated.len(), 2);
                for (list, tids) in found.candidates.estimated.iter().zip([300..340, 400..440]) {
                    // Code-only segments return an oversampled pool of estimates.
                    assert!(list.len() >= depth);
                    assert!(list.iter().all(|n| tids.contains(&n.row)));
                }
            }
            let estimated_rows = |found: &Found| found.candidates.estimated.iter().map(|l| rows(l)).collect::<Vec<_>>();
            assert_eq!(estimated_rows(&sequential), estimated_rows(&parallel));
        });
    }
}
