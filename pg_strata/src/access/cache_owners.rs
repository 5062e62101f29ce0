//! Which index relation each key of this backend's segment caches belongs to
//! ([`strata_lsm::segment_set::CacheOwners`]), noted by the caches at each use and read by the
//! relation cache callback (`access::invalidation`).

use std::cell::RefCell;
use std::sync::atomic::Ordering;

use strata_lsm::segment_set::CacheOwners;

use super::state::IndexHandle;
use crate::shmem::IndexKey;

thread_local! {
    static OWNERS: RefCell<CacheOwners<IndexKey>> = RefCell::new(CacheOwners::default());
}

/// Notes that the cached entries of `handle.key` belong to `handle`'s index relation.
pub fn note(handle: &IndexHandle) {
    let relation = handle.shared().relid.load(Ordering::Acquire);
    OWNERS.with(|owners| owners.borrow_mut().note(relation, &handle.key));
}

/// The keys whose cached entries belong to `relation` (`None`: to any relation), forgotten
/// here; `None` when the record is in use (then drop every entry).
pub fn invalidated(relation: Option<u32>) -> Option<Vec<IndexKey>> {
    OWNERS.with(|owners| owners.try_borrow_mut().ok().map(|mut owners| owners.invalidated(relation)))
}
