//! The `bm25query` type (a query text, optionally bound to a bm25 index by `to_bm25query`) and
//! the `<@>` operator's functions: the negative BM25 score of a row, so that ascending order is
//! best first.
//!
//! Layout of a `bm25query` (varlena): the 4-byte header, the index's OID (`u32`, 0 when none),
//! then the query's UTF-8 bytes. Its text form is the query text alone: the index a value names
//! does not survive text output (as a `regclass` in it would not survive a dump either).

use std::ffi::CStr;

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_text::{Bm25Query, GlobalStats};

use super::tokens;
use crate::access::state::IndexHandle;
use crate::fmgr::{arg, error, v1_functions};

v1_functions! {
    strata_bm25query_in => bm25query_in;
    strata_bm25query_out => bm25query_out;
    strata_to_bm25query => to_bm25query;
    strata_to_bm25query_bound => to_bm25query_bound;
    strata_bm25_score => bm25_score;
    strata_bm25_score_text => bm25_score_text;
}

/// A `bm25query` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryValue {
    /// The bm25 index it is bound to (`InvalidOid`: none).
    pub index: pg_sys::Oid,
    /// The query text.
    pub text: String,
}

impl QueryValue {
    /// The value as a freshly palloc'd varlena.
    pub fn to_datum(&self) -> pg_sys::Datum {
        let bytes = 4 + 4 + self.text.len();
        // SAFETY: palloc returns `bytes` maximally aligned bytes (or raises an error: it refuses
        // more than 1 GB, so `bytes` fits the header's i32); SET_VARSIZE (pgrx's, for either byte
        // order) writes the 4-byte header, then the OID and the text bytes fill the rest.
        unsafe {
            let out = pg_sys::palloc(bytes).cast::<u8>();
            pgrx::set_varsize_4b(out.cast(), bytes as i32);
            out.add(4).cast::<u32>().write_unaligned(self.index.to_u32());
            std::ptr::copy_nonoverlapping(self.text.as_ptr(), out.add(8), self.text.len());
            pg_sys::Datum::from(out)
        }
    }

    /// Reads a `bm25query` datum (detoasting it when needed).
    ///
    /// # Safety
    /// `datum` must be a `bm25query` value.
    pub unsafe fn from_datum(datum: pg_sys::Datum) -> Self {
        // SAFETY: `datum` is a non-null bm25query varlena (a STRICT function's bm25query argument, or
        // a bm25 scan's order-by key checked for SK_ISNULL); pg_detoast_datum_packed returns a value
        // with a short or 4-byte header whose VARSIZE_ANY_EXHDR bytes follow VARDATA_ANY.
        unsafe {
            let value = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
            let len = pgrx::varsize_any_exhdr(value);
            let data = pgrx::vardata_any(value).cast::<u8>();
            if len < 4 {
                error(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, "a bm25query value is too short");
            }
            let index = pg_sys::Oid::from(data.cast::<u32>().read_unaligned());
            let text = std::slice::from_raw_parts(data.add(4), len - 4);
            Self { index, text: String::from_utf8_lossy(text).into_owned() }
        }
    }
}

/// The text of a `text` datum.
///
/// # Safety
/// `datum` must be a `text` value.
pub unsafe fn text_of(datum: pg_sys::Datum) -> String {
    // SAFETY: `datum` is a non-null `text` varlena (a STRICT function's text argument, a non-null
    // Const or a scan key checked for SK_ISNULL); text_to_cstring detoasts and copies it.
    unsafe {
        let raw = pg_sys::text_to_cstring(datum.cast_mut_ptr());
        let text = CStr::from_ptr(raw).to_string_lossy().into_owned();
        pg_sys::pfree(raw.cast());
        text
    }
}

unsafe fn bm25query_in(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a cstring.
    let text = unsafe { CStr::from_ptr(arg(fcinfo, 0).cast_mut_ptr()) }.to_string_lossy().into_owned();
    QueryValue { index: pg_sys::InvalidOid, text }.to_datum()
}

unsafe fn bm25query_out(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a bm25query.
    let value = unsafe { QueryValue::from_datum(arg(fcinfo, 0)) };
    let text = std::ffi::CString::new(value.text.replace('\0', "")).expect("NULs removed");
    // SAFETY: pstrdup copies the NUL-terminated string into the current memory context.
    pg_sys::Datum::from(unsafe { pg_sys::pstrdup(text.as_ptr()) })
}

/// `to_bm25query(query text)`: a query not bound to an index.
unsafe fn to_bm25query(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a text.
    let text = unsafe { text_of(arg(fcinfo, 0)) };
    QueryValue { index: pg_sys::InvalidOid, text }.to_datum()
}

