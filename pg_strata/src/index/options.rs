//! `WITH (...)` options of `CREATE INDEX … USING strata`: registration with PostgreSQL's
//! reloptions machinery and reading them back. Their meaning, defaults and validation are
//! [`strata_lsm::options`] (see the table there).
//!
//! Unknown options and out-of-range numbers are rejected by PostgreSQL's reloptions machinery
//! (with the ranges of [`strata_lsm::options::INT_OPTIONS`]); everything else by
//! [`IndexOptions::resolve`], with an error naming the option.

use std::ffi::{c_char, c_int, CStr, CString};

use pgrx::{pg_sys, PgSqlErrorCode};
pub use strata_lsm::options::Flavor;
use strata_lsm::options::{IndexOptions, KindOption, RerankOption, INT_OPTIONS};

use crate::fmgr::error;

/// The options as PostgreSQL stores them (`rd_options`): the integer options in
/// [`INT_OPTIONS`] order.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct StrataOptions {
    vl_len_: i32,
    kind_offset: c_int,
    ints: [c_int; INT_OPTIONS.len()],
    rerank_offset: c_int,
}

/// The type of an `amoptions` function.
pub use crate::access::AmOptions;

/// One reloptions kind per [`Flavor`] (they differ in the default of `kind`).
static mut RELOPT_KINDS: [pg_sys::relopt_kind::Type; 3] = [0; 3];

/// The text of a string option's value, or `None` for a null pointer.
///
/// # Safety
/// `value` must be null or a NUL-terminated string.
unsafe fn option_text(value: *const c_char) -> Option<String> {
    // SAFETY: `value` is non-null here and NUL-terminated (this function's contract: a reloption
    // value PostgreSQL passes to a validator, or a string that build_reloptions stored).
    (!value.is_null()).then(|| unsafe { CStr::from_ptr(value) }.to_string_lossy().into_owned())
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn validate_kind(value: *const c_char) {
    // SAFETY: PostgreSQL passes a NUL-terminated option value.
    if let Some(Err(e)) = unsafe { option_text(value) }.map(|text| KindOption::parse(&text)) {
        error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string());
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn validate_rerank(value: *const c_char) {
    // SAFETY: PostgreSQL passes a NUL-terminated option value.
    if let Some(Err(e)) = unsafe { option_text(value) }.map(|text| RerankOption::parse(&text)) {
        error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string());
    }
}

/// Registers the reloptions; called from `_PG_init`.
pub fn register() {
    // SAFETY: _PG_init runs once per process, before any index is opened; PostgreSQL copies the
    // names, descriptions and defaults into TopMemoryContext.
    for flavor in Flavor::ALL {
        // SAFETY: _PG_init runs once per process, before any index is opened; PostgreSQL copies
        // the names, descriptions and defaults into TopMemoryContext.
        unsafe { register_kind(flavor) };
    }
}

/// Registers the reloptions kind of `flavor`.
///
/// # Safety
/// Only from `_PG_init` (see [`register`]).
unsafe fn register_kind(flavor: Flavor) {
    // SAFETY: only `register`, run from _PG_init, calls this: single-threaded, before any index is
    // opened, so RELOPT_KINDS has no reader yet; PostgreSQL copies the names and defaults it is given.
    unsafe {
        let relopt_kind = pg_sys::add_reloption_kind();
        RELOPT_KINDS[flavor as usize] = relopt_kind;
        let lock = pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE;
        let kind_default = CString::new(flavor.default_kind().name()).expect("no NUL");
        pg_sys::add_string_reloption(
            relopt_kind,
            c"kind".as_ptr(),
            c"segment kind: hnsw, ivf or flat".as_ptr(),
            kind_default.as_ptr(),
            Some(validate_kind),
            lock,
        );
        let rerank_default = CString::new(RerankOption::DEFAULT.name()).expect("no NUL");
        pg_sys::add_string_reloption(
            relopt_kind,
            c"rerank".as_ptr(),
            c"where exact distances come from: index (stored vectors) or heap (the table's rows)".as_ptr(),
            rerank_default.as_ptr(),
            Some(validate_rerank),
            lock,
        );
        for option in INT_OPTIONS {
            let name = CString::new(option.name).expect("no NUL");
            let description = CString::new(option.description).expect("no NUL");
            pg_sys::add_int_reloption(
                relopt_kind,
                name.as_ptr(),
                description.as_ptr(),
                option.default,
                option.min,
                option.max,
                lock,
            );
        }
    }
}

/// `amoptions` of `USING strata`: parses (and with `validate`, checks) reloptions.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amoptions(reloptions: pg_sys::Datum, validate: bool) -> *mut pg_sys::bytea {
    parse(reloptions, validate, Flavor::Strata)
}

/// `amoptions` of `USING hnsw` (companion extension `pg_strata_pgvector`).
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn hnsw_amoptions(reloptions: pg_sys::Datum, validate: bool) -> *mut pg_sys::bytea {
    parse(reloptions, validate, Flavor::Hnsw)
}

