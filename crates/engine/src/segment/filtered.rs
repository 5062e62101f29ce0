//! Filtered search on a segment: the allow-set from a predicate over the segment's filter
//! columns (or given by the caller), the strategy from [`crate::filter::plan::choose`], and a
//! report of what ran, for EXPLAIN.

use super::{query_fits, IndexView, SearchParams, Segment};
use crate::bitset::{Bitset, RowPredicate};
use crate::filter::plan::{self, Strategy};
use crate::filter::{FilterError, Predicate, Selectivity};
use crate::hnsw::{with_thread_scratch, FilterStrategy};
use crate::store::Query;
use crate::topk::Neighbor;

/// Which rows a filtered search may return (before deletions).
#[derive(Debug, Clone, Copy)]
pub enum AllowSet<'a> {
    /// Every row.
    All,
    /// The rows of a bitset (e.g. built by the caller from a memtable or a heap scan).
    Rows(&'a Bitset),
    /// The rows where a predicate over the segment's filter columns is TRUE.
    Predicate(&'a Predicate),
}

/// A filtered search's results and what it did.
#[derive(Debug, Clone, PartialEq)]
pub struct FilteredSearch {
    /// As [`Segment::search`]: nearest first, only allowed and not deleted rows.
    pub results: Vec<Neighbor>,
    /// The strategy the plan chose (for kinds without a graph: exact scan for flat segments,
    /// post-check for quantized and IVF ones, whose searches check the allow-set themselves).
    pub planned: Strategy,
    /// The strategy whose results came back: `planned`, or [`Strategy::ExactScan`] when a graph
    /// search found fewer than `k` allowed rows and the allowed rows were scanned.
    pub ran: Strategy,
    /// Rows allowed and not deleted (exact: counted on the allow-set).
    pub allowed: usize,
    /// The estimate from the column statistics, for a predicate.
    pub estimate: Option<Selectivity>,
    /// Rows whose distance was computed, where the kind counts them (flat and HNSW).
    pub rows_checked: Option<usize>,
}

impl Segment {
    /// The `k` nearest rows to `query` among those `allow` admits and `deleted` does not hold,
    /// choosing the strategy per [`plan::choose`] from the number of allowed rows.
    ///
    /// Guarantees: the contract of [`Segment::search`] (only allowed, undeleted rows; exactly
    /// `min(k, allowed)` results where vectors are stored); when the plan (or a graph search's
    /// fallback) runs an exact scan, the results equal brute force over the allowed rows, ties
    /// broken by row. Fails when the predicate names a column the segment lacks or misuses a
    /// type, and with [`FilterError::UnknownColumn`] for a predicate on a segment without a
    /// FILTER section.
    ///
    /// # Panics
    /// When `query` has a different number of dimensions than the segment.
    pub fn search_filtered(
        &self,
        query: &[f32],
        k: usize,
        params: &SearchParams,
        allow: AllowSet<'_>,
        deleted: Option<&Bitset>,
    ) -> Result<FilteredSearch, FilterError> {
        let views = self.cell.borrow_dependent();
        let rows = self.len();
        let (owned, estimate) = match allow {
            AllowSet::Predicate(predicate) => {
                let columns = views.filters.as_ref().ok_or(FilterError::UnknownColumn(0))?;
                (Some(columns.allowed(predicate)?), Some(columns.estimate(predicate)?))
            }
            _ => (None, None),
        };
        let filter = match allow {
            AllowSet::All => None,
            AllowSet::Rows(rows) => Some(rows),
            AllowSet::Predicate(_) => owned.as_ref(),
        };
        let predicate = RowPredicate { filter, deleted };
        let allowed = predicate.count_accepted(rows);
        let mut out = FilteredSearch {
            results: Vec::new(),
            planned: Strategy::PostCheck,
            ran: Strategy::PostCheck,
            allowed,
            estimate,
            rows_checked: None,
        };
        match (&views.index, views.store.as_ref()) {
            (IndexView::Hnsw(view), Some(store)) => {
                assert!(query_fits(query.len(), &views.meta), "query dimensions differ from the segment's");
                let q = Query::new_for(query, views.meta.metric, views.meta.element);
                let ef = params.ef_search.max(k);
                out.planned = if predicate.accepts_all() {
                    Strategy::PostCheck
                } else {
                    plan::choose(view.node_count(), allowed as f64, k, ef)
                };
                let strategy = match out.planned {
                    Strategy::ExactScan => FilterStrategy::Exact,
                    Strategy::FilteredGraph => FilterStrategy::TwoHop,
                    Strategy::PostCheck => FilterStrategy::Graph,
                };
                let hnsw_params = crate::hnsw::SearchParams { ef_search: ef, strategy, accepted: Some(allowed) };
                let (results, report) =
                    with_thread_scratch(|scratch| view.search_reported(scratch, store, &q, k, &hnsw_params, predicate));
                out.ran = if report.strategy == FilterStrategy::Exact { Strategy::ExactScan } else { out.planned };
                out.rows_checked = Some(report.distances);
                out.results = results;
            }
            (IndexView::Flat, Some(_)) => {
                out.planned = Strategy::ExactScan;
                out.ran = Strategy::ExactScan;
                out.rows_checked = Some(allowed);
                out.results = self.search(query, k, params, predicate);
            }
            _ => out.results = self.search(query, k, params, predicate),
        }
        Ok(out)
    }
}
