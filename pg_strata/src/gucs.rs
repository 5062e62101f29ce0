//! Configuration parameters (`strata.*`).

use std::ffi::CStr;

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// Shared memory for memtables, in MB (server start only).
pub static MEMTABLE_MEMORY_MB: GucSetting<i32> = GucSetting::<i32>::new(128);
/// Bytes per memtable slab, in MB (server start only).
pub static MEMTABLE_SLAB_MB: GucSetting<i32> = GucSetting::<i32>::new(16);
/// HNSW candidate list size for searches.
pub static EF_SEARCH: GucSetting<i32> = GucSetting::<i32>::new(100);
/// IVF lists probed per search (0: an eighth of each segment's lists, at least 8).
pub static PROBES: GucSetting<i32> = GucSetting::<i32>::new(0);
/// Rerank factor of quantized kinds.
pub static OVERSAMPLE: GucSetting<f64> = GucSetting::<f64>::new(4.0);
/// The most tuples one index scan returns before it stops widening.
pub static MAX_SCAN_TUPLES: GucSetting<i32> = GucSetting::<i32>::new(20_000);
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
