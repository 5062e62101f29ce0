//! One round of an ordered scan over an index's vector segments and memtables: what
//! pg_strata's [`Sources`](super::Sources) implementation runs on each snapshot.
//!
//! Each segment is searched for its `depth` nearest live rows (deleted rows left out, rows named
//! by their TIDs), the memtables together for theirs (exact distances to the prepared query).
//! With a filter (the query's predicate over the index's filter columns), segments search only
//! the rows it allows, each with its own strategy ([`strata_engine::segment::FilteredSearch`]),
//! and memtables skip the rows it does not admit, before any distance is computed.
//! With a [`Parallel`] runner and at least two searches worth it ([`worth_parallel_round`]),
//! every segment and each large memtable (the small ones together) are searched as separate
//! jobs; the result is the same either way. Lists of segments that keep
//! vectors are exact, those of segments with codes only are estimated (reranked by the scan);
//! the memtables' list is exact and comes last among the exact lists. With
//! [`Sharing::Proportional`] the memtables together are searched as deep as a segment of their
//! filled slots would be ([`memtable_depth`]), their list then shallow like such a segment's.

use std::sync::Arc;

use strata_engine::bitset::RowPredicate;
use strata_engine::hnsw::ResumableSearch;

pub use super::walks::SegmentWalks;
use strata_engine::filter::plan::Strategy;
use strata_engine::segment::{AllowSet, FilteredSearch, IndexKind, SearchParams, Segment};
use strata_engine::topk::{Neighbor, TopK};

use super::memtable_codes::MemtableCodes;
use super::{budget, Candidates, ScanQuery, ShallowList, Sharing};
use crate::dead_rows::{live_ef, RowOrigins};
use crate::memtable::Memtable;
use crate::slabs::SlabMemory;
use crate::vector::OpenVectorSegment;

/// Runs independent jobs, possibly on other threads (pg_strata: the search pool's helper
/// threads, which make no PostgreSQL calls).
pub trait Parallel {
    /// Runs every job of `jobs` once and returns when all have finished.
    fn run_all<'s>(&self, jobs: Vec<Box<dyn FnOnce() + Send + 's>>);

    /// The rows a segment's search must consider for it to be worth a job of its own
    /// ([`worth_parallel`]).
    fn min_rows(&self) -> usize {
        PARALLEL_MIN_ROWS
    }
}

/// What one round found.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// The lists for [`Scan`](super::Scan): per segment (in the order given), exact or
    /// estimated, then the memtables' exact list.
    pub candidates: Candidates,
    /// Memtable rows examined (EXPLAIN reports it).
    pub memtable_rows: u64,
    /// What filtered searches did (all zero without a filter).
    pub filtered: FilterReport,
    /// Time spent searching memtables, ns (EXPLAIN ANALYZE reports it).
    pub memtable_nanos: u64,
    /// Time spent searching segments, summed over segments (on helper threads, their sum
    /// exceeds the round's wall time), ns.
    pub segment_nanos: u64,
    /// Where the rows of each segment's list came from, in segment order (for
    /// [`DeadRowReports`](crate::dead_rows::DeadRowReports)).
    pub origins: Vec<RowOrigins<Segment>>,
}

/// Nanoseconds since `started`, saturating.
fn nanos_since(started: std::time::Instant) -> u64 {
    u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// What the filtered searches of a round did, for EXPLAIN.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilterReport {
    /// Segments whose results came from each strategy, indexed by [`strategy_slot`]: exact scan,
    /// filtered graph, post-check.
    pub segments_by_strategy: [u64; 3],
    /// Rows the filter allowed in the segments (not deleted).
    pub segment_rows_allowed: u64,
    /// Rows whose distance the segments computed, where their kinds count them.
    pub segment_rows_checked: u64,
    /// Memtable rows the filter admitted.
    pub memtable_rows_admitted: u64,
}

/// The position of `strategy` in [`FilterReport::segments_by_strategy`].
pub fn strategy_slot(strategy: Strategy) -> usize {
    match strategy {
        Strategy::ExactScan => 0,
        Strategy::FilteredGraph => 1,
        Strategy::PostCheck => 2,
    }
}

impl FilterReport {
    /// Nothing filtered.
    pub const NONE: Self = Self {
        segments_by_strategy: [0; 3],
        segment_rows_allowed: 0,
        segment_rows_checked: 0,
        memtable_rows_admitted: 0,
    };

