//! Where an index keeps its files: the [`Directory`] trait, its durability contract, and the one
//! crash-safe way to write a file through it ([`write_file`]).
//!
//! Everything strata-lsm reads or writes (segments, deletion bitmaps, the manifest) goes through
//! a `Directory`, so the same code runs over the real file system ([`fs::FsDirectory`], used by
//! PostgreSQL) and over [`memory::MemoryDirectory`], which loses unsynced data at a simulated
//! crash and injects ENOSPC / EIO at any call (the fault-injection tests).

pub mod faults;
pub mod fs;
pub mod memory;

use std::io;

use strata_engine::format::{FileLayout, FormatError, SegmentBytes, SegmentFile};

/// Suffix of a file being written by [`write_file`]; such files are never read and are garbage
/// once their writer is gone.
pub const TMP_SUFFIX: &str = ".tmp";

/// A flat directory of immutable files, named by plain names (no `/`).
///
/// # Durability contract
/// Implementations behave as POSIX file systems do, and callers rely on exactly this:
/// - the *contents* of a file written through a [`FileWriter`] are durable only after
///   [`FileWriter::sync`] returned `Ok`; a crash before that may leave the file empty, with a
///   prefix of the bytes, or with all of them;
/// - a *name change* ([`Directory::create`], [`Directory::rename`], [`Directory::remove`]) is
///   visible to every reader at once, and durable only after a later [`Directory::sync_dir`]
///   returned `Ok`; a crash before that may undo it;
/// - [`Directory::rename`] is atomic: readers and a crash see the old file or the new one at the
///   target name, never a mix, and an error means it did not happen;
/// - a file is never modified after it has been renamed into place (segment files are mapped
///   into memory on the strength of this).
///
/// [`write_file`] builds the crash-safe write from these steps: a reader sees no file or a
/// complete one, and after a crash the name holds either the previous complete file or the new
/// complete one.
pub trait Directory: Send + Sync {
    /// Creates `name` empty (replacing a file of that name) and opens it for writing.
    fn create(&self, name: &str) -> io::Result<Box<dyn FileWriter>>;
    /// Renames `from` to `to` atomically, replacing `to`.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// Makes every earlier name change durable; `renamed` is the file whose rename the caller
    /// is completing (only used to describe the step, e.g. to fault hooks).
    fn sync_dir(&self, renamed: &str) -> io::Result<()>;
    /// The names of the files present now (any order).
    fn list(&self) -> io::Result<Vec<String>>;
    /// Removes `name`; an error of kind `NotFound` when it does not exist.
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Whether `name` exists now.
    fn exists(&self, name: &str) -> io::Result<bool>;
    /// The bytes of `name` for reading (a read-only memory map where the directory is on disk).
    fn open_read(&self, name: &str) -> io::Result<SegmentBytes>;
    /// The length of `name` in bytes.
    fn file_len(&self, name: &str) -> io::Result<u64>;
    /// How `name` is shown in messages (its path on disk, for a real directory).
    fn describe(&self, name: &str) -> String;
}

/// A file being written through a [`Directory`].
pub trait FileWriter: io::Write + Send {
    /// Makes the bytes written so far durable (fsync).
    fn sync(&mut self) -> io::Result<()>;
}

/// Writes `name` crash-safely: the segment-format file holding `sections` is written to
/// `name.tmp`, synced, renamed to `name`, and the directory synced. Returns the file's length.
///
/// On an error the temporary file is removed (best effort) and, except for
/// [`FormatError::Unsynced`], `name` is unchanged. `Unsynced` means the rename happened but the
/// directory sync failed: every reader now sees the new file, which may not survive a crash, and
/// the caller decides (a file nothing lists yet is garbage; a replaced manifest cannot be taken
/// back).
pub fn write_file(dir: &dyn Directory, name: &str, sections: &[(u32, &[u8])]) -> Result<u64, FormatError> {
    let layout = FileLayout::new(sections)?;
    let tmp = format!("{name}{TMP_SUFFIX}");
    let io_error = |file: &str| {
        let path = dir.describe(file);
        move |source| FormatError::Io { path, source }
    };
    let written = (|| {
        let mut file = dir.create(&tmp).map_err(io_error(&tmp))?;
        layout.write_to(&mut *file).map_err(io_error(&tmp))?;
        file.sync().map_err(io_error(&tmp))?;
        drop(file);
        dir.rename(&tmp, name).map_err(io_error(name))
    })();
    if let Err(e) = written {
        let _ = dir.remove(&tmp);
        return Err(e);
    }
    dir.sync_dir(name).map_err(|source| FormatError::Unsynced { path: dir.describe(name), source })?;
    Ok(layout.len())
}

/// Opens `name` as a segment-format file (section checksums verified when `verify_sections`).
pub fn read_file(dir: &dyn Directory, name: &str, verify_sections: bool) -> Result<SegmentFile, FormatError> {
    let bytes = dir.open_read(name).map_err(|source| FormatError::Io { path: dir.describe(name), source })?;
    SegmentFile::from_bytes(bytes, verify_sections)
}

/// Whether `error` (or an error it wraps) is a full disk (ENOSPC).
pub fn is_disk_full(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if e.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::StorageFull) {
            return true;
        }
        current = e.source();
    }
    false
}

#[cfg(test)]
mod tests;
