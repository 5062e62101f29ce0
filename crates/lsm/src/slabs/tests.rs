//! Each transition on its own: preconditions refused and kept, in one thread. The atomics are
//! shuttle's in tests, so every test runs as one shuttle execution.

use super::test_region::{TestLock, TestRegion};
use super::{LockMode, NotFlushable, SlabState, Slabs};
use crate::memtable::{Insert, MemtableLayout};
use crate::slabs::{DirectoryLock, SlabMemory};

/// Runs `test` once in shuttle with a region of `slabs` slabs of `capacity` rows of 2 dimensions
/// and 2 index slots.
fn with_slabs(slabs: usize, capacity: usize, test: fn(Slabs<'_, TestRegion, TestLock>, MemtableLayout)) {
    shuttle::check_random(
        move || {
            let region = TestRegion::new(slabs, capacity, 2, 2);
            let lock = TestLock::default();
            test(Slabs::new(&region, &lock), MemtableLayout::new(capacity, 2));
        },
        1,
    );
}

fn active_memtable(slabs: Slabs<'_, TestRegion, TestLock>, index: usize, layout: MemtableLayout, id: u64) -> usize {
    let allocation = slabs.allocate(index, layout, || id).expect("a free slab");
    let slab = allocation.slab();
    assert!(allocation.activate());
    slab
}

#[test]
fn state_codes_round_trip_and_unknown_codes_are_refused() {
    for state in SlabState::ALL {
        assert_eq!(SlabState::try_from(state as u32), Ok(state));
    }
    assert_eq!(SlabState::try_from(8).unwrap_err().to_string(), "8 is not a slab state");
    let searchable: Vec<_> = SlabState::ALL.into_iter().filter(|s| s.is_searchable()).collect();
    assert_eq!(searchable, [SlabState::Active, SlabState::Sealed, SlabState::Flushing, SlabState::Absorbing]);
}

#[test]
fn a_writer_allocates_pins_fills_and_seals() {
    with_slabs(2, 2, |slabs, layout| {
        assert!(slabs.pin_active(0).is_none());
        let allocation = slabs.allocate(0, layout, || 7).unwrap();
        assert_eq!(slabs.info(allocation.slab()).state, SlabState::Allocating);
        assert!(slabs.pin_active(0).is_none(), "an ALLOCATING memtable is invisible to writers");
        let slab = allocation.slab();
        assert!(allocation.activate());
        let pin = slabs.pin_active(0).unwrap();
        assert_eq!((pin.slab(), pin.segment_id()), (slab, 7));
        assert!(slabs.pin_active(1).is_none(), "another index has no active memtable");
        assert_eq!(pin.insert(1, &[1.0, 2.0]), Insert::Done);
        assert_eq!(pin.insert(2, &[3.0, 4.0]), Insert::Done);
        assert_eq!(pin.insert(3, &[5.0, 6.0]), Insert::Full);
        assert!(!pin.unpin(), "the memtable is still ACTIVE");
        assert!(!slabs.seal(0, slab, 8), "another memtable's seal changes nothing");
        assert!(slabs.seal(0, slab, 7));
        assert!(!slabs.seal(0, slab, 7), "sealed once");
        assert_eq!(slabs.info(slab).state, SlabState::Sealed);
        assert!(!slabs.has_active(0));
        assert!(slabs.pin_active(0).is_none());
    });
}

#[test]
fn an_absorbing_memtable_keeps_slot_equal_to_list_position_and_is_searched_until_sealed() {
    with_slabs(2, 4, |slabs, layout| {
        assert!(slabs.absorbing(0, 9).is_none());
        let memtable = slabs.take_for_absorb(0, layout, 9).unwrap();
        assert_eq!(slabs.info(memtable.memtable().slab()).state, SlabState::Absorbing);
        assert!(slabs.pin_active(0).is_none(), "writers never append to an ABSORBING memtable");
        assert_eq!(memtable.insert(11, &[1.0, 0.0]), Insert::Done);
        assert_eq!(memtable.insert_placeholder(), Insert::Done, "position 1: a removed TID");
        assert_eq!(memtable.insert(13, &[0.0, 1.0]), Insert::Done);
        assert_eq!(memtable.memtable().slot_tids(), [11, 0, 13]);
        memtable.memtable().delete_slots(&[0]);
        assert_eq!(memtable.memtable().slot_tids(), [0, 0, 13]);
        assert_eq!(memtable.insert(14, &[1.0, 1.0]), Insert::Done);
        assert_eq!(memtable.insert_placeholder(), Insert::Full);
        let (snapshot, ()) = slabs.snapshot(0, || ());
        let mut live = Vec::new();
        for searched in snapshot.iter() {
            searched.for_each_live(|tid, _| live.push(tid));
        }
        drop(snapshot);
        assert_eq!(live, [13, 14], "scans read ABSORBING memtables, without placeholders");
        let again = slabs.absorbing(0, 9).expect("found by index and group");
        assert!(slabs.absorbing(1, 9).is_none() && slabs.absorbing(0, 8).is_none());
        slabs.seal_absorbed(&again);
        assert_eq!(slabs.info(again.memtable().slab()).state, SlabState::Sealed);
        assert!(slabs.absorbing(0, 9).is_none());
    });
}

#[test]
fn an_allocation_dropped_before_activation_frees_its_slab() {
    with_slabs(1, 2, |slabs, layout| {
        let allocation = slabs.allocate(0, layout, || 1).unwrap();
        assert_eq!(slabs.allocate(0, layout, || 2).err(), Some(super::NoFreeSlab));
        drop(allocation);
        assert_eq!(slabs.counts().get(SlabState::Free), 1);
    });
}

#[test]
fn begin_flush_requires_sealed_unpinned_complete_and_the_same_memtable() {
    with_slabs(2, 4, |slabs, layout| {
        let slab = active_memtable(slabs, 0, layout, 1);
        assert_eq!(slabs.begin_flush(slab, 0, 1).unwrap_err(), NotFlushable::NotSealed(SlabState::Active));
        let pin = slabs.pin_active(0).unwrap();
        pin.insert(10, &[0.0, 0.0]);
        assert!(slabs.seal_active(0));
        assert_eq!(slabs.begin_flush(slab, 0, 2).unwrap_err(), NotFlushable::Gone);
        assert_eq!(slabs.begin_flush(slab, 1, 1).unwrap_err(), NotFlushable::Gone);
        assert_eq!(slabs.begin_flush(slab, 0, 1).unwrap_err(), NotFlushable::Pinned(1));
        assert!(pin.unpin(), "the last pin of a SEALED memtable lets its flush start");
        // A writer that reserved a slot and has not written it yet.
        slabs.memory().header(slab).reserve();
        let incomplete = NotFlushable::Incomplete { written: 1, filled: 2 };
        assert_eq!(slabs.begin_flush(slab, 0, 1).unwrap_err(), incomplete);
        slabs.memory().header(slab).count_written();
        let memtable = slabs.begin_flush(slab, 0, 1).unwrap();
        assert_eq!(slabs.info(slab).state, SlabState::Flushing);
        assert_eq!(slabs.begin_flush(slab, 0, 1).unwrap_err(), NotFlushable::NotSealed(SlabState::Flushing));
        assert!(slabs.abort_flush(&memtable));
        assert_eq!(slabs.info(slab).state, SlabState::Sealed);
        let memtable = slabs.begin_flush(slab, 0, 1).unwrap();
        slabs.finish_flush(&memtable);
        assert!(!slabs.abort_flush(&memtable), "a finished flush is not aborted");
        assert_eq!(slabs.info(slab).state, SlabState::Flushed);
    });
}

#[test]
fn flushed_slabs_are_freed_only_without_readers_and_snapshots_skip_them() {
    with_slabs(2, 4, |slabs, layout| {
        let slab = active_memtable(slabs, 0, layout, 1);
        slabs.pin_active(0).unwrap().insert(10, &[1.0, 1.0]);
        let (snapshot, generation) = slabs.snapshot(0, || 41);
        assert_eq!((snapshot.len(), generation), (1, 41));
        assert_eq!(slabs.info(slab).readers, 1);
        assert_eq!(slabs.snapshot(1, || ()).0.len(), 0, "another index's snapshot is empty");
        slabs.seal_active(0);
        let memtable = slabs.begin_flush(slab, 0, 1).unwrap();
        {
            let _lock = slabs.lock.lock(LockMode::Exclusive);
            slabs.finish_flush_locked(&memtable);
        }
        assert_eq!(slabs.snapshot(0, || ()).0.len(), 0, "FLUSHED memtables are not searched");
        assert_eq!(slabs.free_unread(), 0, "a scan still reads the flushed memtable");
        assert_eq!(snapshot[0].live_rows(), 1);
        drop(snapshot);
        assert_eq!(slabs.info(slab).readers, 0);
        assert_eq!(slabs.free_unread(), 1);
        assert_eq!(slabs.info(slab).state, SlabState::Free);
    });
}

#[test]
fn memtables_held_elsewhere_leave_a_snapshot_and_stop_being_read() {
    with_slabs(3, 4, |slabs, layout| {
        let first = active_memtable(slabs, 0, layout, 7);
        slabs.pin_active(0).unwrap().insert(10, &[1.0, 1.0]);
        slabs.seal_active(0);
        let second = active_memtable(slabs, 0, layout, 8);
        slabs.pin_active(0).unwrap().insert(11, &[2.0, 2.0]);
        let (mut snapshot, ()) = slabs.snapshot(0, || ());
        assert_eq!(snapshot.len(), 2);
        assert_eq!((slabs.info(first).readers, slabs.info(second).readers), (1, 1));
        // Memtable 7 was flushed into a segment of a newer set than the snapshot's generation.
        snapshot.release_held(|id| id == 7);
        assert_eq!(snapshot.iter().map(crate::memtable::Memtable::segment_id).collect::<Vec<_>>(), vec![8]);
        assert_eq!(slabs.info(first).readers, 0, "the released memtable is no longer read");
        assert_eq!(slabs.info(second).readers, 1);
        drop(snapshot);
        assert_eq!(slabs.info(second).readers, 0, "the kept one is released once, on drop");
    });
}

#[test]
#[should_panic(expected = "without the exclusive directory lock")]
fn finish_flush_locked_requires_the_exclusive_lock() {
    with_slabs(1, 1, |slabs, layout| {
        let slab = active_memtable(slabs, 0, layout, 1);
        slabs.seal_active(0);
        let memtable = slabs.begin_flush(slab, 0, 1).unwrap();
        let _shared = slabs.lock.lock(LockMode::Shared);
        slabs.finish_flush_locked(&memtable);
    });
}

#[test]
fn is_flushed_until_a_slab_holds_the_memtable_unflushed() {
    with_slabs(2, 1, |slabs, layout| {
        assert!(slabs.is_flushed(0, 3), "no slab holds memtable 3");
        let recovering = slabs.take_for_recovery(0, layout, 3).unwrap();
        assert!(!slabs.is_flushed(0, 3));
        assert!(slabs.is_flushed(1, 3), "another index's memtable 3");
        assert_eq!(recovering.insert(5, &[0.0, 1.0]), Insert::Done);
        assert_eq!(recovering.insert(6, &[0.0, 1.0]), Insert::Full);
        assert_eq!(slabs.snapshot(0, || ()).0.len(), 0, "RECOVERING memtables are not searched");
        let slab = recovering.memtable().slab();
        slabs.finish_recovery(&[recovering]);
        assert_eq!(slabs.info(slab).state, SlabState::Sealed);
        let memtable = slabs.begin_flush(slab, 0, 3).unwrap();
        assert!(!slabs.is_flushed(0, 3));
        assert_eq!(slabs.flushed_among(0, &[7, 3, 2]), [7, 2], "3 is flushing: not yet");
        slabs.finish_flush(&memtable);
        assert!(slabs.is_flushed(0, 3));
        assert_eq!(slabs.flushed_among(0, &[7, 3, 2]), [7, 3, 2]);
    });
}

#[test]
fn seal_all_and_release_index_leave_no_active_memtable() {
    with_slabs(4, 2, |slabs, layout| {
        active_memtable(slabs, 0, layout, 1);
        active_memtable(slabs, 1, layout, 2);
        let sealed = slabs.allocate(1, layout, || 3).unwrap();
        let sealed_slab = sealed.slab();
        drop(sealed);
        assert_eq!(slabs.counts().get(SlabState::Active), 2);
        assert_eq!(slabs.seal_all(), 2);
        assert!(!slabs.has_active(0) && !slabs.has_active(1));
        let counts = slabs.counts();
        assert_eq!((counts.get(SlabState::Sealed), counts.get(SlabState::Free)), (2, 2));
        assert_eq!(slabs.info(sealed_slab).state, SlabState::Free);
        active_memtable(slabs, 0, layout, 4);
        {
            let _lock = slabs.lock.lock(LockMode::Exclusive);
            slabs.release_index_locked(0);
        }
        assert!(!slabs.has_active(0));
        let counts = slabs.counts();
        assert_eq!((counts.get(SlabState::Sealed), counts.get(SlabState::Free)), (1, 3), "index 1's memtable stays");
    });
}

#[test]
fn a_lost_writer_pin_can_be_released() {
    with_slabs(1, 2, |slabs, layout| {
        let slab = active_memtable(slabs, 0, layout, 1);
        std::mem::forget(slabs.pin_active(0).unwrap());
        slabs.seal_active(0);
        assert_eq!(slabs.begin_flush(slab, 0, 1).unwrap_err(), NotFlushable::Pinned(1));
        slabs.release_lost_writer_pin(slab);
        assert!(slabs.begin_flush(slab, 0, 1).is_ok());
    });
}

#[test]
fn memtables_list_live_rows_across_bitmap_words_and_delete_them() {
    with_slabs(1, 130, |slabs, layout| {
        active_memtable(slabs, 0, layout, 1);
        let pin = slabs.pin_active(0).unwrap();
        // Heap TIDs are never 0 (item offsets start at 1); readers skip TID-0 slots.
        for tid in 1..=130u64 {
            assert_eq!(pin.insert(tid, &[tid as f32, -(tid as f32)]), Insert::Done);
        }
        assert_eq!(pin.insert(131, &[0.0, 0.0]), Insert::Full);
        let memtable = *pin.memtable();
        assert!(memtable.is_complete());
        let mut rows = Vec::new();
        memtable.for_each_live(|tid, vector| rows.push((tid, vector.to_vec())));
        assert_eq!(rows.len(), 130);
        assert!(rows.iter().all(|(tid, vector)| *vector == [*tid as f32, -(*tid as f32)]));
        assert_eq!(memtable.delete_where(|tid| tid % 3 == 0), 43);
        assert_eq!(memtable.delete_where(|tid| tid % 3 == 0), 0, "deleted rows are not live");
        assert_eq!(memtable.live_rows(), 87);
        let mut live = Vec::new();
        memtable.for_each_live(|tid, _| live.push(tid));
        assert_eq!(live, (1..=130).filter(|tid| tid % 3 != 0).collect::<Vec<_>>());
    });
}

#[test]
fn a_reused_slab_starts_empty() {
    with_slabs(1, 2, |slabs, layout| {
        let slab = active_memtable(slabs, 0, layout, 1);
        let pin = slabs.pin_active(0).unwrap();
        pin.insert(1, &[1.0, 1.0]);
        pin.memtable().delete_where(|_| true);
        pin.insert(2, &[2.0, 2.0]);
        drop(pin);
        slabs.seal_active(0);
        let memtable = slabs.begin_flush(slab, 0, 1).unwrap();
        slabs.finish_flush(&memtable);
        slabs.free_unread();
        let other = MemtableLayout::new(1, 2);
        assert_eq!(active_memtable(slabs, 1, other, 2), slab);
        let memtable = slabs.memtable(slab);
        assert_eq!((memtable.live_rows(), memtable.layout().capacity, memtable.segment_id()), (0, 1, 2));
        let info = slabs.info(slab);
        assert_eq!((info.index, info.filled, info.written, info.readers, info.writers), (1, 0, 0, 0, 0));
    });
}
