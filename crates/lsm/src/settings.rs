//! The configuration parameters (`strata.*`): each one's name, description, default and range,
//! defined once here, and how scans read pgvector's parameter names as aliases of strata's.
//!
//! pg_strata registers every [`IntSetting`] with PostgreSQL's GUC machinery (which enforces the
//! range on `SET`) and reads pgvector's names with `GetConfigOption`; what a scan then uses is
//! [`IntSetting::resolve`]: strata's own value when it differs from its default, else the alias's
//! when it is set (checked as pgvector checks it), else the default. pg_strata never defines
//! pgvector's names, so the two libraries cannot clash.

use std::ffi::CStr;

use thiserror::Error;

use crate::scan::ScanOrder;

/// When PostgreSQL lets a parameter change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// At server start only (`postgresql.conf`).
    ServerStart,
    /// By a configuration reload (SIGHUP).
    Reload,
    /// By any user, per session (`SET`).
    Session,
}

/// An integer parameter: its name, description, default and range, and pgvector's name for the
/// same setting, if it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntSetting {
    /// The name (`strata.…`).
    pub name: &'static CStr,
    /// The one-line description PostgreSQL shows.
    pub description: &'static CStr,
    /// The default.
    pub default: i32,
    /// The least value.
    pub min: i32,
    /// The greatest value.
    pub max: i32,
    /// When it may change.
    pub context: Context,
    /// pgvector's name for the same setting, read while strata's is at its default.
    pub alias: Option<&'static CStr>,
}

/// Why a parameter's text is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingError {
    /// An alias set to something other than an integer in the setting's range.
    #[error("invalid value for parameter \"{name}\": \"{text}\" (an integer from {min} to {max})")]
    NotInRange {
        /// The alias's name.
        name: String,
        /// Its text.
        text: String,
        /// The least value accepted.
        min: i32,
        /// The greatest value accepted.
        max: i32,
    },
    /// `hnsw.iterative_scan` set to something pgvector does not accept either.
    #[error("invalid value for parameter \"hnsw.iterative_scan\": \"{0}\" (off, strict_order or relaxed_order)")]
    IterativeScan(String),
}

impl IntSetting {
    /// The value in use: `own` (the parameter's current value) when it differs from the default;
    /// otherwise the alias's text (`None`: not set; surrounding blanks ignored, an empty text is
    /// unset) when it is an integer in range as PostgreSQL reads one ([`parse_int`]), an error
    /// when it is not; otherwise the default.
    pub fn resolve(&self, own: i32, alias_text: Option<&str>) -> Result<i32, SettingError> {
        let text = alias_text.map(str::trim).filter(|t| !t.is_empty());
        let (Some(alias), Some(text), true) = (self.alias, text, own == self.default) else {
            return Ok(own);
        };
        match parse_int(text) {
            Some(value) if (i64::from(self.min)..=i64::from(self.max)).contains(&value) => Ok(value as i32),
            _ => Err(SettingError::NotInRange {
                name: alias.to_string_lossy().into_owned(),
                text: text.to_owned(),
                min: self.min,
                max: self.max,
            }),
        }
    }
}

/// An integer as PostgreSQL's `parse_int` reads a setting's text (`strtol` in base 0, then
/// `strtod`): an optional sign, then decimal, `0x` hexadecimal or leading-`0` octal digits, or a
/// number with a fraction or an exponent, rounded half to even (`1e3` is 1000, `2.5` is 2, `010`
/// is 8, `-0x10` is -16); `None` for anything else or a value beyond 64 bits.
pub fn parse_int(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let radix_digits = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some((hex, 16))
    } else if digits.len() > 1 && digits.starts_with('0') && digits.bytes().all(|b| b.is_ascii_digit()) {
        Some((&digits[1..], 8))
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        Some((digits, 10))
    } else {
        None
    };
    if let Some((body, radix)) = radix_digits {
        let magnitude = i64::from_str_radix(body, radix).ok()?;
        return Some(if negative { -magnitude } else { magnitude });
    }
    let value = text.parse::<f64>().ok().filter(|v| v.is_finite())?.round_ties_even();
    // The cast saturates; values past ±2^63 are out of every setting's range anyway.
    (value.abs() < 9.2e18).then_some(value as i64)
}

/// Shared memory for memtables, in MB.
pub const MEMTABLE_MEMORY_MB: IntSetting = IntSetting {
    name: c"strata.memtable_memory",
    description: c"Shared memory for memtables (MB).",
    default: 128,
    min: 16,
    max: 1 << 20,
    context: Context::ServerStart,
    alias: None,
};

/// Bytes per memtable slab, in MB.
pub const MEMTABLE_SLAB_MB: IntSetting = IntSetting {
    name: c"strata.memtable_slab_size",
    description: c"Size of one memtable slab (MB).",
    default: 16,
    min: 1,
    max: 1024,
    context: Context::ServerStart,
    alias: None,
};

