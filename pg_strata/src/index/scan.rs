//! Ordered index scans: the PostgreSQL side of `strata_lsm::scan`.
//!
//! The progressive scan (rounds, depth doubling, the heap-rerank pool, exhaustion judged before
//! reranks drop rows, `strata.max_scan_tuples`, the set of returned rows) is
//! [`strata_lsm::scan::Scan`]. This module supplies its sources and its reranker: each round
//! takes a snapshot of the index's memtables and manifest generation, searches the segments in
//! parallel on the search pool's helper threads while the backend scans the memtables (the
//! memtables' reader counts held by the snapshot until it is dropped), and hands the lists over,
//! exact (memtables, segments with vectors) or estimated (segments without vectors,
//! `rerank = 'heap'`). Estimated candidates are reranked from the table on the backend's own
//! thread, through the scan's snapshot; rows it cannot see are skipped, as the executor would
//! skip them.

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::segment::Segment;
use strata_engine::store::{ColumnType, Query};
use strata_engine::topk::Neighbor;
use strata_lsm::dead_rows::DeadRowReports;
use strata_lsm::scan::round::{self, Parallel};
use strata_lsm::scan::{order_by_value, Candidates, Reranker, Scan, ScanQuery, ScanSettings, Sharing, Sources};

use super::heap::HeapVectors;

use super::segments::{memtable_codes, segment_set};
use crate::access::state::{self, IndexHandle};
use crate::fmgr::error;
use crate::gucs;
use crate::memtable::unpack_tid;

/// The scan parameters in effect now (read once per (re)scan: each one is a lookup of
/// PostgreSQL's configuration, pgvector's alias names included).
fn settings() -> ScanSettings {
    ScanSettings {
        ef_search: gucs::ef_search(),
        probes: gucs::probes(),
        oversample: gucs::OVERSAMPLE.get(),
        max_scan_tuples: gucs::max_scan_tuples(),
        order: gucs::scan_order(),
    }
}

/// Per-scan state, kept in the scan's memory context.
pub struct ScanState {
    handle: IndexHandle,
    /// The scan descriptor (for the heap relation and snapshot of heap reranks).
    scan: pg_sys::IndexScanDesc,
    /// Reader of the table, opened on the first heap rerank and closed by `amendscan`.
    heap: Option<HeapVectors>,
    query: Option<ScanQuery>,
    /// The scan parameters, read when the scan (re)starts.
    settings: ScanSettings,
    /// Whether `settings` were read by `ambeginscan` and no `amrescan` has run since (the first
    /// `amrescan` of a scan follows at once and keeps them).
    settings_fresh: bool,
    /// Whether the scan has keys on filter columns (its rows are then rechecked by the executor).
    filtered: bool,
    /// The progressive scan: queue, returned rows, depth.
    progress: Scan,
    /// The segments' graph walks, continued by each deeper round of this (re)scan.
    walks: round::SegmentWalks,
    /// Rows the executor found dead, with the origins of the segment rows this scan listed,
    /// applied as hints when the scan ends or restarts (`strata_lsm::dead_rows`).
    dead_rows: DeadRowReports<Segment>,
    /// The TID `amgettuple` returned last (the one `kill_prior_tuple` speaks of).
    last_returned: Option<u64>,
    /// Whether this (re)scan was counted in the index's statistics (`idx_scan`) yet.
    counted: bool,
}

