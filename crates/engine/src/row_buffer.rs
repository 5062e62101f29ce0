//! The rows a build owns: row-major `f32` words in memory, or in a file mapped into memory.
//!
//! A build normalises its rows in place and keeps them as the segment's VECTORS section until
//! the file is written, so it needs them mutable and whole. A table larger than the build's
//! memory budget is written to a spill file first ([`RowBuffer::map_file`]): the build then reads
//! and writes its rows through the page cache, whose pages the kernel writes back and evicts as
//! it needs, instead of holding them in the process's own memory.

use std::fs::File;
use std::io;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};

/// Row-major `f32` words owned by a build (see the module docs). Dereferences to the words.
pub struct RowBuffer {
    inner: Inner,
}

enum Inner {
    Owned(Vec<f32>),
    /// The first `len` words of a shared, writable map of a file only this buffer uses.
    Mapped {
        map: MmapMut,
        len: usize,
        /// Where the file lives, when the caller said ([`RowBuffer::map_spill_file`]).
        dir: Option<PathBuf>,
    },
}

impl RowBuffer {
    /// The first `words` `f32` words of `file` (native byte order), mapped shared and writable:
    /// changes through the buffer reach the file. An error when the file is shorter or cannot be
    /// mapped.
    ///
    /// The caller keeps every other writer away from the file while the buffer lives (a build's
    /// own spill file, which nothing else opens).
    pub fn map_file(file: &File, words: usize) -> io::Result<Self> {
        let bytes = words.checked_mul(4).ok_or_else(|| io::Error::other("spill file too large to map"))?;
        if file.metadata()?.len() < bytes as u64 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "spill file shorter than its rows"));
        }
        if words == 0 {
            return Ok(Self::from(Vec::new()));
        }
        // SAFETY: the map covers bytes the file holds (checked above); the caller's contract keeps
        // other writers away from the file (no truncation or concurrent change under the map);
        // the map is page-aligned, so its bytes can be viewed as `f32` words.
        let map = unsafe { MmapOptions::new().len(bytes).map_mut(file)? };
        Ok(Self { inner: Inner::Mapped { map, len: words, dir: None } })
    }

    /// Maps like [`map_file`](Self::map_file) a spill file that lives in `dir`: a build over
    /// these rows puts its own large arrays in unnamed files there too ([`crate::spill`]).
    pub fn map_spill_file(file: &File, words: usize, dir: &Path) -> io::Result<Self> {
        let mut buffer = Self::map_file(file, words)?;
        if let Inner::Mapped { dir: place, .. } = &mut buffer.inner {
            *place = Some(dir.to_path_buf());
        }
        Ok(buffer)
    }

    /// Whether the words live in a mapped file.
    pub fn is_mapped(&self) -> bool {
        matches!(self.inner, Inner::Mapped { .. })
    }

    /// The directory of the spill file the words live in, when mapped with
    /// [`map_spill_file`](Self::map_spill_file).
    pub fn spill_dir(&self) -> Option<&Path> {
        match &self.inner {
            Inner::Mapped { dir, .. } => dir.as_deref(),
            Inner::Owned(_) => None,
        }
    }

    /// Keeps the first `len` words (no change when there are fewer).
    pub fn truncate(&mut self, len: usize) {
        match &mut self.inner {
            Inner::Owned(words) => words.truncate(len),
            Inner::Mapped { len: kept, .. } => *kept = (*kept).min(len),
        }
    }

    /// Appends `words`; a mapped buffer is first copied into memory.
    pub fn extend_from_slice(&mut self, words: &[f32]) {
        if let Inner::Mapped { .. } = self.inner {
            self.inner = Inner::Owned(self.to_vec());
        }
        if let Inner::Owned(owned) = &mut self.inner {
            owned.extend_from_slice(words);
        }
    }
}

impl Deref for RowBuffer {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        match &self.inner {
            Inner::Owned(words) => words,
            Inner::Mapped { map, len, .. } => &bytemuck::cast_slice(&map[..])[..*len],
        }
    }
}

impl DerefMut for RowBuffer {
    fn deref_mut(&mut self) -> &mut [f32] {
        match &mut self.inner {
            Inner::Owned(words) => words,
            Inner::Mapped { map, len, .. } => &mut bytemuck::cast_slice_mut(&mut map[..])[..*len],
        }
    }
}

impl From<Vec<f32>> for RowBuffer {
    fn from(words: Vec<f32>) -> Self {
        Self { inner: Inner::Owned(words) }
    }
}

impl Default for RowBuffer {
    fn default() -> Self {
        Self::from(Vec::new())
    }
}

/// A copy in memory (a mapped buffer's copy no longer uses the file).
impl Clone for RowBuffer {
    fn clone(&self) -> Self {
        Self::from(self.to_vec())
    }
}

impl std::fmt::Debug for RowBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowBuffer").field("words", &self.len()).field("mapped", &self.is_mapped()).finish()
    }
}

impl PartialEq for RowBuffer {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn spill(words: &[f32]) -> File {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytemuck::cast_slice(words)).unwrap();
        file
    }

    #[test]
    fn a_mapped_file_reads_and_writes_like_memory() {
        let words: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
        let file = spill(&words);
        let mut mapped = RowBuffer::map_file(&file, 999).unwrap();
        assert!(mapped.is_mapped());
        assert_eq!(&mapped[..], &words[..999]);
        mapped[3] = -1.0;
        mapped.truncate(10);
        assert_eq!(mapped.len(), 10);
        mapped.truncate(20);
        assert_eq!(mapped.len(), 10, "truncate never grows");
        let copy = mapped.clone();
        assert!(!copy.is_mapped() && copy == mapped);
        drop(mapped);
        let reread = RowBuffer::map_file(&file, 4).unwrap();
        assert_eq!(&reread[..], &[0.0, 0.5, 1.0, -1.0], "changes reach the file");
    }

    #[test]
    fn appending_to_a_mapped_buffer_moves_it_into_memory() {
        let file = spill(&[1.0, 2.0]);
        let mut buffer = RowBuffer::map_file(&file, 2).unwrap();
        buffer.extend_from_slice(&[3.0]);
        assert!(!buffer.is_mapped());
        assert_eq!(&buffer[..], &[1.0, 2.0, 3.0]);
    }

    #[test]
    fn a_short_file_is_refused_and_an_empty_one_maps_to_nothing() {
        let file = spill(&[1.0, 2.0]);
        assert_eq!(RowBuffer::map_file(&file, 3).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert!(RowBuffer::map_file(&file, 0).unwrap().is_empty());
    }
}