/// `to_bm25query(query text, index_name text)`: a query bound to the named bm25 index.
unsafe fn to_bm25query_bound(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: arguments 0 and 1 are texts.
    let (text, name) = unsafe { (text_of(arg(fcinfo, 0)), text_of(arg(fcinfo, 1))) };
    // SAFETY: a catalog lookup on the backend's main thread.
    let index = unsafe { super::index_by_name(&name) };
    QueryValue { index, text }.to_datum()
}

thread_local! {
    /// The query the latest bm25 scan of this backend prepared: its statement's start time, its
    /// query text, configuration and prepared query.
    static SCANNED: std::cell::RefCell<Option<(i64, String, pg_sys::Oid, Bm25Query)>> =
        const { std::cell::RefCell::new(None) };
}

/// Notes that a bm25 scan of the current statement prepared `query` (its text) with `config`, so
/// that `<@>` with the same unbound query text in the same statement (the scan's ORDER BY
/// expression computed again in the target list) scores with the scan's statistics.
pub fn remember_scanned(query: &str, config: pg_sys::Oid, prepared: &Bm25Query) {
    // SAFETY: reads the backend's statement start time, on its main thread.
    let statement = unsafe { pg_sys::GetCurrentStatementStartTimestamp() };
    SCANNED.with(|s| *s.borrow_mut() = Some((statement, query.to_owned(), config, prepared.clone())));
}

/// The configuration and prepared query of a bm25 scan of the current statement whose query text
/// is `query`, if any.
fn scanned(query: &str) -> Option<(pg_sys::Oid, Bm25Query)> {
    // SAFETY: reads the backend's statement start time; `<@>` calls and scans run on its main
    // thread.
    let statement = unsafe { pg_sys::GetCurrentStatementStartTimestamp() };
    SCANNED.with(|s| {
        s.borrow()
            .as_ref()
            .filter(|(at, text, _, _)| *at == statement && text == query)
            .map(|(_, _, c, p)| (*c, p.clone()))
    })
}

/// What a `<@>` call remembers between rows (kept in `fn_extra` for the query's life).
struct ScoreCache {
    key: QueryValue,
    config: pg_sys::Oid,
    prepared: Bm25Query,
}

/// `text <@> bm25query`: the row's negative BM25 score against the query's index (global
/// statistics read once per query execution). Outside an index scan the query must name its
/// index (`to_bm25query(query, index)`).
unsafe fn bm25_score(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 1 is a bm25query.
    let key = unsafe { QueryValue::from_datum(arg(fcinfo, 1)) };
    // SAFETY: `fcinfo` is this V1 call's, with argument 0 declared text in SQL (the operator is
    // strict), which is what `score_against` reads.
    unsafe { score_against(fcinfo, &key) }
}

/// `text <@> text`: the index-scan form with the query as text; outside an index scan there is
/// no index to score against, unless the text carries statistics (`strata_bm25_query`) or a bm25
/// scan of the same statement prepared the same query text.
unsafe fn bm25_score_text(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 1 is a text.
    let text = unsafe { text_of(arg(fcinfo, 1)) };
    if GlobalStats::split(&text).is_none() && scanned(&text).is_none() {
        error_with_hint_unbound();
    }
    // SAFETY: `fcinfo` is this V1 call's, with argument 0 declared text in SQL (the operator is
    // strict), which is what `score_against` reads.
    unsafe { score_against(fcinfo, &QueryValue { index: pg_sys::InvalidOid, text }) }
}

fn error_with_hint_unbound() -> ! {
    crate::fmgr::error_with_detail(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        "pg_strata: text <@> query needs a bm25 index to score with",
        "Order by it with a bm25 index on the column (ORDER BY body <@> 'query' LIMIT n), or name the index: \
         body <@> to_bm25query('query', 'index_name').",
    )
}

/// Scores argument 0 (a `text`) against `key`, caching the prepared query in `fn_extra`.
///
/// # Safety
/// `fcinfo` is a call of `<@>` with a `text` argument 0.
unsafe fn score_against(fcinfo: pg_sys::FunctionCallInfo, key: &QueryValue) -> pg_sys::Datum {
    if key.index == pg_sys::InvalidOid && GlobalStats::split(&key.text).is_none() && scanned(&key.text).is_none() {
        error_with_hint_unbound();
    }
    // SAFETY: flinfo is valid for the call; fn_extra belongs to this function, and a cache
    // leaked into fn_mcxt is dropped when that context is deleted.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        let mut cache = (*flinfo).fn_extra.cast::<ScoreCache>();
        if cache.is_null() || (*cache).key != *key {
            let fresh = prepare_for(key);
            cache = pgrx::PgMemoryContexts::For((*flinfo).fn_mcxt).leak_and_drop_on_delete(fresh);
            (*flinfo).fn_extra = cache.cast();
        }
        let document = tokens::document_of((*cache).config, arg(fcinfo, 0));
        pg_sys::Datum::from((-(*cache).prepared.score_document(&document)).to_bits())
    }
}

