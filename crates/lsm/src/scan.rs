//! The progressive scan of an ordered index scan, as a component over candidate sources.
//!
//! A scan answers `ORDER BY column <op> query` by rounds: each round asks every source
//! (memtables, segments) for its `depth` nearest rows, merges them, and queues the ones not yet
//! returned in distance order. When the queue runs dry — the consumer keeps asking because rows
//! were filtered out by a WHERE clause or invisible to its snapshot — the next round searches
//! half as deep again ([`next_depth`]). The scan ends when everything reachable has been returned or the tuple cap is reached.
//!
//! Sources are exact (memtables, segments that keep vectors) or estimated (segments that keep
//! only codes). The estimated candidates of a round are pooled, the `⌈oversample · depth⌉` best
//! estimates not returned yet are reranked by a [`Reranker`] (in PostgreSQL: the table, read
//! through the scan's snapshot), rows it cannot see are dropped for good, and the `depth` nearest
//! exact distances are merged with the exact sources' lists.
//!
//! Exhaustion is judged on the candidates the sources returned *before* reranks drop rows: a
//! round whose sources returned fewer than `depth` candidates in all has seen everything they
//! hold. Judging after the drops would end a scan early whenever invisible rows thin a round out.
//!
//! Sources may search some segments less deep than the round ([`budget`]): such *shallow* lists
//! are exhausted when they return fewer rows than they were asked for, and until then a round
//! returns no row farther than the last row of any of them (the frontier). Rows past it come
//! back in a deeper round. So exact sources still give rows in distance order, and a round at
//! the tuple cap asks every source for its full depth ([`Sharing::Uniform`]).
//!
//! The component is pure: where sources run (helper threads) and how rows are read is the
//! caller's business, behind [`Sources`] and [`Reranker`].

pub mod budget;
pub mod keys;
pub mod memtable_codes;
pub mod round;
mod walks;

use std::collections::VecDeque;

use strata_engine::filter::{FilterSchema, Predicate};
use strata_engine::metric::Metric;
use strata_engine::quant::pool_size;
use strata_engine::row_hash::RowSet;
use strata_engine::segment::SearchParams;
use strata_engine::store::Query;
use strata_engine::topk::{merge_sorted, Neighbor, TopK};

use crate::manifest::IndexConfig;
use crate::rows::WrongDimensions;
pub use budget::Sharing;

/// A strict round returns the nearest `1 / STRICT_SHARE` of each approximate list (a graph
/// search, IVF probing some lists, a rerank pool of estimates) and holds the rest back for the
/// next, deeper round: an approximate search misses rows mostly in the deeper part of its list,
/// and the deeper round finds them before they would have to be skipped. Measured on the 100k
/// MiniLM set (`crates/bench/examples/filtered_rounds.rs`, one HNSW segment, ef_search 100,
/// LIMIT 10 behind a 10 % filter): recall 0.934 returning halves, 0.954 thirds, 0.966 quarters,
/// at 1.0×, 1.6× and 2.2× the search work.
pub const STRICT_SHARE: usize = 4;

/// A strict round holds back at most this many first-round depths of a graph walk's list
/// ([`Candidates::walked`]; [`STRICT_SHARE`] caps it for short lists). Other approximate lists
/// (IVF probing some lists, memtable codes, rerank pools) keep the quarter: their misses are
/// whole lists or estimates, not a walk's tail. The misses of a graph walk sit in a tail whose
/// length follows the walk's own list, not the depth the scan has reached, so a deep round
/// (a selective filter) returns all but that tail. Measured as above with continued walks
/// (`hnsw::ResumableSearch`), LIMIT 10: behind a 1 % filter recall 0.984 → 0.977 and the
/// distances computed 45.4k → 24.7k a query (lists searched 10.9k → 5.1k); behind 0.1 % 0.999 →
/// 0.991; behind 10 % unchanged (0.958). A tail of four first depths measured 0.964 at 1 %.
pub const STRICT_HOLD_BACK_DEPTHS: usize = 8;

