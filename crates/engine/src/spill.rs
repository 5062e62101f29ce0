//! A build's large working arrays, in memory or in an unnamed file mapped into memory.
//!
//! A build whose rows came from a spill file (its rows exceed the memory budget, see
//! [`crate::row_buffer`]) also keeps its largest arrays there: HNSW's layer-0 links and its
//! codes (the 4-bit walk codes while the graph is built, then the traversal codes), about
//! `8 · m + dims + 4` bytes a row. Their pages then belong to the page
//! cache, which writes them back and evicts them as it needs, instead of the process's own
//! memory; the process keeps only what is small per row (levels, locks, offsets, ids). The
//! files are unnamed (`tempfile`), so neither an error nor a crash leaves them behind, and the
//! segment writer reads the arrays in place as section contents ([`SectionBytes`]), without a
//! copy.

use std::io;
use std::ops::Deref;
use std::path::Path;
use std::sync::atomic::AtomicU32;

use memmap2::{MmapMut, MmapOptions};

/// A zero-initialised byte array of fixed length whose start is 4-byte aligned: in memory, or
/// mapped from an unnamed file in a directory (see the module docs). Dereferences to its bytes;
/// [`words_mut`](Self::words_mut) views it as `u32` words.
pub struct SpillBuffer {
    inner: Inner,
    len: usize,
}

enum Inner {
    /// Whole words, so that the bytes can be viewed as words; `len` bytes are used.
    Owned(Vec<u32>),
    /// A shared, writable map of an unnamed file only this buffer uses (page-aligned).
    Mapped(MmapMut),
}

impl SpillBuffer {
    /// `len` zero bytes: in memory when `dir` is `None`, otherwise in a new unnamed file in `dir`
    /// (an error when it cannot be created, sized or mapped: ENOSPC, EIO, a missing directory).
    pub fn zeroed(len: usize, dir: Option<&Path>) -> io::Result<Self> {
        let inner = match dir {
            // An empty buffer maps nothing (a map of no bytes is an error).
            _ if len == 0 => Inner::Owned(Vec::new()),
            None => Inner::Owned(vec![0u32; len.div_ceil(4)]),
            Some(dir) => {
                let file = tempfile::tempfile_in(dir)?;
                file.set_len(len as u64)?;
                // SAFETY: the file is unnamed and only this buffer holds it, so nothing else can
                // truncate or change it under the map; it is `len` bytes long (set above).
                Inner::Mapped(unsafe { MmapOptions::new().len(len).map_mut(&file)? })
            }
        };
        Ok(Self { inner, len })
    }

    /// `words` `u32` words, each `value`, placed as [`zeroed`](Self::zeroed) places them.
    pub fn filled_words(words: usize, value: u32, dir: Option<&Path>) -> io::Result<Self> {
        let bytes = words.checked_mul(4).ok_or_else(|| io::Error::other("array too large"))?;
        let mut buffer = Self::zeroed(bytes, dir)?;
        buffer.words_mut().fill(value);
        Ok(buffer)
    }

    /// Whether the bytes live in a mapped file.
    pub fn is_mapped(&self) -> bool {
        matches!(self.inner, Inner::Mapped(_))
    }

    /// The bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.inner {
            Inner::Owned(words) => &mut bytemuck::cast_slice_mut(words)[..self.len],
            Inner::Mapped(map) => &mut map[..self.len],
        }
    }

    /// The first `len / 4` bytes' worth of native-endian `u32` words, writable.
    pub fn words_mut(&mut self) -> &mut [u32] {
        let words = self.len / 4;
        match &mut self.inner {
            Inner::Owned(owned) => &mut owned[..words],
            Inner::Mapped(map) => bytemuck::cast_slice_mut(&mut map[..words * 4]),
        }
    }

    /// The words, read only (see [`words_mut`](Self::words_mut)).
    pub fn words(&self) -> &[u32] {
        let words = self.len / 4;
        match &self.inner {
            Inner::Owned(owned) => &owned[..words],
            Inner::Mapped(map) => bytemuck::cast_slice(&map[..words * 4]),
        }
    }

    /// The words as atomics, for a parallel build that writes them from several threads.
    pub fn atomic_words(&mut self) -> &[AtomicU32] {
        let words = self.words_mut();
        assert_eq!(words.as_ptr().align_offset(std::mem::align_of::<AtomicU32>()), 0, "word arrays are 4-byte aligned");
        // SAFETY: `AtomicU32` has the same size and bit validity as `u32`, and the start is
        // aligned for it (asserted above); the exclusive borrow of `self` lasts as long as the
        // returned slice, so no plain access to the words overlaps the atomic ones.
        unsafe { &*(std::ptr::from_mut::<[u32]>(words) as *const [AtomicU32]) }
    }

    /// Converts the words to little-endian in place (the stored form; nothing changes on
    /// little-endian machines).
    pub fn words_to_le(&mut self) {
        if cfg!(target_endian = "big") {
            for word in self.words_mut() {
                *word = word.to_le();
            }
        }
    }
}

