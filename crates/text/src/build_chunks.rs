//! CREATE INDEX's chunks of a bm25 index: the table's documents collected into an in-memory
//! [`Memtable`] until the build's estimate of its memory passes the budget
//! (`maintenance_work_mem`), then handed out to become one text segment, so memory stays
//! bounded whatever the table size (as strata-lsm's `BuildChunks` does for vector rows).

use crate::{Document, Memtable, TextError};

/// The memory an in-memory memtable takes per word of its rows' [`Document::to_words`] form,
/// as the build estimates it: the lexeme strings in its dictionary, its postings (row and tf,
/// 8 bytes per lexeme of a row) and the segment built from it, which coexist while it is
/// written.
pub const BYTES_PER_ROW_WORD: usize = 16;

/// The chunks of one build.
///
/// Guarantees: every document pushed is in exactly one chunk handed out ([`TextChunks::push`]
/// or [`TextChunks::finish`]), in push order; a chunk is handed out as soon as its documents'
/// words times [`BYTES_PER_ROW_WORD`] exceed the budget, with the document that made it exceed;
/// no chunk is empty.
#[derive(Debug)]
pub struct TextChunks {
    rows: Memtable,
    words: usize,
    budget_bytes: usize,
}

impl TextChunks {
    /// Chunks of at most about `budget_bytes` each.
    pub fn new(budget_bytes: usize) -> Self {
        Self { rows: Memtable::new(), words: 0, budget_bytes }
    }

    /// Adds `document` as row `id`; returns the chunk it completed, if it did. An error (a
    /// memtable of too many rows) leaves the chunk as it was.
    pub fn push(&mut self, id: u64, document: &Document) -> Result<Option<Memtable>, TextError> {
        self.rows.insert(id, document)?;
        self.words += document.word_count();
        if self.words.saturating_mul(BYTES_PER_ROW_WORD) > self.budget_bytes {
            self.words = 0;
            return Ok(Some(std::mem::take(&mut self.rows)));
        }
        Ok(None)
    }

    /// The last chunk, unless it is empty (the chunks are empty afterwards).
    pub fn finish(&mut self) -> Option<Memtable> {
        self.words = 0;
        (!self.rows.is_empty()).then(|| std::mem::take(&mut self.rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(words: &[&str]) -> Document {
        Document::from_tokens(words.iter().copied()).unwrap()
    }

    /// Against a budget counted by hand: each document below is 2 + 2 · 2 + 1 + 1 = 8 words
    /// (two lexemes of at most four bytes), 128 bytes; a budget of 300 bytes is exceeded by the
    /// third document of each chunk.
    #[test]
    fn chunks_close_at_the_document_that_passes_the_budget() {
        let document = doc(&["abc", "de"]);
        assert_eq!(document.word_count() * BYTES_PER_ROW_WORD, 128);
        let mut chunks = TextChunks::new(300);
        let mut handed: Vec<Vec<u64>> = Vec::new();
        for id in 1..=8u64 {
            if let Some(chunk) = chunks.push(id, &document).unwrap() {
                handed.push(chunk.ids().to_vec());
            }
        }
        handed.extend(chunks.finish().map(|chunk| chunk.ids().to_vec()));
        assert_eq!(handed, [vec![1, 2, 3], vec![4, 5, 6], vec![7, 8]], "every document once, in order");
    }

    /// Nothing pushed, or a last chunk handed out by `push`: `finish` hands out nothing.
    #[test]
    fn no_chunk_is_empty() {
        assert!(TextChunks::new(1 << 20).finish().is_none());
        let mut chunks = TextChunks::new(1);
        let chunk = chunks.push(9, &doc(&["x"])).unwrap().expect("over a one-byte budget at once");
        assert_eq!(chunk.ids(), [9]);
        assert!(chunks.finish().is_none());
        let mut chunks = TextChunks::new(1 << 20);
        chunks.push(3, &doc(&["y"])).unwrap();
        assert_eq!(chunks.finish().map(|chunk| chunk.ids().to_vec()), Some(vec![3]));
        assert!(chunks.finish().is_none(), "handed out once");
    }
}
