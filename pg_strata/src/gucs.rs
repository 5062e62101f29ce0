//! Configuration parameters (`strata.*`).

use std::ffi::CStr;

use pgrx::{pg_sys, GucContext, GucFlags, GucRegistry, GucSetting, PgSqlErrorCode};

use crate::fmgr::error;

/// Shared memory for memtables, in MB (server start only).
pub static MEMTABLE_MEMORY_MB: GucSetting<i32> = GucSetting::<i32>::new(128);
/// Bytes per memtable slab, in MB (server start only).
pub static MEMTABLE_SLAB_MB: GucSetting<i32> = GucSetting::<i32>::new(16);
/// HNSW candidate list size for searches.
pub static EF_SEARCH: GucSetting<i32> = GucSetting::<i32>::new(EF_SEARCH_DEFAULT);
/// IVF lists probed per search (0: an eighth of each segment's lists, at least 8).
pub static PROBES: GucSetting<i32> = GucSetting::<i32>::new(PROBES_DEFAULT);
/// Rerank factor of quantized kinds.
pub static OVERSAMPLE: GucSetting<f64> = GucSetting::<f64>::new(4.0);
/// The most tuples one index scan returns before it stops widening.
pub static MAX_SCAN_TUPLES: GucSetting<i32> = GucSetting::<i32>::new(MAX_SCAN_TUPLES_DEFAULT);
/// Threads one backend uses to search several segments in parallel.
pub static SEARCH_THREADS: GucSetting<i32> = GucSetting::<i32>::new(2);
/// Threads an index build uses.
pub static BUILD_THREADS: GucSetting<i32> = GucSetting::<i32>::new(2);
/// Seconds an unlisted (replaced) segment or bitmap file stays on disk before the service
/// deletes it, so that scans that loaded an older manifest can still open it.
pub static FILE_GRACE_PERIOD: GucSetting<i32> = GucSetting::<i32>::new(60);

fn int(
    name: &'static CStr,
    short: &'static CStr,
    setting: &'static GucSetting<i32>,
    min: i32,
    max: i32,
    context: GucContext,
) {
    GucRegistry::define_int_guc(name, short, c"", setting, min, max, context, GucFlags::default());
}

/// Registers every parameter; called from `_PG_init`. The server-start parameters (memtable
/// memory) exist only when `preloading` (PostgreSQL refuses, with FATAL, to create them later); a
/// library loaded on demand has no shared memory for them to size.
pub fn register(preloading: bool) {
    if preloading {
        register_server_start();
    }
    register_session();
}

fn register_server_start() {
    int(
        c"strata.memtable_memory",
        c"Shared memory for memtables (MB).",
        &MEMTABLE_MEMORY_MB,
        16,
        1 << 20,
        GucContext::Postmaster,
    );
    int(
        c"strata.memtable_slab_size",
        c"Size of one memtable slab (MB).",
        &MEMTABLE_SLAB_MB,
        1,
        1024,
        GucContext::Postmaster,
    );
}