/// HNSW candidate list size for searches.
pub const EF_SEARCH: IntSetting = IntSetting {
    name: c"strata.ef_search",
    description: c"HNSW candidate list size for searches of 100,000 rows; larger indexes search a list about (rows / 100,000)^0.45 times longer.",
    default: 100,
    min: 1,
    max: 10_000,
    context: Context::Session,
    alias: Some(c"hnsw.ef_search"),
};

/// IVF lists probed per search (0: automatic).
pub const PROBES: IntSetting = IntSetting {
    name: c"strata.probes",
    description: c"IVF lists probed per search (0: automatic, an eighth of each segment's lists).",
    default: 0,
    min: 0,
    max: 1 << 20,
    context: Context::Session,
    alias: Some(c"ivfflat.probes"),
};

/// The most tuples one index scan returns before it stops widening: unlimited by default, so
/// that a scan whose consumer keeps asking (a selective WHERE clause) returns every visible row
/// (pgvector's `hnsw.max_scan_tuples`, 20,000 by default there, ends such scans short).
pub const MAX_SCAN_TUPLES: IntSetting = IntSetting {
    name: c"strata.max_scan_tuples",
    description: c"Most tuples one index scan returns while widening (default: no limit).",
    default: i32::MAX,
    min: 1,
    max: i32::MAX,
    context: Context::Session,
    alias: Some(c"hnsw.max_scan_tuples"),
};

/// Threads one backend uses to search several segments in parallel.
pub const SEARCH_THREADS: IntSetting = IntSetting {
    name: c"strata.search_threads",
    description: c"Threads a backend uses to search segments in parallel.",
    default: 2,
    min: 1,
    max: 64,
    context: Context::Session,
    alias: None,
};

/// Threads an index build uses.
pub const BUILD_THREADS: IntSetting = IntSetting {
    name: c"strata.build_threads",
    description: c"Threads an index build uses.",
    default: 2,
    min: 1,
    max: 64,
    context: Context::Session,
    alias: None,
};

/// Seconds an unlisted (replaced) segment or bitmap file stays on disk before the service deletes
/// it, so that scans that loaded an older manifest can still open it.
pub const FILE_GRACE_PERIOD: IntSetting = IntSetting {
    name: c"strata.file_grace_period",
    description: c"Seconds replaced segment and bitmap files stay on disk before the index service deletes them.",
    default: 60,
    min: 1,
    max: 86_400,
    context: Context::Reload,
    alias: None,
};

/// Memtables of one index that may wait for their flush (sealed or being flushed) before its
/// writers wait for the index service ([`crate::writer::Allocated::Backlogged`]); 0: no limit.
/// Bounds the rows a query scans in memtables under sustained ingest, and keeps one index's
/// ingest from taking every slab from the others. Default 2, chosen with
/// `crates/bench/python/pg_ingest_stall.py` (100k rows, one writer of 1,000-row COPY batches,
/// one searcher at ef_search 100, 30 s each): no limit 13,066 rows/s, client p50 4.52 ms,
/// memtable share 0.68 with 7 memtables waiting; limit 2 11,398 rows/s (0.87×), p50 2.08 ms,
/// share 0.34; limit 1 5,099 rows/s (0.39×), p50 1.15 ms, share 0.28.
pub const MAX_WAITING_MEMTABLES: IntSetting = IntSetting {
    name: c"strata.max_waiting_memtables",
    description: c"Memtables of one index that may wait for their flush before its writers wait for the index service (0: no limit).",
    default: 2,
    min: 0,
    max: 1024,
    context: Context::Reload,
    alias: None,
};

/// Every integer parameter, server-start ones first.
pub const INT_SETTINGS: [IntSetting; 9] = [
    MEMTABLE_MEMORY_MB,
    MEMTABLE_SLAB_MB,
    EF_SEARCH,
    PROBES,
    MAX_SCAN_TUPLES,
    SEARCH_THREADS,
    BUILD_THREADS,
    FILE_GRACE_PERIOD,
    MAX_WAITING_MEMTABLES,
];

/// A real-valued parameter, changed per session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RealSetting {
    /// The name (`strata.…`).
    pub name: &'static CStr,
    /// The one-line description PostgreSQL shows.
    pub description: &'static CStr,
    /// The default.
    pub default: f64,
    /// The least value.
    pub min: f64,
    /// The greatest value.
    pub max: f64,
}

/// The rerank factor of quantized kinds.
pub const OVERSAMPLE: RealSetting = RealSetting {
    name: c"strata.oversample",
    description: c"Quantized kinds rerank oversample x k candidates exactly.",
    default: 4.0,
    min: 1.0,
    max: 1000.0,
};

/// A boolean parameter, changed per session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoolSetting {
    /// The name (`strata.…`).
    pub name: &'static CStr,
    /// The one-line description PostgreSQL shows.
    pub description: &'static CStr,
    /// The default.
    pub default: bool,
}

/// Whether bm25 scans use Block-Max WAND (on) or score every posting of the query's lexemes
/// (off). Both return the same rows and scores; off exists to measure what Block-Max WAND saves.
pub const BM25_BLOCK_MAX: BoolSetting = BoolSetting {
    name: c"strata.bm25_block_max",
    description:
        c"bm25 scans skip posting blocks that cannot reach the top k (Block-Max WAND); off scores every posting.",
    default: true,
};

