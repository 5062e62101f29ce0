//! Refilling, from the heap, the memtables a crash lost ([`RecoveryAction::RebuildMemtable`]):
//! their rows are fetched by TID from a [`HeapRows`] source and appended to slabs taken for
//! recovery under their original SegmentIDs, then handed to the flusher (SEALED).

use super::RecoveryAction;
use crate::memtable::{Insert, MemtableLayout, RowShape, SpanTooLong};
use crate::slabs::{AbsorbingMemtable, DirectoryLock, NoFreeSlab, RecoveringMemtable, SlabMemory, Slabs, WriterPin};

/// Where recovery and followers read rows back by TID (pg_strata: the table, with a snapshot
/// that sees every version some transaction may still need, the key computed as CREATE INDEX
/// computes it).
pub trait HeapRows {
    /// A memtable row as this source gives it: a vector index's `Vec<f32>`, a text index's
    /// [`SpanRow`].
    type Row: MemtableRow;

    /// The memtable row of the heap row at `tid` (its stored-form vector, then its encoded filter
    /// values: [`crate::rows::memtable_row`]); `None` when no transaction can see any
    /// version of it any more (an aborted insert, a row deleted before every snapshot) or it is
    /// not indexed (a NULL key).
    fn fetch(&mut self, tid: u64) -> Option<Self::Row>;
}

/// A row read back from the heap, as recovery and followers append it to a memtable.
pub trait MemtableRow {
    /// How rows of this kind sit in a memtable's slots.
    const SHAPE: RowShape;

    /// Appends the row as `tid`'s to a memtable recovery refills; [`Insert::Full`] when the
    /// memtable has no room for it.
    fn append_recovered<M: SlabMemory + ?Sized>(&self, memtable: &RecoveringMemtable<'_, M>, tid: u64) -> Insert;

    /// Appends the row as `tid`'s, at the next list position of an ABSORBING memtable;
    /// [`Insert::Full`] when the memtable has no room for it.
    fn append_absorbed<M: SlabMemory + ?Sized>(&self, memtable: &AbsorbingMemtable<'_, M>, tid: u64) -> Insert;

    /// Appends the row as `tid`'s to the ACTIVE memtable a writer pinned
    /// ([`crate::writer::insert`]); [`Insert::Full`] when the memtable has no room for it, an
    /// error when no memtable of the index's layout can hold it.
    fn append_written<M: SlabMemory + ?Sized>(
        &self,
        pinned: &WriterPin<'_, M>,
        tid: u64,
    ) -> Result<Insert, SpanTooLong>;
}

impl MemtableRow for Vec<f32> {
    const SHAPE: RowShape = RowShape::Fixed;

    fn append_recovered<M: SlabMemory + ?Sized>(&self, memtable: &RecoveringMemtable<'_, M>, tid: u64) -> Insert {
        memtable.insert(tid, self)
    }

    fn append_absorbed<M: SlabMemory + ?Sized>(&self, memtable: &AbsorbingMemtable<'_, M>, tid: u64) -> Insert {
        memtable.insert(tid, self)
    }

    fn append_written<M: SlabMemory + ?Sized>(
        &self,
        pinned: &WriterPin<'_, M>,
        tid: u64,
    ) -> Result<Insert, SpanTooLong> {
        Ok(pinned.insert(tid, self))
    }
}

/// A span row ([`crate::memtable::spans`]) of a text index, which its source has checked to fit
/// in a memtable of the recovery layout ([`MemtableLayout::check_span`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanRow(pub Vec<u32>);

impl MemtableRow for SpanRow {
    const SHAPE: RowShape = RowShape::Spans;

    fn append_recovered<M: SlabMemory + ?Sized>(&self, memtable: &RecoveringMemtable<'_, M>, tid: u64) -> Insert {
        memtable.insert_span(tid, &self.0).unwrap_or(Insert::Full)
    }

    fn append_absorbed<M: SlabMemory + ?Sized>(&self, memtable: &AbsorbingMemtable<'_, M>, tid: u64) -> Insert {
        memtable.insert_span(tid, &self.0).unwrap_or(Insert::Full)
    }

    fn append_written<M: SlabMemory + ?Sized>(
        &self,
        pinned: &WriterPin<'_, M>,
        tid: u64,
    ) -> Result<Insert, SpanTooLong> {
        pinned.insert_span(tid, &self.0)
    }
}

/// What [`refill`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Refilled {
    /// Memtables rebuilt.
    pub memtables: u64,
    /// Rows fetched and appended.
    pub rows: u64,
}

/// Refills every memtable `actions` lists (other actions are ignored) for index `index`, in as
/// many slabs laid out as `layout` as it takes, and hands them to the flusher. Never waits: when
/// no slab is free it returns [`NoFreeSlab`], leaving the slabs taken so far RECOVERING (the
/// caller's next attempt re-registers the index, which frees them).
pub fn refill<M: SlabMemory + ?Sized, L: DirectoryLock + ?Sized>(
    slabs: Slabs<'_, M, L>,
    index: usize,
    layout: MemtableLayout,
    actions: &[RecoveryAction],
    heap: &mut impl HeapRows,
) -> Result<Refilled, NoFreeSlab> {
    let mut held: Vec<RecoveringMemtable<'_, M>> = Vec::new();
    let mut refilled = Refilled::default();
    for action in actions {
        let RecoveryAction::RebuildMemtable { memtable, tids } = action else { continue };
        refilled.memtables += 1;
        let mut current: Option<RecoveringMemtable<'_, M>> = None;
        for &tid in tids {
            let Some(row) = heap.fetch(tid) else { continue };
            if current.as_ref().is_none_or(|slab| row.append_recovered(slab, tid) == Insert::Full) {
                held.extend(current.take());
                let fresh = slabs.take_for_recovery(index, layout, *memtable)?;
                let inserted = row.append_recovered(&fresh, tid);
                assert_eq!(inserted, Insert::Done, "a row its source checked fits in an empty memtable");
                current = Some(fresh);
            }
            refilled.rows += 1;
        }
        held.extend(current);
    }
    slabs.finish_recovery(&held);
    Ok(refilled)
}

#[cfg(all(test, feature = "shuttle"))]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::slabs::test_region::{TestLock, TestRegion};
    use crate::slabs::SlabState;