/// `ambeginscan`.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn ambeginscan(
    index: pg_sys::Relation,
    nkeys: i32,
    norderbys: i32,
) -> pg_sys::IndexScanDesc {
    // An iterative_scan value pgvector refuses is an error when the scan starts.
    let settings = settings();
    // SAFETY: standard scan allocation; the state lives in the scan's memory context and is
    // dropped when that context is deleted.
    unsafe {
        let scan = pg_sys::RelationGetIndexScan(index, nkeys, norderbys);
        // Access methods that order by operator provide the ORDER BY value slots themselves.
        let slots = norderbys.max(1) as usize;
        (*scan).xs_orderbyvals = pg_sys::palloc0(slots * std::mem::size_of::<pg_sys::Datum>()).cast();
        (*scan).xs_orderbynulls = pg_sys::palloc0(slots * std::mem::size_of::<bool>()).cast();
        let state = ScanState {
            handle: crate::access::opening::open(index),
            scan,
            heap: None,
            query: None,
            settings,
            settings_fresh: true,
            filtered: false,
            progress: Scan::new(),
            walks: round::SegmentWalks::new(),
            dead_rows: DeadRowReports::new(),
            last_returned: None,
            counted: false,
        };
        (*scan).opaque = pgrx::PgMemoryContexts::CurrentMemoryContext.leak_and_drop_on_delete(state).cast();
        scan
    }
}

/// `amrescan`: takes the query vector from the ORDER BY key and the filter from the scan keys on
/// filter columns. A scan without ORDER BY (keys only) returns every row its filter admits.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amrescan(
    scan: pg_sys::IndexScanDesc,
    keys: pg_sys::ScanKey,
    nkeys: i32,
    orderbys: pg_sys::ScanKey,
    norderbys: i32,
) {
    // SAFETY: `scan` is ours; `keys` and `orderbys` hold `nkeys` and `norderbys` keys, copied
    // into the scan descriptor as PostgreSQL's own AMs do; the ORDER BY argument is a value of
    // the index column's type, the keys' arguments values of their subtypes.
    unsafe {
        let state = &mut *(*scan).opaque.cast::<ScanState>();
        // On a standby: take in what replay brought since the last scan, before this scan's
        // first snapshot of memtables and segments.
        crate::access::standby::absorb((*scan).indexRelation, &state.handle);
        if !orderbys.is_null() && norderbys > 0 {
            std::ptr::copy(orderbys, (*scan).orderByData, norderbys as usize);
        }
        if !keys.is_null() && nkeys > 0 {
            std::ptr::copy(keys, (*scan).keyData, nkeys as usize);
        }
        state.apply_dead_rows(scan);
        state.progress.reset();
        state.walks.clear();
        state.counted = false;
        state.query = None;
        if !std::mem::replace(&mut state.settings_fresh, false) {
            state.settings = settings();
        }
        let filter =
            super::filters::scan_predicate(&state.handle.config.filters, (*scan).keyData, (*scan).numberOfKeys);
        state.filtered = filter.is_some();
        let dims = state.handle.config.dims as usize;
        if norderbys <= 0 {
            // Keys only (the planner chose this index for its filter columns alone): every row
            // the filter admits, nearest to the origin first.
            if let Some(filter) = &filter {
                let query = ScanQuery::new(vec![0.0; dims], &state.handle.config).expect("the index's dimensions");
                state.query = Some(query.with_filter(filter));
            }
        }
        if norderbys > 0 {
            let key = &*(*scan).orderByData;
            let column = super::column_of((*scan).indexRelation);
            let values = if key.sk_flags & pg_sys::SK_ISNULL as i32 != 0 {
                vec![0.0; dims]
            } else if state.handle.config.element == strata_engine::store::ElementKind::Bits {
                super::keys::packed_bits((*scan).indexRelation, key.sk_argument)
            } else if state.handle.config.element == strata_engine::store::ElementKind::SparseF32 {
                let dim = crate::types::sparse::sparse(key.sk_argument).dim();
                let typmod = (*crate::pg_compat::tuple_desc_attr((*(*scan).indexRelation).rd_att, 0)).atttypmod;
                if typmod > 0 && dim != typmod {
                    error(
                        PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
                        format!("different sparsevec dimensions {typmod} and {dim}"),
                    );
                }
                super::keys::packed(key.sk_argument, None).expect("a query packs at its own capacity")
            } else {
                super::keys::widened(column, key.sk_argument)
            };
            let query = ScanQuery::new(values, &state.handle.config).unwrap_or_else(|e| {
                let message = if column == ColumnType::Bit {
                    let length = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
                    strata_engine::vector_value::VectorError::DifferentBitLengths {
                        a: length(e.expected),
                        b: length(e.found),
                    }
                    .to_string()
                } else {
                    format!("different {} dimensions {} and {}", column.sql_name(), e.expected, e.found)
                };
                error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, message)
            });
            let query = query.with_table_rows(table_rows((*scan).indexRelation));
            state.query = Some(match &filter {
                Some(filter) => query.with_filter(filter),
                None => query,
            });
        }
    }
}

