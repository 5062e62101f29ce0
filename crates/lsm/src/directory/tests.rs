//! Tests of the directory layer: the crash-safe write over both directories, fault hooks of the
//! real one, and the crash semantics of the in-memory one.

use std::cell::Cell;
use std::io;
use std::path::Path;

use proptest::prelude::*;
use strata_engine::format::{encode, FormatError};

use super::faults::{set_fault_hook, WriteStep};
use super::fs::FsDirectory;
use super::memory::{Fault, MemoryDirectory};
use super::{is_disk_full, read_file, write_file, Directory, TMP_SUFFIX};

const SECTIONS: [(u32, &[u8]); 2] = [(7, b"payload"), (8, &[3u8; 300])];

thread_local! {
    /// The step that fails on this thread, and with which raw OS error.
    static FAILING: Cell<Option<(WriteStep, i32)>> = const { Cell::new(None) };
}

fn hook(step: WriteStep, _path: &Path) -> io::Result<()> {
    match FAILING.get() {
        Some((failing, errno)) if failing == step => Err(io::Error::from_raw_os_error(errno)),
        _ => Ok(()),
    }
}

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

#[test]
fn a_failed_step_on_disk_reports_its_error_and_leaves_no_temporary_file() {
    set_fault_hook(hook);
    let path = std::env::temp_dir().join(format!("strata-directory-{}", std::process::id()));
    std::fs::create_dir_all(&path).unwrap();
    let dir = FsDirectory::new(&path);
    std::fs::write(path.join(format!("stale{TMP_SUFFIX}")), b"torn garbage from a crash").unwrap();
    write_file(&dir, "stale", &SECTIONS).unwrap();
    assert!(!dir.exists(&format!("stale{TMP_SUFFIX}")).unwrap(), "a stale temporary file is replaced");
    assert_eq!(std::fs::read(path.join("stale")).unwrap(), encode(&SECTIONS).unwrap());
    for step in WriteStep::ALL {
        for errno in [ENOSPC, EIO] {
            let name = format!("{}-{errno}.seg", step.name());
            FAILING.set(Some((step, errno)));
            let err = write_file(&dir, &name, &SECTIONS).unwrap_err();
            FAILING.set(None);
            assert!(err.to_string().contains(&io::Error::from_raw_os_error(errno).to_string()), "{step:?}: {err}");
            assert_eq!(is_disk_full(&err), errno == ENOSPC, "{step:?}: {err}");
            assert_eq!(matches!(err, FormatError::Unsynced { .. }), step == WriteStep::FsyncDir);
            assert!(!dir.exists(&format!("{name}{TMP_SUFFIX}")).unwrap(), "{step:?} left its temporary file");
            // Only a failed directory fsync comes after the rename: the file is then complete.
            let placed = dir.exists(&name).unwrap();
            assert_eq!(placed, step == WriteStep::FsyncDir, "{step:?}");
            if placed {
                read_file(&dir, &name, true).unwrap();
            }
            // Once the fault clears, the same write succeeds.
            write_file(&dir, &name, &SECTIONS).unwrap();
            assert_eq!(read_file(&dir, &name, true).unwrap().section(7).unwrap(), b"payload");
        }
    }
    let mut listed = dir.list().unwrap();
    listed.sort();
    assert_eq!(listed.len(), 11, "{listed:?}");
    std::fs::remove_dir_all(&path).unwrap();
    assert_eq!(WriteStep::from_name("fsync_dir"), Some(WriteStep::FsyncDir));
    assert_eq!(WriteStep::try_from(3u8), Ok(WriteStep::Fsync));
}

#[test]
fn memory_directory_keeps_only_synced_state_at_a_crash() {
    let dir = MemoryDirectory::new();
    // Written, synced, renamed, but the directory not synced: the crash undoes the rename.
    let mut file = dir.create("a.tmp").unwrap();
    file.write_all(b"abc").unwrap();
    file.sync().unwrap();
    drop(file);
    dir.rename("a.tmp", "a").unwrap();
    dir.crash(|_, _| 0);
    assert_eq!(dir.list().unwrap(), Vec::<String>::new());
    // Written and named durably but not synced: a crash may keep a prefix.
    let mut file = dir.create("b").unwrap();
    file.write_all(b"0123456789").unwrap();
    drop(file);
    dir.sync_dir("b").unwrap();
    dir.crash(|_, len| len / 2);
    assert_eq!(dir.read("b").unwrap(), b"01234");
    // The whole protocol survives.
    write_file(&dir, "c", &SECTIONS).unwrap();
    dir.crash(|_, _| 0);
    assert_eq!(read_file(&dir, "c", true).unwrap().section(7).unwrap(), b"payload");
}

#[test]
fn a_planned_crash_fails_every_later_call_until_the_restart() {
    let dir = MemoryDirectory::new();
    dir.plan(dir.calls() + 2, Fault::Crash);
    assert!(write_file(&dir, "x", &SECTIONS).is_err());
    assert!(dir.is_dead());
    assert!(dir.list().is_err());
    dir.crash(|_, _| 0);
    assert!(!dir.is_dead());
    assert_eq!(dir.list().unwrap(), Vec::<String>::new());
    dir.plan(dir.calls(), Fault::Error(io::ErrorKind::StorageFull));
    let err = write_file(&dir, "x", &SECTIONS).unwrap_err();
    assert!(is_disk_full(&err), "{err}");
    assert_eq!(dir.delivered(), 2);
}

proptest! {
    /// Whatever call fails or crashes, a name written with `write_file` holds afterwards (and
    /// after a crash) either its previous complete file or the new complete one.
    #[test]
    fn write_file_is_all_or_nothing(
        at in 0u64..12,
        crash in any::<bool>(),
        error_is_full in any::<bool>(),
        torn in 0usize..2000,
        had_previous in any::<bool>(),
    ) {
        let dir = MemoryDirectory::new();
        let old: [(u32, &[u8]); 1] = [(1, b"old")];
        if had_previous {
            write_file(&dir, "f", &old).unwrap();
        }
        let kind = if error_is_full { io::ErrorKind::StorageFull } else { io::ErrorKind::Other };
        dir.plan(dir.calls() + at, if crash { Fault::Crash } else { Fault::Error(kind) });
        let result = write_file(&dir, "f", &SECTIONS);
        dir.crash(|_, len| torn.min(len));
        match read_file(&dir, "f", true) {
            Ok(file) => {
                let new = file.section(7).is_some();
                prop_assert!(new || (had_previous && file.section(1) == Some(b"old".as_slice())));
                if result.is_ok() {
                    prop_assert!(new, "a successful write survives a crash");
                }
            }
            Err(_) => prop_assert!(!had_previous && result.is_err(), "no file only when none was complete"),
        }
    }
}
