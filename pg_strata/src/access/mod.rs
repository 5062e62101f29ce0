//! The access-method core: what the vector (`strata`, `hnsw`, `ivfflat`) and `bm25` access
//! methods share, written once over the per-kind [`kind::Kind`].
//!
//! The contract. An index is opened ([`opening::open`]) into an [`state::IndexHandle`] whose
//! `access_kind` is chosen once from its configuration ([`AccessKind::of`], the only place
//! that looks at the kind); every shared path runs generic over the [`kind::Kind`] that
//! [`dispatch::dispatch!`] picks for it. A kind supplies its segment type, its backend-local segment
//! cache, its table reader (rows read back by TID as CREATE INDEX computed them), its segment
//! build and how a sealed memtable's rows are collected; everything else is here, once:
//!
//! - [`build`]: the build-chunk protocol of CREATE INDEX (register a group, append its TIDs,
//!   publish the segment, settle the group), the index directory, `ambuildempty`;
//! - [`state`] / [`status`]: the shared-memory handle, memtables, writer pins and settles; the
//!   status pages (membership log);
//! - [`publish`]: publishing manifests and generations, error codes;
//! - [`opening`] and [`recovery`]: registration at first use, crash recovery (repair + refill);
//! - [`standby`]: a node deriving its index from the membership log;
//! - [`vacuum`]: `ambulkdelete` / `amvacuumcleanup`;
//! - [`cost`], [`pgstat`], [`heap`] (the table read back by TID), the backend caches' owners and
//!   their invalidation ([`cache_owners`], [`invalidation`]).
//!
//! The vector access method (module `index`) and the bm25 access method (module `text`) use this
//! module and never each other; only [`dispatch`] names them both (and the cost estimate asks
//! the bm25 planner binding whether a `bm25query` names another index).

pub mod build;
pub mod cache_owners;
pub mod cost;
pub mod dispatch;
pub mod heap;
pub mod insert;
pub mod invalidation;
pub mod kind;
pub mod opening;
pub mod pgstat;
pub mod publish;
pub mod recovery;
pub mod standby;
pub mod state;
pub mod status;
pub mod vacuum;

use pgrx::pg_sys;
use strata_lsm::manifest::IndexConfig;

/// The family of an index, chosen from its configuration when its handle is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessKind {
    /// A vector index (access methods `strata`, `hnsw`, `ivfflat`): vector segments.
    Vector,
    /// A bm25 index: text segments, documents as span rows.
    Text,
}

impl AccessKind {
    /// The family of an index of configuration `config`.
    pub fn of(config: &IndexConfig) -> Self {
        if config.kind.is_text() {
            Self::Text
        } else {
            Self::Vector
        }
    }
}

/// An access method's `amoptions` callback.
pub type AmOptions = unsafe extern "C-unwind" fn(pg_sys::Datum, bool) -> *mut pg_sys::bytea;

/// Whether an open index belongs to one of pg_strata's access methods (`strata`, the
/// companion's `hnsw` / `ivfflat`, or `bm25`; pgvector's own `hnsw` is not).
///
/// # Safety
/// `index` must be a valid, open index relation.
pub unsafe fn is_strata_index(index: pg_sys::Relation) -> bool {
    // SAFETY: `index` is an open index relation (this function's contract: the settler and stats
    // functions open it by OID first), so `*index` is valid; the kind tests read rd_indam only
    // after the null check short-circuits.
    unsafe {
        !(*index).rd_indam.is_null() && (dispatch::is_vector_relation(index) || dispatch::is_text_relation(index))
    }
}

/// Opens relation `oid` with AccessShareLock, runs `work` on it and closes it; does nothing when
/// the relation is gone (dropped since the caller found it). Call inside a (sub)transaction, whose
/// end releases the lock and the reference also when `work` raises an error.
pub fn with_index_by_oid(oid: pg_sys::Oid, work: impl FnOnce(pg_sys::Relation)) {
    // SAFETY: opening a relation by OID on the backend's main thread inside a transaction;
    // try_relation_open returns NULL for a relation that no longer exists.
    let index = unsafe { pg_sys::try_relation_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    if index.is_null() {
        return;
    }
    work(index);
    // SAFETY: closing what was opened above.
    unsafe { pg_sys::relation_close(index, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
}

/// The `IndexAmRoutine` of pg_strata's access methods with `amoptions`, freshly palloc'd: the
/// callbacks written once ([`build::ambuildempty`], VACUUM, the cost estimate) are set; each
/// access method's handler sets its own build, insert and scan callbacks and what it supports.
pub fn routine_struct(amoptions: AmOptions) -> *mut pg_sys::IndexAmRoutine {
    // SAFETY: makeNode-style allocation of an IndexAmRoutine in the current memory context.
    let routine = unsafe {
        let routine = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexAmRoutine>()).cast::<pg_sys::IndexAmRoutine>();
        (*routine).type_ = pg_sys::NodeTag::T_IndexAmRoutine;
        routine
    };
    // SAFETY: `routine` was just allocated and zeroed.
    let r = unsafe { &mut *routine };
    r.amstrategies = 0;
    r.amsupport = 1;
    r.amoptsprocnum = 0;
    r.amcanorder = false;
    r.amcanorderbyop = true;
    r.amcanbackward = false;
    r.amcanunique = false;
    r.amcanmulticol = true;
    r.amoptionalkey = true;
    r.amsearcharray = true;
    r.amsearchnulls = false;
    r.amstorage = false;
    r.amclusterable = false;
    r.ampredlocks = false;
    r.amcanparallel = false;
    r.amcaninclude = false;
    r.amusemaintenanceworkmem = true;
    r.amparallelvacuumoptions = pg_sys::VACUUM_OPTION_PARALLEL_BULKDEL as u8;
    r.amkeytype = pg_sys::InvalidOid;
    r.ambuildempty = Some(build::ambuildempty);
    r.ambulkdelete = Some(vacuum::ambulkdelete);
    r.amvacuumcleanup = Some(vacuum::amvacuumcleanup);
    r.amcostestimate = Some(cost::amcostestimate);
    r.amoptions = Some(amoptions);
    r.amvalidate = Some(amvalidate);
    routine
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn amvalidate(_opclass: pg_sys::Oid) -> bool {
    true
}

/// The name of relation `rel`.
///
/// # Safety
/// `rel` must be a valid, open relation.
pub unsafe fn relation_name(rel: pg_sys::Relation) -> String {
    // SAFETY: `rel` is an open relation (this function's contract: callers pass an AM callback's
    // Relation), so rd_rel points to its pg_class row; relname is a NUL-terminated NameData.
    unsafe { std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()) }.to_string_lossy().into_owned()
}
