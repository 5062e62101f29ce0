//! A segment type of span rows for the follower's model test: each row a TID and its words, as a
//! text index's documents are ([`crate::memtable::spans`]). It keeps the words as they are, so the
//! model can compare a follower's index with the primary's rows exactly.

use std::borrow::Cow;

use strata_engine::bitset::Bitset;
use strata_engine::format::SegmentFile;
use strata_engine::topk::Neighbor;

use super::FollowedSegment;
use crate::files::{FileError, IndexFiles};
use crate::manifest::IndexConfig;
use crate::recovery::SpanRow;
use crate::segment_type::{BuildWork, MergeInput, OpenError, SegmentType};

const TAG_TIDS: u32 = 1;
/// Per row, its word count and then its words (`u32`, little endian).
const TAG_WORDS: u32 = 2;

/// Rows `(tid, words)` in row order.
pub(super) struct WordsSegment {
    pub(super) tids: Vec<u64>,
    pub(super) words: Vec<Vec<u32>>,
}

fn le_u32(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("chunks of 4"))).collect()
}

impl SegmentType for WordsSegment {
    type Config = IndexConfig;
    type Rows = Vec<(u64, Vec<u32>)>;
    type Built = WordsSegment;
    type Query = ();
    type Params = ();

    fn open(file: SegmentFile) -> Result<Self, OpenError> {
        let tids: Vec<u64> = file
            .require(TAG_TIDS)?
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8")))
            .collect();
        let mut flat = le_u32(file.require(TAG_WORDS)?).into_iter();
        let mut words = Vec::with_capacity(tids.len());
        while let Some(count) = flat.next() {
            let row: Vec<u32> = flat.by_ref().take(count as usize).collect();
            if row.len() != count as usize {
                return Err("a row's words end early".into());
            }
            words.push(row);
        }
        if words.len() != tids.len() {
            return Err("tids and rows differ in number".into());
        }
        Ok(Self { tids, words })
    }

    fn ids(&self) -> &[u64] {
        &self.tids
    }

    fn build(_: &IndexFiles<Self>, _: &IndexConfig, rows: Self::Rows, _: &BuildWork) -> Result<Self, FileError> {
        let (tids, words) = rows.into_iter().unzip();
        Ok(Self { tids, words })
    }

    fn merge(_: &IndexConfig, inputs: Vec<MergeInput<Self>>, _: &BuildWork) -> Result<Self, FileError> {
        let mut merged = Self { tids: Vec::new(), words: Vec::new() };
        for input in inputs {
            for row in 0..input.segment.tids.len() {
                if !input.deleted.as_ref().is_some_and(|d| d.contains(row)) {
                    merged.tids.push(input.segment.tids[row]);
                    merged.words.push(input.segment.words[row].clone());
                }
            }
        }
        Ok(merged)
    }

    fn sections(built: &Self) -> Vec<(u32, Cow<'_, [u8]>)> {
        let words: Vec<u8> = built
            .words
            .iter()
            .flat_map(|row| std::iter::once(row.len() as u32).chain(row.iter().copied()))
            .flat_map(u32::to_le_bytes)
            .collect();
        vec![
            (TAG_TIDS, Cow::Owned(built.tids.iter().flat_map(|t| t.to_le_bytes()).collect())),
            (TAG_WORDS, Cow::Owned(words)),
        ]
    }

    fn built_rows(built: &Self) -> u64 {
        built.tids.len() as u64
    }

    /// Not searched by the model (it reads rows directly): no rows.
    fn search(&self, (): &(), _: usize, (): &(), _: Option<&Bitset>) -> Vec<Neighbor> {
        Vec::new()
    }
}

impl FollowedSegment for WordsSegment {
    type Row = SpanRow;

    fn no_rows() -> Self::Rows {
        Vec::new()
    }

    fn push_row(rows: &mut Self::Rows, _: usize, tid: u64, row: SpanRow) -> Result<(), FileError> {
        rows.push((tid, row.0));
        Ok(())
    }

    fn is_empty(rows: &Self::Rows) -> bool {
        rows.is_empty()
    }
}