/// The depth of the round after one `depth` deep: half as deep again. A round that runs dry
/// means the consumer is skipping rows (a WHERE clause, invisible rows), and a deeper list
/// continues each segment's graph walk, so each round's extra depth is paid once; growing by
/// half rather than doubling overshoots the depth the consumer needed by less. Measured with
/// `crates/bench/examples/filtered_rounds.rs` (100k MiniLM rows, one HNSW segment, strict,
/// continued walks, LIMIT 10): behind a 1 % filter 25.1k → 21.5k distances and 4.1 → 3.7 ms a
/// query, recall 0.978 → 0.976; behind 0.1 % 29.3k → 44.9k distances and 20 → 23.5 ms (one
/// more walked round before the list covers the graph and the segment is scanned exactly).
pub fn next_depth(depth: usize) -> usize {
    depth.saturating_add(depth.div_ceil(2))
}

/// The last row a strict round may return from the approximate `list` (sorted nearest first):
/// the last of its nearest [`STRICT_SHARE`]-th, or of all but its deepest `max_held` rows when
/// that is more; `None` for an empty list.
fn strict_share_end(list: &[Neighbor], max_held: usize) -> Option<Neighbor> {
    let end = list.len().div_ceil(STRICT_SHARE).max(list.len().saturating_sub(max_held));
    list.get(end.checked_sub(1)?).copied()
}

/// What one round's sources returned: per source, its nearest rows (or all it has), sorted by
/// [`Neighbor::order`].
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    /// Lists with exact distances (memtables, segments that keep vectors), in a fixed order.
    pub exact: Vec<Vec<Neighbor>>,
    /// Lists with estimated distances (segments without vectors), reranked before merging.
    pub estimated: Vec<Vec<Neighbor>>,
    /// The exact lists whose sources were asked for fewer rows than the round's depth (see
    /// [`budget`]); every other list was asked for the round's depth.
    pub shallow: Vec<ShallowList>,
    /// The positions in [`Candidates::exact`] of lists from approximate searches (graphs, IVF
    /// probing some lists): exact distances, but a row may be missing that a deeper search
    /// finds. A strict-order round returns only the nearest [`STRICT_SHARE`]-th of such a list
    /// that is not exhausted ([`Candidates::frontier`]): misses gather in a search's deeper part.
    pub approximate: Vec<usize>,
    /// The positions in [`Candidates::exact`] of approximate lists from graph walks (HNSW
    /// segments): a strict round holds back at most [`STRICT_HOLD_BACK_DEPTHS`] first depths of
    /// them, the nearest [`STRICT_SHARE`]-th of the other approximate lists.
    pub walked: Vec<usize>,
}

/// An exact list searched less deep than its round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShallowList {
    /// Its position in [`Candidates::exact`].
    pub list: usize,
    /// The rows its source was asked for (fewer than the round's depth).
    pub asked: usize,
}

impl Candidates {
    /// How many candidates all sources returned together (duplicates and rows returned earlier
    /// included).
    pub fn available(&self) -> usize {
        self.exact.iter().chain(&self.estimated).map(Vec::len).sum()
    }

    fn is_shallow(&self, list: usize) -> bool {
        self.shallow.iter().any(|s| s.list == list)
    }

    /// Whether every source returned all it holds: the lists asked for the round's `depth`
    /// returned fewer than `depth` rows together, and each shallow list fewer than it was asked.
    pub fn exhausted(&self, depth: usize) -> bool {
        let uniform: usize = self
            .exact
            .iter()
            .enumerate()
            .filter(|(list, _)| !self.is_shallow(*list))
            .map(|(_, rows)| rows.len())
            .chain(self.estimated.iter().map(Vec::len))
            .sum();
        uniform < depth && self.shallow.iter().all(|s| self.exact[s.list].len() < s.asked)
    }