/// The indexed table's live and unvacuumed dead rows from its statistics (a prior for the dead
/// rows the index's segments hold, [`strata_lsm::scan::round::dead_prior`]); `None` on a
/// standby, whose statistics do not count the primary's changes, or when the table has none.
unsafe fn table_rows(index: pg_sys::Relation) -> Option<strata_lsm::scan::TableRows> {
    if crate::fmgr::in_recovery() {
        return None;
    }
    // SAFETY: `index` is the scan's open index relation, so `rd_index` is its valid pg_index
    // row; `pgstat_fetch_stat_tabentry` returns NULL or a pointer into this backend's stats
    // snapshot, valid until the transaction ends, which outlives this read.
    unsafe {
        let entry = pg_sys::pgstat_fetch_stat_tabentry((*(*index).rd_index).indrelid);
        entry.as_ref().map(|e| {
            let (live, dead) = crate::pg_compat::live_and_dead_rows(e);
            strata_lsm::scan::TableRows {
                live: u64::try_from(live).unwrap_or(0),
                dead: u64::try_from(dead).unwrap_or(0),
            }
        })
    }
}

/// One round's view of the index: the memtables and segments live when it runs.
struct IndexSources<'a> {
    handle: &'a IndexHandle,
    settings: &'a ScanSettings,
    query: &'a ScanQuery,
    dead_rows: &'a mut DeadRowReports<Segment>,
    walks: &'a mut round::SegmentWalks,
}

impl Sources for IndexSources<'_> {
    /// Segments in parallel on the search pool (when there are several), memtables alongside;
    /// lists of segments with vectors (in manifest order) then the memtables' list are exact.
    fn search(&mut self, depth: usize, sharing: Sharing) -> Candidates {
        let params = self.settings.search_params(depth);
        // The memtables' reader counts are lowered when dropped, also when an error (a damaged
        // segment) unwinds.
        let (mut memtables, generation) = state::snapshot(self.handle);
        let set = segment_set(self.handle, generation);
        // The set may be newer than the snapshot: a memtable it holds is searched there only.
        memtables.release_held(|id| set.covers(id));
        let pool = crate::threads::search_pool(gucs::SEARCH_THREADS.get() as usize).map(SearchPool);
        let parallel = pool.as_ref().map(|pool| pool as &dyn Parallel);
        let codes = memtable_codes(self.handle, &memtables, self.query, pool.as_ref().map(|p| &*p.0));
        let mut found = round::search_continuing(
            &set.segments,
            &memtables,
            &codes,
            self.query,
            depth,
            &params,
            sharing,
            parallel,
            self.walks,
        );
        drop(memtables);
        self.dead_rows.record(std::mem::take(&mut found.origins));
        let available = found.candidates.available() as u64;
        let filtered = self.query.filter.is_some().then_some(&found.filtered);
        crate::explain::record_round(set.segments.len() as u64, &found, available, filtered);
        found.candidates
    }
}

/// The search pool's helper threads as strata-lsm's [`Parallel`] runner (its jobs make no
/// PostgreSQL calls).
struct SearchPool(std::sync::Arc<rayon::ThreadPool>);

impl Parallel for SearchPool {
    fn run_all<'s>(&self, jobs: Vec<Box<dyn FnOnce() + Send + 's>>) {
        self.0.scope(|scope| {
            for job in jobs {
                scope.spawn(move |_| job());
            }
        });
    }
}

