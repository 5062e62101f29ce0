//! The vector kind of the access-method core ([`crate::access::kind::Kind`]): vector segments
//! (flat, quantized, IVF, HNSW), cached by [`super::segments`], built on helper threads; rows
//! read back from the table in stored form with their filter values.

use std::sync::Arc;

use pgrx::pg_sys;
use strata_engine::cancel::Cancel;
use strata_engine::segment::{BuiltSegment, Segment};
use strata_lsm::files::{FileError, IndexFiles};
use strata_lsm::memtable::Memtable;
use strata_lsm::recovery::HeapRows;
use strata_lsm::segment_set::{OpenSegment, SegmentSet};
use strata_lsm::vector::VectorRows;

use super::heap::vector_row;
use crate::access::heap::Table;
use crate::access::kind::Kind;
use crate::access::state::IndexHandle;
use crate::shmem::{IndexKey, SharedSlabs};

/// Vector indexes (access methods `strata`, `hnsw`, `ivfflat`).
pub struct Vector;

/// The table of a vector index read back as memtable rows: stored-form vectors followed by
/// their filter values.
pub struct VectorTable<'a> {
    table: Table,
    handle: &'a IndexHandle,
    column: strata_engine::store::ColumnType,
}

impl HeapRows for VectorTable<'_> {
    type Row = Vec<f32>;

    fn fetch(&mut self, tid: u64) -> Option<Vec<f32>> {
        let (index, handle, column) = (self.table.index(), self.handle, self.column);
        // SAFETY: the key datums are valid while the closure runs (`fetch_with`'s contract);
        // `index` is the open vector index of `handle` (`open_table`'s contract).
        self.table.fetch_with(tid, |values, isnull| unsafe { vector_row(index, column, handle, values, isnull, true) })
    }
}

impl Kind for Vector {
    type Segment = Segment;
    type Row = Vec<f32>;
    type Table<'a> = VectorTable<'a>;

    fn files(handle: &IndexHandle) -> IndexFiles<Segment> {
        super::segments::files(handle)
    }

    fn segment_set(handle: &IndexHandle, generation: u64) -> Arc<SegmentSet<Segment>> {
        super::segments::segment_set(handle, generation)
    }

    fn forget(key: IndexKey) {
        super::segments::forget(key);
    }

    fn forget_soon(key: IndexKey) {
        super::segments::forget_soon(key);
    }

    fn forget_all_soon() {
        super::segments::forget_all_soon();
    }

    unsafe fn open_table(index: pg_sys::Relation, handle: &IndexHandle) -> VectorTable<'_> {
        // SAFETY: `index` is the open vector index of `handle` (this function's contract), as
        // `Table::begin` and `column_of` need.
        unsafe { VectorTable { table: Table::begin(index), handle, column: super::column_of(index) } }
    }

    fn close_table(table: VectorTable<'_>) {
        table.table.end();
    }

    fn build(
        handle: &IndexHandle,
        rows: VectorRows,
        between: &mut dyn FnMut(&Cancel),
    ) -> Result<BuiltSegment, FileError> {
        let threads = crate::gucs::BUILD_THREADS.get() as usize;
        super::segments::build(handle, rows, threads, between)
    }

    fn collect(handle: &IndexHandle, memtable: &Memtable<'_, SharedSlabs>) -> Result<Option<VectorRows>, FileError> {
        let dims = handle.config.dims as usize;
        let mut rows = VectorRows::default();
        memtable.for_each_live(|tid, row| rows.push_row(dims, tid, row));
        Ok((!rows.ids.is_empty()).then_some(rows))
    }

    fn segment_kind(_handle: &IndexHandle, open: &OpenSegment<Segment>) -> String {
        open.segment.meta().kind.name().to_owned()
    }
}
