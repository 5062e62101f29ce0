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
//!
//! The same hook also decides for one step that writes no file: settling an index's flushed
//! groups in its status pages ([`check_settle`], file kind [`FaultFiles::Status`]), so that tests
//! can make a settle fail.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::manifest::{IndexFileName, MANIFEST_FILE};

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

/// Consults the hook before settling the flushed groups of the index whose files are in
/// `index_dir` (step [`WriteStep::Write`] of the pseudo-file [`STATUS_PAGES`] there): `Err` makes
/// the settle fail. Always `Ok` without a hook (production builds).
pub fn check_settle(index_dir: &Path) -> io::Result<()> {
    check(WriteStep::Write, &index_dir.join(STATUS_PAGES))
}

/// The plan's `step` value meaning every step.
const ANY_STEP: u32 = 255;

/// Which files a [`FaultPlan`] targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum FaultFiles {
    /// Every file.
    Any = 0,
    /// Segments (and any other file that is neither a bitmap nor the manifest).
    Segment = 1,
    /// Deletion bitmaps.
    Bitmap = 2,
    /// The manifest.
    Manifest = 3,
    /// Not a file: the settle of an index's flushed groups in its status pages
    /// ([`check_settle`]). Targeted only by name (`any` means every file, not this).
    Status = 4,
}

/// The name [`check_settle`] hands the hook in place of a file name.
pub const STATUS_PAGES: &str = "status";

impl FaultFiles {
    /// The kind named `name` (`any`, `segment`, `bitmap`, `manifest`, `status`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "any" => Some(Self::Any),
            "segment" => Some(Self::Segment),
            "bitmap" => Some(Self::Bitmap),
            "manifest" => Some(Self::Manifest),
            "status" => Some(Self::Status),
            _ => None,
        }
    }

    /// The kind of the file `path` names (never [`FaultFiles::Any`]).
    pub fn of_path(path: &Path) -> Self {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name == MANIFEST_FILE {
            Self::Manifest
        } else if name == STATUS_PAGES {
            Self::Status
        } else if matches!(IndexFileName::parse(&name), Some(IndexFileName::Deletions { .. })) {
            Self::Bitmap
        } else {
            Self::Segment
        }
    }
}

/// The raw OS error a fault plan can inject, by name (`ENOSPC` or `EIO`).
pub fn errno_from_name(name: &str) -> Option<i32> {
    match name {
        "ENOSPC" => Some(libc::ENOSPC),
        "EIO" => Some(libc::EIO),
        _ => None,
    }
}

/// A name `strata_inject_fault` does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnknownFaultName {
    /// Not a write step nor `any`.
    #[error("unknown write step \"{0}\"")]
    Step(String),
    /// Not a kind of file nor `any`.
    #[error("unknown file kind \"{0}\"")]
    Files(String),
    /// Not `ENOSPC` nor `EIO`.
    #[error("unknown error \"{0}\"")]
    Error(String),
}

/// The fault `strata_inject_fault` names: the write step (`any`: `None`, every step), the kind
/// of file and the raw OS error, checked in that order.
pub fn parse_fault(
    step: &str,
    files: &str,
    error: &str,
) -> Result<(Option<WriteStep>, FaultFiles, i32), UnknownFaultName> {
    let step = match step {
        "any" => None,
        name => Some(WriteStep::from_name(name).ok_or_else(|| UnknownFaultName::Step(name.to_owned()))?),
    };
    let files = FaultFiles::from_name(files).ok_or_else(|| UnknownFaultName::Files(files.to_owned()))?;
    let errno = errno_from_name(error).ok_or_else(|| UnknownFaultName::Error(error.to_owned()))?;
    Ok((step, files, errno))
}

