//! The segment file format: a versioned, checksummed container of 64-byte-aligned sections that
//! can be memory-mapped and read without copying.
//!
//! Byte layout (all integers little-endian):
//!
//! ```text
//! offset  size  field
//! ──────  ────  ─────────────────────────────────────────────────────────────
//!      0     8  magic  "STRATSEG"
//!      8     4  format version (u32) = 1
//!     12     4  section count N (u32), at most 64
//!     16     8  file length in bytes (u64): detects truncation
//!     24     8  section table offset (u64) = 64
//!     32     4  CRC-32 of the section table (N × 32 bytes)
//!     36    24  reserved, zero
//!     60     4  CRC-32 of bytes 0..60 of this header
//!     64  32·N  section table, one entry per section:
//!                 +0  u32 tag (what the section holds; unique in a file)
//!                 +4  u32 reserved, zero
//!                 +8  u64 offset of the section's first byte (a multiple of 64)
//!                +16  u64 length in bytes
//!                +24  u32 CRC-32 of the section's bytes
//!                +28  u32 reserved, zero
//!      …            sections in table order, each starting on a 64-byte boundary,
//!                   zero padding between them (checked on open, so every byte of the file
//!                   is covered by a checksum or must be zero)
//! ```
//!
//! CRC-32 is the IEEE polynomial (crc32fast, SIMD-accelerated). Sections are 64-byte aligned so
//! that `&[u8]` views cast to `&[f32]`, `&[u32]`, `&[u64]` without copying and SIMD loads of a
//! row never straddle more cache lines than necessary.
//!
//! Files are written by strata-lsm's `directory::write_file`, over its `Directory` trait, with the
//! only protocol that survives a crash at any point: write everything to `NAME.tmp`, fsync it,
//! rename it to `NAME`, fsync the directory. A reader therefore sees either no file or a complete
//! one; a torn `.tmp` is garbage to delete. This module only lays the bytes out
//! ([`FileLayout`], [`encode`]) and reads them back ([`SegmentFile`]).
//!
//! Opening validates the header, the table and (by default) every section checksum, and returns
//! a typed [`FormatError`] for anything wrong — never a panic, never undefined behaviour.

mod file;

pub use file::{encode, FileLayout, SegmentBytes, SegmentFile};

use thiserror::Error;

/// The magic bytes every segment file starts with.
pub const MAGIC: [u8; 8] = *b"STRATSEG";
/// The format version this code writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes in the fixed header.
pub const HEADER_BYTES: usize = 64;
/// Bytes per section-table entry.
pub const TABLE_ENTRY_BYTES: usize = 32;
/// Section alignment in the file.
pub const SECTION_ALIGN: usize = 64;
/// The most sections a file may hold (bounds the table a corrupt header can claim).
pub const MAX_SECTIONS: usize = 64;

/// Why a segment file could not be read or written.
#[derive(Debug, Error)]
pub enum FormatError {
    /// An I/O error, with the path involved.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file was renamed into place, but syncing its directory failed: the new file is what
    /// every reader sees now, and it may not survive an operating-system crash.
    #[error("{path}: renamed into place, but syncing its directory failed: {source}")]
    Unsynced {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is shorter than its header says (or than a header).
    #[error("segment file truncated: {actual} bytes, expected {expected}")]
    Truncated {
        /// Bytes present.
        actual: u64,
        /// Bytes required.
        expected: u64,
    },
    /// The file does not start with the magic bytes.
    #[error("not a segment file (bad magic)")]
    BadMagic,
    /// A version this code does not read.
    #[error("unsupported segment format version {0}")]
    UnsupportedVersion(u32),
    /// A checksum did not match.
    #[error("checksum mismatch in {what}: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// Which part (`header`, `section table`, `section 0x…`).
        what: String,
        /// The checksum in the file.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
    /// The header or section table is inconsistent.
    #[error("corrupt segment file: {0}")]
    Corrupt(String),
    /// A section a reader needs is absent.
    #[error("segment file lacks section {0:#010x}")]
    MissingSection(u32),
    /// Two sections share a tag when writing.
    #[error("duplicate section tag {0:#010x}")]
    DuplicateSection(u32),
}

impl FormatError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        Self::Io { path: path.display().to_string(), source }
    }
}

/// Rounds `offset` up to the section alignment.
pub(crate) fn align_up(offset: u64) -> u64 {
    offset.div_ceil(SECTION_ALIGN as u64) * SECTION_ALIGN as u64
}

#[cfg(test)]
mod tests;