/// The scan order pgvector's `hnsw.iterative_scan` and `ivfflat.iterative_scan` ask for (their
/// texts when set): `relaxed_order` in either gives [`ScanOrder::Relaxed`]; `off`,
/// `strict_order` or unset give [`ScanOrder::Strict`] (strata scans always widen, so `off`
/// means widening in exact order). Another value of `hnsw.iterative_scan` is an error, as it is
/// under pgvector; `ivfflat.iterative_scan`'s other values are not checked (pgvector's own
/// library checks them where it is loaded).
pub fn scan_order(hnsw: Option<&str>, ivfflat: Option<&str>) -> Result<ScanOrder, SettingError> {
    let relaxed = |text: Option<&str>| text.is_some_and(|t| t.trim() == "relaxed_order");
    match hnsw.map(str::trim) {
        None | Some("" | "off" | "strict_order" | "relaxed_order") => {}
        Some(other) => return Err(SettingError::IterativeScan(other.to_owned())),
    }
    Ok(if relaxed(hnsw) || relaxed(ivfflat) { ScanOrder::Relaxed } else { ScanOrder::Strict })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_value_wins_unless_at_its_default_then_a_set_alias_then_the_default() {
        let s = EF_SEARCH;
        assert_eq!(s.resolve(40, Some("200")), Ok(40), "changed own value wins");
        assert_eq!(s.resolve(100, Some(" 200 ")), Ok(200), "at default: the alias decides");
        assert_eq!(s.resolve(100, None), Ok(100));
        assert_eq!(s.resolve(100, Some("  ")), Ok(100), "a reset placeholder is unset");
        assert_eq!(s.resolve(100, Some("1")), Ok(1));
        assert_eq!(s.resolve(100, Some("10000")), Ok(10_000));
        // PostgreSQL's own integer settings take these forms too.
        assert_eq!(s.resolve(100, Some("1e3")), Ok(1000));
        assert_eq!(s.resolve(100, Some("1.5")), Ok(2));
        assert_eq!(s.resolve(100, Some("2.5")), Ok(2), "half to even, as rint");
        assert_eq!(s.resolve(100, Some("0x10")), Ok(16));
        assert_eq!(s.resolve(100, Some("010")), Ok(8), "a leading 0 is octal, as strtol reads it");
        assert_eq!(s.resolve(100, Some("+12")), Ok(12));
        assert_eq!(parse_int("-0x10"), Some(-16));
        assert_eq!(parse_int("09"), None, "not octal, not a float strtol or strtod reads whole");
        for bad in ["0", "10001", "abc", "-3", "0.4", "1e10", "nan", "inf", "0x", "1e"] {
            assert_eq!(
                s.resolve(100, Some(bad)).unwrap_err().to_string(),
                format!("invalid value for parameter \"hnsw.ef_search\": \"{bad}\" (an integer from 1 to 10000)")
            );
        }
        assert_eq!(s.resolve(40, Some("abc")), Ok(40), "the alias is not read when own is set");
        assert_eq!(SEARCH_THREADS.resolve(2, Some("9")), Ok(2), "no alias: own value");
        assert_eq!(PROBES.resolve(0, Some("0")), Ok(0));
        assert_eq!(MAX_SCAN_TUPLES.resolve(i32::MAX, Some("20000")), Ok(20_000), "pgvector's cap, when set");
    }

    #[test]
    fn iterative_scan_accepts_pgvectors_values_only_and_relaxed_order_relaxes() {
        for strict in ["off", "strict_order", " off ", ""] {
            assert_eq!(scan_order(Some(strict), None), Ok(ScanOrder::Strict), "{strict:?}");
            assert_eq!(scan_order(None, Some(strict)), Ok(ScanOrder::Strict), "{strict:?}");
        }
        assert_eq!(scan_order(None, None), Ok(ScanOrder::Strict));
        assert_eq!(scan_order(Some("relaxed_order"), None), Ok(ScanOrder::Relaxed));
        assert_eq!(scan_order(Some("off"), Some(" relaxed_order")), Ok(ScanOrder::Relaxed));
        assert_eq!(
            scan_order(Some("on"), None).unwrap_err().to_string(),
            "invalid value for parameter \"hnsw.iterative_scan\": \"on\" (off, strict_order or relaxed_order)"
        );
        assert_eq!(
            scan_order(None, Some("x")),
            Ok(ScanOrder::Strict),
            "ivfflat's other values are pgvector's to check"
        );
    }

    #[test]
    fn every_default_lies_in_its_range_and_names_are_unique() {
        for s in INT_SETTINGS {
            assert!(s.min <= s.default && s.default <= s.max, "{:?}", s.name);
            assert_eq!(INT_SETTINGS.iter().filter(|t| t.name == s.name).count(), 1);
            assert!(s.name.to_str().unwrap().starts_with("strata."));
        }
        const { assert!(OVERSAMPLE.min <= OVERSAMPLE.default && OVERSAMPLE.default <= OVERSAMPLE.max) };
    }
}