/// A fault to inject into file writes, made of atomics so that it can live in memory shared by
/// every process and be read from any thread (all zero means none).
///
/// Guarantees: at most `times` faults are injected after [`FaultPlan::set`] (unlimited for `-1`),
/// each into a write step matching the plan's step, file kind and index, and [`FaultPlan::clear`]
/// stops them.
#[repr(C)]
#[derive(Debug, Default)]
pub struct FaultPlan {
    /// The `WriteStep` that fails (`0`: none, `255`: every step).
    step: AtomicU32,
    /// Which files ([`FaultFiles`] as a number).
    file_kind: AtomicU32,
    /// Only files of the index with this relfilenode (0: every index).
    relnode: AtomicU32,
    /// The raw OS error to fail with (ENOSPC, EIO, …).
    errno: AtomicI32,
    /// Faults left to inject (`-1`: until cleared).
    remaining: AtomicI64,
    /// Faults injected since the plan was set.
    injected: AtomicU64,
}

impl FaultPlan {
    /// Makes the next `times` (`-1` or less: every, until cleared) writes of `files` fail at
    /// `step` (`None`: every step) with OS error `errno`; only files of the index directory whose
    /// name ends in `_{relnode}`, unless `relnode` is 0. Resets the injected count.
    pub fn set(&self, step: Option<WriteStep>, files: FaultFiles, relnode: u32, errno: i32, times: i64) {
        // The step goes last: a hook reading the plan meanwhile sees no plan or the whole new one.
        self.step.store(0, Ordering::Release);
        self.file_kind.store(files as u32, Ordering::Release);
        self.relnode.store(relnode, Ordering::Release);
        self.errno.store(errno, Ordering::Release);
        self.remaining.store(times.max(-1), Ordering::Release);
        self.injected.store(0, Ordering::Release);
        self.step.store(step.map_or(ANY_STEP, |s| u32::from(s as u8)), Ordering::Release);
    }

    /// Removes the plan; returns how many faults it injected.
    pub fn clear(&self) -> u64 {
        self.step.store(0, Ordering::Release);
        self.injected.load(Ordering::Acquire)
    }