/// The words' native-endian bytes, in memory.
impl From<Vec<u32>> for SpillBuffer {
    fn from(words: Vec<u32>) -> Self {
        let len = words.len() * 4;
        Self { inner: Inner::Owned(words), len }
    }
}

impl Deref for SpillBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.inner {
            Inner::Owned(words) => &bytemuck::cast_slice(words)[..self.len],
            Inner::Mapped(map) => &map[..self.len],
        }
    }
}

/// A copy in memory (a mapped buffer's copy no longer uses the file).
impl Clone for SpillBuffer {
    fn clone(&self) -> Self {
        let mut copy = Self::zeroed(self.len, None).expect("a buffer in memory cannot fail to be made");
        copy.bytes_mut().copy_from_slice(self);
        copy
    }
}

impl PartialEq for SpillBuffer {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl Eq for SpillBuffer {}

impl std::fmt::Debug for SpillBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillBuffer")
            .field("bytes", &self.len)
            .field("mapped", &self.is_mapped())
            .finish_non_exhaustive()
    }
}

/// The contents of one section of a segment being written: bytes in memory, or a
/// [`SpillBuffer`] moved in without a copy. Dereferences to the bytes.
#[derive(Clone, PartialEq, Eq)]
pub enum SectionBytes {
    /// Bytes in memory.
    Owned(Vec<u8>),
    /// A build's array, in memory or mapped.
    Buffer(SpillBuffer),
}

impl SectionBytes {
    /// The bytes in a vector of their own (a copy unless they are already one).
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Self::Owned(bytes) => bytes,
            Self::Buffer(buffer) => buffer.to_vec(),
        }
    }
}

impl Deref for SectionBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Owned(bytes) => bytes,
            Self::Buffer(buffer) => buffer,
        }
    }
}

impl From<Vec<u8>> for SectionBytes {
    fn from(bytes: Vec<u8>) -> Self {
        Self::Owned(bytes)
    }
}

impl std::fmt::Debug for SectionBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Owned(bytes) => write!(f, "SectionBytes({} bytes)", bytes.len()),
            Self::Buffer(buffer) => buffer.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    #[test]
    fn a_mapped_buffer_holds_what_a_buffer_in_memory_holds() {
        let dir = tempfile::tempdir().unwrap();
        for place in [None, Some(dir.path())] {
            let mut words = SpillBuffer::filled_words(1001, u32::MAX, place).unwrap();
            assert_eq!(words.is_mapped(), place.is_some());
            assert_eq!(words.len(), 4004);
            assert!(words.words().iter().all(|&w| w == u32::MAX));
            words.atomic_words()[7].store(42, Ordering::Relaxed);
            assert_eq!(words.words()[7], 42);
            let mut odd = SpillBuffer::zeroed(7, place).unwrap();
            odd.bytes_mut().copy_from_slice(&[1, 2, 3, 4, 5, 6, 7]);
            assert_eq!(&odd[..], &[1, 2, 3, 4, 5, 6, 7]);
            assert_eq!(odd.words(), &[u32::from_ne_bytes([1, 2, 3, 4])], "only whole words");
            let copy = odd.clone();
            assert!(!copy.is_mapped() && copy == odd);
            assert_eq!(SectionBytes::Buffer(odd).into_vec(), vec![1, 2, 3, 4, 5, 6, 7]);
        }
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "the files are unnamed");
        assert!(SpillBuffer::zeroed(0, Some(dir.path())).unwrap().is_empty());
    }

    #[test]
    fn a_directory_that_cannot_hold_files_is_an_error() {
        let error = SpillBuffer::zeroed(10, Some(Path::new("/nonexistent/strata"))).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }
}
