//! [`SegmentPostings`]: a cursor over one term's bit-packed posting blocks.

use bitpacking::{BitPacker, BitPacker4x};

use super::layout::{Skip, SKIP_BYTES};
use crate::postings::{read_vint, BlockMax, Postings, BLOCK_LEN, END};

/// A cursor over one term's postings in a segment (see [`Postings`]). Blocks are decoded
/// lazily, only when `next` or `seek` lands in them; `block_max` reads skip entries only.
///
/// A block whose decoded rows contradict its skip entry (possible only in a file whose section
/// checksums were not verified) ends the cursor instead of panicking.
pub struct SegmentPostings<'a> {
    skips: &'a [u8],
    data: &'a [u8],
    lens: &'a [u32],
    df: u32,
    blocks: usize,
    /// The decoded block (`usize::MAX`: none yet).
    block: usize,
    rows: [u32; BLOCK_LEN],
    tfs: [u32; BLOCK_LEN],
    count: usize,
    pos: usize,
    /// The block `block_max` last described.
    shallow: usize,
    /// Blocks decoded so far.
    decoded: u32,
}

impl<'a> SegmentPostings<'a> {
    /// A cursor over a term's skip entries and posting bytes (validated by the segment's open);
    /// positioned on the first posting.
    pub(crate) fn new(skips: &'a [u8], data: &'a [u8], lens: &'a [u32], df: u32) -> Self {
        let blocks = skips.len() / SKIP_BYTES;
        let mut cursor = Self {
            skips,
            data,
            lens,
            df,
            blocks,
            block: usize::MAX,
            rows: [0; BLOCK_LEN],
            tfs: [0; BLOCK_LEN],
            count: 0,
            pos: 0,
            shallow: 0,
            decoded: 0,
        };
        cursor.load(0);
        cursor
    }

    #[inline]
    fn skip(&self, block: usize) -> Skip {
        Skip::read(&self.skips[block * SKIP_BYTES..(block + 1) * SKIP_BYTES])
    }

    /// Decodes `block` (or ends the cursor at `blocks`, or on a damaged block).
    fn load(&mut self, block: usize) {
        self.block = block;
        self.pos = 0;
        self.count = 0;
        if block >= self.blocks {
            return;
        }
        self.decoded += 1;
        let skip = self.skip(block);
        let initial = if block == 0 { 0 } else { self.skip(block - 1).last_row };
        let end = if block + 1 < self.blocks { self.skip(block + 1).offset as usize } else { self.data.len() };
        let bytes = &self.data[skip.offset as usize..end];
        let count = if block + 1 < self.blocks { BLOCK_LEN } else { self.df as usize - BLOCK_LEN * block };
        let ok = if count == BLOCK_LEN {
            // Sizes were checked on open: `bytes` holds both packed arrays.
            let packer = BitPacker4x::new();
            let at = packer.decompress_sorted(initial, bytes, &mut self.rows, skip.row_bits);
            packer.decompress(&bytes[at..], &mut self.tfs, skip.tf_bits);
            true
        } else {
            self.decode_tail(bytes, initial, count)
        };
        let valid = ok
            && self.rows[..count].windows(2).all(|w| w[0] < w[1])
            && self.rows[count - 1] == skip.last_row
            && (block == 0 || self.rows[0] > initial)
            && (skip.last_row as usize) < self.lens.len();
        if valid {
            for tf in &mut self.tfs[..count] {
                *tf = tf.saturating_add(1);
            }
            self.count = count;
        } else {
            self.block = self.blocks;
        }
    }

    fn decode_tail(&mut self, bytes: &[u8], initial: u32, count: usize) -> bool {
        let mut at = 0;
        let mut row = initial;
        for i in 0..count {
            let Some(delta) = read_vint(bytes, &mut at) else { return false };
            let Some(next) = row.checked_add(delta) else { return false };
            row = next;
            self.rows[i] = row;
        }
        for i in 0..count {
            let Some(tf) = read_vint(bytes, &mut at) else { return false };
            self.tfs[i] = tf;
        }
        at == bytes.len()
    }
}

impl Postings for SegmentPostings<'_> {
    #[inline]
    fn row(&self) -> u32 {
        if self.pos < self.count {
            self.rows[self.pos]
        } else {
            END
        }
    }

    #[inline]
    fn tf(&self) -> u32 {
        self.tfs[self.pos.min(BLOCK_LEN - 1)]
    }

    #[inline]
    fn next(&mut self) -> u32 {
        if self.pos + 1 < self.count {
            self.pos += 1;
            return self.rows[self.pos];
        }
        if self.pos < self.count {
            self.load(self.block + 1);
        }
        self.row()
    }

    fn seek(&mut self, target: u32) -> u32 {
        if self.row() >= target {
            return self.row();
        }
        if self.skip(self.block).last_row < target {
            let from = self.block + 1;
            let found = from + partition(self.blocks - from, |b| self.skip(from + b).last_row < target);
            self.load(found);
            if self.count == 0 {
                return END;
            }
        }
        self.pos += self.rows[self.pos..self.count].partition_point(|&r| r < target);
        self.row()
    }

    fn block_max(&mut self, target: u32) -> Option<BlockMax> {
        let from = self.shallow;
        self.shallow = from + partition(self.blocks.saturating_sub(from), |b| self.skip(from + b).last_row < target);
        (self.shallow < self.blocks).then(|| self.skip(self.shallow).block_max())
    }

    fn for_each_block(&self, f: &mut dyn FnMut(BlockMax)) {
        for block in 0..self.blocks {
            f(self.skip(block).block_max());
        }
    }

    fn len(&self) -> u32 {
        self.df
    }

    fn blocks_decoded(&self) -> u32 {
        self.decoded
    }
}

/// The first `i` in `0..n` with `!pred(i)` (`pred` true on a prefix), by galloping then
/// binary search, so that short moves cost few probes.
fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let mut lo = 0;
    let mut step = 1;
    while lo + step <= n && pred(lo + step - 1) {
        lo += step;
        step *= 2;
    }
    let mut hi = (lo + step).min(n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::partition;

    #[test]
    fn partition_finds_the_boundary() {
        for n in 0..40 {
            for k in 0..=n {
                assert_eq!(partition(n, |i| i < k), k, "n {n} k {k}");
            }
        }
    }
}
