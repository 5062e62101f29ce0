//! `ambuild` of a bm25 index: the heap is scanned once, each row tokenised
//! ([`super::tokens::document_of`]) into chunks bounded by `maintenance_work_mem`
//! ([`strata_text::TextChunks`]), each built into one text segment, so memory stays bounded
//! whatever the table size. Each segment is published by the core's build-chunk protocol
//! ([`crate::access::build::publish_chunk`]), as the vector build publishes its chunks.

use pgrx::pg_sys;
use strata_text::{Memtable, TextChunks};

use super::kind::Text;
use crate::access::state::IndexHandle;
use crate::access::status;
use crate::memtable::pack_tid;

struct BuildState {
    index: pg_sys::Relation,
    handle: IndexHandle,
    config: pg_sys::Oid,
    chunks: TextChunks,
    heap_tuples: f64,
    index_tuples: f64,
    segments: u32,
}

impl BuildState {
    /// Builds a chunk's rows into a segment and publishes it.
    fn build_chunk(&mut self, rows: &Memtable) {
        self.segments += 1;
        if self.segments == 2 {
            pgrx::notice!(
                "pg_strata: index \"{}\" is built in several segments: its rows exceed maintenance_work_mem",
                // SAFETY: the relation being built, open and locked by CREATE INDEX.
                unsafe { crate::access::relation_name(self.index) }
            );
        }
        let tids = rows.ids().to_vec();
        let built = rows.to_segment().unwrap_or_else(|e| {
            crate::fmgr::error(pgrx::PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, format!("pg_strata: {e}"))
        });
        self.index_tuples += f64::from(built.rows());
        // SAFETY: `index` is the relation being built, open and locked by CREATE INDEX.
        unsafe { crate::access::build::publish_chunk::<Text>(self.index, &self.handle, &tids, &built) };
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn build_callback(
    _index: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    _tuple_is_alive: bool,
    state: *mut std::ffi::c_void,
) {
    // SAFETY: PostgreSQL passes our BuildState pointer back, plus one value/isnull pair (the
    // indexed text) and a valid TID.
    unsafe {
        let state = &mut *state.cast::<BuildState>();
        state.heap_tuples += 1.0;
        if *isnull {
            return;
        }
        let document = super::tokens::document_of(state.config, *values);
        super::check_span_fits(&state.handle, document.word_count());
        let chunk = state.chunks.push(pack_tid(*tid), &document).unwrap_or_else(|e| {
            crate::fmgr::error(pgrx::PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, format!("pg_strata: {e}"))
        });
        pg_sys::pgstat_progress_update_param(pg_sys::PROGRESS_CREATEIDX_TUPLES_DONE as i32, state.heap_tuples as i64);
        if let Some(rows) = chunk {
            state.build_chunk(&rows);
        }
    }
}

/// `ambuild` of `USING bm25`.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn ambuild(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    index_info: *mut pg_sys::IndexInfo,
) -> *mut pg_sys::IndexBuildResult {
    // SAFETY: PostgreSQL calls ambuild with open, locked relations and the IndexInfo of `index`.
    unsafe {
        crate::access::build::refuse_temporary(index);
        super::check_encoding();
        // The configuration is resolved once, here, and stored in the status pages, which come
        // first: the service treats an index whose main fork is empty as dropped.
        let config = super::config::at_build(index);
        status::initialise(index, pg_sys::ForkNumber::MAIN_FORKNUM, 0, config.to_u32());
        let handle = crate::access::build::initialise(index, config.to_u32());
        let mut state = BuildState {
            index,
            config,
            handle,
            chunks: TextChunks::new(pg_sys::maintenance_work_mem as usize * 1024),
            heap_tuples: 0.0,
            index_tuples: 0.0,
            segments: 0,
        };
        pg_sys::table_index_build_scan(
            heap,
            index,
            index_info,
            true,
            true,
            Some(build_callback),
            (&raw mut state).cast(),
            std::ptr::null_mut(),
        );
        if let Some(rows) = state.chunks.finish() {
            state.build_chunk(&rows);
        }
        let result =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBuildResult>()).cast::<pg_sys::IndexBuildResult>();
        (*result).heap_tuples = state.heap_tuples;
        (*result).index_tuples = state.index_tuples;
        result
    }
}
