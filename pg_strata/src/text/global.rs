//! BM25 statistics over the shards of a distributed table (`strata_bm25_stats`,
//! `strata_bm25_stats_merge`): what a shard reports for a query, and the sum a coordinator
//! prefixes the query text with ([`strata_text::GlobalStats`]), so that each shard's scan and
//! `<@>` score rows with the statistics of all the shards instead of their own.

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use strata_text::GlobalStats;

use crate::fmgr::error;

/// The BM25 statistics of bm25 index `index` for `query` (its live rows, their total length and
/// each query lexeme's live `df`, with the index's text configuration and parameters), as the
/// header text that `strata_bm25_stats_merge` sums and a query text may start with. A header
/// already at the start of `query` is ignored.
#[pg_extern(stable, parallel_safe)]
fn strata_bm25_stats_by_oid(index: pg_sys::Oid, query: &str) -> String {
    let plain = GlobalStats::split(query).map_or(query, |(_, plain)| plain);
    // SAFETY: index_open raises for a missing relation; the lock is held to the transaction's end.
    let relation = unsafe { pg_sys::index_open(index, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    // SAFETY: `relation` is an open index; closed (keeping its lock) once read. This runs on the
    // backend's main thread inside a transaction, as `prepare` needs.
    unsafe {
        if !super::options::is_bm25(relation) {
            error(PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, "strata_bm25_stats: not a bm25 index");
        }
        crate::stats::check_select(relation);
        let handle = crate::access::opening::open(relation);
        crate::access::standby::absorb(relation, &handle);
        let config = super::text_config_of(relation, &handle);
        let name = super::options::of(relation).text_config().to_owned();
        let prepared = super::query::prepare_local(&handle, config, plain);
        pg_sys::index_close(relation, pg_sys::NoLock as pg_sys::LOCKMODE);
        GlobalStats::of_query(&name, &prepared).to_header()
    }
}

/// The sum of shard statistics (`strata_bm25_stats` of each shard's index for one query): rows,
/// lengths and document frequencies added. Errors when a part is not such a header or the parts
/// disagree on the text configuration or the BM25 parameters.
#[pg_extern(immutable, parallel_safe)]
#[allow(clippy::needless_pass_by_value)] // pgrx passes SQL arrays as owned vectors
fn strata_bm25_stats_merge(parts: Vec<Option<String>>) -> String {
    let parsed: Vec<GlobalStats> = parts
        .iter()
        .map(|part| {
            part.as_deref().and_then(|text| GlobalStats::split(text).map(|(stats, _)| stats)).unwrap_or_else(|| {
                error(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    "strata_bm25_stats_merge: a part is not the output of strata_bm25_stats",
                )
            })
        })
        .collect();
    GlobalStats::merge(&parsed)
        .unwrap_or_else(|e| {
            error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("strata_bm25_stats_merge: {e}"))
        })
        .to_header()
}
