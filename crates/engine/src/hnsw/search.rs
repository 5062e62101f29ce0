//! k-nearest-neighbour search on a graph view, with filters and deletions.

use std::cell::RefCell;

use super::codes::CodedTarget;
use super::layer::{descend, search_layer, Target};
use super::resumable::ResumableSearch;
use super::scratch::{Cand, SearchScratch};
use super::view::HnswView;
use super::{ABSENT_LEVEL, DEFAULT_EF_SEARCH};
use crate::bitset::RowPredicate;
use crate::store::{Query, VectorStore};
use crate::topk::{Neighbor, TopK};

/// How a search with a predicate finds its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterStrategy {
    /// Graph search, or an exact scan of the accepted rows when few rows are accepted (cheaper and
    /// exact; see [`SearchParams`]).
    #[default]
    Auto,
    /// Graph search whatever the selectivity (still falling back to an exact scan when the graph
    /// yields fewer than `k` accepted rows).
    Graph,
    /// Exact scan of the accepted rows.
    Exact,
    /// Filter-aware graph search that computes distances to accepted nodes only, looking through
    /// rejected neighbours to their neighbours (see [`super::filtered`]); for the middle band of
    /// selectivities. Falls back to an exact scan like [`FilterStrategy::Graph`].
    TwoHop,
}

/// What a search did, for EXPLAIN: the strategy that produced the results and the work done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchReport {
    /// [`FilterStrategy::Exact`], [`FilterStrategy::Graph`] or [`FilterStrategy::TwoHop`]: what
    /// ran ([`FilterStrategy::Auto`] resolved). A graph search that found fewer than `k` rows and
    /// fell back to a scan reports `Exact` with `fell_back` set.
    pub strategy: FilterStrategy,
    /// Distances computed (rows whose vectors were read), over every phase.
    pub distances: usize,
    /// Whether a graph search found fewer than `k` accepted rows and the accepted rows were
    /// then scanned exactly.
    pub fell_back: bool,
}

/// Search parameters beyond `k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchParams {
    /// Size of the dynamic candidate list on layer 0; the search uses `max(ef_search, k)`.
    pub ef_search: usize,
    /// The strategy for searches with a predicate.
    pub strategy: FilterStrategy,
    /// The number of rows the predicate accepts, when the caller knows it; otherwise it is
    /// counted from the bitmaps' words (a few microseconds per 100,000 rows). Only steers
    /// [`FilterStrategy::Auto`]; results never depend on it being right.
    pub accepted: Option<usize>,
}

impl Default for SearchParams {
    fn default() -> Self {
        Self { ef_search: DEFAULT_EF_SEARCH, strategy: FilterStrategy::Auto, accepted: None }
    }
}

/// [`FilterStrategy::Auto`] scans exactly when `accepted² ≤ EXACT_COST_RATIO · ef · nodes`: the
/// graph expands roughly `ef / selectivity` nodes to collect `ef` accepted ones, an exact scan
/// reads `accepted` rows sequentially. Measured at 100,000 × 384 (`M = 16`, `ef = 64`): the graph
/// took 2.8 ms per query at 10 % selectivity and 5.1 ms at 5 %, the scan 3.8 ms and 1.5 ms, a
/// crossover near 7 %, i.e. a ratio of about 8. At `ef = 64` the scan thus takes over below
/// 23 % of 10,000 nodes, 7.2 % of 100,000 and 2.3 % of 1,000,000.
const EXACT_COST_RATIO: usize = 8;

/// A search whose candidate list is at least `1 / EXACT_LIST_FRACTION` of the graph's nodes
/// scans the nodes exactly instead ([`FilterStrategy::Auto`]): on a small graph a list of `ef`
/// reaches most nodes anyway, each through its links and a heap, while a scan reads the rows in
/// order. Measured for one segment (m 16, ef_construction 64, uniform rows, L2), the 100 nearest
/// with a list of 100 (`cargo run --release -p strata-bench --example small_segments`): walk
/// against scan 31.8 / 19.5 µs at 1,000 × 8, 34.2 / 32.3 at 2,000 × 8, 44.4 / 19.6 at
/// 1,000 × 50, 60.9 / 55.6 at 4,000 × 50, 65.5 / 39.2 at 1,000 × 384, 86.9 / 78.1 at
/// 2,000 × 384, 103.3 / 143.3 at 4,000 × 384; the walks' recall@100 0.90–0.996, the scan's 1.
/// So the scan is cheaper up to about 20 times the list, at every width measured.
const EXACT_LIST_FRACTION: usize = 16;

