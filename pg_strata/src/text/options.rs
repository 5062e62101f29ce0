//! `WITH (...)` options of `CREATE INDEX … USING bm25`: registration with PostgreSQL's reloptions
//! machinery and reading them back. Their meaning, defaults and checks are
//! [`strata_lsm::text_options`].

use std::ffi::{c_char, c_int, CStr, CString};

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::text_options::{Bm25Options, B, DEFAULT_TEXT_CONFIG, K1, MEMTABLE_SLOTS};

use strata_lsm::manifest::IndexConfig;

use crate::fmgr::error;

/// The options as PostgreSQL stores them (`rd_options`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct StoredOptions {
    vl_len_: i32,
    text_config_offset: c_int,
    k1: f64,
    b: f64,
    memtable_slots: c_int,
}

/// The reloptions kind of `USING bm25`.
static mut RELOPT_KIND: pg_sys::relopt_kind::Type = 0;

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn validate_text_config(value: *const c_char) {
    // PostgreSQL also validates the default at registration, in the postmaster, where no catalog
    // can be read; the default names a built-in configuration.
    // SAFETY: a plain query of the transaction state.
    if value.is_null() || !unsafe { pg_sys::IsTransactionState() } {
        return;
    }
    // SAFETY: PostgreSQL passes a NUL-terminated option value; resolving it is a catalog
    // lookup on the backend's main thread that raises the standard error for an unknown name.
    unsafe { super::tokens::resolve_config(&CStr::from_ptr(value).to_string_lossy()) };
}

/// Registers the reloptions; called from `_PG_init`.
pub fn register() {
    // SAFETY: _PG_init runs once per process, before any index is opened; PostgreSQL copies the
    // names, descriptions and defaults into TopMemoryContext.
    unsafe {
        let kind = pg_sys::add_reloption_kind();
        RELOPT_KIND = kind;
        let lock = pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE;
        let default = CString::new(DEFAULT_TEXT_CONFIG).expect("no NUL");
        pg_sys::add_string_reloption(
            kind,
            c"text_config".as_ptr(),
            c"text search configuration rows and queries are tokenised with".as_ptr(),
            default.as_ptr(),
            Some(validate_text_config),
            lock,
        );
        for option in [K1, B] {
            let name = CString::new(option.name).expect("no NUL");
            let description = CString::new(option.description).expect("no NUL");
            pg_sys::add_real_reloption(
                kind,
                name.as_ptr(),
                description.as_ptr(),
                option.default,
                option.min,
                option.max,
                lock,
            );
        }
        let name = CString::new(MEMTABLE_SLOTS.name).expect("no NUL");
        let description = CString::new(MEMTABLE_SLOTS.description).expect("no NUL");
        pg_sys::add_int_reloption(
            kind,
            name.as_ptr(),
            description.as_ptr(),
            MEMTABLE_SLOTS.default,
            MEMTABLE_SLOTS.min,
            MEMTABLE_SLOTS.max,
            lock,
        );
    }
}

/// `amoptions` of `USING bm25`: parses (and with `validate`, checks) reloptions.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amoptions(reloptions: pg_sys::Datum, validate: bool) -> *mut pg_sys::bytea {
    let field = |name: &'static CStr, opttype, offset: usize| crate::pg_compat::relopt_parse_elt(name, opttype, offset);
    let table = [
        field(
            c"text_config",
            pg_sys::relopt_type::RELOPT_TYPE_STRING,
            std::mem::offset_of!(StoredOptions, text_config_offset),
        ),
        field(c"k1", pg_sys::relopt_type::RELOPT_TYPE_REAL, std::mem::offset_of!(StoredOptions, k1)),
        field(c"b", pg_sys::relopt_type::RELOPT_TYPE_REAL, std::mem::offset_of!(StoredOptions, b)),
        field(
            c"memtable_slots",
            pg_sys::relopt_type::RELOPT_TYPE_INT,
            std::mem::offset_of!(StoredOptions, memtable_slots),
        ),
    ];
    // SAFETY: the table describes StoredOptions' fields; build_reloptions allocates the struct.
    let parsed = unsafe {
        pg_sys::build_reloptions(
            reloptions,
            validate,
            RELOPT_KIND,
            std::mem::size_of::<StoredOptions>(),
            table.as_ptr(),
            table.len() as c_int,
        )
    };
    if validate && !parsed.is_null() {
        // SAFETY: build_reloptions returned a StoredOptions.
        let options = read(unsafe { &*parsed.cast::<StoredOptions>() });
        if let Err(e) = strata_lsm::manifest::IndexConfig::from_bm25_options(&options) {
            error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string());
        }
    }
    parsed.cast()
}

/// The options as given.
fn read(options: &StoredOptions) -> Bm25Options {
    let text_config = (options.text_config_offset != 0).then(|| {
        // SAFETY: a non-zero string offset points at a NUL-terminated string stored after the
        // struct in the same allocation (PostgreSQL's GET_STRING_RELOPTION).
        unsafe {
            let base = std::ptr::from_ref(options).cast::<c_char>();
            CStr::from_ptr(base.add(options.text_config_offset as usize)).to_string_lossy().into_owned()
        }
    });
    Bm25Options { text_config, k1: Some(options.k1), b: Some(options.b), memtable_slots: Some(options.memtable_slots) }
}

/// Whether an open index belongs to the `bm25` access method.
///
/// # Safety
/// `index` must be a valid, open index relation.
pub unsafe fn is_bm25(index: pg_sys::Relation) -> bool {
    // The address of bm25's own `amoptions` function, to compare with the relation's IndexAmRoutine.
    let own = amoptions as crate::access::AmOptions as usize;
    // SAFETY: `index` is an open relation (an AM callback's Relation, or one its caller opened with a
    // lock), so `*index` is a valid RelationData; rd_indam is null-checked before it is read.
    unsafe { !(*index).rd_indam.is_null() && (*(*index).rd_indam).amoptions.map(|f| f as usize) == Some(own) }
}

/// The options of an open bm25 index (the defaults when it has none).
///
/// # Safety
/// `index` must be a valid, open index of access method bm25.
pub unsafe fn of(index: pg_sys::Relation) -> Bm25Options {
    // SAFETY: rd_options is null or the bytea amoptions built for this relation.
    let raw = unsafe { (*index).rd_options };
    if raw.is_null() {
        return Bm25Options::default();
    }
    // SAFETY: rd_options of a bm25 index is a StoredOptions (built by amoptions).
    read(unsafe { &*raw.cast::<StoredOptions>() })
}

/// The configuration of an open bm25 index, from its options.
///
/// # Safety
/// `index` must be a valid, open index of access method bm25.
pub unsafe fn config_of(index: pg_sys::Relation) -> IndexConfig {
    // SAFETY: `index` is an open bm25 index (this function's contract; `access::kind::config_of` calls it only
    // after `is_bm25`), so `of` reads a StoredOptions built by bm25's `amoptions` from rd_options.
    let options = unsafe { of(index) };
    IndexConfig::from_bm25_options(&options)
        .unwrap_or_else(|e| error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string()))
}
