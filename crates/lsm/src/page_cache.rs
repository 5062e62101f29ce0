//! Promoting segment files into the page cache (the memory every process's mmap shares) after a
//! restart, in the background: the index answers at once through mmap, reading pages on demand,
//! and gets faster as the kernel's read-ahead proceeds; no query waits for it.

use std::os::fd::AsRawFd;
use std::path::Path;

use crate::manifest::IndexFileName;

/// Asks the kernel to read every segment file of the index directories under `root` into the
/// page cache, asynchronously (`POSIX_FADV_WILLNEED`); returns the bytes requested. Unreadable
/// directories and files are skipped; a missing `root` requests nothing.
pub fn promote_segments(root: &Path) -> u64 {
    let mut bytes = 0;
    let Ok(dirs) = std::fs::read_dir(root) else {
        return 0;
    };
    for dir in dirs.flatten() {
        let Ok(files) = std::fs::read_dir(dir.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name();
            if !matches!(IndexFileName::parse(&name.to_string_lossy()), Some(IndexFileName::Segment { .. })) {
                continue;
            }
            if let Ok(opened) = std::fs::File::open(file.path()) {
                bytes += opened.metadata().map_or(0, |m| m.len());
                // SAFETY: posix_fadvise only schedules asynchronous read-ahead on a descriptor
                // we own for the duration of the call.
                unsafe { libc::posix_fadvise(opened.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) };
            }
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_segment_files_of_index_directories_are_promoted() {
        let root = std::env::temp_dir().join(format!("strata-promote-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(promote_segments(&root), 0, "no root");
        for (path, len) in [
            ("1_2_3/4.seg", 100),
            ("1_2_3/5.seg", 20),
            ("1_2_3/5.del.1", 7),
            ("1_2_3/manifest", 9),
            ("1_2_9/6.seg", 3),
            ("1_2_9/6.seg.tmp", 50),
            ("7.seg", 11),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, vec![0u8; len]).unwrap();
        }
        // Segments inside index directories only: 100 + 20 + 3.
        assert_eq!(promote_segments(&root), 123);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
