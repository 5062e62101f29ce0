//! Memtables as pg_strata holds them: views of slabs of the shared region (the append protocol
//! and the lifecycle are `strata_lsm::memtable` and `strata_lsm::slabs`), with rows keyed by heap
//! TIDs packed into 64 bits ([`strata_lsm::rows::pack_tid`]).

use crate::shmem::SharedSlabs;

/// A view of the memtable in one slab of the shared region.
pub type Memtable = strata_lsm::memtable::Memtable<'static, SharedSlabs>;

/// Packs a heap TID into a row key ([`strata_lsm::rows::pack_tid`]).
pub fn pack_tid(tid: pgrx::pg_sys::ItemPointerData) -> u64 {
    let block = (u32::from(tid.ip_blkid.bi_hi) << 16) | u32::from(tid.ip_blkid.bi_lo);
    strata_lsm::rows::pack_tid(block, tid.ip_posid)
}

/// The heap TID of a row key ([`strata_lsm::rows::unpack_tid`]).
pub fn unpack_tid(packed: u64) -> pgrx::pg_sys::ItemPointerData {
    let (block, offset) = strata_lsm::rows::unpack_tid(packed);
    pgrx::pg_sys::ItemPointerData {
        ip_blkid: pgrx::pg_sys::BlockIdData { bi_hi: (block >> 16) as u16, bi_lo: block as u16 },
        ip_posid: offset,
    }
}