/// Exact distances read from the table through the scan's snapshot, on the backend's thread.
struct HeapRerank<'a> {
    scan: pg_sys::IndexScanDesc,
    handle: &'a IndexHandle,
    heap: &'a mut Option<HeapVectors>,
    query: &'a Query,
}

impl Reranker for HeapRerank<'_> {
    /// `None` for rows the scan's snapshot cannot see (or that hold no usable vector).
    fn exact_distance(&mut self, row: u64) -> Option<f32> {
        // SAFETY: the scan descriptor is ours and alive; its heap relation (or the one the reader
        // opens) and snapshot are valid for the scan, on the backend's thread.
        let reader = self.heap.get_or_insert_with(|| unsafe {
            HeapVectors::begin((*self.scan).indexRelation, (*self.scan).heapRelation)
        });
        // SAFETY: the scan descriptor is ours and alive for the scan; index_beginscan set the
        // snapshot before the first amgettuple.
        let snapshot = unsafe { (*self.scan).xs_snapshot };
        // SAFETY: `reader` reads the scan's heap under the scan's snapshot, on the backend's
        // thread, while the scan (and so both relations) is open.
        let vector = unsafe { reader.fetch(self.handle, row, snapshot, false) }?;
        Some(self.query.distance_f32(&vector))
    }
}

impl ScanState {
    /// Takes in the executor's verdict on the row returned last (`kill_prior_tuple`: dead to every
    /// transaction; PostgreSQL sets it only then, and never on a standby).
    fn note_prior(&mut self, scan: pg_sys::IndexScanDesc) {
        // SAFETY: `scan` is this state's live scan descriptor.
        if unsafe { (*scan).kill_prior_tuple } {
            if let Some(tid) = self.last_returned.take() {
                self.dead_rows.report_dead(tid);
            }
        }
    }

    /// Hints the rows found dead in the segments that listed them, for later searches.
    fn apply_dead_rows(&mut self, scan: pg_sys::IndexScanDesc) {
        self.note_prior(scan);
        self.last_returned = None;
        crate::explain::record_hinted(self.dead_rows.apply());
    }

    fn next(&mut self) -> Option<Neighbor> {
        let query = self.query.as_ref()?;
        let limits = self.settings.limits();
        let mut sources = IndexSources {
            handle: &self.handle,
            settings: &self.settings,
            query,
            dead_rows: &mut self.dead_rows,
            walks: &mut self.walks,
        };
        let mut reranker =
            HeapRerank { scan: self.scan, handle: &self.handle, heap: &mut self.heap, query: &query.prepared };
        self.progress.next(limits, &mut sources, &mut reranker)
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
        if !state.counted {
            state.counted = true;
            crate::access::pgstat::count_index_scan(scan);
        }
        state.note_prior(scan);
        let Some(next) = state.next() else {
            state.last_returned = None;
            return false;
        };
        state.last_returned = Some(next.row);
        state.dead_rows.report_returned(next.row);
        (*scan).xs_heaptid = unpack_tid(next.row);
        // Filter columns hold texts by hash, and keys the index cannot apply are left out of its
        // filter: the executor rechecks the scan's conditions on every row it returns.
        (*scan).xs_recheck = state.filtered;
        (*scan).xs_recheckorderby = false;
        if (*scan).numberOfOrderBys > 0 {
            let distance = order_by_value(state.handle.config.metric, next.distance);
            *(*scan).xs_orderbyvals = pg_sys::Datum::from(distance.to_bits());
            *(*scan).xs_orderbynulls = false;
        }
        true
    }
}

/// `amendscan`: hints the rows found dead and closes the table reader of heap reranks.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amendscan(scan: pg_sys::IndexScanDesc) {
    // SAFETY: `scan` is ours (opaque set by ambeginscan); the reader was opened in this scan.
    unsafe {
        let state = &mut *(*scan).opaque.cast::<ScanState>();
        state.apply_dead_rows(scan);
        if let Some(reader) = state.heap.take() {
            reader.end();
        }
    }
}