    /// No row past this one may be returned this round (`None`: no bound), over the lists that
    /// may hold more (returned as many rows as they were asked for: `depth`, or a shallow list's
    /// share): with a `hold_back` of `Some(max_held)`, the last row of the nearest
    /// [`STRICT_SHARE`]-th of each approximate list, or for a graph walk's list
    /// ([`Candidates::walked`]) of all but its deepest `max_held` rows when that is more; the last
    /// row of each other shallow list. Rows past it come back in a
    /// deeper round, which finds first what a shallow list did not reach and what an approximate
    /// search missed in the deeper part of its list: a strict scan would have to skip those for
    /// good.
    pub fn frontier(&self, depth: usize, hold_back: Option<usize>) -> Option<Neighbor> {
        (0..self.exact.len())
            .filter_map(|list| {
                let rows = &self.exact[list];
                let asked = self.shallow.iter().find(|s| s.list == list).map(|s| s.asked);
                if rows.len() < asked.unwrap_or(depth) {
                    return None;
                }
                if let (Some(max_held), true) = (hold_back, self.approximate.contains(&list)) {
                    strict_share_end(rows, if self.walked.contains(&list) { max_held } else { usize::MAX })
                } else {
                    asked.and(rows.last().copied())
                }
            })
            .min_by(Neighbor::order)
    }
}

/// The memtables and segments a round searches.
pub trait Sources {
    /// Every source's nearest live rows to the query (or all it has, when it holds fewer), each
    /// list sorted by [`Neighbor::order`]: `depth` rows, or with [`Sharing::Proportional`]
    /// possibly fewer from a segment, named in [`Candidates::shallow`] with the count it was
    /// asked for. Returning fewer rows than asked from a source that holds more breaks
    /// exhaustion: the scan may end early.
    fn search(&mut self, depth: usize, sharing: Sharing) -> Candidates;
}

/// One candidate source, searched on the caller's thread: the building block of the sequential
/// [`Sources`] implementation for slices.
pub trait CandidateSource {
    /// Whether [`CandidateSource::nearest`]'s distances are exact.
    fn exact(&self) -> bool;
    /// Whether a deeper search may find rows nearer than those a shallower one returned (a
    /// graph): such lists are [`Candidates::approximate`]. Default: no.
    fn approximate(&self) -> bool {
        false
    }
    /// Whether an approximate list comes from a graph walk ([`Candidates::walked`]). Default: no.
    fn walked(&self) -> bool {
        false
    }
    /// The `depth` nearest rows (or all, when fewer), sorted by [`Neighbor::order`].
    fn nearest(&self, depth: usize) -> Vec<Neighbor>;
}

impl<S: CandidateSource> Sources for [S] {
    /// Searches the sources one after the other, exact lists in slice order, each `depth` deep.
    fn search(&mut self, depth: usize, _: Sharing) -> Candidates {
        let mut candidates = Candidates::default();
        for source in self.iter() {
            let list = source.nearest(depth);
            if source.exact() {
                if source.approximate() {
                    candidates.approximate.push(candidates.exact.len());
                    if source.walked() {
                        candidates.walked.push(candidates.exact.len());
                    }
                }
                candidates.exact.push(list);
            } else {
                candidates.estimated.push(list);
            }
        }
        candidates
    }
}

/// Exact distances for estimated candidates.
pub trait Reranker {
    /// The exact distance of `row` to the query, or `None` when the row is invisible to the
    /// scan (it is then never asked for again and never returned by this scan).
    fn exact_distance(&mut self, row: u64) -> Option<f32>;
}

/// How a scan orders rows across its rounds (pgvector's `iterative_scan` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScanOrder {
    /// Rows come out in non-decreasing distance order, always: a row a deeper round finds nearer
    /// than the last row returned is skipped (pgvector's `strict_order`, and this scan's meaning
    /// of `off`).
    #[default]
    Strict,
    /// Every row a round finds comes out, also one nearer than rows returned before it (pgvector's
    /// `relaxed_order`): an unlimited scan returns every visible row, and the caller re-sorts
    /// when it needs exact order.
    Relaxed,
}

