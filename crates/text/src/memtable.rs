//! [`Memtable`]: the append-only in-memory text index that rows enter before a flush turns them
//! into an immutable [`crate::segment::TextSegment`].

use std::collections::HashMap;

use crate::document::Document;
use crate::error::TextError;
use crate::postings::{BlockMax, Postings, BLOCK_LEN, END};
use crate::stats::CollectionStats;

/// One term's postings: rows ascending, their term frequencies, and per-128-posting block
/// metadata kept up to date on every append.
#[derive(Debug, Clone, Default)]
struct TermList {
    rows: Vec<u32>,
    tfs: Vec<u32>,
    blocks: Vec<BlockMax>,
}

/// An append-only inverted index over the rows inserted so far.
///
/// Guarantees: row `i` is the `i`-th inserted document and keeps the caller's id
/// ([`Memtable::id`]); every term's postings are in row order with block metadata
/// (largest `tf`, smallest `dl` per 128 postings) equal to what a segment built from the same
/// rows stores, so searches over a memtable and over its flushed segment return the same hits.
#[derive(Debug, Clone, Default)]
pub struct Memtable {
    ids: Vec<u64>,
    lens: Vec<u32>,
    total_len: u64,
    terms: HashMap<String, TermList>,
}

impl Memtable {
    /// An empty memtable.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `doc` under the caller's row id `id` (a heap TID); returns its row number.
    /// Ids are not checked for uniqueness: the LSM gives each live TID one row.
    pub fn insert(&mut self, id: u64, doc: &Document) -> Result<u32, TextError> {
        let row =
            u32::try_from(self.ids.len()).ok().filter(|&r| r < END).ok_or(TextError::TooLarge("memtable rows"))?;
        let dl = doc.length();
        for (term, tf) in doc.terms() {
            let list = match self.terms.get_mut(term.as_str()) {
                Some(list) => list,
                None => self.terms.entry(term.clone()).or_default(),
            };
            if list.rows.len().is_multiple_of(BLOCK_LEN) {
                list.blocks.push(BlockMax::new(row, *tf, dl));
            } else {
                list.blocks.last_mut().expect("a partial block exists").add(row, *tf, dl);
            }
            list.rows.push(row);
            list.tfs.push(*tf);
        }
        self.ids.push(id);
        self.lens.push(dl);
        self.total_len += u64::from(dl);
        Ok(row)
    }

    /// Rows inserted.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no row was inserted.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The id of every row, in row order.
    pub fn ids(&self) -> &[u64] {
        &self.ids
    }

    /// The id of `row` (panics when `row ≥ len()`).
    pub fn id(&self, row: u32) -> u64 {
        self.ids[row as usize]
    }

    /// The length `dl` of every row, in row order.
    pub fn doc_lens(&self) -> &[u32] {
        &self.lens
    }

    /// Rows and total length, deleted rows included.
    pub fn stats(&self) -> CollectionStats {
        CollectionStats { docs: self.ids.len() as u64, total_len: self.total_len }
    }

    /// Distinct lexemes.
    pub fn term_count(&self) -> usize {
        self.terms.len()
    }

    /// Rows containing `lexeme`, deleted rows included.
    pub fn df(&self, lexeme: &str) -> u32 {
        self.terms.get(lexeme).map_or(0, |l| l.rows.len() as u32)
    }

    /// Every lexeme with its rows and term frequencies (rows ascending), in no particular order.
    pub fn postings_lists(&self) -> impl Iterator<Item = (&str, &[u32], &[u32])> + '_ {
        self.terms.iter().map(|(t, l)| (t.as_str(), l.rows.as_slice(), l.tfs.as_slice()))
    }

    /// A cursor over `lexeme`'s postings, `None` when no row holds it.
    pub fn postings(&self, lexeme: &str) -> Option<MemPostings<'_>> {
        let list = self.terms.get(lexeme)?;
        Some(MemPostings { rows: &list.rows, tfs: &list.tfs, blocks: &list.blocks, pos: 0, block: 0 })
    }
}

/// A cursor over one memtable term's postings (see [`Postings`]).
#[derive(Debug, Clone)]
pub struct MemPostings<'a> {
    rows: &'a [u32],
    tfs: &'a [u32],
    blocks: &'a [BlockMax],
    pos: usize,
    block: usize,
}

impl Postings for MemPostings<'_> {
    #[inline]
    fn row(&self) -> u32 {
        self.rows.get(self.pos).copied().unwrap_or(END)
    }

    #[inline]
    fn tf(&self) -> u32 {
        self.tfs.get(self.pos).copied().unwrap_or(0)
    }

    #[inline]
    fn next(&mut self) -> u32 {
        self.pos = (self.pos + 1).min(self.rows.len());
        self.row()
    }

    fn seek(&mut self, target: u32) -> u32 {
        if self.row() >= target {
            return self.row();
        }
        // Gallop, then binary search: cheap for both short and long jumps.
        let mut step = 1;
        let mut hi = self.pos + 1;
        while hi < self.rows.len() && self.rows[hi] < target {
            hi += step;
            step *= 2;
        }
        let hi = hi.min(self.rows.len());
        self.pos += self.rows[self.pos..hi].partition_point(|&r| r < target);
        self.row()
    }

    fn block_max(&mut self, target: u32) -> Option<BlockMax> {
        self.block += self.blocks[self.block.min(self.blocks.len())..].partition_point(|b| b.last_row < target);
        self.blocks.get(self.block).copied()
    }

    fn for_each_block(&self, f: &mut dyn FnMut(BlockMax)) {
        self.blocks.iter().copied().for_each(f);
    }

    fn len(&self) -> u32 {
        self.rows.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_and_blocks() {
        let mut m = Memtable::new();
        for i in 0..300u32 {
            let mut terms = vec![("all".to_owned(), 1 + i % 5)];
            if i % 3 == 0 {
                terms.push(("third".to_owned(), 2));
            }
            m.insert(1000 + u64::from(i), &Document::with_length(terms, 10 + i % 7).unwrap()).unwrap();
        }
        assert_eq!(m.len(), 300);
        assert_eq!(m.df("all"), 300);
        assert_eq!(m.df("third"), 100);
        assert_eq!(m.df("none"), 0);
        let mut c = m.postings("all").unwrap();
        let mut blocks = Vec::new();
        c.for_each_block(&mut |b| blocks.push(b));
        assert_eq!(blocks.len(), 3);
        assert_eq!((blocks[0].last_row, blocks[0].max_tf(), blocks[0].min_dl()), (127, 5, 10));
        assert_eq!(c.seek(200), 200);
        assert_eq!(c.tf(), 1); // 1 + 200 % 5
        assert_eq!(c.block_max(200).unwrap().last_row, 255);
        assert_eq!(c.seek(300), END);
        assert_eq!(c.next(), END);
        let mut t = m.postings("third").unwrap();
        assert_eq!(t.seek(4), 6);
        assert_eq!(t.next(), 9);
    }
}
