//! Serialised sections shared by [`super::QuantizedFlat`] and [`crate::ivf::Ivf`]: the header
//! layout, typed errors and checked, zero-copy casts.
//!
//! The header layout is documented in [`super`] (the module docs of `quant`).
//!
//! Every other section is a flat little-endian array whose length the header determines exactly;
//! readers cast it with `bytemuck::try_cast_slice` (sections are 64-byte aligned in segment
//! files; a misaligned slice is reported, never read unaligned). Integrity of the bulk bytes
//! (codes, factors, centroids) is the container's job: segment files carry a CRC-32 per section
//! (see [`crate::format`]); here every *structural* value is validated so that no byte pattern
//! can cause a panic, an out-of-bounds access or a result outside `0..rows`.

use thiserror::Error;

use super::encode::Scheme;
use super::fastscan;
use crate::metric::Metric;

/// Why serialised sections could not be opened. Every failure is one of these; none panics.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SectionError {
    /// A required section is absent.
    #[error("section {tag:#010x} is missing")]
    Missing {
        /// The section tag.
        tag: u32,
    },
    /// A section has the wrong length.
    #[error("section {tag:#010x} holds {actual} bytes, expected {expected}")]
    Length {
        /// The section tag.
        tag: u32,
        /// Bytes required.
        expected: usize,
        /// Bytes present.
        actual: usize,
    },
    /// A section cannot be viewed as its element type (misaligned start).
    #[error("section {tag:#010x} is not aligned for its element type")]
    Misaligned {
        /// The section tag.
        tag: u32,
    },
    /// The header does not start with the expected magic number.
    #[error("section {tag:#010x}: bad magic {found:#010x}")]
    BadMagic {
        /// The section tag.
        tag: u32,
        /// The value found.
        found: u32,
    },
    /// A version this code does not read.
    #[error("unsupported version {0}")]
    UnsupportedVersion(u32),
    /// A header field disagrees with what the caller knows (rows, dims) or derives.
    #[error("header field {field} is {stored}, expected {expected}")]
    Mismatch {
        /// The field.
        field: &'static str,
        /// Stored value.
        stored: u64,
        /// Expected value.
        expected: u64,
    },
    /// A header field holds a value outside its domain.
    #[error("header field {field} holds invalid value {value}")]
    InvalidField {
        /// The field.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// An array entry is outside its bounds.
    #[error("section {tag:#010x}: entry {index} = {value} is out of range (bound {bound})")]
    OutOfRange {
        /// The section tag.
        tag: u32,
        /// Entry index.
        index: usize,
        /// Entry value.
        value: u64,
        /// Exclusive (offsets: inclusive) bound.
        bound: u64,
    },
    /// Offsets decrease.
    #[error("section {tag:#010x}: entry {index} is below its predecessor")]
    NotMonotone {
        /// The section tag.
        tag: u32,
        /// Entry index.
        index: usize,
    },
    /// A row appears twice where each row must appear once.
    #[error("section {tag:#010x}: row {row} appears more than once")]
    Duplicate {
        /// The section tag.
        tag: u32,
        /// The repeated row.
        row: u64,
    },
    /// Sizes overflow `usize`.
    #[error("section sizes overflow")]
    Overflow,
}

/// Bytes in the header section.
pub const HEADER_BYTES: usize = 64;
/// Format version written and read.
pub const VERSION: u32 = 1;
/// Header flag: IVF codes are residuals of their list's centroid.
pub(crate) const FLAG_RESIDUAL: u8 = 1;

/// The decoded header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Header {
    pub(crate) magic: u32,
    pub(crate) dims: usize,
    pub(crate) bits: u8,
    pub(crate) metric: Metric,
    pub(crate) scheme: Scheme,
    pub(crate) flags: u8,
    pub(crate) rows: usize,
    pub(crate) seed: u64,
    pub(crate) lists: usize,
}

pub(crate) fn metric_id(metric: Metric) -> u8 {
    match metric {
        Metric::L2 => 0,
        Metric::InnerProduct => 1,
        Metric::Cosine => 2,
        Metric::L1 | Metric::Hamming | Metric::Jaccard => unreachable!("quantizers refuse L1 (Quantizer::train_with)"),
    }
}