/// The settings of one [`Scan::next`] call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Depth of the first round (at least 1 is used).
    pub first_depth: usize,
    /// The tuple cap: no round starts once this many rows were returned or dropped as
    /// invisible, and no round asks for more than this many rows (at least 1 is used).
    pub max_tuples: usize,
    /// How many estimated candidates a round reranks, as a factor of its depth (values below 1
    /// count as 1).
    pub oversample: f32,
    /// Whether rows nearer than the last one returned are skipped ([`ScanOrder::Strict`]).
    pub order: ScanOrder,
}

/// The state of one progressive scan: the queue of rows found but not returned yet, the rows
/// returned or dropped, the current depth.
#[derive(Debug, Default)]
pub struct Scan {
    queue: VecDeque<Neighbor>,
    /// Rows returned, and rows dropped for good (invisible to the reranker, or nearer than a
    /// row returned before them in a strict scan). A row found but still queued is not here: a
    /// consumer that stops after a few rows (a `LIMIT`) never pays for the rest of the queue.
    returned: RowSet,
    /// The last row [`Scan::next`] returned: a later round skips rows nearer than it.
    last: Option<Neighbor>,
    depth: usize,
    finished: bool,
    rounds: u32,
}

impl Scan {
    /// A scan that has returned nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets everything: the next [`Scan::next`] starts over at the first depth.
    pub fn reset(&mut self) {
        self.queue.clear();
        self.returned.clear();
        self.last = None;
        self.depth = 0;
        self.finished = false;
        self.rounds = 0;
    }

    /// Rounds run since the last reset.
    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// The next row with its distance, or `None` at the end. Each row comes out at most once per
    /// scan; rows the reranker cannot see never come out; the rows of one round come out in
    /// distance order. With [`ScanOrder::Strict`] every row comes out in non-decreasing distance
    /// order: a row that a deeper round finds nearer than the last row returned (an approximate
    /// source missed it before, or it arrived since) is skipped, as pgvector's `strict_order`
    /// iterative scans skip it; to make that rare, a strict round returns only the nearest
    /// [`STRICT_SHARE`]-th of each approximate list ([`Candidates::frontier`]). With [`ScanOrder::Relaxed`] it comes out
    /// anyway. With exact sources that do not change, both are the same.
    ///
    /// A scan returns fewer than `2 · max_tuples` rows, and at most `max_tuples` when all
    /// sources are exact and do not change during the scan (`strata.max_scan_tuples`, unlimited
    /// by default, so that a consumer that keeps asking reaches every visible row).
    pub fn next<S: Sources + ?Sized, R: Reranker + ?Sized>(
        &mut self,
        limits: Limits,
        sources: &mut S,
        reranker: &mut R,
    ) -> Option<Neighbor> {
        let limit = limits.max_tuples.max(1);
        loop {
            while let Some(next) = self.queue.pop_front() {
                if !self.returned.insert(next.row) {
                    // Listed twice in its round (by two sources): it came out already.
                    continue;
                }
                self.last = Some(next);
                return Some(next);
            }
            if self.finished || self.returned.len() >= limit {
                return None;
            }
            self.depth = if self.depth == 0 { limits.first_depth.max(1) } else { next_depth(self.depth) }.min(limit);
            let sharing = if self.depth < limit { Sharing::Proportional } else { Sharing::Uniform };
            let queued = self.round(sources, reranker, limits, sharing, limit);
            if queued == 0 && self.depth >= limit {
                self.finished = true;
            }
        }
    }