    /// The fault hook's decision for `step` of writing `path`: `Err` (and one fault less left)
    /// when the plan targets it.
    pub fn check(&self, step: WriteStep, path: &Path) -> io::Result<()> {
        let wanted = self.step.load(Ordering::Acquire);
        if wanted == 0 || (wanted != ANY_STEP && wanted != u32::from(step as u8)) {
            return Ok(());
        }
        let kind = self.file_kind.load(Ordering::Acquire);
        let target = FaultFiles::of_path(path);
        let targeted =
            if kind == FaultFiles::Any as u32 { target != FaultFiles::Status } else { kind == target as u32 };
        if !targeted {
            return Ok(());
        }
        let relnode = self.relnode.load(Ordering::Acquire);
        let directory = path.parent().and_then(Path::file_name).map(|d| d.to_string_lossy().into_owned());
        if relnode != 0 && directory.is_none_or(|d| !d.ends_with(&format!("_{relnode}"))) {
            return Ok(());
        }
        // Take one fault from the budget (-1: unlimited).
        let taken = self
            .remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| match left {
                0 => None,
                n if n < 0 => Some(n),
                n => Some(n - 1),
            })
            .is_ok();
        if !taken {
            return Ok(());
        }
        self.injected.fetch_add(1, Ordering::AcqRel);
        Err(io::Error::from_raw_os_error(self.errno.load(Ordering::Acquire)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fails(plan: &FaultPlan, step: WriteStep, path: &str) -> Option<i32> {
        plan.check(step, Path::new(path)).err().map(|e| e.raw_os_error().expect("an OS error"))
    }

    #[test]
    fn an_empty_plan_injects_nothing() {
        let plan = FaultPlan::default();
        for step in WriteStep::ALL {
            assert_eq!(fails(&plan, step, "/d/1_2_3/4.seg"), None);
        }
        assert_eq!(plan.clear(), 0);
    }

    #[test]
    fn a_plan_fails_only_matching_writes_and_counts_down() {
        let plan = FaultPlan::default();
        plan.set(Some(WriteStep::Fsync), FaultFiles::Manifest, 0, libc::ENOSPC, 2);
        assert_eq!(fails(&plan, WriteStep::Write, "/d/1_2_3/manifest"), None, "another step");
        assert_eq!(fails(&plan, WriteStep::Fsync, "/d/1_2_3/4.seg"), None, "another kind of file");
        assert_eq!(fails(&plan, WriteStep::Fsync, &format!("/d/1_2_3/{MANIFEST_FILE}")), Some(libc::ENOSPC));
        assert_eq!(fails(&plan, WriteStep::Fsync, &format!("/d/1_2_9/{MANIFEST_FILE}")), Some(libc::ENOSPC));
        assert_eq!(fails(&plan, WriteStep::Fsync, &format!("/d/1_2_3/{MANIFEST_FILE}")), None, "budget spent");
        assert_eq!(plan.clear(), 2);
    }

    #[test]
    fn a_plan_can_target_one_index_and_every_step_until_cleared() {
        let plan = FaultPlan::default();
        plan.set(None, FaultFiles::Any, 3, libc::EIO, -1);
        for step in WriteStep::ALL {
            assert_eq!(fails(&plan, step, "/d/1_2_3/4.seg"), Some(libc::EIO));
            assert_eq!(fails(&plan, step, "/d/1_2_33/4.seg"), None, "another index");
        }
        assert_eq!(plan.clear(), 5);
        assert_eq!(fails(&plan, WriteStep::Write, "/d/1_2_3/4.seg"), None, "cleared");
    }

    #[test]
    fn settles_fail_only_under_a_plan_that_names_the_status_pages() {
        let plan = FaultPlan::default();
        let settle = format!("/d/1_2_3/{STATUS_PAGES}");
        plan.set(None, FaultFiles::Any, 0, libc::EIO, -1);
        assert_eq!(fails(&plan, WriteStep::Write, &settle), None, "`any` means files, not settles");
        assert_eq!(fails(&plan, WriteStep::Write, "/d/1_2_3/4.seg"), Some(libc::EIO));
        plan.set(Some(WriteStep::Write), FaultFiles::Status, 3, libc::EIO, 1);
        assert_eq!(fails(&plan, WriteStep::Write, "/d/1_2_3/4.seg"), None, "a file, not a settle");
        assert_eq!(fails(&plan, WriteStep::Write, &format!("/d/1_2_33/{STATUS_PAGES}")), None, "another index");
        assert_eq!(fails(&plan, WriteStep::Write, &settle), Some(libc::EIO));
        assert_eq!(fails(&plan, WriteStep::Write, &settle), None, "budget spent");
        assert_eq!(FaultFiles::from_name("status"), Some(FaultFiles::Status));
    }

    #[test]
    fn names_parse() {
        assert_eq!(FaultFiles::from_name("bitmap"), Some(FaultFiles::Bitmap));
        assert_eq!(FaultFiles::from_name("segments"), None);
        assert_eq!(errno_from_name("EIO"), Some(libc::EIO));
        assert_eq!(errno_from_name("EPERM"), None);
        assert_eq!(FaultFiles::of_path(Path::new("/d/x/4.del.2")), FaultFiles::Bitmap);
        assert_eq!(parse_fault("any", "any", "EIO"), Ok((None, FaultFiles::Any, libc::EIO)));
        assert_eq!(
            parse_fault("fsync", "manifest", "ENOSPC"),
            Ok((Some(WriteStep::Fsync), FaultFiles::Manifest, libc::ENOSPC))
        );
        let refused = [("sync", "any", "EIO"), ("any", "segments", "EIO"), ("any", "any", "EPERM"), ("x", "y", "z")];
        let messages: Vec<String> =
            refused.iter().map(|&(a, b, c)| parse_fault(a, b, c).unwrap_err().to_string()).collect();
        assert_eq!(
            messages,
            [
                "unknown write step \"sync\"",
                "unknown file kind \"segments\"",
                "unknown error \"EPERM\"",
                "unknown write step \"x\""
            ]
        );
    }
}