impl Header {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES);
        out.extend(self.magic.to_le_bytes());
        out.extend(VERSION.to_le_bytes());
        out.extend((self.dims as u32).to_le_bytes());
        out.extend([self.bits, metric_id(self.metric), self.scheme.id(), self.flags]);
        out.extend((self.rows as u64).to_le_bytes());
        out.extend(self.seed.to_le_bytes());
        out.extend((self.lists as u32).to_le_bytes());
        out.extend((fastscan::nibbles(self.dims, self.bits) as u32 / 2).to_le_bytes());
        out.resize(HEADER_BYTES, 0);
        out
    }

    /// Decodes and validates a header against the caller's `rows` and `dims`.
    pub(crate) fn decode(
        tag: u32,
        bytes: &[u8],
        magic: u32,
        rows: usize,
        dims: usize,
        allowed_flags: u8,
    ) -> Result<Self, SectionError> {
        if bytes.len() != HEADER_BYTES {
            return Err(SectionError::Length { tag, expected: HEADER_BYTES, actual: bytes.len() });
        }
        let u32_at = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let u64_at = |at: usize| u64::from(u32_at(at)) | (u64::from(u32_at(at + 4)) << 32);
        if u32_at(0) != magic {
            return Err(SectionError::BadMagic { tag, found: u32_at(0) });
        }
        if u32_at(4) != VERSION {
            return Err(SectionError::UnsupportedVersion(u32_at(4)));
        }
        let mismatch =
            |field, stored: u64, expected: usize| SectionError::Mismatch { field, stored, expected: expected as u64 };
        if u64::from(u32_at(8)) != dims as u64 || dims == 0 {
            return Err(mismatch("dims", u64::from(u32_at(8)), dims));
        }
        if u64_at(16) != rows as u64 {
            return Err(mismatch("rows", u64_at(16), rows));
        }
        let bits = bytes[12];
        if !matches!(bits, 1 | 2 | 4) {
            return Err(SectionError::InvalidField { field: "bits", value: u64::from(bits) });
        }
        let metric = match bytes[13] {
            0 => Metric::L2,
            1 => Metric::InnerProduct,
            2 => Metric::Cosine,
            other => return Err(SectionError::InvalidField { field: "metric", value: u64::from(other) }),
        };
        // Only the shipped codebook is read; the others exist for measurements.
        if bytes[14] != Scheme::DEFAULT.id() {
            return Err(SectionError::InvalidField { field: "codebook", value: u64::from(bytes[14]) });
        }
        let scheme = Scheme::DEFAULT;
        let flags = bytes[15];
        if flags & !allowed_flags != 0 {
            return Err(SectionError::InvalidField { field: "flags", value: u64::from(flags) });
        }
        dims.checked_mul(4).ok_or(SectionError::Overflow)?;
        let pairs = fastscan::nibbles(dims, bits) / 2;
        if u64::from(u32_at(36)) != pairs as u64 {
            return Err(mismatch("code bytes", u64::from(u32_at(36)), pairs));
        }
        if let Some(i) = (40..HEADER_BYTES).find(|&i| bytes[i] != 0) {
            return Err(SectionError::InvalidField { field: "reserved", value: i as u64 });
        }
        Ok(Self { magic, dims, bits, metric, scheme, flags, rows, seed: u64_at(24), lists: u32_at(32) as usize })
    }
}

/// Fetches a required section.
pub(crate) fn require<'a>(get: &impl Fn(u32) -> Option<&'a [u8]>, tag: u32) -> Result<&'a [u8], SectionError> {
    get(tag).ok_or(SectionError::Missing { tag })
}

/// Views a section as exactly `count` elements of `T` (length checked first, then alignment).
pub(crate) fn cast<T: bytemuck::Pod>(tag: u32, bytes: &[u8], count: usize) -> Result<&[T], SectionError> {
    let expected = count.checked_mul(std::mem::size_of::<T>()).ok_or(SectionError::Overflow)?;
    if bytes.len() != expected {
        return Err(SectionError::Length { tag, expected, actual: bytes.len() });
    }
    bytemuck::try_cast_slice(bytes).map_err(|_| SectionError::Misaligned { tag })
}

/// Little-endian bytes of `f32` values.
pub(crate) fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian bytes of `u32` values.
pub(crate) fn u32_bytes(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}