    /// Runs one round at the current depth (at most `limit`, the tuple cap) and queues new
    /// results; returns how many it queued.
    fn round<S: Sources + ?Sized, R: Reranker + ?Sized>(
        &mut self,
        sources: &mut S,
        reranker: &mut R,
        limits: Limits,
        sharing: Sharing,
        limit: usize,
    ) -> usize {
        let oversample = limits.oversample;
        let depth = self.depth;
        let candidates = sources.search(depth, sharing);
        // Judged before reranks drop returned or invisible rows (each source returns what it was
        // asked for or all it has).
        let exhausted = candidates.exhausted(depth);
        // Strict rounds that are not the tuple cap's keep an approximate list's deeper part.
        let hold_back = (limits.order == ScanOrder::Strict && sharing == Sharing::Proportional)
            .then(|| limits.first_depth.max(1).saturating_mul(STRICT_HOLD_BACK_DEPTHS));
        let mut frontier = candidates.frontier(depth, hold_back);
        let Candidates { exact, estimated, .. } = candidates;
        let mut lists = exact;
        if !estimated.is_empty() {
            let candidates: Vec<Neighbor> = estimated.into_iter().flatten().collect();
            let reranked = self.rerank(candidates, reranker, depth, oversample);
            // A full reranked pool is approximate too: a row whose estimate kept it out of this
            // round's pool may be nearer than the pool's deeper part.
            if hold_back.is_some() && !exhausted && reranked.len() >= depth {
                // A rerank pool keeps the quarter (no cap: its misses are estimates, not a tail).
                let end = strict_share_end(&reranked, usize::MAX);
                frontier = [frontier, end].into_iter().flatten().min_by(Neighbor::order);
            }
            lists.push(reranked);
        }
        self.rounds += 1;
        let before = self.queue.len();
        // An exhausted round returns everything it found: shallow lists may together hold more
        // than the depth, though never more than the tuple cap.
        let take = if exhausted { lists.iter().map(Vec::len).sum::<usize>().clamp(depth, limit) } else { depth };
        for neighbor in merge_sorted(&lists, take) {
            if frontier.is_some_and(|last| neighbor.order(&last).is_gt()) {
                // A shallow list may hold nearer rows than this one: a deeper round finds them.
                break;
            }
            if self.returned.contains(&neighbor.row) {
                continue;
            }
            let nearer_than_returned = limits.order == ScanOrder::Strict
                && self.last.is_some_and(|last| neighbor.distance.total_cmp(&last.distance).is_lt());
            if nearer_than_returned {
                // A row nearer than the last one returned is skipped for good: see `next`.
                self.returned.insert(neighbor.row);
            } else {
                // Marked returned when it comes out (rounds run only once the queue is empty, so
                // by the next round every row queued now is in `returned`).
                self.queue.push_back(neighbor);
            }
        }
        if exhausted {
            // Every source returned fewer rows than asked: nothing more to find.
            self.finished = true;
        }
        self.queue.len() - before
    }

    /// Exact distances of the best `⌈oversample · depth⌉` candidates (by estimate) not returned
    /// yet; the `depth` nearest, sorted. Invisible rows are marked returned (never asked again).
    fn rerank<R: Reranker + ?Sized>(
        &mut self,
        mut candidates: Vec<Neighbor>,
        reranker: &mut R,
        depth: usize,
        oversample: f32,
    ) -> Vec<Neighbor> {
        candidates.sort_unstable_by(Neighbor::order);
        let pool = pool_size(depth, oversample);
        let mut seen = RowSet::default();
        let chosen: Vec<u64> = candidates
            .into_iter()
            .map(|n| n.row)
            .filter(|row| !self.returned.contains(row) && seen.insert(*row))
            .take(pool)
            .collect();
        let mut top = TopK::new(depth);
        for row in chosen {
            match reranker.exact_distance(row) {
                Some(distance) => {
                    top.push(Neighbor::new(row, distance));
                }
                None => {
                    self.returned.insert(row);
                }
            }
        }
        top.into_sorted()
    }
}

/// The `strata.*` parameters a scan reads (as resolved with pgvector's aliases,
/// [`crate::settings::IntSetting::resolve`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScanSettings {
    /// `strata.ef_search`.
    pub ef_search: i32,
    /// `strata.probes`.
    pub probes: i32,
    /// `strata.oversample`.
    pub oversample: f64,
    /// `strata.max_scan_tuples`.
    pub max_scan_tuples: i32,
    /// pgvector's `hnsw.iterative_scan` / `ivfflat.iterative_scan`
    /// ([`crate::settings::scan_order`]).
    pub order: ScanOrder,
}

