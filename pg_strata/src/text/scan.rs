//! Ordered scans of a bm25 index: `ORDER BY body <@> query` best first.
//!
//! The query is prepared once per scan against the index's global statistics
//! ([`super::query::prepare`]) and kept, so that every row the scan returns is scored with the
//! same `N`, `avgdl` and IDFs. Each round runs Block-Max WAND ([`strata_text::search`]) over
//! every source for the `k` best rows (exhaustive scoring instead under
//! `strata.bm25_block_max = off`); when the executor has taken them all (a WHERE clause
//! rejecting rows, or no LIMIT), the next round asks for four times as many and returns those
//! not yet returned, until a round finds fewer than it asked for. Rows that hold no query
//! lexeme are never returned.

use std::collections::{HashSet, VecDeque};

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_text::Bm25Query;

use super::query::{text_of, QueryValue};
use crate::fmgr::error;
use crate::index::state::IndexHandle;
use crate::memtable::unpack_tid;

/// Rows the first round asks for: the usual `LIMIT 10` takes one round, and Block-Max WAND
/// prunes best when k is small (a larger LIMIT or a WHERE clause costs further rounds, each
/// four times deeper, so the rounds together cost about 4/3 of the last).
const FIRST_ROUND: usize = 10;
/// How much each further round asks for more.
const GROWTH: usize = 4;

/// Per-scan state, kept in the scan's memory context.
struct ScanState {
    handle: IndexHandle,
    /// The index's text search configuration.
    config: pg_sys::Oid,
    /// The query text of the ORDER BY key (`None`: no ordering key, nothing to return).
    query: Option<String>,
    /// The query prepared on the first round.
    prepared: Option<Bm25Query>,
    /// Rows found and not yet returned, best first, with their scores.
    queue: VecDeque<(u64, f64)>,
    /// Rows returned so far.
    returned: HashSet<u64>,
    /// Rows the next round asks for.
    k: usize,
    /// Whether the last round found every matching row.
    exhausted: bool,
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
        let state = ScanState {
            handle: crate::index::opening::open(index),
            config: super::text_config_of(index),
            query: None,
            prepared: None,
            queue: VecDeque::new(),
            returned: HashSet::new(),
            k: FIRST_ROUND,
            exhausted: false,
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
        crate::index::standby::absorb((*scan).indexRelation, &state.handle);
        if !orderbys.is_null() && norderbys > 0 {
            std::ptr::copy(orderbys, (*scan).orderByData, norderbys as usize);
        }
        state.query = None;
        state.prepared = None;
        state.queue.clear();
        state.returned.clear();
        state.k = FIRST_ROUND;
        state.exhausted = false;
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
    /// One round: the `k` best rows of every source, those not returned yet queued.
    fn round(&mut self) {
        let Some(query) = &self.query else {
            self.exhausted = true;
            return;
        };
        // SAFETY: on the backend's main thread, inside the scan.
        let prepared =
            self.prepared.get_or_insert_with(|| unsafe { super::query::prepare(&self.handle, self.config, query) });
        if prepared.terms().is_empty() {
            self.exhausted = true;
            return;
        }
        let k = self.k;
        let block_max = crate::gucs::bm25_block_max();
        let found = super::sources::with_sources(&self.handle, |sources| {
            if block_max {
                strata_text::search(sources, prepared, k)
            } else {
                strata_text::search_exhaustive(sources, prepared, k)
            }
        });
        self.exhausted = found.hits.len() < k;
        self.k = k.saturating_mul(GROWTH);
        let returned = &self.returned;
        self.queue.extend(found.hits.iter().filter(|h| !returned.contains(&h.id)).map(|h| (h.id, h.score)));
    }

    fn next(&mut self) -> Option<(u64, f64)> {
        loop {
            if let Some(next) = self.queue.pop_front() {
                if self.returned.insert(next.0) {
                    return Some(next);
                }
                continue;
            }
            if self.exhausted {
                return None;
            }
            pgrx::check_for_interrupts!();
            self.round();
        }
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
