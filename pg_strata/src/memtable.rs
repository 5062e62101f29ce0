//! Memtables as pg_strata holds them: views of slabs of the shared region (the append protocol
//! and the lifecycle are `strata_lsm::memtable` and `strata_lsm::slabs`), with rows keyed by heap
//! TIDs packed into 64 bits.

use crate::shmem::SharedSlabs;

/// A view of the memtable in one slab of the shared region.
pub type Memtable = strata_lsm::memtable::Memtable<'static, SharedSlabs>;

/// A heap TID packed into 64 bits: block number in the high 32 bits, offset in the low 16.
pub type PackedTid = u64;

/// Packs a heap TID.
pub fn pack_tid(tid: pgrx::pg_sys::ItemPointerData) -> PackedTid {
    let block = (u64::from(tid.ip_blkid.bi_hi) << 16) | u64::from(tid.ip_blkid.bi_lo);
    (block << 16) | u64::from(tid.ip_posid)
}

/// Unpacks a TID packed by [`pack_tid`].
pub fn unpack_tid(packed: PackedTid) -> pgrx::pg_sys::ItemPointerData {
    let block = packed >> 16;
    pgrx::pg_sys::ItemPointerData {
        ip_blkid: pgrx::pg_sys::BlockIdData { bi_hi: (block >> 16) as u16, bi_lo: (block & 0xFFFF) as u16 },
        ip_posid: (packed & 0xFFFF) as u16,
    }
}