impl ScanSettings {
    /// The scan's limits: the first round as deep as the HNSW candidate list (at least 10), the
    /// tuple cap at least 1.
    pub fn limits(&self) -> Limits {
        Limits {
            first_depth: (self.ef_search.max(0) as usize).max(10),
            max_tuples: self.max_scan_tuples.max(1) as usize,
            oversample: self.oversample as f32,
            order: self.order,
        }
    }

    /// The segment search parameters of a round `depth` deep: the HNSW candidate list at least
    /// as long as the depth.
    pub fn search_params(&self, depth: usize) -> SearchParams {
        SearchParams {
            ef_search: (self.ef_search.max(0) as usize).max(depth),
            probes: self.probes.max(0) as usize,
            oversample: self.oversample as f32,
        }
    }
}

/// The query of a scan: as given (segments take it so) and prepared for the index's metric,
/// with the filter its WHERE clause hands the index.
#[derive(Debug, Clone)]
pub struct ScanQuery {
    /// The query vector as given.
    pub values: Vec<f32>,
    /// Prepared for the metric (what memtables and reranks compute distances with).
    pub prepared: Query,
    /// The rows a scan may return: a predicate over the index's filter columns in storage form
    /// ([`FilterSchema::storage_predicate`]); `None`: every row.
    pub filter: Option<Predicate>,
    /// The index's filter columns (how memtable rows encode them).
    pub schema: FilterSchema,
    /// The index's vector words per row (the query's own length may differ for packed sparse
    /// rows, whose queries are packed at their own capacity).
    pub dims: usize,
    /// The table's row counts as its statistics had them when the scan began (`None`: not
    /// known): with the index's own row counts, a prior for the share of dead rows its segments
    /// hold before VACUUM ([`round::dead_prior`]).
    pub table_rows: Option<TableRows>,
}

/// A table's live rows and dead rows not yet vacuumed, as its statistics count them (estimates:
/// they may lag the table by a moment, and restart from zero after a crash).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableRows {
    /// Live rows.
    pub live: u64,
    /// Rows dead since the last VACUUM.
    pub dead: u64,
}

impl ScanQuery {
    /// The query `values` for an index configured as `config`; an error when the dimensions are
    /// not the index's (the caller names its column type in pgvector's message).
    pub fn new(values: Vec<f32>, config: &IndexConfig) -> Result<Self, WrongDimensions> {
        let packed = config.element == strata_engine::store::ElementKind::SparseF32;
        let fits = if packed {
            strata_engine::sparse_rows::capacity_of(values.len()).is_some()
        } else {
            values.len() == config.dims as usize
        };
        if !fits {
            return Err(WrongDimensions { expected: config.dims as usize, found: values.len() });
        }
        let prepared = Query::new_for(&values, config.metric, config.element);
        Ok(Self {
            values,
            prepared,
            filter: None,
            schema: config.filters,
            dims: config.dims as usize,
            table_rows: None,
        })
    }

    /// An unfiltered L2 query of `values` for an index of `values.len()` dimensions and no
    /// filter columns (the tests' query).
    #[cfg(test)]
    pub(crate) fn l2_for_tests(values: &[f32]) -> Self {
        Self {
            values: values.to_vec(),
            prepared: Query::new(values, strata_engine::metric::Metric::L2),
            filter: None,
            schema: FilterSchema::default(),
            dims: values.len(),
            table_rows: None,
        }
    }

    /// This query with the table's row counts (see [`ScanQuery::table_rows`]).
    #[must_use]
    pub fn with_table_rows(mut self, rows: Option<TableRows>) -> Self {
        self.table_rows = rows;
        self
    }

    /// This query restricted to the rows where `predicate` (over the index's filter columns,
    /// texts as given) is TRUE.
    #[must_use]
    pub fn with_filter(mut self, predicate: &Predicate) -> Self {
        self.filter = Some(self.schema.storage_predicate(predicate));
        self
    }

    /// Whether the memtable row `row` (vector, then filter words) passes the filter.
    ///
    /// # Panics
    /// When the row is not a row of this index, or the filter does not fit its columns (the
    /// caller builds both from the index's configuration).
    pub fn admits(&self, row: &[f32]) -> bool {
        let Some(filter) = &self.filter else { return true };
        let words: &[u32] = bytemuck::cast_slice(&row[self.dims..]);
        self.schema.row_matches(filter, words).expect("the filter fits the index's filter columns")
    }
}

