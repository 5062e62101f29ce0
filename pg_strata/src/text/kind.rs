//! The bm25 kind of the access-method core ([`crate::access::kind::Kind`]): text segments
//! ([`strata_text::TextSegment`]), cached by [`super::sources`], built on the calling thread;
//! rows read back from the table tokenised as CREATE INDEX tokenises them, as the span rows
//! `aminsert` appended.

use std::sync::Arc;

use pgrx::pg_sys;
use strata_engine::cancel::Cancel;
use strata_lsm::files::{FileError, IndexFiles};
use strata_lsm::memtable::Memtable;
use strata_lsm::recovery::{HeapRows, SpanRow};
use strata_lsm::segment_set::{OpenSegment, SegmentSet};
use strata_lsm::segment_type::{BuildWork, SegmentType};
use strata_text::{BuiltTextSegment, TextSegment};

use crate::access::heap::Table;
use crate::access::kind::Kind;
use crate::access::state::IndexHandle;
use crate::shmem::{IndexKey, SharedSlabs};

/// bm25 indexes.
pub struct Text;

/// The table of a bm25 index read back as span rows.
pub struct TextTable<'a> {
    table: Table,
    handle: &'a IndexHandle,
    config: pg_sys::Oid,
}

impl HeapRows for TextTable<'_> {
    type Row = SpanRow;

    fn fetch(&mut self, tid: u64) -> Option<SpanRow> {
        let (config, handle) = (self.config, self.handle);
        self.table.fetch_with(tid, |values, isnull| {
            (!isnull[0]).then(|| {
                // SAFETY: the key datum is valid while the closure runs (`fetch_with`'s
                // contract); tokenising runs on the backend's thread.
                let words = unsafe { super::tokens::document_of(config, values[0]) }.to_words();
                super::check_span_fits(handle, words.len());
                SpanRow(words)
            })
        })
    }
}

impl Kind for Text {
    type Segment = TextSegment;
    type Row = SpanRow;
    type Table<'a> = TextTable<'a>;

    fn files(handle: &IndexHandle) -> IndexFiles<TextSegment> {
        super::sources::files(handle)
    }

    fn segment_set(handle: &IndexHandle, generation: u64) -> Arc<SegmentSet<TextSegment>> {
        super::sources::segment_set(handle, generation)
    }

    fn forget(key: IndexKey) {
        super::sources::forget(key);
    }

    fn forget_soon(key: IndexKey) {
        super::sources::forget_soon(key);
    }

    fn forget_all_soon() {
        super::sources::forget_all_soon();
    }

    unsafe fn open_table(index: pg_sys::Relation, handle: &IndexHandle) -> TextTable<'_> {
        // SAFETY: `index` is the open bm25 index of `handle` (this function's contract), as
        // `Table::begin` and `text_config_of` need.
        unsafe { TextTable { table: Table::begin(index), handle, config: super::text_config_of(index, handle) } }
    }

    fn close_table(table: TextTable<'_>) {
        table.table.end();
    }

    fn build(
        handle: &IndexHandle,
        rows: strata_text::Memtable,
        _between: &mut dyn FnMut(&Cancel),
    ) -> Result<BuiltTextSegment, FileError> {
        TextSegment::build(&Self::files(handle), &handle.config, rows, &BuildWork::new(1))
    }

    fn collect(
        _handle: &IndexHandle,
        memtable: &Memtable<'_, SharedSlabs>,
    ) -> Result<Option<strata_text::Memtable>, FileError> {
        strata_text::lsm::slab_rows(memtable)
    }

    fn segment_kind(handle: &IndexHandle, _open: &OpenSegment<TextSegment>) -> String {
        handle.config.kind.name().to_owned()
    }
}