/// Opens `key`'s index (checking SELECT on its table), reads its global statistics for the
/// query's lexemes and closes it again. A query without an index that carries statistics
/// ([`GlobalStats`], from `strata_bm25_query`) is prepared with them and the configuration they
/// name, with no index at all (a shard of a distributed table scoring with every shard's
/// statistics).
fn prepare_for(key: &QueryValue) -> ScoreCache {
    if key.index == pg_sys::InvalidOid {
        let Some((carried, plain)) = GlobalStats::split(&key.text) else {
            // The query of a bm25 scan of this statement (its ORDER BY also in the target list,
            // as Citus sends it to each shard): the scan's statistics.
            let Some((config, prepared)) = scanned(&key.text) else { error_with_hint_unbound() };
            return ScoreCache { key: key.clone(), config, prepared };
        };
        // SAFETY: on the backend's main thread inside a transaction (a `<@>` call).
        let config = unsafe { tokens::resolve_config(&carried.config) };
        // SAFETY: on the backend's main thread inside a transaction (a `<@>` call), with a
        // configuration `resolve_config` just returned.
        let lexemes = unsafe { tokens::query_lexemes(config, plain) };
        let prepared = carried.prepare(&lexemes).unwrap_or_else(|e| carried_error(&e));
        return ScoreCache { key: key.clone(), config, prepared };
    }
    // SAFETY: index_open raises for a missing relation; the lock is held to the transaction's end.
    let relation = unsafe { pg_sys::index_open(key.index, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    // SAFETY: `relation` is an open index; closed (keeping its lock) once read.
    unsafe {
        if !super::options::is_bm25(relation) {
            error(
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                "pg_strata: to_bm25query names an index that is not a bm25 index",
            );
        }
        crate::stats::check_select(relation);
        let handle = crate::access::opening::open(relation);
        // On a standby, score against the statistics replay has brought so far.
        crate::access::standby::absorb(relation, &handle);
        let config = super::text_config_of(relation, &handle);
        let prepared = prepare(&handle, config, &key.text);
        pg_sys::index_close(relation, pg_sys::NoLock as pg_sys::LOCKMODE);
        ScoreCache { key: key.clone(), config, prepared }
    }
}

fn carried_error(e: &strata_text::TextError) -> ! {
    error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("pg_strata: bm25 query statistics: {e}"))
}

/// `query` tokenised with `config`, prepared against the global statistics of `handle`'s index
/// now, or, when the query text starts with carried statistics ([`GlobalStats`]), against those
/// (which must name the index's configuration and BM25 parameters).
///
/// # Safety
/// Call on a backend's main thread.
pub unsafe fn prepare(handle: &IndexHandle, config: pg_sys::Oid, query: &str) -> Bm25Query {
    let Some((carried, plain)) = GlobalStats::split(query) else {
        // SAFETY: this function's contract.
        return unsafe { prepare_local(handle, config, query) };
    };
    let params = strata_text::params_of(&handle.config)
        .unwrap_or_else(|e| error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, e.to_string()));
    // SAFETY: on the backend's main thread inside a transaction (this function's contract).
    let same_config = unsafe { tokens::resolve_config(&carried.config) } == config;
    if !same_config || carried.params != params {
        error(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "pg_strata: the bm25 query's statistics were gathered for another text configuration or other BM25 \
             parameters than this index's",
        );
    }
    // SAFETY: on the backend's main thread inside a transaction (this function's contract), with
    // the index's own configuration.
    let lexemes = unsafe { tokens::query_lexemes(config, plain) };
    carried.prepare(&lexemes).unwrap_or_else(|e| carried_error(&e))
}

/// `query` (taken as plain text) tokenised with `config`, prepared against the global statistics
/// of `handle`'s index now.
///
/// # Safety
/// Call on a backend's main thread.
pub unsafe fn prepare_local(handle: &IndexHandle, config: pg_sys::Oid, query: &str) -> Bm25Query {
    // SAFETY: callers (`prepare_for` in `<@>`, the bm25 scan's first round) run on the backend's main
    // thread inside a transaction, which is all `query_lexemes` needs.
    let lexemes = unsafe { tokens::query_lexemes(config, query) };
    let params = strata_text::params_of(&handle.config)
        .unwrap_or_else(|e| error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, e.to_string()));
    super::sources::with_sources(handle, |sources| Bm25Query::prepare(sources, &lexemes, params))
}