/// The value of the ORDER BY operator for a row the scan returns at `distance` (the kernels'
/// distance, which orders the same way): the square root of the squared distance for L2, the
/// distance itself for the other metrics.
pub fn order_by_value(metric: Metric, distance: f32) -> f64 {
    match metric {
        Metric::L2 => f64::from(distance.max(0.0)).sqrt(),
        _ => f64::from(distance),
    }
}

/// What the planner is told an ordered scan costs on top of PostgreSQL's generic index costs,
/// in PostgreSQL's linear form: a startup cost plus a cost per row returned, which the planner
/// scales by the rows its LIMIT and the other WHERE clauses make the executor read.
///
/// A search examines about `ef_search` · log₂ rows · 4 candidates for the first `ef_search` rows
/// (at most every row), at 10 CPU operator costs each, and every further row costs the deeper
/// rounds that find it, about log₂ rows · 4 candidates — the measured cost of widening past a
/// WHERE clause the index does not apply (7.2 µs per row read at 100,000 rows, 68 candidates'
/// worth; docs/benchmarks/filtered.md). So the cost is linear in the rows read from the first:
/// `per_row` each, the startup holding only what the first round costs beyond that. A filter on
/// the index's filter columns admitting fewer rows than the search would examine is scanned
/// exactly in the first round: the startup holds that scan, and further rows cost nothing more.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScanCost {
    /// Candidates the first round examines (the index tuples the generic estimate charges pages
    /// for).
    pub examined: f64,
    /// The CPU cost charged before the first row.
    pub startup: f64,
    /// The CPU cost of each row the scan returns.
    pub per_row: f64,
}

impl ScanCost {
    /// The cost of a plan the index cannot serve (no `ORDER BY column <op> constant`): high
    /// enough that the planner never picks it.
    pub const PROHIBITIVE: f64 = f64::MAX / 1e10;

    /// The cost of a scan of an index of `tuples` rows with `ef_search` (at least 10 counted)
    /// when one CPU operator costs `cpu_operator_cost`.
    pub fn estimate(tuples: f64, ef_search: i32, cpu_operator_cost: f64) -> Self {
        Self::filtered(tuples, ef_search, cpu_operator_cost, 1.0)
    }

    /// The cost of a scan whose filter (the scan keys on filter columns) admits the fraction
    /// `selectivity` of the rows: each segment chooses the cheapest of an exact scan of the
    /// admitted rows, a filtered graph search and a post-checked search
    /// ([`strata_engine::filter::plan`]), so the candidates examined are the smaller of the
    /// admitted rows and the unfiltered search's, doubled for a selective filter (the filtered
    /// traversal's measured cost between 5 % and 20 %: about twice the unfiltered search).
    pub fn filtered(tuples: f64, ef_search: i32, cpu_operator_cost: f64, selectivity: f64) -> Self {
        let tuples = tuples.max(1.0);
        let selectivity = selectivity.clamp(0.0, 1.0);
        let ef = budget::size_scaled_ef(ef_search.max(10) as usize, tuples as u64) as f64;
        let per_candidate = cpu_operator_cost * 10.0;
        let row_candidates = tuples.log2().max(1.0) * 4.0 * (1.0 / selectivity.max(0.5)).min(2.0);
        let search = ef * row_candidates;
        let admitted = tuples * selectivity;
        if admitted < search {
            // The admitted rows are scanned exactly, all of them in the first round.
            let examined = admitted.max(1.0);
            return Self { examined, startup: examined * per_candidate, per_row: cpu_operator_cost };
        }
        let per_row = row_candidates * per_candidate;
        Self { examined: search, startup: (search - ef * row_candidates).max(0.0) * per_candidate, per_row }
    }
}

#[cfg(test)]
mod tests;
#[cfg(all(test, feature = "shuttle"))]
mod tests_filtered;
