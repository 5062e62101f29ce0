//! Ordered index scans.
//!
//! A scan answers `ORDER BY column <op> query` by rounds: each round asks every memtable and
//! segment for its `depth` nearest rows (segments in parallel on the search pool while the
//! backend scans the memtables), merges them, and queues the ones not yet returned in distance
//! order. When the queue runs dry — the executor keeps asking because rows were filtered out by a
//! WHERE clause or invisible to the snapshot — the next round doubles the depth. The scan ends
//! when everything reachable has been returned or `strata.max_scan_tuples` is reached.
//! Memtables are exact; segments are as exact as their kind and settings. Segments that keep no
//! vectors (`rerank = 'heap'`) return candidates with estimated distances: the backend pools the
//! candidates of all such segments, keeps the `⌈strata.oversample · depth⌉` best estimates, reads
//! their rows from the table (through the scan's snapshot; rows it cannot see are skipped, as the
//! executor would skip them) and computes their exact distances before merging.

use std::collections::{HashSet, VecDeque};

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::bitset::RowPredicate;
use strata_engine::metric::Metric;
use strata_engine::segment::SearchParams;
use strata_engine::store::{ElementKind, Query};
use strata_engine::topk::{Neighbor, TopK};

use super::heap::HeapVectors;
use super::segments::{segment_set, OpenSegment};
use super::state::{self, IndexHandle};
use crate::fmgr::error;
use crate::gucs;
use crate::memtable::{unpack_tid, Memtable};

/// Per-scan state, kept in the scan's memory context.
pub struct ScanState {
    handle: IndexHandle,
    /// The scan descriptor (for the heap relation and snapshot of heap reranks).
    scan: pg_sys::IndexScanDesc,
    /// Reader of the table, opened on the first heap rerank and closed by `amendscan`.
    heap: Option<HeapVectors>,
    query: Option<Vec<f32>>,
    queue: VecDeque<Neighbor>,
    returned: HashSet<u64>,
    depth: usize,
    finished: bool,
    /// Rounds run (for EXPLAIN-style statistics).
    pub rounds: u32,
    /// Segments searched across rounds.
    pub segments_searched: u64,
    /// Memtable rows examined across rounds.
    pub memtable_rows: u64,
}

/// `ambeginscan`.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn ambeginscan(
    index: pg_sys::Relation,
    nkeys: i32,
    norderbys: i32,
) -> pg_sys::IndexScanDesc {
    // SAFETY: standard scan allocation; the state lives in the scan's memory context and is
    // dropped when that context is deleted.
    unsafe {
        let scan = pg_sys::RelationGetIndexScan(index, nkeys, norderbys);
        // Access methods that order by operator provide the ORDER BY value slots themselves.
        let slots = norderbys.max(1) as usize;
        (*scan).xs_orderbyvals = pg_sys::palloc0(slots * std::mem::size_of::<pg_sys::Datum>()).cast();
        (*scan).xs_orderbynulls = pg_sys::palloc0(slots * std::mem::size_of::<bool>()).cast();
        let state = ScanState {
            handle: state::open(index),
            scan,
            heap: None,
            query: None,
            queue: VecDeque::new(),
            returned: HashSet::new(),
            depth: 0,
            finished: false,
            rounds: 0,
            segments_searched: 0,
            memtable_rows: 0,
        };
        (*scan).opaque = pgrx::PgMemoryContexts::CurrentMemoryContext.leak_and_drop_on_delete(state).cast();
        scan
    }
}

/// `amrescan`: takes the query vector from the ORDER BY key.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amrescan(
    scan: pg_sys::IndexScanDesc,
    _keys: pg_sys::ScanKey,
    _nkeys: i32,
    orderbys: pg_sys::ScanKey,
    norderbys: i32,
) {
    // SAFETY: `scan` is ours; `orderbys` holds `norderbys` keys, copied into the scan descriptor
    // as PostgreSQL's own AMs do; the argument datum is a value of the index column's type.
    unsafe {
        let state = &mut *(*scan).opaque.cast::<ScanState>();
        if !orderbys.is_null() && norderbys > 0 {
            std::ptr::copy(orderbys, (*scan).orderByData, norderbys as usize);
        }
        state.queue.clear();
        state.returned.clear();
        state.depth = 0;
        state.finished = false;
        state.rounds = 0;
        state.query = None;
        if norderbys > 0 {
            let key = &*(*scan).orderByData;
            let dims = state.handle.config.dims as usize;
            let values = if key.sk_flags & pg_sys::SK_ISNULL as i32 != 0 {
                vec![0.0; dims]
            } else if state.handle.config.element == ElementKind::F16 {
                crate::types::widened::<crate::types::HalfVec>(key.sk_argument)
            } else {
                crate::types::widened::<crate::types::Vector>(key.sk_argument)
            };
            if values.len() != dims {
                let is_half = state.handle.config.element == ElementKind::F16;
                let type_name = if is_half { "halfvec" } else { "vector" };
                error(
                    PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
                    format!("different {type_name} dimensions {dims} and {}", values.len()),
                );
            }
            state.query = Some(values);
        }
    }
}