fn register_session() {
    int(c"strata.ef_search", c"HNSW candidate list size for searches.", &EF_SEARCH, 1, 10_000, GucContext::Userset);
    int(
        c"strata.probes",
        c"IVF lists probed per search (0: automatic, an eighth of each segment's lists).",
        &PROBES,
        0,
        1 << 20,
        GucContext::Userset,
    );
    GucRegistry::define_float_guc(
        c"strata.oversample",
        c"Quantized kinds rerank oversample x k candidates exactly.",
        c"",
        &OVERSAMPLE,
        1.0,
        1000.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    int(
        c"strata.max_scan_tuples",
        c"Most tuples one index scan returns while widening.",
        &MAX_SCAN_TUPLES,
        1,
        i32::MAX,
        GucContext::Userset,
    );
    int(
        c"strata.search_threads",
        c"Threads a backend uses to search segments in parallel.",
        &SEARCH_THREADS,
        1,
        64,
        GucContext::Userset,
    );
    int(c"strata.build_threads", c"Threads an index build uses.", &BUILD_THREADS, 1, 64, GucContext::Userset);
    int(
        c"strata.file_grace_period",
        c"Seconds replaced segment and bitmap files stay on disk before the index service deletes them.",
        &FILE_GRACE_PERIOD,
        1,
        86_400,
        GucContext::Sighup,
    );
}

/// The default of `strata.ef_search`: while it holds this value, `hnsw.ef_search` (pgvector's name)
/// decides when it is set.
const EF_SEARCH_DEFAULT: i32 = 100;
/// The default of `strata.probes` (automatic); see [`EF_SEARCH_DEFAULT`] for `ivfflat.probes`.
const PROBES_DEFAULT: i32 = 0;
/// The default of `strata.max_scan_tuples`; see [`EF_SEARCH_DEFAULT`] for `hnsw.max_scan_tuples`.
const MAX_SCAN_TUPLES_DEFAULT: i32 = 20_000;

/// The text of configuration variable `name`, or `None` when no such variable exists: neither a
/// parameter some loaded library defined (pgvector's, when it is loaded) nor a placeholder a `SET`
/// created (a reset placeholder is empty, and counts as unset). pg_strata never defines pgvector's names, so the two libraries cannot clash.
fn config_text(name: &CStr) -> Option<String> {
    // SAFETY: `name` is NUL-terminated; with missing_ok = true GetConfigOption returns NULL
    // instead of raising for an unknown name, and otherwise a string valid until the next GUC
    // change, which is copied at once.
    unsafe {
        let value = pg_sys::GetConfigOption(name.as_ptr(), true, false);
        if value.is_null() {
            return None;
        }
        let text = CStr::from_ptr(value).to_string_lossy().trim().to_owned();
        (!text.is_empty()).then_some(text)
    }
}

/// pgvector's integer parameter `name` as an alias: `None` when unset, an error naming it when its
/// text is not an integer in `min..=max`.
fn alias_int(name: &CStr, min: i32, max: i32) -> Option<i32> {
    let text = config_text(name)?;
    match text.trim().parse::<i32>() {
        Ok(value) if (min..=max).contains(&value) => Some(value),
        _ => error(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "invalid value for parameter \"{}\": \"{text}\" (an integer from {min} to {max})",
                name.to_string_lossy()
            ),
        ),
    }
}

/// strata's own setting when it differs from its default, else pgvector's alias when set, else the default.
fn resolved(own: &GucSetting<i32>, default: i32, alias: &CStr, min: i32, max: i32) -> i32 {
    let value = own.get();
    if value != default {
        return value;
    }
    alias_int(alias, min, max).unwrap_or(value)
}

/// The HNSW candidate list size scans use: `strata.ef_search`, or `hnsw.ef_search` (pgvector's
/// name) while strata's is at its default.
pub fn ef_search() -> i32 {
    resolved(&EF_SEARCH, EF_SEARCH_DEFAULT, c"hnsw.ef_search", 1, 10_000)
}

/// IVF lists probed per search: `strata.probes`, or `ivfflat.probes` while strata's is automatic.
pub fn probes() -> i32 {
    resolved(&PROBES, PROBES_DEFAULT, c"ivfflat.probes", 0, 1 << 20)
}

/// The most tuples one scan returns: `strata.max_scan_tuples`, or `hnsw.max_scan_tuples` while
/// strata's is at its default.
pub fn max_scan_tuples() -> i32 {
    resolved(&MAX_SCAN_TUPLES, MAX_SCAN_TUPLES_DEFAULT, c"hnsw.max_scan_tuples", 1, i32::MAX)
}

/// Checks `hnsw.iterative_scan` when set: strata scans always widen, so each of pgvector's values
/// (`off`, `strict_order`, `relaxed_order`) is accepted and means the same here; anything else is
/// an error, as it is under pgvector.
pub fn check_iterative_scan() {
    if let Some(text) = config_text(c"hnsw.iterative_scan") {
        if !matches!(text.as_str(), "off" | "strict_order" | "relaxed_order") {
            error(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("invalid value for parameter \"hnsw.iterative_scan\": \"{text}\" (off, strict_order or relaxed_order)"),
            );
        }
    }
}
