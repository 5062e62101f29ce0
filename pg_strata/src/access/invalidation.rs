//! Dropping a backend's cached segments when PostgreSQL invalidates their index relation.
//!
//! Each backend keeps the segment sets it searched (each kind's cache: [`super::kind::Kind`]) with their files mapped, and decoded memtable rows and
//! codes beside them, until the manifest generation moves. An index dropped by another session
//! (`DROP INDEX`, `DROP TABLE`, a rewrite giving it new storage) publishes no new generation, so
//! without more its files stayed mapped until the backend exited — and the index service's sweep
//! of the dropped index's directory freed no disk space while a pooled connection lived.
//!
//! PostgreSQL invalidates a relation's cache entry in every backend when the relation changes or
//! goes away; the callback registered here ([`register`]) drops the cached entries of that
//! relation ([`super::cache_owners`] says which), or every entry for a reset of the whole relation
//! cache. A backend processes invalidations when it starts a transaction (and when it takes a
//! lock), so a long-lived backend lets go of a dropped index's files at its next statement. Any
//! other change of the index (VACUUM or ANALYZE updating its statistics, an ALTER) drops them too:
//! the next scan opens the current set again (mapping its files: milliseconds for a large index).
//!
//! The caches call no PostgreSQL function while borrowed, so an invalidation never meets one in
//! use; should one be, the cache drops everything at its next use instead.

use pgrx::pg_sys;

/// Registers the relation cache callback; called once from `_PG_init` (in the postmaster, whose
/// backends inherit it, or in the backend that loads the library).
pub fn register() {
    // SAFETY: registering a callback function with no argument, from _PG_init on the main thread;
    // PostgreSQL keeps the pointer for the process's life (the library is never unloaded).
    unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(relcache_callback), pg_sys::Datum::from(0)) };
}

/// PostgreSQL's relation cache callback: `relid` was invalidated (`InvalidOid`: every relation).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn relcache_callback(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    let relation = (relid != pg_sys::InvalidOid).then(|| relid.to_u32());
    if let Some(keys) = super::cache_owners::invalidated(relation) {
        for key in keys {
            super::dispatch::forget_soon(key);
        }
    } else {
        // The record was in use: drop every entry (now, or at the caches' next use).
        super::dispatch::forget_all_soon();
    }
}