/// Searches one segment for its `depth` nearest live rows, as (TID, distance).
fn search_segment(open: &OpenSegment, query: &[f32], depth: usize, params: &SearchParams) -> Vec<Neighbor> {
    let predicate = RowPredicate { filter: None, deleted: open.deleted.as_ref() };
    open.segment
        .search(query, depth, params, predicate)
        .into_iter()
        .map(|n| Neighbor::new(open.segment.id(n.row as usize), n.distance))
        .collect()
}

fn search_memtables(memtables: &[Memtable], query: &Query, depth: usize) -> (Vec<Neighbor>, u64) {
    let mut top = TopK::new(depth);
    let mut rows = 0;
    for memtable in memtables {
        memtable.distances(query, |tid, distance| {
            rows += 1;
            top.push(Neighbor::new(tid, distance));
        });
    }
    (top.into_sorted(), rows)
}

impl ScanState {
    /// Runs one round at the current depth and queues new results; returns how many it queued.
    fn round(&mut self) -> usize {
        let Some(values) = self.query.as_ref() else {
            return 0;
        };
        let metric = self.handle.config.metric;
        let query = Query::new(values, metric);
        let params = SearchParams {
            ef_search: (gucs::EF_SEARCH.get() as usize).max(self.depth),
            probes: gucs::PROBES.get() as usize,
            oversample: gucs::OVERSAMPLE.get() as f32,
        };
        let depth = self.depth;
        let (memtables, generation) = state::snapshot(&self.handle);
        // Released when dropped, also when an error (a damaged segment) unwinds: a slab a scan
        // forgot would never be freed.
        let readers = state::Readers(&memtables);
        let set = segment_set(&self.handle, generation);
        let threads = gucs::SEARCH_THREADS.get() as usize;
        let mut lists: Vec<Vec<Neighbor>> = Vec::with_capacity(set.segments.len() + 2);
        let memtable_rows;
        if let Some(pool) = crate::threads::search_pool(threads).filter(|_| set.segments.len() > 1) {
            let mut segment_results: Vec<Vec<Neighbor>> = vec![Vec::new(); set.segments.len()];
            let mut memtable_result = (Vec::new(), 0);
            pool.scope(|scope| {
                for (open, out) in set.segments.iter().zip(segment_results.iter_mut()) {
                    scope.spawn(|_| *out = search_segment(open, values, depth, &params));
                }
                scope.spawn(|_| memtable_result = search_memtables(&memtables, &query, depth));
            });
            lists.extend(segment_results);
            memtable_rows = memtable_result.1;
            lists.push(memtable_result.0);
        } else {
            for open in &set.segments {
                lists.push(search_segment(open, values, depth, &params));
            }
            let (found, rows) = search_memtables(&memtables, &query, depth);
            memtable_rows = rows;
            lists.push(found);
        }
        drop(readers);
        // Counted before reranks drop returned or invisible rows: fewer than `depth` here means
        // every memtable and segment is exhausted (each returns `depth` rows or candidates,
        // or all it has).
        let available: usize = lists.iter().map(Vec::len).sum();
        // Candidates of segments without vectors carry estimates: rerank them from the table.
        // `lists` holds one list per segment, in `set.segments` order, then the memtables' list.
        let (exact, estimated): (Vec<_>, Vec<_>) = lists
            .into_iter()
            .zip(set.segments.iter().map(|s| s.segment.stores_vectors()).chain([true]))
            .partition(|(_, exact)| *exact);
        let mut lists: Vec<Vec<Neighbor>> = exact.into_iter().map(|(list, _)| list).collect();
        if !estimated.is_empty() {
            let candidates: Vec<Neighbor> = estimated.into_iter().flat_map(|(list, _)| list).collect();
            lists.push(self.rerank_from_heap(candidates, &query, depth, params.oversample));
        }
        self.rounds += 1;
        self.segments_searched += set.segments.len() as u64;
        self.memtable_rows += memtable_rows;

        crate::explain::record_round(set.segments.len() as u64, memtable_rows, available as u64);
        let merged = strata_engine::topk::merge_sorted(&lists, depth);
        let before = self.queue.len();
        for neighbor in merged {
            if self.returned.insert(neighbor.row) {
                self.queue.push_back(neighbor);
            }
        }
        if available < depth {
            // Every memtable and segment returned fewer rows than asked: nothing more to find.
            self.finished = true;
        }
        let _ = metric;
        self.queue.len() - before
    }

