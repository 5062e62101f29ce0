//! Ordered scans of a bm25 index: `ORDER BY body <@> query` best first.
//!
//! The query is prepared once per scan against the index's global statistics
//! ([`super::query::prepare`]) and kept, so that every row the scan returns is scored with the
//! same `N`, `avgdl` and IDFs. Which rows come out and when the scan stops is
//! [`strata_text::RankedScan`]: rounds of Block-Max WAND ([`strata_text::search`]) over every
//! source for the `k` best rows (exhaustive scoring instead under `strata.bm25_block_max =
//! off`), ten first, four times as many each time the executor has taken them all, and at most
//! `strata.max_scan_tuples` rows, as for vector scans. Rows that hold no query lexeme are never
//! returned.

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_text::{Bm25Query, RankedScan};

use super::query::{text_of, QueryValue};
use crate::access::state::IndexHandle;
use crate::fmgr::error;
use crate::memtable::unpack_tid;

/// Per-scan state, kept in the scan's memory context.
struct ScanState {
    handle: IndexHandle,
    /// The index's text search configuration.
    config: pg_sys::Oid,
    /// The query text of the ORDER BY key (`None`: no ordering key, nothing to return).
    query: Option<String>,
    /// The query prepared on the first round.
    prepared: Option<Bm25Query>,
    /// Rows found, rows returned, the next round's size.
    progress: RankedScan,
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
    // SAFETY: standard scan allocation; the state lives in the scan's memory context and is
    // dropped when that context is deleted.
    unsafe {
        let scan = pg_sys::RelationGetIndexScan(index, nkeys, norderbys);
        let slots = norderbys.max(1) as usize;
        (*scan).xs_orderbyvals = pg_sys::palloc0(slots * std::mem::size_of::<pg_sys::Datum>()).cast();
        (*scan).xs_orderbynulls = pg_sys::palloc0(slots * std::mem::size_of::<bool>()).cast();
        let handle = crate::access::opening::open(index);
        let state = ScanState {
            config: super::text_config_of(index, &handle),
            handle,
            query: None,
            prepared: None,
            progress: RankedScan::new(),
            counted: false,
        };
        (*scan).opaque = pgrx::PgMemoryContexts::CurrentMemoryContext.leak_and_drop_on_delete(state).cast();
        scan
    }
}

/// `amrescan`: takes the query from the ORDER BY key (strategy 1: a `bm25query`, which must
/// name this index or none; strategy 2: a `text`).
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amrescan(
    scan: pg_sys::IndexScanDesc,
    _keys: pg_sys::ScanKey,
    _nkeys: i32,
    orderbys: pg_sys::ScanKey,
    norderbys: i32,
) {
    // SAFETY: `scan` is ours; `orderbys` holds `norderbys` keys whose arguments have the
    // operator's right-hand type (strategy 1: bm25query, 2: text).
    unsafe {
        let state = &mut *(*scan).opaque.cast::<ScanState>();
        // On a standby: take in what replay brought since the last pass, before this scan's
        // first snapshot of memtables and segments (as a vector scan does).
        crate::access::standby::absorb((*scan).indexRelation, &state.handle);
        if !orderbys.is_null() && norderbys > 0 {
            std::ptr::copy(orderbys, (*scan).orderByData, norderbys as usize);
        }
        state.query = None;
        state.prepared = None;
        state.progress.reset();
        state.counted = false;
        if norderbys <= 0 {
            return;
        }
        let key = &*(*scan).orderByData;
        if key.sk_flags & pg_sys::SK_ISNULL as i32 != 0 {
            return;
        }
        state.query = Some(if key.sk_strategy == 1 {
            let value = QueryValue::from_datum(key.sk_argument);
            let own = (*(*scan).indexRelation).rd_id;
            if value.index != pg_sys::InvalidOid && value.index != own {
                error(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    "pg_strata: the bm25query names another index than the one this scan reads",
                );
            }
            value.text
        } else {
            text_of(key.sk_argument)
        });
    }
}

impl ScanState {
    /// One round: the `k` best rows of every source, best first, with their scores (none
    /// without a query or when the query has no lexeme).
    fn round(
        handle: &IndexHandle,
        config: pg_sys::Oid,
        query: Option<&str>,
        prepared: &mut Option<Bm25Query>,
        k: usize,
    ) -> Vec<(u64, f64)> {
        let Some(query) = query else { return Vec::new() };
        pgrx::check_for_interrupts!();
        // SAFETY: on the backend's main thread, inside the scan.
        let prepared = prepared.get_or_insert_with(|| {
            // SAFETY: on the backend's main thread, inside the scan, whose index `handle` is.
            let fresh = unsafe { super::query::prepare(handle, config, query) };
            super::query::remember_scanned(query, config, &fresh);
            fresh
        });
        if prepared.terms().is_empty() {
            return Vec::new();
        }
        let block_max = crate::gucs::bm25_block_max();
        let found = super::sources::with_sources(handle, |sources| {
            if block_max {
                strata_text::search(sources, prepared, k)
            } else {
                strata_text::search_exhaustive(sources, prepared, k)
            }
        });
        found.hits.iter().map(|h| (h.id, h.score)).collect()
    }

    fn next(&mut self) -> Option<(u64, f64)> {
        let cap = crate::gucs::max_scan_tuples().max(1) as usize;
        let Self { handle, config, query, prepared, progress, .. } = self;
        progress.next(cap, |k| Self::round(handle, *config, query.as_deref(), prepared, k))
    }
}

/// `amgettuple`: the next TID, best first; the ORDER BY value is the negative score.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amgettuple(
    scan: pg_sys::IndexScanDesc,
    _direction: pg_sys::ScanDirection::Type,
) -> bool {
    // SAFETY: `scan` is ours (opaque set by ambeginscan); we set the heap TID and the ORDER BY
    // value slots allocated in ambeginscan.
    unsafe {
        let state = &mut *(*scan).opaque.cast::<ScanState>();
        if !state.counted {
            state.counted = true;
            crate::access::pgstat::count_index_scan(scan);
        }
        let Some((tid, score)) = state.next() else { return false };
        (*scan).xs_heaptid = unpack_tid(tid);
        (*scan).xs_recheck = false;
        (*scan).xs_recheckorderby = false;
        if (*scan).numberOfOrderBys > 0 {
            *(*scan).xs_orderbyvals = pg_sys::Datum::from((-score).to_bits());
            *(*scan).xs_orderbynulls = false;
        }
        true
    }
}

/// `amendscan`.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amendscan(_scan: pg_sys::IndexScanDesc) {}
