//! `WITH (...)` options of `CREATE INDEX … USING strata`.
//!
//! | option | values | default |
//! |---|---|---|
//! | `kind` | `hnsw`, `ivf`, `flat` | `hnsw` |
//! | `bits` | `flat`: 0 (exact) or 1, 2, 4 (quantized + rerank); `ivf`: 1, 2, 4 | flat 0, ivf 4 |
//! | `m` | HNSW neighbours per node, 2–128 | 16 |
//! | `ef_construction` | HNSW build candidate list, 4–4096 (≥ m) | 64 |
//! | `lists` | IVF lists per segment, 0 = about √rows | 0 |
//! | `memtable_rows` | vectors per memtable, 64–10,000,000 | 100,000 |
//! | `rerank` | where exact distances come from: `index` (segments keep the vectors) or `heap` (IVF only: segments keep only codes, scans read the candidates' rows) | `index` |
//!
//! Unknown options, out-of-range numbers and bad kind names are rejected by PostgreSQL's
//! reloptions machinery or by [`validate`] with an error naming the option.

use std::ffi::{c_char, c_int, CStr};

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::manifest::KindConfig;

use crate::fmgr::error;

/// The options as PostgreSQL stores them (`rd_options`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct StrataOptions {
    vl_len_: i32,
    kind_offset: c_int,
    bits: c_int,
    m: c_int,
    ef_construction: c_int,
    lists: c_int,
    memtable_rows: c_int,
    rerank_offset: c_int,
}

/// Parsed, validated options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// The segment kind with its parameters.
    pub kind: KindConfig,
    /// Vectors per memtable.
    pub memtable_rows: u32,
    /// `rerank = 'heap'`: segments keep only codes; scans rerank from the table.
    pub rerank_from_heap: bool,
}

static mut RELOPT_KIND: pg_sys::relopt_kind::Type = 0;

const KINDS: &[&str] = &["hnsw", "ivf", "flat"];

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn validate_kind(value: *const c_char) {
    if value.is_null() {
        return;
    }
    // SAFETY: PostgreSQL passes a NUL-terminated option value.
    let text = unsafe { CStr::from_ptr(value) }.to_string_lossy();
    if !KINDS.contains(&text.as_ref()) {
        error(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid value for strata option \"kind\": \"{text}\" (expected hnsw, ivf or flat)"),
        );
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn validate_rerank(value: *const c_char) {
    if value.is_null() {
        return;
    }
    // SAFETY: PostgreSQL passes a NUL-terminated option value.
    let text = unsafe { CStr::from_ptr(value) }.to_string_lossy();
    if !["index", "heap"].contains(&text.as_ref()) {
        error(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid value for strata option \"rerank\": \"{text}\" (expected index or heap)"),
        );
    }
}

/// Registers the reloptions; called from `_PG_init`.
pub fn register() {
    // SAFETY: _PG_init runs once per process, before any index is opened; the strings are static.
    unsafe {
        RELOPT_KIND = pg_sys::add_reloption_kind();
        let lock = pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE;
        pg_sys::add_string_reloption(
            RELOPT_KIND,
            c"kind".as_ptr(),
            c"segment kind: hnsw, ivf or flat".as_ptr(),
            c"hnsw".as_ptr(),
            Some(validate_kind),
            lock,
        );
        pg_sys::add_int_reloption(
            RELOPT_KIND,
            c"bits".as_ptr(),
            c"bits per dimension of quantized codes".as_ptr(),
            -1,
            -1,
            4,
            lock,
        );
        pg_sys::add_int_reloption(RELOPT_KIND, c"m".as_ptr(), c"HNSW neighbours per node".as_ptr(), 16, 2, 128, lock);
        pg_sys::add_int_reloption(
            RELOPT_KIND,
            c"ef_construction".as_ptr(),
            c"HNSW build candidate list size".as_ptr(),
            64,
            4,
            4096,
            lock,
        );
        pg_sys::add_int_reloption(
            RELOPT_KIND,
            c"lists".as_ptr(),
            c"IVF lists per segment (0: about sqrt(rows))".as_ptr(),
            0,
            0,
            1 << 20,
            lock,
        );
        pg_sys::add_string_reloption(
            RELOPT_KIND,
            c"rerank".as_ptr(),
            c"where exact distances come from: index (stored vectors) or heap (the table's rows)".as_ptr(),
            c"index".as_ptr(),
            Some(validate_rerank),
            lock,
        );
        pg_sys::add_int_reloption(
            RELOPT_KIND,
            c"memtable_rows".as_ptr(),
            c"vectors per memtable".as_ptr(),
            100_000,
            64,
            10_000_000,
            lock,
        );
    }
}