/// Distances from a query to stored rows.
struct QueryTarget<'a, 's> {
    store: &'a VectorStore<'s>,
    query: &'a Query,
    computed: std::cell::Cell<usize>,
}

impl Target for QueryTarget<'_, '_> {
    #[inline]
    fn distance(&self, id: u32) -> f32 {
        self.computed.set(self.computed.get() + 1);
        self.store.distance(self.query, id as usize)
    }

    #[inline]
    fn prefetch(&self, id: u32) {
        self.store.prefetch(id as usize);
    }
}

thread_local! {
    static SCRATCH: RefCell<SearchScratch> = RefCell::new(SearchScratch::new());
}

/// Runs `f` with this thread's search scratch (a fresh one if it is already in use).
pub fn with_thread_scratch<R>(f: impl FnOnce(&mut SearchScratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        Err(_) => f(&mut SearchScratch::new()),
    })
}

/// Rows accepted by `predicate` among `0..rows`, counted word by word.
fn count_accepted(predicate: &RowPredicate<'_>, rows: usize) -> usize {
    let deleted_word = |i: usize| predicate.deleted.and_then(|d| d.words().get(i).copied()).unwrap_or(0);
    match predicate.filter {
        Some(filter) => filter
            .words()
            .iter()
            .enumerate()
            .map(|(i, &w)| (w & !deleted_word(i)).count_ones() as usize)
            .sum::<usize>()
            .min(rows),
        None => rows.saturating_sub(predicate.deleted.map_or(0, crate::bitset::Bitset::count)),
    }
}