    fn add_segment(&mut self, search: &FilteredSearch) {
        self.segments_by_strategy[strategy_slot(search.ran)] += 1;
        self.segment_rows_allowed += search.allowed as u64;
        self.segment_rows_checked += search.rows_checked.unwrap_or(0) as u64;
    }
}

/// One segment's list and, for a filtered search, what it did.
type SegmentResult = (Vec<Neighbor>, Option<FilteredSearch>);

/// The `depth` nearest live rows of one segment to `query` that its filter admits, as (segment
/// row, distance), nearest first; with a filter, also what the filtered search did (its results
/// moved out). Rows VACUUM deleted and rows hinted dead in this process
/// ([`OpenSegment::skipped_rows`](crate::segment_set::OpenSegment::skipped_rows)) are left out,
/// and the candidate list grows by the fraction of dead rows the segment returned lately or by
/// `dead_prior` ([`dead_prior`]), whichever is larger ([`live_ef`]).
///
/// # Panics
/// When the segment cannot evaluate the query's filter (an index with filter columns whose
/// segment lacks them): the caller's damaged-segment handling applies.
pub fn search_segment(
    open: &OpenVectorSegment,
    query: &ScanQuery,
    depth: usize,
    params: &SearchParams,
    dead_prior: f64,
) -> SegmentResult {
    search_segment_continuing(open, query, depth, params, dead_prior, None)
}

/// [`search_segment`], continuing `walk` (the segment's graph walk for this query in earlier
/// rounds of the same scan, [`SegmentWalks`]) when the query has no filter of the index's own.
fn search_segment_continuing(
    open: &OpenVectorSegment,
    query: &ScanQuery,
    depth: usize,
    params: &SearchParams,
    dead_prior: f64,
    walk: Option<&mut ResumableSearch>,
) -> SegmentResult {
    let skipped = open.skipped_rows();
    let dead = open.hints.dead_fraction().max(dead_prior);
    let params = &SearchParams { ef_search: live_ef(params.ef_search, dead), ..*params };
    match &query.filter {
        None => {
            let predicate = RowPredicate { filter: None, deleted: skipped.bitset() };
            let list = match walk {
                Some(walk) => open.segment.search_resumable(walk, &query.values, depth, params, predicate),
                None => open.segment.search(&query.values, depth, params, predicate),
            };
            (list, None)
        }
        Some(filter) => {
            let mut search = open
                .segment
                .search_filtered(&query.values, depth, params, AllowSet::Predicate(filter), skipped.bitset())
                .unwrap_or_else(|e| panic!("segment filter columns: {e}"));
            let list = std::mem::take(&mut search.results);
            (list, Some(search))
        }
    }
}