    struct Heap(BTreeMap<u64, Vec<f32>>);

    impl HeapRows for Heap {
        type Row = Vec<f32>;

        fn fetch(&mut self, tid: u64) -> Option<Vec<f32>> {
            self.0.get(&tid).cloned()
        }
    }

    /// Lost memtables come back under their ids, in as many slabs as they need, with exactly the
    /// rows the heap still has, sealed for the flusher; without enough free slabs, an error.
    #[test]
    fn refills_lost_memtables_from_the_heap_in_as_many_slabs_as_needed() {
        shuttle::check_random(
            || {
                let (region, lock) = (TestRegion::new(4, 4, 2, 1), TestLock::default());
                let slabs = Slabs::new(&region, &lock);
                let layout = MemtableLayout::new(4, 2);
                // TID 5 is gone from the heap (an aborted insert).
                let mut heap = Heap((1..=9).filter(|&t| t != 5).map(|t| (t, vec![t as f32, 0.0])).collect());
                let actions = vec![
                    RecoveryAction::RebuildMemtable { memtable: 7, tids: (1..=7).collect() },
                    RecoveryAction::DropSegment(3),
                    RecoveryAction::RebuildMemtable { memtable: 9, tids: vec![8, 9] },
                ];
                let refilled = refill(slabs, 0, layout, &actions, &mut heap).unwrap();
                assert_eq!(refilled, Refilled { memtables: 2, rows: 8 });
                let mut rows: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
                for info in slabs.infos().into_iter().filter(|i| i.state != SlabState::Free) {
                    assert_eq!(info.state, SlabState::Sealed, "refilled memtables wait for the flusher");
                    slabs.memtable(info.slab).for_each_live(|tid, vector| {
                        assert_eq!(vector, [tid as f32, 0.0]);
                        rows.entry(info.segment_id).or_default().push(tid);
                    });
                }
                assert_eq!(rows.get(&7).map(Vec::len), Some(6), "memtable 7 holds its six surviving rows");
                assert_eq!(rows.get(&9), Some(&vec![8, 9]));
                assert_eq!(slabs.infos().iter().filter(|i| i.state == SlabState::Sealed).count(), 3);
                // One slab left: a memtable of five rows needs two.
                let more = [RecoveryAction::RebuildMemtable { memtable: 11, tids: (1..=6).collect() }];
                assert_eq!(refill(slabs, 0, layout, &more, &mut heap), Err(NoFreeSlab));
            },
            1,
        );
    }
}
