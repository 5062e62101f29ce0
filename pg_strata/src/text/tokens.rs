//! Tokenising with PostgreSQL's text search: `to_tsvector(config, text)` and its lexemes as a
//! strata-text [`Document`] (`tf` = the lexeme's positions, `dl` = their sum), so every installed
//! configuration and dictionary works and the index scores exactly what `to_tsvector` returns.

use std::ffi::CString;

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_text::Document;

use crate::fmgr::error;

/// The OID of text search configuration `name` (schema-qualified or found on the search path);
/// raises PostgreSQL's error when there is none.
///
/// # Safety
/// Call on a backend's main thread inside a transaction.
pub unsafe fn resolve_config(name: &str) -> pg_sys::Oid {
    let Ok(name) = CString::new(name) else {
        error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "a text search configuration name has no NUL bytes")
    };
    // SAFETY: callers run on the backend's main thread inside a transaction (index callbacks, `<@>`,
    // or the reloption validator after its IsTransactionState check), so catalog lookups may run;
    // stringToQualifiedNameList raises on a malformed name and get_ts_config_oid(missing_ok = false)
    // on an unknown one.
    unsafe { pg_sys::get_ts_config_oid(crate::pg_compat::qualified_name_list(name.as_ptr()), false) }
}

thread_local! {
    /// `to_tsvector(regconfig, text)`'s function-manager entry, looked up once per process.
    static TO_TSVECTOR: std::cell::Cell<*mut pg_sys::FmgrInfo> = const { std::cell::Cell::new(std::ptr::null_mut()) };
}

/// `to_tsvector(regconfig, text)`'s function-manager entry, kept in TopMemoryContext.
fn to_tsvector() -> *mut pg_sys::FmgrInfo {
    TO_TSVECTOR.with(|cached| {
        if cached.get().is_null() {
            // SAFETY: fmgr_info_cxt fills a FmgrInfo allocated in TopMemoryContext (which lives as
            // long as the process) for a built-in function, on the backend's main thread.
            unsafe {
                let info =
                    pg_sys::MemoryContextAllocZero(pg_sys::TopMemoryContext, std::mem::size_of::<pg_sys::FmgrInfo>())
                        .cast::<pg_sys::FmgrInfo>();
                pg_sys::fmgr_info_cxt(
                    pg_sys::Oid::from(pg_sys::F_TO_TSVECTOR_REGCONFIG_TEXT),
                    info,
                    pg_sys::TopMemoryContext,
                );
                cached.set(info);
            }
        }
        cached.get()
    })
}

/// The lexemes of `to_tsvector(config, text)` with their position counts, in the tsvector's
/// (byte) order.
///
/// # Safety
/// `text` must be a `text` datum (possibly toasted); call on a backend's main thread.
unsafe fn lexemes(config: pg_sys::Oid, text: pg_sys::Datum) -> Vec<(Vec<u8>, u32)> {
    // SAFETY: to_tsvector(regconfig, text) returns a freshly made (untoasted) tsvector.
    let vector = unsafe { pg_sys::FunctionCall2Coll(to_tsvector(), pg_sys::InvalidOid, config.into(), text) };
    let header = vector.cast_mut_ptr::<pg_sys::TSVectorData>();
    // SAFETY: a tsvector is `int32 vl_len_, int32 size, WordEntry[size]`, then the lexeme bytes
    // (STRPTR), each lexeme's position vector following it at a 2-byte aligned offset
    // (_POSVECPTR); every offset read below is one the tsvector's own entries give.
    unsafe {
        let size = (*header).size as usize;
        let entries = (*header).entries.as_ptr();
        let strings = entries.add(size).cast::<u8>();
        let mut out = Vec::with_capacity(size);
        for i in 0..size {
            let entry = &*entries.add(i);
            let (pos, len) = (entry.pos() as usize, entry.len() as usize);
            let bytes = std::slice::from_raw_parts(strings.add(pos), len).to_vec();
            let tf = if entry.haspos() != 0 {
                let at = (pos + len).next_multiple_of(2);
                u32::from(strings.add(at).cast::<u16>().read_unaligned())
            } else {
                1
            };
            out.push((bytes, tf.max(1)));
        }
        pg_sys::pfree(header.cast());
        out
    }
}

fn utf8(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|_| {
        error(
            PgSqlErrorCode::ERRCODE_CHARACTER_NOT_IN_REPERTOIRE,
            "pg_strata: bm25 indexes need lexemes in UTF-8 (a database of encoding UTF8 or SQL_ASCII)",
        )
    })
}

/// `text` (a `text` datum) tokenised with configuration `config` as a document.
///
/// # Safety
/// As for [`lexemes`].
pub unsafe fn document_of(config: pg_sys::Oid, text: pg_sys::Datum) -> Document {
    // SAFETY: `text` is a non-null value of a bm25 index's `text` column (build, aminsert and recovery
    // skip nulls; `<@>` is STRICT), tokenised on the backend's main thread, as `lexemes` requires.
    let terms = unsafe { lexemes(config, text) }.into_iter().map(|(bytes, tf)| (utf8(bytes), tf));
    Document::new(terms)
        .unwrap_or_else(|e| error(PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, format!("pg_strata: {e}")))
}

/// The distinct lexemes of `to_tsvector(config, query)`.
///
/// # Safety
/// Call on a backend's main thread.
pub unsafe fn query_lexemes(config: pg_sys::Oid, query: &str) -> Vec<String> {
    // SAFETY: a text datum made in the current memory context, read by `lexemes` only.
    unsafe {
        let text = pg_sys::cstring_to_text_with_len(query.as_ptr().cast(), query.len() as i32);
        let out = lexemes(config, pg_sys::Datum::from(text)).into_iter().map(|(bytes, _)| utf8(bytes)).collect();
        pg_sys::pfree(text.cast());
        out
    }
}