    /// Exact distances of the best `⌈oversample · depth⌉` candidates (by estimate) not returned
    /// yet, read from the table; the `depth` nearest, sorted. Rows the scan's snapshot cannot see
    /// are dropped (and never fetched again by this scan).
    fn rerank_from_heap(
        &mut self,
        mut candidates: Vec<Neighbor>,
        query: &Query,
        depth: usize,
        oversample: f32,
    ) -> Vec<Neighbor> {
        candidates.sort_unstable_by(Neighbor::order);
        let pool = strata_engine::quant::pool_size(depth, oversample);
        let mut seen = HashSet::new();
        let chosen: Vec<u64> = candidates
            .into_iter()
            .map(|n| n.row)
            .filter(|row| !self.returned.contains(row) && seen.insert(*row))
            .take(pool)
            .collect();
        // SAFETY: the scan descriptor is ours and alive; its heap relation (or the one the reader
        // opens) and snapshot are valid for the scan, on the backend's thread.
        let reader = self.heap.get_or_insert_with(|| unsafe {
            HeapVectors::begin((*self.scan).indexRelation, (*self.scan).heapRelation)
        });
        // SAFETY: as above; index_beginscan set the snapshot before the first amgettuple.
        let snapshot = unsafe { (*self.scan).xs_snapshot };
        let mut top = TopK::new(depth);
        for row in chosen {
            // SAFETY: as above.
            match unsafe { reader.fetch(&self.handle, row, snapshot) } {
                Some(vector) => {
                    top.push(Neighbor::new(row, query.distance_f32(&vector)));
                }
                None => {
                    self.returned.insert(row);
                }
            }
        }
        top.into_sorted()
    }

    fn next(&mut self) -> Option<Neighbor> {
        let limit = gucs::MAX_SCAN_TUPLES.get().max(1) as usize;
        loop {
            if let Some(next) = self.queue.pop_front() {
                return Some(next);
            }
            if self.finished || self.returned.len() >= limit {
                return None;
            }
            self.depth =
                if self.depth == 0 { (gucs::EF_SEARCH.get() as usize).max(10) } else { self.depth.saturating_mul(2) }
                    .min(limit.max(1));
            let queued = self.round();
            if queued == 0 && self.depth >= limit {
                self.finished = true;
            }
        }
    }
}

/// `amgettuple`: the next TID in distance order.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amgettuple(
    scan: pg_sys::IndexScanDesc,
    _direction: pg_sys::ScanDirection::Type,
) -> bool {
    // SAFETY: `scan` is ours (opaque set by ambeginscan); we set the heap TID and the ORDER BY
    // value slots that RelationGetIndexScan allocated for `numberOfOrderBys` keys.
    unsafe {
        let state = &mut *(*scan).opaque.cast::<ScanState>();
        let Some(next) = state.next() else {
            return false;
        };
        (*scan).xs_heaptid = unpack_tid(next.row);
        (*scan).xs_recheck = false;
        (*scan).xs_recheckorderby = false;
        if (*scan).numberOfOrderBys > 0 {
            let metric = state.handle.config.metric;
            let distance = match metric {
                Metric::L2 => f64::from(next.distance.max(0.0)).sqrt(),
                _ => f64::from(next.distance),
            };
            *(*scan).xs_orderbyvals = pg_sys::Datum::from(distance.to_bits());
            *(*scan).xs_orderbynulls = false;
        }
        true
    }
}

/// `amendscan`: closes the table reader of heap reranks.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amendscan(scan: pg_sys::IndexScanDesc) {
    // SAFETY: `scan` is ours (opaque set by ambeginscan); the reader was opened in this scan.
    unsafe {
        let state = &mut *(*scan).opaque.cast::<ScanState>();
        if let Some(reader) = state.heap.take() {
            reader.end();
        }
    }
}
