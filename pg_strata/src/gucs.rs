//! Configuration parameters (`strata.*`): registration with PostgreSQL and reading them. Their
//! names, descriptions, defaults and ranges, and how pgvector's names act as aliases, are
//! [`strata_lsm::settings`].

use std::ffi::CStr;

use pgrx::{pg_sys, GucContext, GucFlags, GucRegistry, GucSetting, PgSqlErrorCode};
use strata_lsm::settings::{self, Context, IntSetting, SettingError};

use crate::fmgr::error;

/// Shared memory for memtables, in MB (server start only).
pub static MEMTABLE_MEMORY_MB: GucSetting<i32> = GucSetting::<i32>::new(settings::MEMTABLE_MEMORY_MB.default);
/// Bytes per memtable slab, in MB (server start only).
pub static MEMTABLE_SLAB_MB: GucSetting<i32> = GucSetting::<i32>::new(settings::MEMTABLE_SLAB_MB.default);
/// HNSW candidate list size for searches (read through [`ef_search`]).
static EF_SEARCH: GucSetting<i32> = GucSetting::<i32>::new(settings::EF_SEARCH.default);
/// IVF lists probed per search (0: automatic; read through [`probes`]).
static PROBES: GucSetting<i32> = GucSetting::<i32>::new(settings::PROBES.default);
/// Rerank factor of quantized kinds.
pub static OVERSAMPLE: GucSetting<f64> = GucSetting::<f64>::new(settings::OVERSAMPLE.default);
/// The most tuples one index scan returns before it stops widening (read through
/// [`max_scan_tuples`]).
static MAX_SCAN_TUPLES: GucSetting<i32> = GucSetting::<i32>::new(settings::MAX_SCAN_TUPLES.default);
/// Threads one backend uses to search several segments in parallel.
pub static SEARCH_THREADS: GucSetting<i32> = GucSetting::<i32>::new(settings::SEARCH_THREADS.default);
/// Threads an index build uses.
pub static BUILD_THREADS: GucSetting<i32> = GucSetting::<i32>::new(settings::BUILD_THREADS.default);
/// Seconds an unlisted (replaced) segment or bitmap file stays on disk before the service
/// deletes it.
pub static FILE_GRACE_PERIOD: GucSetting<i32> = GucSetting::<i32>::new(settings::FILE_GRACE_PERIOD.default);
/// Memtables of one index that may wait for their flush before its writers wait for the service
/// (0: no limit).
pub static MAX_WAITING_MEMTABLES: GucSetting<i32> = GucSetting::<i32>::new(settings::MAX_WAITING_MEMTABLES.default);

/// Whether bm25 scans use Block-Max WAND (read through [`bm25_block_max`]).
static BM25_BLOCK_MAX: GucSetting<bool> = GucSetting::<bool>::new(settings::BM25_BLOCK_MAX.default);

/// Each integer parameter with the variable PostgreSQL keeps it in.
fn int_variables() -> [(IntSetting, &'static GucSetting<i32>); 9] {
    [
        (settings::MEMTABLE_MEMORY_MB, &MEMTABLE_MEMORY_MB),
        (settings::MEMTABLE_SLAB_MB, &MEMTABLE_SLAB_MB),
        (settings::EF_SEARCH, &EF_SEARCH),
        (settings::PROBES, &PROBES),
        (settings::MAX_SCAN_TUPLES, &MAX_SCAN_TUPLES),
        (settings::SEARCH_THREADS, &SEARCH_THREADS),
        (settings::BUILD_THREADS, &BUILD_THREADS),
        (settings::FILE_GRACE_PERIOD, &FILE_GRACE_PERIOD),
        (settings::MAX_WAITING_MEMTABLES, &MAX_WAITING_MEMTABLES),
    ]
}

/// Registers every parameter; called from `_PG_init`. The server-start parameters (memtable
/// memory) exist only when `preloading` (PostgreSQL refuses, with FATAL, to create them later); a
/// library loaded on demand has no shared memory for them to size.
pub fn register(preloading: bool) {
    for (s, variable) in int_variables() {
        let context = match s.context {
            Context::ServerStart if !preloading => continue,
            Context::ServerStart => GucContext::Postmaster,
            Context::Reload => GucContext::Sighup,
            Context::Session => GucContext::Userset,
        };
        GucRegistry::define_int_guc(s.name, s.description, c"", variable, s.min, s.max, context, GucFlags::default());
    }
    let o = settings::OVERSAMPLE;
    GucRegistry::define_float_guc(
        o.name,
        o.description,
        c"",
        &OVERSAMPLE,
        o.min,
        o.max,
        GucContext::Userset,
        GucFlags::default(),
    );
    let block_max = settings::BM25_BLOCK_MAX;
    GucRegistry::define_bool_guc(
        block_max.name,
        block_max.description,
        c"",
        &BM25_BLOCK_MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
}

/// Whether bm25 scans use Block-Max WAND (`strata.bm25_block_max`).
pub fn bm25_block_max() -> bool {
    BM25_BLOCK_MAX.get()
}

/// The text of configuration variable `name`, or `None` when no such variable exists: neither a
/// parameter some loaded library defined (pgvector's, when it is loaded) nor a placeholder a `SET`
/// created.
fn config_text(name: &CStr) -> Option<String> {
    // SAFETY: `name` is NUL-terminated; with missing_ok = true GetConfigOption returns NULL
    // instead of raising for an unknown name, and otherwise a string valid until the next GUC
    // change, which is copied at once.
    unsafe {
        let value = pg_sys::GetConfigOption(name.as_ptr(), true, false);
        (!value.is_null()).then(|| CStr::from_ptr(value).to_string_lossy().into_owned())
    }
}

/// The value of `setting` in use ([`IntSetting::resolve`]), an error naming pgvector's alias when
/// its text is refused.
fn resolved(setting: &IntSetting, own: &GucSetting<i32>) -> i32 {
    let alias = setting.alias.and_then(config_text);
    setting.resolve(own.get(), alias.as_deref()).unwrap_or_else(|e| raise(&e))
}

fn raise(e: &SettingError) -> ! {
    error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string())
}

/// The HNSW candidate list size scans use: `strata.ef_search`, or `hnsw.ef_search` (pgvector's
/// name) while strata's is at its default.
pub fn ef_search() -> i32 {
    resolved(&settings::EF_SEARCH, &EF_SEARCH)
}

/// IVF lists probed per search: `strata.probes`, or `ivfflat.probes` while strata's is automatic.
pub fn probes() -> i32 {
    resolved(&settings::PROBES, &PROBES)
}

/// The most tuples one scan returns: `strata.max_scan_tuples`, or `hnsw.max_scan_tuples` while
/// strata's is at its default.
pub fn max_scan_tuples() -> i32 {
    resolved(&settings::MAX_SCAN_TUPLES, &MAX_SCAN_TUPLES)
}

/// The scan order `hnsw.iterative_scan` / `ivfflat.iterative_scan` ask for
/// ([`settings::scan_order`]); an error for a value pgvector refuses too.
pub fn scan_order() -> strata_lsm::scan::ScanOrder {
    let (hnsw, ivfflat) = (config_text(c"hnsw.iterative_scan"), config_text(c"ivfflat.iterative_scan"));
    settings::scan_order(hnsw.as_deref(), ivfflat.as_deref()).unwrap_or_else(|e| raise(&e))
}