/// The `depth` nearest live rows of all `memtables` to `query` (exact) that its filter admits,
/// nearest first, the number of rows examined and the number admitted.
pub fn search_memtables<M: SlabMemory + ?Sized>(
    memtables: &[Memtable<'_, M>],
    query: &ScanQuery,
    depth: usize,
) -> (Vec<Neighbor>, u64, u64) {
    search_memtables_with(memtables, &[], query, depth)
}

/// [`search_memtables`], searching the memtables that `codes` (aligned with `memtables`; missing
/// or `None` entries: exact) has codes for through them ([`MemtableCodes::search`]).
fn search_memtables_with<M: SlabMemory + ?Sized>(
    memtables: &[Memtable<'_, M>],
    codes: &[Option<Arc<MemtableCodes>>],
    query: &ScanQuery,
    depth: usize,
) -> (Vec<Neighbor>, u64, u64) {
    let mut top = TopK::new(depth);
    let (mut rows, mut admitted) = (0, 0);
    let dims = query.dims;
    for (i, memtable) in memtables.iter().enumerate() {
        if let Some(Some(codes)) = codes.get(i) {
            let (list, examined) = codes.search(memtable, query, depth);
            rows += examined;
            admitted += examined;
            for neighbor in list {
                top.push(neighbor);
            }
            continue;
        }
        memtable.for_each_live(|tid, row| {
            rows += 1;
            if query.admits(row) {
                admitted += 1;
                top.push(Neighbor::new(tid, query.prepared.distance_f32(&row[..dims])));
            }
        });
    }
    (top.into_sorted(), rows, admitted)
}

/// Rows a segment must hold (or, with a filter, admit by its column statistics' estimate) for its
/// search to be worth a helper thread: handing a job to another thread and waiting for it costs
/// about 0.1 ms on a loaded machine, the search of a few thousand rows' worth about as much.
pub const PARALLEL_MIN_ROWS: usize = 5_000;

/// The rows `query`'s search of `open` has to consider: the segment's rows, or the estimate of
/// those its filter admits.
fn search_work(open: &OpenVectorSegment, query: &ScanQuery) -> usize {
    let rows = open.segment.len();
    match (&query.filter, open.segment.filter_columns()) {
        (Some(filter), Some(columns)) => {
            columns.estimate(filter).map_or(rows, |estimate| (estimate.true_rows.estimate as usize).min(rows))
        }
        _ => rows,
    }
}

/// One memtable search's list, rows examined and rows admitted.
type MemtableResult = (Vec<Neighbor>, u64, u64);

/// The memtables split into the groups a parallel round searches as separate jobs (index
/// ranges): each memtable with at least `min_rows` filled slots alone, runs of smaller ones
/// together.
fn memtable_groups<M: SlabMemory + ?Sized>(
    memtables: &[Memtable<'_, M>],
    min_rows: usize,
) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut small_start = None;
    for (i, memtable) in memtables.iter().enumerate() {
        if memtable.header().filled() >= min_rows {
            if let Some(start) = small_start.take() {
                groups.push(start..i);
            }
            groups.push(i..i + 1);
        } else if small_start.is_none() {
            small_start = Some(i);
        }
    }
    if let Some(start) = small_start {
        groups.push(start..memtables.len());
    }
    groups
}

/// The `depth` nearest of several memtable groups' lists (each nearest first), with their rows
/// and admitted counts summed: what one search of all the memtables returns.
fn merge_memtable_results(results: Vec<MemtableResult>, depth: usize) -> MemtableResult {
    let mut top = TopK::new(depth);
    let (mut rows, mut admitted) = (0, 0);
    for (list, r, a) in results {
        rows += r;
        admitted += a;
        for neighbor in list {
            top.push(neighbor);
        }
    }
    (top.into_sorted(), rows, admitted)
}

/// Whether a round over `segments` and `memtables` is worth parallel jobs: at least two
/// searches (segments as [`worth_parallel`] counts them, memtables with `min_rows` filled slots)
/// large enough for a job of their own.
pub fn worth_parallel_round<M: SlabMemory + ?Sized>(
    segments: &[Arc<OpenVectorSegment>],
    memtables: &[Memtable<'_, M>],
    query: &ScanQuery,
    min_rows: usize,
) -> bool {
    let large_segments = segments.iter().filter(|open| search_work(open, query) >= min_rows).count();
    let large_memtables = memtables.iter().filter(|m| m.header().filled() >= min_rows).count();
    large_segments + large_memtables >= 2
}

/// Whether the searches of `segments` for `query` are worth running in parallel: when at least
/// two of them have `min_rows` rows to consider (one large search gains nothing from a helper,
/// and small ones cost less than the hand-over).
pub fn worth_parallel(segments: &[Arc<OpenVectorSegment>], query: &ScanQuery, min_rows: usize) -> bool {
    segments.iter().filter(|open| search_work(open, query) >= min_rows).nth(1).is_some()
}

/// How deep each segment is searched in a round `depth` deep with `params`. The candidate list
/// is first sized for the index's live rows (with the memtables' filled slots) by
/// [`budget::size_scaled_ef`](super::budget::size_scaled_ef); then, with
/// [`Sharing::Proportional`], segments that keep vectors, searched without a filter, get the
/// [`budget`](super::budget) share of their live rows among all rows; every other segment gets
/// `depth` and the sized list.
pub fn segment_depths<M: SlabMemory + ?Sized>(
    segments: &[Arc<OpenVectorSegment>],
    memtables: &[Memtable<'_, M>],
    query: &ScanQuery,
    depth: usize,
    params: &SearchParams,
    sharing: Sharing,
) -> Vec<(usize, SearchParams)> {
    let live: Vec<u64> = segments.iter().map(|open| open.live_rows()).collect();
    let total = live.iter().sum::<u64>() + filled_rows(memtables);
    let params = &SearchParams { ef_search: budget::size_scaled_ef(params.ef_search, total), ..*params };
    let uniform = || vec![(depth, *params); segments.len()];
    if sharing == Sharing::Uniform || query.filter.is_some() || segments.len() + memtables.len() < 2 {
        return uniform();
    }
    segments
        .iter()
        .zip(live)
        .map(|(open, rows)| {
            if !open.segment.stores_vectors() {
                return (depth, *params);
            }
            let ef_search = budget::source_ef(params.ef_search, depth, rows, total);
            (budget::source_depth(depth, rows, total), SearchParams { ef_search, ..*params })
        })
        .collect()
}

/// A prior for the share of each segment's searchable rows (neither deleted nor hinted) that
/// are dead before VACUUM, from the table's statistics: the index's searchable rows (the
/// segments' and the memtables' filled slots) beyond the table's live rows are dead somewhere,
/// and so are its dead rows not yet vacuumed less those hinted; the smaller of the two counts
/// (statistics restart from zero after a crash, when the first would count every row dead) is
/// spread over the segments by their searchable rows (memtables hold the newest rows), so every
/// segment gets the same share. 0 without counts or when they leave no row dead; at most
/// [`MAX_DEAD_FRACTION`](crate::dead_rows::MAX_DEAD_FRACTION).
///
/// Why: a segment a merge just wrote starts with no hints and no observed dead fraction, so
/// the dead rows it still holds take places in its candidate list until the scan has met them.
/// Only the list's length follows from this; which rows qualify never does.
pub fn dead_prior<M: SlabMemory + ?Sized>(
    segments: &[Arc<OpenVectorSegment>],
    memtables: &[Memtable<'_, M>],
    table_rows: Option<super::TableRows>,
) -> f64 {
    let Some(table) = table_rows.filter(|table| table.dead > 0) else { return 0.0 };
    let hinted: u64 = segments.iter().map(|open| open.hints.count(open.deleted.as_ref()) as u64).sum();
    let searchable: u64 = segments.iter().map(|open| open.live_rows()).sum::<u64>().saturating_sub(hinted);
    let beyond_live = (searchable + filled_rows(memtables)).saturating_sub(table.live);
    let unknown_dead = beyond_live.min(table.dead.saturating_sub(hinted));
    if unknown_dead == 0 || searchable == 0 {
        return 0.0;
    }
    (unknown_dead as f64 / searchable as f64).min(crate::dead_rows::MAX_DEAD_FRACTION)
}

/// The memtables' filled slots, together (what the budget counts for them).
fn filled_rows<M: SlabMemory + ?Sized>(memtables: &[Memtable<'_, M>]) -> u64 {
    memtables.iter().map(|m| m.header().filled() as u64).sum()
}

/// How deep the memtables (together, one list) are searched in a round `depth` deep: with
/// [`Sharing::Proportional`] and no filter, the [`budget`](super::budget) share of their filled
/// slots among all rows, as a segment of that many rows would be; otherwise `depth`.
pub fn memtable_depth<M: SlabMemory + ?Sized>(
    segments: &[Arc<OpenVectorSegment>],
    memtables: &[Memtable<'_, M>],
    query: &ScanQuery,
    depth: usize,
    sharing: Sharing,
) -> usize {
    if sharing == Sharing::Uniform || query.filter.is_some() || segments.is_empty() || memtables.is_empty() {
        return depth;
    }
    let filled = filled_rows(memtables);
    let total = filled + segments.iter().map(|open| open.live_rows()).sum::<u64>();
    budget::source_depth(depth, filled, total)
}

/// Searches `segments` and `memtables` for their nearest rows to `query` that its filter admits,
/// in parallel on `parallel` when [`worth_parallel`]: the memtables and each segment `depth`
/// deep, or with [`Sharing::Proportional`] segments as deep as [`segment_depths`] says (the
/// shallower ones named in [`Candidates::shallow`]).
pub fn search<M: SlabMemory + Sync + ?Sized>(
    segments: &[Arc<OpenVectorSegment>],
    memtables: &[Memtable<'_, M>],
    query: &ScanQuery,
    depth: usize,
    params: &SearchParams,
    sharing: Sharing,
    parallel: Option<&dyn Parallel>,
) -> Found {
    search_with_codes(segments, memtables, &[], query, depth, params, sharing, parallel)
}

/// [`search`], with the memtables' codes of [`CodesCache::for_round`](super::memtable_codes::CodesCache::for_round)
/// (aligned with `memtables`): those memtables are searched through their codes.
#[allow(clippy::too_many_arguments)] // one round's inputs, each used once
pub fn search_with_codes<M: SlabMemory + Sync + ?Sized>(
    segments: &[Arc<OpenVectorSegment>],
    memtables: &[Memtable<'_, M>],
    codes: &[Option<Arc<MemtableCodes>>],
    query: &ScanQuery,
    depth: usize,
    params: &SearchParams,
    sharing: Sharing,
    parallel: Option<&dyn Parallel>,
) -> Found {
    search_continuing(segments, memtables, codes, query, depth, params, sharing, parallel, &mut SegmentWalks::new())
}

/// [`search_with_codes`], continuing the segments' graph walks of the scan's earlier rounds
/// (`walks`, which keeps this round's for the next): a round deeper than the last expands
/// only what the last one left, instead of walking each graph again from its entry point.
#[allow(clippy::too_many_arguments)] // one round's inputs, each used once
pub fn search_continuing<M: SlabMemory + Sync + ?Sized>(
    segments: &[Arc<OpenVectorSegment>],
    memtables: &[Memtable<'_, M>],
    codes: &[Option<Arc<MemtableCodes>>],
    query: &ScanQuery,
    depth: usize,
    params: &SearchParams,
    sharing: Sharing,
    parallel: Option<&dyn Parallel>,
    walks: &mut SegmentWalks,
) -> Found {
    let mut segment_walks = walks.take_for(segments);
    let depths = segment_depths(segments, memtables, query, depth, params, sharing);
    let prior = dead_prior(segments, memtables, query.table_rows);
    let memtable_asked = memtable_depth(segments, memtables, query, depth, sharing);
    let mut results: Vec<SegmentResult> = vec![(Vec::new(), None); segments.len()];
    let mut segment_times = vec![0u64; segments.len()];
    let mut memtable_nanos = 0u64;
    let timed_memtables = |out: &mut u64| {
        let started = std::time::Instant::now();
        let found = search_memtables_with(memtables, codes, query, memtable_asked);
        *out = nanos_since(started);
        found
    };
    let (memtable_list, memtable_rows, admitted) =
        if let Some(parallel) = parallel.filter(|p| worth_parallel_round(segments, memtables, query, p.min_rows())) {
            let groups = memtable_groups(memtables, parallel.min_rows());
            let mut memtable_results: Vec<MemtableResult> = vec![(Vec::new(), 0, 0); groups.len()];
            let mut memtable_times = vec![0u64; groups.len()];
            let mut jobs: Vec<Box<dyn FnOnce() + Send + '_>> = Vec::with_capacity(segments.len() + groups.len());
            let outputs = segments.iter().zip(results.iter_mut()).zip(segment_times.iter_mut()).zip(&depths);
            for ((((open, out), time), (depth, params)), walk) in outputs.zip(segment_walks.iter_mut()) {
                jobs.push(Box::new(move || {
                    let started = std::time::Instant::now();
                    *out = search_segment_continuing(open, query, *depth, params, prior, Some(walk));
                    *time = nanos_since(started);
                }));
            }
            for ((range, out), time) in groups.iter().zip(memtable_results.iter_mut()).zip(memtable_times.iter_mut()) {
                let group = &memtables[range.clone()];
                let group_codes = codes.get(range.clone()).unwrap_or(&[]);
                jobs.push(Box::new(move || {
                    let started = std::time::Instant::now();
                    *out = search_memtables_with(group, group_codes, query, memtable_asked);
                    *time = nanos_since(started);
                }));
            }
            parallel.run_all(jobs);
            memtable_nanos = memtable_times.iter().fold(0u64, |a, &b| a.saturating_add(b));
            merge_memtable_results(memtable_results, memtable_asked)
        } else {
            let outputs = segments.iter().zip(results.iter_mut()).zip(segment_times.iter_mut()).zip(&depths);
            for ((((open, out), time), (depth, params)), walk) in outputs.zip(segment_walks.iter_mut()) {
                let started = std::time::Instant::now();
                *out = search_segment_continuing(open, query, *depth, params, prior, Some(walk));
                *time = nanos_since(started);
            }
            timed_memtables(&mut memtable_nanos)
        };
    walks.put_back(segments, segment_walks);
    let segment_nanos = segment_times.iter().fold(0u64, |a, &b| a.saturating_add(b));
    let mut candidates = Candidates::default();
    let mut filtered = FilterReport::default();
    let mut origins = Vec::with_capacity(segments.len());
    for (((rows, search), open), (asked, segment_params)) in results.into_iter().zip(segments).zip(&depths) {
        let asked = *asked;
        if let Some(search) = &search {
            filtered.add_segment(search);
        }
        let (list, origin) = RowOrigins::from_rows(open, rows, |row| open.segment.id(row));
        origins.push(origin);
        if open.segment.stores_vectors() {
            if asked < depth {
                candidates.shallow.push(ShallowList { list: candidates.exact.len(), asked });
            }
            if !open.segment.search_is_exact(asked, segment_params) {
                candidates.approximate.push(candidates.exact.len());
                if matches!(open.segment.meta().kind, IndexKind::Hnsw { .. }) {
                    candidates.walked.push(candidates.exact.len());
                }
            }
            candidates.exact.push(list);
        } else {
            candidates.estimated.push(list);
        }
    }
    if memtable_asked < depth {
        candidates.shallow.push(ShallowList { list: candidates.exact.len(), asked: memtable_asked });
    }
    if codes.iter().any(Option::is_some) {
        // Code estimates choose the rows reranked: the list may miss a row (module
        // memtable_codes).
        candidates.approximate.push(candidates.exact.len());
    }
    candidates.exact.push(memtable_list);
    if query.filter.is_some() {
        filtered.memtable_rows_admitted = admitted;
    }
    Found { candidates, memtable_rows, filtered, memtable_nanos, segment_nanos, origins }
}

#[cfg(all(test, feature = "shuttle"))]
mod tests {
    use strata_engine::metric::Metric;
    use strata_engine::segment::{IndexKind, Segment};
    use strata_engine::store::{ElementKind, Query};

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
            kind: if rerank_from_heap { IndexKind::Ivf { lists: 1, bits: 4 } } else { IndexKind::Flat }.into(),
            memtable_rows: 8,
            rerank_from_heap,
            filters: strata_engine::filter::FilterSchema::default(),
        };
        let files = VectorFiles::new(Arc::new(MemoryDirectory::new()));
        let manifest = files.create(config).unwrap();
        for (n, tids) in segments.iter().enumerate() {
            let rows = VectorRows {
                ids: tids.clone(),
                vectors: tids.iter().flat_map(|&t| vector_of(t)).collect::<Vec<f32>>().into(),
                filters: Vec::new(),
            };
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

    /// Runs `test` under shuttle. Segment searches need more stack than shuttle's default of
    /// 32 KiB per thread (HNSW and filtered-search frames overflow it, which shows as a SIGSEGV).
    fn run(test: impl Fn() + Send + Sync + 'static) {
        let mut config = shuttle::Config::new();
        config.stack_size = 1 << 20;
        shuttle::Runner::new(shuttle::scheduler::RandomScheduler::new(1), config).run(test);
    }

    /// The query `[3, 2]` under L2, without a filter.
    fn scan_query() -> ScanQuery {
        ScanQuery::l2_for_tests(&[3.0, 2.0])
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

        fn min_rows(&self) -> usize {
            1
        }
    }

    /// Each segment's list is its `depth` nearest live rows by TID (brute force), exact for
    /// segments with vectors and estimated for the others; the memtables' list comes last and is
    /// their `depth` nearest rows; a parallel runner finds the same.
    #[test]
    fn a_round_returns_each_sources_nearest_live_rows() {
        run(|| {
            let (region, lock) = (TestRegion::new(2, 8, 2, 1), TestLock::default());
            let slabs = Slabs::new(&region, &lock);
            let allocation = slabs.allocate(0, MemtableLayout::new(8, 2), || 1).unwrap();
            allocation.activate();
            let pin = slabs.pin_active(0).unwrap();
            for tid in 1..=6 {
                assert_eq!(pin.insert(tid, &vector_of(tid)), Insert::Done);
            }
            drop(pin);
            // A second memtable, so that a parallel round searches memtables as separate jobs.
            assert!(slabs.seal_active(0));
            let allocation = slabs.allocate(0, MemtableLayout::new(8, 2), || 2).unwrap();
            allocation.activate();
            let pin = slabs.pin_active(0).unwrap();
            for tid in 7..=9 {
                assert_eq!(pin.insert(tid, &vector_of(tid)), Insert::Done);
            }
            drop(pin);
            let exact = segment_set(false, &[(100..130).collect(), (200..240).collect()], 107);
            let estimated = segment_set(true, &[(300..340).collect(), (400..440).collect()], 0);
            let (memtables, ()) = slabs.snapshot(0, || ());
            let scan_query = scan_query();
            let query = scan_query.prepared.clone();
            let (depth, params) = (5, SearchParams::default());
            let round = |set: &VectorSegmentSet, memtables: &[Memtable<'_, TestRegion>], parallel| {
                search(&set.segments, memtables, &scan_query, depth, &params, Sharing::Uniform, parallel)
            };
            let sequential = round(&exact, &memtables, None);
            let parallel = round(&exact, &memtables, Some(&Backwards));
            assert_eq!(memtables.len(), 2);
            for found in [&sequential, &parallel] {
                assert_eq!(found.memtable_rows, 9);
                assert!(found.candidates.estimated.is_empty());
                let lists: Vec<Vec<u64>> = found.candidates.exact.iter().map(|l| rows(l)).collect();
                assert_eq!(
                    lists,
                    vec![
                        nearest((100..130).filter(|&t| t != 107), &query, depth),
                        nearest(200..240, &query, depth),
                        nearest(1..=9, &query, depth),
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

    /// Merging the memtable groups' lists gives the nearest rows of all of them, as one search.
    #[test]
    fn memtable_groups_merge_into_the_nearest_rows_of_all() {
        let list = |rows: &[(u64, f32)]| rows.iter().map(|&(row, d)| Neighbor::new(row, d)).collect::<Vec<_>>();
        let merged = merge_memtable_results(
            vec![
                (list(&[(4, 0.1), (9, 0.5), (2, 0.9)]), 10, 7),
                (list(&[(3, 0.1), (8, 0.3)]), 5, 5),
                (Vec::new(), 2, 0),
            ],
            3,
        );
        assert_eq!(rows(&merged.0), vec![3, 4, 8], "ties by row");
        assert_eq!((merged.1, merged.2), (17, 12));
    }

    /// With a shared budget, segments with vectors searched without a filter get the
    /// square-root share of their live rows and are named shallow; code-only segments, filtered
    /// searches and uniform rounds get the full depth.
    #[test]
    fn segments_share_the_candidate_budget_by_their_rows() {
        let exact = segment_set(false, &[(0..1000).collect(), (1000..1100).collect()], 5);
        let query = scan_query();
        let params = SearchParams { ef_search: 100, ..SearchParams::default() };
        let none: &[Memtable<'_, TestRegion>] = &[];
        let depths = segment_depths(&exact.segments, none, &query, 100, &params, Sharing::Proportional);
        let total = 999 + 100;
        let expected: Vec<usize> = [999u64, 100].iter().map(|&rows| budget::source_depth(100, rows, total)).collect();
        assert_eq!(depths.iter().map(|(d, _)| *d).collect::<Vec<_>>(), expected);
        assert!(expected[0] < 100 && expected[1] < expected[0], "{expected:?}");
        assert_eq!(depths[1].1.ef_search, budget::source_ef(100, 100, 100, total));
        let uniform = segment_depths(&exact.segments, none, &query, 100, &params, Sharing::Uniform);
        assert!(uniform.iter().all(|(d, p)| *d == 100 && p.ef_search == 100));

        let found = search(&exact.segments, none, &query, 100, &params, Sharing::Proportional, None);
        let shallow: Vec<(usize, usize)> = found.candidates.shallow.iter().map(|s| (s.list, s.asked)).collect();
        assert_eq!(shallow, vec![(0, expected[0]), (1, expected[1])]);
        for (list, asked) in shallow {
            let rows: Vec<u64> = rows(&found.candidates.exact[list]);
            let tids =
                if list == 0 { (0..1000).filter(|&t| t != 5).collect::<Vec<_>>() } else { (1000..1100).collect() };
            assert_eq!(rows, nearest(tids, &query.prepared, asked), "flat segments: exact lists of the asked depth");
        }

        let codes = segment_set(true, &[(0..1000).collect(), (1000..1100).collect()], 0);
        let depths = segment_depths(&codes.segments, none, &query, 100, &params, Sharing::Proportional);
        assert!(depths.iter().all(|(d, _)| *d == 100), "estimated lists keep the round's depth");
    }

    /// The dead-row prior: the smaller of the index's searchable rows beyond the table's live
    /// rows and the table's unvacuumed dead rows not hinted, as a share of the segments'
    /// searchable rows (hinted rows no longer count), capped; none without counts.
    #[test]
    #[allow(clippy::float_cmp)] // 0 and the cap are returned as constants, exactly
    fn dead_priors_count_the_rows_beyond_the_tables_live_rows() {
        let set = segment_set(false, &[(0..1000).collect(), (1000..1100).collect()], 5);
        let none: &[Memtable<'_, TestRegion>] = &[];
        let table = |live, dead| Some(super::super::TableRows { live, dead });
        assert_eq!(dead_prior(&set.segments, none, None), 0.0);
        assert_eq!(dead_prior(&set.segments, none, table(1099, 10)), 0.0, "every row live");
        assert_eq!(dead_prior(&set.segments, none, table(5_000, 10)), 0.0, "more live rows than indexed");
        let half = dead_prior(&set.segments, none, table(550, 600));
        assert!((half - 549.0 / 1099.0).abs() < 1e-12, "{half:?}");
        let after_crash = dead_prior(&set.segments, none, table(20, 10));
        assert!((after_crash - 10.0 / 1099.0).abs() < 1e-12, "statistics restarted: {after_crash:?}");
        assert_eq!(dead_prior(&set.segments, none, table(0, 5_000)), 0.8, "capped");
        // Rows the scan already skips (hinted dead) are not counted again.
        assert_eq!(set.segments[1].hint_dead(&(0..49).collect::<Vec<_>>()), 49);
        let hinted = dead_prior(&set.segments, none, table(550, 600));
        assert!((hinted - 500.0 / 1050.0).abs() < 1e-12, "{hinted:?}");
        let few_dead = dead_prior(&set.segments, none, table(550, 100));
        assert!((few_dead - 51.0 / 1050.0).abs() < 1e-12, "{few_dead:?}");
    }

    /// With a shared budget the memtables together are searched as deep as a segment of their
    /// filled slots: their list holds that many nearest rows and is named shallow; a uniform
    /// round asks them for the full depth.
    #[test]
    fn memtables_share_the_candidate_budget_by_their_rows() {
        run(|| {
            let (region, lock) = (TestRegion::new(1, 64, 2, 1), TestLock::default());
            let slabs = Slabs::new(&region, &lock);
            slabs.allocate(0, MemtableLayout::new(64, 2), || 1).unwrap().activate();
            let pin = slabs.pin_active(0).unwrap();
            for tid in 5_000..5_060 {
                assert_eq!(pin.insert(tid, &vector_of(tid)), Insert::Done);
            }
            drop(pin);
            let (memtables, ()) = slabs.snapshot(0, || ());
            let exact = segment_set(false, &[(0..1000).collect()], 5);
            let query = scan_query();
            let params = SearchParams { ef_search: 40, ..SearchParams::default() };
            let asked = budget::source_depth(40, 60, 999 + 60);
            assert!(asked < 40, "{asked}");
            assert_eq!(memtable_depth(&exact.segments, &memtables, &query, 40, Sharing::Proportional), asked);
            let found = search(&exact.segments, &memtables, &query, 40, &params, Sharing::Proportional, None);
            let last = found.candidates.exact.len() - 1;
            assert!(found.candidates.shallow.contains(&ShallowList { list: last, asked }));
            assert_eq!(rows(&found.candidates.exact[last]), nearest(5_000..5_060, &query.prepared, asked));
            let uniform = search(&exact.segments, &memtables, &query, 40, &params, Sharing::Uniform, None);
            assert!(uniform.candidates.shallow.is_empty());
            assert_eq!(rows(uniform.candidates.exact.last().unwrap()), nearest(5_000..5_060, &query.prepared, 40));
        });
    }
}
