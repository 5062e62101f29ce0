//! [`FsDirectory`]: a [`Directory`] on the real file system.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use strata_engine::format::SegmentBytes;

use super::faults::{self, WriteStep};
use super::{Directory, FileWriter, TMP_SUFFIX};

/// A directory on disk. Reads are memory maps; every write step consults the process's fault
/// hook ([`faults`]), which production never installs.
#[derive(Debug, Clone)]
pub struct FsDirectory {
    path: PathBuf,
}

impl FsDirectory {
    /// The directory at `path` (which must exist before files are written).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The final path of the file `name` belongs to (its temporary suffix removed), as fault
    /// hooks see it.
    fn hook_path(&self, name: &str) -> PathBuf {
        self.path.join(name.strip_suffix(TMP_SUFFIX).unwrap_or(name))
    }
}

struct FsWriter {
    file: File,
    hook_path: PathBuf,
    first_write: bool,
}

impl Write for FsWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.first_write {
            faults::check(WriteStep::Write, &self.hook_path)?;
            self.first_write = false;
        }
        self.file.write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl FileWriter for FsWriter {
    fn sync(&mut self) -> io::Result<()> {
        faults::check(WriteStep::Fsync, &self.hook_path)?;
        self.file.sync_all()
    }
}

impl Directory for FsDirectory {
    fn create(&self, name: &str) -> io::Result<Box<dyn FileWriter>> {
        let hook_path = self.hook_path(name);
        faults::check(WriteStep::Create, &hook_path)?;
        let file = OpenOptions::new().write(true).create(true).truncate(true).open(self.path.join(name))?;
        Ok(Box::new(FsWriter { file, hook_path, first_write: true }))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        faults::check(WriteStep::Rename, &self.hook_path(to))?;
        fs::rename(self.path.join(from), self.path.join(to))
    }

    fn sync_dir(&self, renamed: &str) -> io::Result<()> {
        faults::check(WriteStep::FsyncDir, &self.hook_path(renamed))?;
        File::open(&self.path)?.sync_all()
    }

    fn list(&self) -> io::Result<Vec<String>> {
        fs::read_dir(&self.path)?.map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned())).collect()
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        fs::remove_file(self.path.join(name))
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        self.path.join(name).try_exists()
    }

    fn open_read(&self, name: &str) -> io::Result<SegmentBytes> {
        let file = File::open(self.path.join(name))?;
        // SAFETY: files in a Directory are never modified after they are renamed into place
        // (the trait's contract; temporary files are never opened for reading), so the mapped
        // bytes cannot change underneath the `&[u8]` views handed out. The map is read-only.
        let map = unsafe { memmap2::Mmap::map(&file) }?;
        Ok(SegmentBytes::Mapped(map))
    }

    fn file_len(&self, name: &str) -> io::Result<u64> {
        Ok(fs::metadata(self.path.join(name))?.len())
    }

    fn describe(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }
}
