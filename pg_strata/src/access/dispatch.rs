//! The one place that turns an index's [`AccessKind`](super::AccessKind) into its [`Kind`]
//! ([`dispatch!`]), and
//! that tells the access methods apart by relation before an index has a handle (its
//! configuration, its text search configuration, whether it is one of pg_strata's). It names the
//! kinds' modules (`index::kind`, `text::kind`); nothing else in the core does.

use pgrx::pg_sys;
use strata_lsm::manifest::IndexConfig;

use super::kind::Kind;
use crate::shmem::IndexKey;

/// Runs `$body` with `$K` the [`Kind`] of `$kind` (an [`AccessKind`](super::AccessKind), usually an
/// `IndexHandle`'s `access_kind`); `$body` is written once, generic over the kind.
macro_rules! dispatch {
    ($kind:expr, $K:ident => $body:expr) => {
        match $kind {
            $crate::access::AccessKind::Vector => {
                type $K = $crate::index::kind::Vector;
                $body
            }
            $crate::access::AccessKind::Text => {
                type $K = $crate::text::kind::Text;
                $body
            }
        }
    };
}
pub(crate) use dispatch;

/// Drops every kind's cached entries of `key` now, or every entry at the next use (see
/// [`Kind::forget_soon`]).
pub fn forget_soon(key: IndexKey) {
    crate::index::kind::Vector::forget_soon(key);
    crate::text::kind::Text::forget_soon(key);
}

/// Drops every kind's cached entries (see [`Kind::forget_all_soon`]).
pub fn forget_all_soon() {
    crate::index::kind::Vector::forget_all_soon();
    crate::text::kind::Text::forget_all_soon();
}

/// Whether `index` is an index of the bm25 access method (null-safe on `rd_indam`).
///
/// # Safety
/// `index` must be a valid, open relation.
pub unsafe fn is_text_relation(index: pg_sys::Relation) -> bool {
    // SAFETY: `index` is an open relation (this function's contract), as `is_bm25` needs.
    unsafe { crate::text::options::is_bm25(index) }
}

/// The configuration an index relation of one of pg_strata's access methods asks for (its
/// options, and for a vector index its opclass and filter columns).
///
/// # Safety
/// `index` must be a valid, open index of a strata access method or of bm25.
pub unsafe fn config_of(index: pg_sys::Relation) -> IndexConfig {
    // SAFETY: `index` is an open strata or bm25 index (this function's contract); each branch
    // passes it to the configuration reader of its access method.
    unsafe {
        if is_text_relation(index) {
            crate::text::options::config_of(index)
        } else {
            crate::index::config_of(index)
        }
    }
}

/// The text search configuration a bm25 index tokenises with, from the value its status pages
/// store (`stored`); 0 for a vector index (whose pages store 0).
///
/// # Safety
/// `index` must be an open index, on a backend's main thread inside a transaction.
pub unsafe fn text_config_at_open(index: pg_sys::Relation, stored: u32) -> u32 {
    // SAFETY: this function's contract is `at_open`'s.
    unsafe { crate::text::config::at_open(index, stored) }
}

/// Whether an open index belongs to one of pg_strata's vector access methods (`strata`, the
/// companion's `hnsw` / `ivfflat`; pgvector's own `hnsw` is not).
///
/// # Safety
/// `index` must be a valid, open index relation whose `rd_indam` is set.
pub unsafe fn is_vector_relation(index: pg_sys::Relation) -> bool {
    // SAFETY: this function's contract is `flavor_of`'s.
    unsafe { crate::index::options::flavor_of(index).is_some() }
}
