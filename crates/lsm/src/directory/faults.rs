//! Fault injection into the real file system's writes, for tests of the whole extension.
//!
//! Every file pg_strata writes (segments, deletion bitmaps, the manifest) goes through
//! [`write_file`](super::write_file) over an [`FsDirectory`](super::fs::FsDirectory), which
//! consults the process's fault hook before each step. With no hook installed (production) the
//! check is one atomic load. (Tests of strata-lsm itself use
//! [`MemoryDirectory`](super::memory::MemoryDirectory), which injects faults per call.) A test
//! harness installs a hook once per process with [`set_fault_hook`]; the hook decides from the
//! step and the path whether that step fails, and with which I/O error (ENOSPC, EIO, …).
//! Hooks run on whatever thread writes the file, so they must only touch plain memory.

use std::io;
use std::path::Path;
use std::sync::OnceLock;

/// A step of [`write_file`](super::write_file) at which a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WriteStep {
    /// Creating the temporary file.
    Create = 1,
    /// Writing its bytes.
    Write = 2,
    /// `fsync` of the temporary file.
    Fsync = 3,
    /// Renaming it into place.
    Rename = 4,
    /// `fsync` of the directory after the rename.
    FsyncDir = 5,
}

impl WriteStep {
    /// Every step, in the order a write takes them.
    pub const ALL: [WriteStep; 5] =
        [WriteStep::Create, WriteStep::Write, WriteStep::Fsync, WriteStep::Rename, WriteStep::FsyncDir];

    /// The step's lower-case name (`create`, `write`, `fsync`, `rename`, `fsync_dir`).
    pub fn name(self) -> &'static str {
        match self {
            WriteStep::Create => "create",
            WriteStep::Write => "write",
            WriteStep::Fsync => "fsync",
            WriteStep::Rename => "rename",
            WriteStep::FsyncDir => "fsync_dir",
        }
    }

    /// The step named `name` (as [`WriteStep::name`] spells it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|step| step.name() == name)
    }
}

impl TryFrom<u8> for WriteStep {
    type Error = u8;

    fn try_from(value: u8) -> Result<Self, u8> {
        Self::ALL.into_iter().find(|step| *step as u8 == value).ok_or(value)
    }
}

/// A fault hook: `Err` makes the step fail with that error. `path` is the final path of the file
/// being written (without the temporary suffix; for [`WriteStep::FsyncDir`], the file whose
/// rename is being made durable).
pub type FaultHook = fn(step: WriteStep, path: &Path) -> io::Result<()>;

static HOOK: OnceLock<FaultHook> = OnceLock::new();

/// Installs the process's fault hook; returns `false` when one was installed already (the first
/// stays).
pub fn set_fault_hook(hook: FaultHook) -> bool {
    HOOK.set(hook).is_ok()
}

/// Consults the hook before `step` of writing `path`.
pub(crate) fn check(step: WriteStep, path: &Path) -> io::Result<()> {
    match HOOK.get() {
        Some(hook) => hook(step, path),
        None => Ok(()),
    }
}