impl HnswView<'_> {
    /// The `k` nearest rows to `query` that `predicate` accepts, nearest first, with exact
    /// distances (`store.distance`), searching with `max(ef_search, k)` candidates and the
    /// [`FilterStrategy::Auto`] strategy. Uses a thread-local [`SearchScratch`] (kept for the
    /// thread's life: 4 bytes per row of the largest graph searched on the thread).
    ///
    /// Guarantees:
    /// - only nodes of the graph that `predicate` accepts are returned (deleted and filtered-out
    ///   rows never), each once, sorted by `(distance, row)` with `f32::total_cmp`;
    /// - exactly `min(k, a)` results, where `a` is the number of accepted nodes: when the graph
    ///   search finds fewer than `k` (a very selective filter, a disconnected part of the graph)
    ///   the accepted rows are scanned exactly instead;
    /// - with few accepted rows (see [`SearchParams`]) the result is the exact answer.
    ///
    /// # Panics
    /// When `store` does not have exactly [`rows`](Self::rows) rows or `query` has other
    /// dimensions than the store.
    pub fn search(
        &self,
        store: &VectorStore<'_>,
        query: &Query,
        k: usize,
        ef_search: usize,
        predicate: RowPredicate<'_>,
    ) -> Vec<Neighbor> {
        let params = SearchParams { ef_search, ..SearchParams::default() };
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => self.search_with(&mut scratch, store, query, k, &params, predicate),
            Err(_) => self.search_with(&mut SearchScratch::new(), store, query, k, &params, predicate),
        })
    }

    /// [`search`](Self::search) with explicit scratch memory and parameters; same guarantees.
    ///
    /// # Panics
    /// As [`search`](Self::search).
    pub fn search_with(
        &self,
        scratch: &mut SearchScratch,
        store: &VectorStore<'_>,
        query: &Query,
        k: usize,
        params: &SearchParams,
        predicate: RowPredicate<'_>,
    ) -> Vec<Neighbor> {
        self.search_reported(scratch, store, query, k, params, predicate).0
    }

    /// Whether a search for `k` rows with candidate list `ef_search` scans every node exactly
    /// ([`FilterStrategy::Auto`] and [`FilterStrategy::TwoHop`]): its list holds at least
    /// `1 / EXACT_LIST_FRACTION` of the nodes, so the result is the exact `k` nearest.
    pub fn list_covers_the_graph(&self, k: usize, ef_search: usize) -> bool {
        ef_search.max(k).saturating_mul(EXACT_LIST_FRACTION) >= self.node_count()
    }

    /// [`search_with`](Self::search_with), also reporting the strategy that ran and the
    /// distances computed; same guarantees.
    ///
    /// # Panics
    /// As [`search`](Self::search).
    pub fn search_reported(
        &self,
        scratch: &mut SearchScratch,
        store: &VectorStore<'_>,
        query: &Query,
        k: usize,
        params: &SearchParams,
        predicate: RowPredicate<'_>,
    ) -> (Vec<Neighbor>, SearchReport) {
        self.search_continuing(None, scratch, store, query, k, params, predicate)
    }

    /// [`search_reported`](Self::search_reported) continuing `state`'s graph walk when the
    /// strategy is a graph search ([`FilterStrategy::Graph`]), so that a deeper search of the
    /// same query after a shallower one expands only what the shorter list left (see
    /// [`ResumableSearch`]); the same guarantees. The exact and two-hop strategies do not use
    /// the state. `state` must only be continued with the same query and predicate.
    ///
    /// # Panics
    /// As [`search`](Self::search).
    #[allow(clippy::too_many_arguments)] // search_reported's inputs and the state
    pub fn search_resumable(
        &self,
        state: &mut ResumableSearch,
        scratch: &mut SearchScratch,
        store: &VectorStore<'_>,
        query: &Query,
        k: usize,
        params: &SearchParams,
        predicate: RowPredicate<'_>,
    ) -> (Vec<Neighbor>, SearchReport) {
        self.search_continuing(Some(state), scratch, store, query, k, params, predicate)
    }

    #[allow(clippy::too_many_arguments)] // search_reported's inputs and the state
    fn search_continuing(
        &self,
        state: Option<&mut ResumableSearch>,
        scratch: &mut SearchScratch,
        store: &VectorStore<'_>,
        query: &Query,
        k: usize,
        params: &SearchParams,
        predicate: RowPredicate<'_>,
    ) -> (Vec<Neighbor>, SearchReport) {
        assert_eq!(store.len(), self.rows, "the store has {} rows, the graph {}", store.len(), self.rows);
        let mut report = SearchReport { strategy: FilterStrategy::Exact, distances: 0, fell_back: false };
        if k == 0 || self.node_count() == 0 {
            return (Vec::new(), report);
        }
        let ef = params.ef_search.max(k);
        let all = predicate.accepts_all();
        let strategy = match params.strategy {
            // A list of a sixteenth of the nodes or more visits most of a small graph: a scan of
            // the nodes costs no more and is exact (small segments, and deep rounds of a
            // filtered scan).
            FilterStrategy::Auto | FilterStrategy::TwoHop if self.list_covers_the_graph(k, params.ef_search) => {
                FilterStrategy::Exact
            }
            FilterStrategy::Auto | FilterStrategy::TwoHop if all => FilterStrategy::Graph,
            FilterStrategy::Auto => {
                let accepted = params.accepted.unwrap_or_else(|| count_accepted(&predicate, self.rows));
                if accepted.saturating_mul(accepted)
                    <= EXACT_COST_RATIO.saturating_mul(ef).saturating_mul(self.node_count())
                {
                    FilterStrategy::Exact
                } else {
                    FilterStrategy::Graph
                }
            }
            other => other,
        };
        if strategy == FilterStrategy::Exact {
            let (found, scanned) = self.exact(store, query, k, predicate);
            report.distances = scanned;
            return (found, report);
        }
        report.strategy = strategy;
        let two_hop = strategy == FilterStrategy::TwoHop;
        let (found, computed) = match state {
            Some(state) if !two_hop => {
                let before = state.distances();
                let found = if all {
                    self.search_resumed(state, scratch, store, query, k, ef, &|_| true)
                } else {
                    self.search_resumed(state, scratch, store, query, k, ef, &|n| predicate.accepts(n as usize))
                };
                (found, state.distances() - before)
            }
            _ if all => self.graph_search(scratch, store, query, k, ef, &|_| true, false),
            _ => self.graph_search(scratch, store, query, k, ef, &|n| predicate.accepts(n as usize), two_hop),
        };
        report.distances = computed;
        if found.len() < k {
            // Fewer than k accepted nodes are reachable: only a scan can tell whether more exist.
            let (found, scanned) = self.exact(store, query, k, predicate);
            report.distances += scanned;
            report.fell_back = true;
            report.strategy = FilterStrategy::Exact;
            return (found, report);
        }
        (found, report)
    }

    #[allow(clippy::too_many_arguments)]
    fn graph_search(
        &self,
        scratch: &mut SearchScratch,
        store: &VectorStore<'_>,
        query: &Query,
        k: usize,
        ef: usize,
        accept: &impl Fn(u32) -> bool,
        two_hop: bool,
    ) -> (Vec<Neighbor>, usize) {
        let coded = self.codes.as_ref().and_then(|codes| Some((codes, codes.prepare(query)?)));
        let Some((codes, coded_query)) = coded else {
            let target = QueryTarget { store, query, computed: std::cell::Cell::new(0) };
            self.walk(scratch, &target, ef, accept, two_hop);
            let found = scratch.sorted.iter().take(k).map(|c| Neighbor::new(u64::from(c.id), c.distance())).collect();
            return (found, target.computed.get());
        };
        // Walk on the codes' estimates, then give every row the walk kept its exact distance.
        let target = CodedTarget { codes, query: &coded_query, computed: std::cell::Cell::new(0) };
        self.walk(scratch, &target, ef, accept, two_hop);
        for c in &scratch.sorted {
            store.prefetch(c.id as usize);
        }
        let mut top = TopK::new(k);
        for c in &scratch.sorted {
            top.push(Neighbor::new(u64::from(c.id), store.distance(query, c.id as usize)));
        }
        (top.into_sorted(), target.computed.get() + scratch.sorted.len())
    }

    /// The graph walk of a search: descends the upper layers greedily, searches layer 0 with a
    /// list of `ef`, and leaves the nodes found in `scratch.sorted`, nearest first by `target`.
    fn walk(
        &self,
        scratch: &mut SearchScratch,
        target: &impl Target,
        ef: usize,
        accept: &impl Fn(u32) -> bool,
        two_hop: bool,
    ) {
        let mut current = Cand::new(self.entry_point, target.distance(self.entry_point));
        for layer in (1..=usize::from(self.max_level)).rev() {
            current = descend(self, layer, target, current, self.upper_list, self.rows, scratch);
        }
        scratch.begin(self.rows);
        if two_hop {
            super::filtered::search_layer_two_hop(self, target, accept, current, ef, scratch);
        } else {
            search_layer(self, 0, target, accept, current, ef, scratch);
        }
        scratch.drain_sorted();
    }

    /// Exact top-k over the accepted nodes, and the number of distances computed.
    fn exact(
        &self,
        store: &VectorStore<'_>,
        query: &Query,
        k: usize,
        predicate: RowPredicate<'_>,
    ) -> (Vec<Neighbor>, usize) {
        let mut top = crate::topk::Selection::new(k);
        let mut scanned = 0;
        let mut consider = |row: usize| {
            if self.levels[row] != ABSENT_LEVEL && predicate.accepts(row) {
                scanned += 1;
                top.push(row, store.distance(query, row));
            }
        };
        match predicate.filter {
            Some(filter) => filter.iter().take_while(|&row| row < self.rows).for_each(&mut consider),
            // Every row: the store's own loop (the same distances), rows left out of the graph
            // and deleted ones skipped after it.
            None => store.for_each_distance(query, |row, distance| {
                if self.levels[row] != ABSENT_LEVEL && !predicate.deleted.is_some_and(|d| d.contains(row)) {
                    scanned += 1;
                    top.push(row, distance);
                }
            }),
        }
        (top.into_sorted(), scanned)
    }
}
