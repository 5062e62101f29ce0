//! Exact search: every accepted row's distance, best `k` kept.

use crate::bitset::RowPredicate;
use crate::store::{Query, VectorStore};
use crate::topk::{Neighbor, Selection};

/// Below this fraction of accepted rows, iterate the filter's members instead of all rows.
const SPARSE_FILTER_FRACTION: f64 = 0.05;

/// The exact `k` nearest accepted rows, nearest first.
pub(crate) fn search(store: &VectorStore<'_>, query: &Query, k: usize, predicate: RowPredicate<'_>) -> Vec<Neighbor> {
    let mut top = Selection::new(k);
    let rows = store.len();
    let mut consider = |row: usize| {
        if predicate.accepts(row) {
            top.push(row, store.distance(query, row));
        }
    };
    match (predicate.filter, predicate.deleted) {
        (Some(filter), _) if (filter.count() as f64) < SPARSE_FILTER_FRACTION * rows as f64 => {
            filter.iter().filter(|&row| row < rows).for_each(&mut consider);
        }
        // Every row: the store's own loop, with the deletion bitmap checked after the distance
        // (cheaper than a branch per row before it when few rows are deleted).
        (None, deleted) => store.for_each_distance(query, |row, distance| {
            if !deleted.is_some_and(|d| d.contains(row)) {
                top.push(row, distance);
            }
        }),
        _ => (0..rows).for_each(&mut consider),
    }
    top.into_sorted()
}
