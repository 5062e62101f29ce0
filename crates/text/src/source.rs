//! [`Source`]: one memtable or segment as a query sees it, with its deletion bitmap.

use strata_engine::bitset::Bitset;

use crate::error::TextError;
use crate::memtable::Memtable;
use crate::postings::{Postings, END};
use crate::segment::TextSegment;
use crate::stats::CollectionStats;

/// Where a source's rows live.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SourceKind<'a> {
    /// An immutable segment.
    Segment(&'a TextSegment),
    /// A memtable.
    Memtable(&'a Memtable),
}

/// One searchable source (a segment or a memtable) and the rows deleted from it.
///
/// Guarantees: deleted rows are never returned by a search and count in none of the global
/// statistics ([`Source::live_stats`], [`Source::live_df`]).
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub(crate) kind: SourceKind<'a>,
    pub(crate) deleted: Option<&'a Bitset>,
    deleted_rows: u64,
    deleted_len: u64,
}

impl<'a> Source<'a> {
    /// A segment with its deletion bitmap, which must range over exactly the segment's rows.
    pub fn segment(segment: &'a TextSegment, deleted: Option<&'a Bitset>) -> Result<Self, TextError> {
        let rows = segment.rows() as usize;
        if let Some(d) = deleted.filter(|d| d.len() != rows) {
            return Err(TextError::DeletionLength { bitmap: d.len(), rows });
        }
        Ok(Self::with(SourceKind::Segment(segment), deleted, |row| segment.doc_len(row)))
    }

    /// A memtable with its deletion bitmap, which may range over fewer rows than the memtable
    /// holds (rows appended after the bitmap was made are live), never more.
    pub fn memtable(memtable: &'a Memtable, deleted: Option<&'a Bitset>) -> Result<Self, TextError> {
        let rows = memtable.len();
        if let Some(d) = deleted.filter(|d| d.len() > rows) {
            return Err(TextError::DeletionLength { bitmap: d.len(), rows });
        }
        let lens = memtable.doc_lens();
        Ok(Self::with(SourceKind::Memtable(memtable), deleted, |row| lens[row as usize]))
    }

    fn with(kind: SourceKind<'a>, deleted: Option<&'a Bitset>, len: impl Fn(u32) -> u32) -> Self {
        let (mut deleted_rows, mut deleted_len) = (0, 0);
        for row in deleted.into_iter().flat_map(Bitset::iter) {
            deleted_rows += 1;
            deleted_len += u64::from(len(row as u32));
        }
        Self { kind, deleted, deleted_rows, deleted_len }
    }

    /// Rows, deleted ones included.
    pub fn rows(&self) -> u32 {
        match self.kind {
            SourceKind::Segment(s) => s.rows(),
            SourceKind::Memtable(m) => m.len() as u32,
        }
    }

    /// The caller's id of `row`.
    pub fn id(&self, row: u32) -> u64 {
        match self.kind {
            SourceKind::Segment(s) => s.id(row),
            SourceKind::Memtable(m) => m.id(row),
        }
    }

    /// Whether `row` is deleted.
    #[inline]
    pub fn is_deleted(&self, row: u32) -> bool {
        self.deleted.is_some_and(|d| d.contains(row as usize))
    }

    /// Live rows and their total length.
    pub fn live_stats(&self) -> CollectionStats {
        let all = match self.kind {
            SourceKind::Segment(s) => s.stats(),
            SourceKind::Memtable(m) => m.stats(),
        };
        CollectionStats { docs: all.docs - self.deleted_rows, total_len: all.total_len - self.deleted_len }
    }

    /// Live rows holding `lexeme`: the list's length minus its deleted rows, counted exactly —
    /// by probing the list for each deleted row when there are fewer deleted rows than
    /// postings, else by walking the list and testing each row against the bitmap.
    pub fn live_df(&self, lexeme: &str) -> u64 {
        match self.kind {
            SourceKind::Segment(s) => s.postings(lexeme).map_or(0, |p| self.live_in(p)),
            SourceKind::Memtable(m) => m.postings(lexeme).map_or(0, |p| self.live_in(p)),
        }
    }

    fn live_in(&self, mut postings: impl Postings) -> u64 {
        let df = u64::from(postings.len());
        let Some(deleted) = self.deleted.filter(|_| self.deleted_rows > 0) else {
            return df;
        };
        let mut dead = 0;
        if self.deleted_rows < df {
            for row in deleted.iter() {
                if postings.seek(row as u32) == row as u32 {
                    dead += 1;
                }
            }
        } else {
            let mut row = postings.row();
            while row != END {
                dead += u64::from(deleted.contains(row as usize));
                row = postings.next();
            }
        }
        df - dead
    }
}