/// `amoptions`: parses (and with `validate`, checks) reloptions.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amoptions(reloptions: pg_sys::Datum, validate: bool) -> *mut pg_sys::bytea {
    let field = |name: &'static CStr, opttype, offset: usize| pg_sys::relopt_parse_elt {
        optname: name.as_ptr(),
        opttype,
        offset: offset as c_int,
    };
    let table = [
        field(c"kind", pg_sys::relopt_type::RELOPT_TYPE_STRING, std::mem::offset_of!(StrataOptions, kind_offset)),
        field(c"bits", pg_sys::relopt_type::RELOPT_TYPE_INT, std::mem::offset_of!(StrataOptions, bits)),
        field(c"m", pg_sys::relopt_type::RELOPT_TYPE_INT, std::mem::offset_of!(StrataOptions, m)),
        field(
            c"ef_construction",
            pg_sys::relopt_type::RELOPT_TYPE_INT,
            std::mem::offset_of!(StrataOptions, ef_construction),
        ),
        field(c"lists", pg_sys::relopt_type::RELOPT_TYPE_INT, std::mem::offset_of!(StrataOptions, lists)),
        field(
            c"memtable_rows",
            pg_sys::relopt_type::RELOPT_TYPE_INT,
            std::mem::offset_of!(StrataOptions, memtable_rows),
        ),
        field(c"rerank", pg_sys::relopt_type::RELOPT_TYPE_STRING, std::mem::offset_of!(StrataOptions, rerank_offset)),
    ];
    // SAFETY: the table describes StrataOptions' fields; build_reloptions allocates the struct.
    let parsed = unsafe {
        pg_sys::build_reloptions(
            reloptions,
            validate,
            RELOPT_KIND,
            std::mem::size_of::<StrataOptions>(),
            table.as_ptr(),
            table.len() as c_int,
        )
    };
    if validate && !parsed.is_null() {
        // SAFETY: build_reloptions returned a StrataOptions.
        validate_options(unsafe { &*parsed.cast::<StrataOptions>() });
    }
    parsed.cast()
}

/// A string option stored at `offset` (0: not set, `default`).
fn string_option(options: &StrataOptions, offset: c_int, default: &str) -> String {
    if offset == 0 {
        return default.to_owned();
    }
    // SAFETY: a non-zero string offset points at a NUL-terminated string stored after the struct
    // in the same allocation (PostgreSQL's GET_STRING_RELOPTION).
    unsafe {
        let base = std::ptr::from_ref(options).cast::<c_char>();
        CStr::from_ptr(base.add(offset as usize)).to_string_lossy().into_owned()
    }
}

fn resolve(options: &StrataOptions) -> Result<Options, String> {
    let kind = string_option(options, options.kind_offset, "hnsw");
    let rerank_from_heap = match string_option(options, options.rerank_offset, "index").as_str() {
        "index" => false,
        "heap" if kind == "ivf" => true,
        "heap" => return Err(format!("rerank = 'heap' applies to kind = 'ivf' only, not kind = '{kind}'")),
        other => {
            return Err(format!("invalid value for strata option \"rerank\": \"{other}\" (expected index or heap)"))
        }
    };
    let bits = options.bits;
    let kind = match kind.as_str() {
        "hnsw" => {
            if bits != -1 {
                return Err("option \"bits\" does not apply to kind = 'hnsw'".into());
            }
            if options.ef_construction < options.m {
                return Err(format!(
                    "ef_construction ({}) must be at least m ({})",
                    options.ef_construction, options.m
                ));
            }
            KindConfig::Hnsw { m: options.m as u32, ef_construction: options.ef_construction as u32 }
        }
        "ivf" => match bits {
            -1 => KindConfig::Ivf { lists: options.lists as u32, bits: 4 },
            1 | 2 | 4 => KindConfig::Ivf { lists: options.lists as u32, bits: bits as u8 },
            other => return Err(format!("option \"bits\" must be 1, 2 or 4 for kind = 'ivf', not {other}")),
        },
        "flat" => match bits {
            -1 | 0 => KindConfig::Flat,
            1 | 2 | 4 => KindConfig::QuantizedFlat { bits: bits as u8 },
            other => return Err(format!("option \"bits\" must be 0, 1, 2 or 4 for kind = 'flat', not {other}")),
        },
        other => {
            return Err(format!("invalid value for strata option \"kind\": \"{other}\" (expected hnsw, ivf or flat)"))
        }
    };
    Ok(Options { kind, memtable_rows: options.memtable_rows as u32, rerank_from_heap })
}

fn validate_options(options: &StrataOptions) {
    if let Err(message) = resolve(options) {
        error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message);
    }
}

/// The options of an open index relation (defaults when none were given).
///
/// # Safety
/// `index` must be a valid, open relation of access method strata.
pub unsafe fn of(index: pg_sys::Relation) -> Options {
    // SAFETY: rd_options is null or the bytea amoptions built for this relation.
    let raw = unsafe { (*index).rd_options };
    if raw.is_null() {
        return Options {
            kind: KindConfig::Hnsw { m: 16, ef_construction: 64 },
            memtable_rows: 100_000,
            rerank_from_heap: false,
        };
    }
    // SAFETY: rd_options of a strata index is a StrataOptions (built by amoptions).
    match resolve(unsafe { &*raw.cast::<StrataOptions>() }) {
        Ok(options) => options,
        Err(message) => error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message),
    }
}
