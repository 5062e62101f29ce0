//! The text segment's section tags and fixed-size records (byte layout in the crate docs).

use crate::error::TextError;
use crate::postings::{BlockMax, BOUND_POINTS};

/// META: 64 bytes of counts.
pub const TAG_META: u32 = 0x5458_0001;
/// IDS: `u64` per row.
pub const TAG_IDS: u32 = 0x5458_0002;
/// LENS: `u32` document length per row.
pub const TAG_LENS: u32 = 0x5458_0003;
/// TERMS: the fst map lexeme → term ordinal.
pub const TAG_TERMS: u32 = 0x5458_0004;
/// TERMINFO: 24 bytes per term ordinal.
pub const TAG_TERMINFO: u32 = 0x5458_0005;
/// SKIPS: 44 bytes per posting block.
pub const TAG_SKIPS: u32 = 0x5458_0006;
/// POSTINGS: every term's blocks, concatenated in term order.
pub const TAG_POSTINGS: u32 = 0x5458_0007;

/// The text-segment layout version this code writes and reads.
pub const LAYOUT_VERSION: u32 = 1;
/// Bytes of META.
pub const META_BYTES: usize = 64;
/// Bytes per TERMINFO record.
pub const TERMINFO_BYTES: usize = 24;
/// Bytes per SKIPS record.
pub const SKIP_BYTES: usize = 12 + 8 * BOUND_POINTS;

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// META's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Rows.
    pub rows: u32,
    /// Sum of the rows' lengths.
    pub total_len: u64,
    /// Distinct lexemes.
    pub terms: u64,
    /// Postings over all terms.
    pub postings: u64,
    /// Posting blocks over all terms.
    pub blocks: u64,
}

impl Meta {
    /// The 64 META bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(META_BYTES);
        out.extend_from_slice(&LAYOUT_VERSION.to_le_bytes());
        out.extend_from_slice(&(crate::postings::BLOCK_LEN as u32).to_le_bytes());
        out.extend_from_slice(&u64::from(self.rows).to_le_bytes());
        out.extend_from_slice(&self.total_len.to_le_bytes());
        out.extend_from_slice(&self.terms.to_le_bytes());
        out.extend_from_slice(&self.postings.to_le_bytes());
        out.extend_from_slice(&self.blocks.to_le_bytes());
        out.resize(META_BYTES, 0);
        out
    }

    /// Reads META, checking its size, version, block length and reserved bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, TextError> {
        if bytes.len() != META_BYTES {
            return Err(TextError::Corrupt(format!("META is {} bytes, expected {META_BYTES}", bytes.len())));
        }
        let version = u32_at(bytes, 0);
        if version != LAYOUT_VERSION {
            return Err(TextError::UnsupportedVersion(version));
        }
        if u32_at(bytes, 4) as usize != crate::postings::BLOCK_LEN {
            return Err(TextError::Corrupt(format!("block length {}", u32_at(bytes, 4))));
        }
        if bytes[48..].iter().any(|&b| b != 0) {
            return Err(TextError::Corrupt("non-zero reserved META bytes".into()));
        }
        let rows = u32::try_from(u64_at(bytes, 8))
            .ok()
            .filter(|&r| r < crate::postings::END)
            .ok_or_else(|| TextError::Corrupt("row count out of range".into()))?;
        Ok(Self {
            rows,
            total_len: u64_at(bytes, 16),
            terms: u64_at(bytes, 24),
            postings: u64_at(bytes, 32),
            blocks: u64_at(bytes, 40),
        })
    }
}

/// A TERMINFO record: where a term's skip entries and posting bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermInfo {
    /// Rows holding the term (its postings).
    pub df: u32,
    /// Index of its first SKIPS record; it has `ceil(df / 128)`.
    pub first_block: u32,
    /// Offset of its first byte in POSTINGS.
    pub offset: u64,
    /// Its bytes in POSTINGS.
    pub len: u64,
}

impl TermInfo {
    /// Appends the 24-byte record.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.df.to_le_bytes());
        out.extend_from_slice(&self.first_block.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
    }

    /// Reads a 24-byte record.
    pub fn read(bytes: &[u8]) -> Self {
        Self { df: u32_at(bytes, 0), first_block: u32_at(bytes, 4), offset: u64_at(bytes, 8), len: u64_at(bytes, 16) }
    }

    /// Its number of blocks.
    pub fn blocks(&self) -> usize {
        (self.df as usize).div_ceil(crate::postings::BLOCK_LEN)
    }
}

/// A SKIPS record: one posting block's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skip {
    /// The block's last row.
    pub last_row: u32,
    /// The block's first byte, relative to its term's first byte in POSTINGS.
    pub offset: u32,
    /// Bits per packed row delta (full blocks; 0 in a tail block).
    pub row_bits: u8,
    /// Bits per packed `tf − 1` (full blocks; 0 in a tail block).
    pub tf_bits: u8,
    /// Bound points in use (1..=4).
    pub points: u8,
    /// The bound points `(tf, dl)`; unused ones are zero.
    pub bounds: [(u32, u32); BOUND_POINTS],
}

impl Skip {
    /// The record of a block with metadata `block` at `offset` with the given bit widths.
    pub fn new(block: &BlockMax, offset: u32, row_bits: u8, tf_bits: u8) -> Self {
        let mut bounds = [(0, 0); BOUND_POINTS];
        bounds[..block.points().len()].copy_from_slice(block.points());
        Self { last_row: block.last_row, offset, row_bits, tf_bits, points: block.points().len() as u8, bounds }
    }

    /// Appends the record.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.last_row.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&[self.row_bits, self.tf_bits, self.points, 0]);
        for (tf, dl) in self.bounds {
            out.extend_from_slice(&tf.to_le_bytes());
            out.extend_from_slice(&dl.to_le_bytes());
        }
    }

    /// Reads a record.
    #[inline]
    pub fn read(bytes: &[u8]) -> Self {
        let mut bounds = [(0, 0); BOUND_POINTS];
        for (i, b) in bounds.iter_mut().enumerate() {
            *b = (u32_at(bytes, 12 + 8 * i), u32_at(bytes, 16 + 8 * i));
        }
        Self {
            last_row: u32_at(bytes, 0),
            offset: u32_at(bytes, 4),
            row_bits: bytes[8],
            tf_bits: bytes[9],
            points: bytes[10],
            bounds,
        }
    }

    /// Whether the bound points are well formed: 1..=4 in use, each with `tf, dl ≥ 1`, strictly
    /// increasing in both; unused ones zero.
    pub fn points_valid(&self, reserved: u8) -> bool {
        let n = self.points as usize;
        (1..=BOUND_POINTS).contains(&n)
            && reserved == 0
            && self.bounds[..n].iter().all(|&(t, d)| t >= 1 && d >= 1)
            && self.bounds[..n].windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1)
            && self.bounds[n..].iter().all(|&p| p == (0, 0))
    }

    /// The block-max view of the record (call only on a validated record).
    #[inline]
    pub fn block_max(&self) -> BlockMax {
        BlockMax::from_points(self.last_row, &self.bounds[..(self.points as usize).min(BOUND_POINTS)])
    }
}