/// `amoptions` of `USING ivfflat` (companion extension `pg_strata_pgvector`).
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn ivfflat_amoptions(reloptions: pg_sys::Datum, validate: bool) -> *mut pg_sys::bytea {
    parse(reloptions, validate, Flavor::Ivfflat)
}

/// The [`Flavor`] of an open index of one of pg_strata's access methods, by its `amoptions`.
///
/// # Safety
/// `index` must be a valid, open index relation.
pub unsafe fn flavor_of(index: pg_sys::Relation) -> Option<Flavor> {
    // SAFETY: `index` is an open index relation (this function's contract; `is_strata_index` checks
    // rd_indam first), and the relcache sets rd_indam for every open index.
    let own = unsafe { (*(*index).rd_indam).amoptions }.map(|f| f as usize)?;
    [(amoptions as AmOptions, Flavor::Strata), (hnsw_amoptions, Flavor::Hnsw), (ivfflat_amoptions, Flavor::Ivfflat)]
        .into_iter()
        .find_map(|(function, flavor)| (function as usize == own).then_some(flavor))
}

fn parse(reloptions: pg_sys::Datum, validate: bool, flavor: Flavor) -> *mut pg_sys::bytea {
    let names: Vec<CString> = INT_OPTIONS.iter().map(|o| CString::new(o.name).expect("no NUL")).collect();
    let string = |name: &'static CStr, offset: usize| {
        crate::pg_compat::relopt_parse_elt(name, pg_sys::relopt_type::RELOPT_TYPE_STRING, offset)
    };
    let ints = std::mem::offset_of!(StrataOptions, ints);
    let mut table: Vec<pg_sys::relopt_parse_elt> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            crate::pg_compat::relopt_parse_elt(
                name,
                pg_sys::relopt_type::RELOPT_TYPE_INT,
                ints + i * std::mem::size_of::<c_int>(),
            )
        })
        .collect();
    table.push(string(c"kind", std::mem::offset_of!(StrataOptions, kind_offset)));
    table.push(string(c"rerank", std::mem::offset_of!(StrataOptions, rerank_offset)));
    // SAFETY: the table describes StrataOptions' fields; build_reloptions allocates the struct.
    let parsed = unsafe {
        pg_sys::build_reloptions(
            reloptions,
            validate,
            RELOPT_KINDS[flavor as usize],
            std::mem::size_of::<StrataOptions>(),
            table.as_ptr(),
            table.len() as c_int,
        )
    };
    if validate && !parsed.is_null() {
        // SAFETY: build_reloptions returned a StrataOptions.
        validate_options(unsafe { &*parsed.cast::<StrataOptions>() }, &given_names(reloptions));
    }
    parsed.cast()
}

/// The names of the options `reloptions` (a text array of `name=value`, or 0) gives.
fn given_names(reloptions: pg_sys::Datum) -> Vec<String> {
    // SAFETY: `reloptions` is the array (or 0) PostgreSQL passed to amoptions; untransformRelOptions
    // returns a list of DefElem nodes (NIL for 0), allocated in the current memory context.
    unsafe {
        let list = pg_sys::untransformRelOptions(reloptions);
        pgrx::PgList::<pg_sys::DefElem>::from_pg(list)
            .iter_ptr()
            .map(|element| std::ffi::CStr::from_ptr((*element).defname).to_string_lossy().into_owned())
            .collect()
    }
}

/// A string option stored at `offset` (0: not set).
fn string_option(options: &StrataOptions, offset: c_int) -> Option<String> {
    if offset == 0 {
        return None;
    }
    // SAFETY: a non-zero string offset points at a NUL-terminated string stored after the struct
    // in the same allocation (PostgreSQL's GET_STRING_RELOPTION).
    unsafe {
        let base = std::ptr::from_ref(options).cast::<c_char>();
        option_text(base.add(offset as usize))
    }
}

/// The options as given ([`IndexOptions::stored`]).
fn read(options: &StrataOptions) -> IndexOptions {
    IndexOptions::stored(
        string_option(options, options.kind_offset),
        options.ints,
        string_option(options, options.rerank_offset),
    )
}

/// Checks the options on their own and that each option `given` applies to the kind.
fn validate_options(options: &StrataOptions, given: &[String]) {
    let options = read(options);
    let checked = options.resolve().and_then(|_| options.check_given(given.iter().map(String::as_str)));
    if let Err(e) = checked {
        error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string());
    }
}

/// The options of an open index relation (all `None` when it has none).
///
/// # Safety
/// `index` must be a valid, open index of one of pg_strata's access methods.
pub unsafe fn of(index: pg_sys::Relation) -> IndexOptions {
    // SAFETY: rd_options is null or the bytea amoptions built for this relation.
    let raw = unsafe { (*index).rd_options };
    if raw.is_null() {
        // No WITH clause: the access method's default kind.
        // SAFETY: `index` is an open index of one of pg_strata's access methods (this function's
        // contract), which is what `flavor_of` requires.
        let flavor = unsafe { flavor_of(index) }.unwrap_or(Flavor::Strata);
        return IndexOptions::without_clause(flavor);
    }
    // SAFETY: rd_options of a strata index is a StrataOptions (built by amoptions).
    read(unsafe { &*raw.cast::<StrataOptions>() })
}
