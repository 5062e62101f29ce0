//! The posting-list cursor every source (memtable or segment) offers the query algorithms.
//!
//! Rows are a source's local row numbers `0..rows`, strictly increasing along a list;
//! [`END`] marks an exhausted cursor.

/// The row number of an exhausted cursor (never a real row: sources hold fewer rows).
pub const END: u32 = u32::MAX;

/// Postings per block, in segments and memtables alike.
pub const BLOCK_LEN: usize = 128;

/// A block's metadata: what block-max pruning bounds a block's scores with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMax {
    /// The block's last row.
    pub last_row: u32,
    /// The largest term frequency in the block.
    pub max_tf: u32,
    /// The smallest document length among the block's rows.
    pub min_dl: u32,
}

/// A forward-only cursor over one term's postings.
///
/// Contract: [`Postings::row`] starts at the first posting; `next` and `seek` only move forward;
/// once [`END`] is reached the cursor stays there. `block_max(target)` describes the block
/// holding the first posting ≥ `target` without decoding it, and callers pass non-decreasing
/// targets.
pub trait Postings {
    /// The current row, or [`END`].
    fn row(&self) -> u32;
    /// The current posting's term frequency (unspecified at [`END`]).
    fn tf(&self) -> u32;
    /// Moves to the next posting; returns the new row.
    fn next(&mut self) -> u32;
    /// Moves to the first posting ≥ `target` (no move when already there); returns the row.
    fn seek(&mut self, target: u32) -> u32;
    /// The metadata of the block holding the first posting ≥ `target`, `None` past the end.
    fn block_max(&mut self, target: u32) -> Option<BlockMax>;
    /// Calls `f` with every block's metadata, in order.
    fn for_each_block(&self, f: &mut dyn FnMut(BlockMax));
    /// Postings in the list (deleted rows included).
    fn len(&self) -> u32;
    /// Whether the list has no posting (never, for a list a source hands out).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Compressed blocks decoded so far (0 for lists kept uncompressed).
    fn blocks_decoded(&self) -> u32 {
        0
    }
}

/// Appends `value` as a LEB128 variable-length integer.
pub(crate) fn write_vint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads a LEB128 integer at `*at`, advancing it; `None` when truncated or over 32 bits.
pub(crate) fn read_vint(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let mut value: u32 = 0;
    for shift in [0u32, 7, 14, 21, 28] {
        let byte = *bytes.get(*at)?;
        *at += 1;
        if shift == 28 && byte > 0x0F {
            return None;
        }
        value |= u32::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vint_round_trip() {
        let values = [0, 1, 127, 128, 300, 16_383, 16_384, u32::MAX - 1, u32::MAX];
        let mut out = Vec::new();
        for &v in &values {
            write_vint(&mut out, v);
        }
        let mut at = 0;
        for &v in &values {
            assert_eq!(read_vint(&out, &mut at), Some(v));
        }
        assert_eq!(read_vint(&out, &mut at), None);
        assert_eq!(read_vint(&[0xFF, 0xFF, 0xFF, 0xFF, 0x7F], &mut 0), None, "over 32 bits");
    }
}
