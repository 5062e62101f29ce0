//! Which files of an index directory are garbage, and when they may be deleted.
//!
//! An index directory holds the manifest, the segments it lists (`{id}.seg`) and their current
//! deletion bitmaps (`{id}.del.{g}`). Anything else that pg_strata writes is garbage once no
//! reader can need it: inputs replaced by a merge, bitmaps replaced by VACUUM, files of a merge or
//! flush that failed or was interrupted by a crash, temporary files of interrupted writes. A
//! backend may still read segments through a manifest it loaded just before a change, so garbage
//! is deleted only after it has been seen unlisted for a grace period.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::directory::fs::FsDirectory;
use crate::directory::TMP_SUFFIX;
use crate::manifest::{IndexConfig, IndexFileName, Manifest, MANIFEST_FILE};

/// The id of the segment a pg_strata file name belongs to (an [`IndexFileName`], either with the
/// temporary suffix), or `None` for a name pg_strata does not write.
pub fn segment_id_of(name: &str) -> Option<u64> {
    IndexFileName::parse(name.strip_suffix(TMP_SUFFIX).unwrap_or(name)).map(IndexFileName::segment_id)
}

/// The names among `names` that are garbage: pg_strata files (see [`segment_id_of`]) that
/// `manifest` does not list, except those of segments in `in_flight` (being built or written
/// right now, not yet published). The manifest itself and unknown names are never garbage.
pub fn unlisted<'n>(manifest: &Manifest, names: impl IntoIterator<Item = &'n str>, in_flight: &[u64]) -> Vec<String> {
    let mut listed: HashSet<String> = HashSet::new();
    for entry in &manifest.segments {
        listed.insert(entry.file_name());
        if let Some(name) = entry.deletion_file_name() {
            listed.insert(name);
        }
    }
    names
        .into_iter()
        .filter(|name| *name != MANIFEST_FILE && !listed.contains(*name))
        .filter(|name| segment_id_of(name).is_some_and(|id| !in_flight.contains(&id)))
        .map(str::to_owned)
        .collect()
}

/// Remembers when each garbage file was first seen, and says which have waited out the grace
/// period.
///
/// Guarantees: a file is returned by [`GraceTracker::expired`] only after it was reported garbage
/// by every [`GraceTracker::observe`] call for at least `grace` (a file that is listed again, or
/// that disappears, is forgotten and starts over).
#[derive(Debug, Default, Clone)]
pub struct GraceTracker<K> {
    first_seen: HashMap<K, Instant>,
}

impl<K: Eq + std::hash::Hash + Clone> GraceTracker<K> {
    /// Records that `garbage` is the whole current garbage set of one scope (`in_scope` says which
    /// keys belong to that scope; tracked keys of the scope absent from `garbage` are forgotten).
    pub fn observe(&mut self, garbage: &[K], in_scope: impl Fn(&K) -> bool, now: Instant) {
        let current: HashSet<&K> = garbage.iter().collect();
        self.first_seen.retain(|key, _| !in_scope(key) || current.contains(key));
        for key in garbage {
            self.first_seen.entry(key.clone()).or_insert(now);
        }
    }

    /// The keys seen as garbage for at least `grace`; they are forgotten (the caller deletes them).
    pub fn expired(&mut self, grace: Duration, now: Instant) -> Vec<K> {
        self.expired_where(grace, now, |_| true)
    }

    /// [`GraceTracker::expired`] restricted to the keys of one scope.
    pub fn expired_where(&mut self, grace: Duration, now: Instant, in_scope: impl Fn(&K) -> bool) -> Vec<K> {
        let done: Vec<K> = self
            .first_seen
            .iter()
            .filter(|(key, &seen)| in_scope(key) && now.saturating_duration_since(seen) >= grace)
            .map(|(key, _)| key.clone())
            .collect();
        for key in &done {
            self.first_seen.remove(key);
        }
        done
    }

    /// Forgets every key of a scope (an index that was dropped).
    pub fn forget(&mut self, in_scope: impl Fn(&K) -> bool) {
        self.first_seen.retain(|key, _| !in_scope(key));
    }

    /// Keeps only the keys `keep` accepts.
    pub fn retain_scopes(&mut self, keep: impl Fn(&K) -> bool) {
        self.first_seen.retain(|key, _| keep(key));
    }
}

/// One sweep of the index directory `dir` on the real file system: its garbage (as [`unlisted`]
/// says against the manifest there, sparing the segments in `in_flight`) is observed in
/// `tracker`, and the files garbage for at least `grace` are deleted. A directory without a
/// readable manifest is left alone. The caller holds the index's manifest lock, so that no file is
/// published between listing and deleting.
pub fn sweep_directory(
    tracker: &mut GraceTracker<PathBuf>,
    dir: &Path,
    in_flight: &[u64],
    grace: Duration,
    now: Instant,
) {
    let Ok(Some(manifest)) = Manifest::<IndexConfig>::load(&FsDirectory::new(dir)) else { return };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let names: Vec<String> = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    let garbage: Vec<PathBuf> =
        unlisted(&manifest, names.iter().map(String::as_str), in_flight).iter().map(|n| dir.join(n)).collect();
    let in_dir = |p: &PathBuf| p.starts_with(dir);
    tracker.observe(&garbage, in_dir, now);
    for path in tracker.expired_where(grace, now, in_dir) {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_engine::metric::Metric;
    use strata_engine::segment::IndexKind;
    use strata_engine::store::ElementKind;

    use crate::manifest::{IndexConfig, SegmentEntry};

    fn entry(id: u64, deletion_generation: u64) -> SegmentEntry {
        SegmentEntry { id, covers: vec![], rows: 10, deleted: 0, deletion_generation, bytes: 100 }
    }

    #[test]
    fn files_the_manifest_does_not_list_are_garbage_unless_in_flight_or_unknown() {
        let mut manifest = Manifest::new(IndexConfig {
            dims: 3,
            metric: Metric::L2,
            element: ElementKind::F32,
            kind: IndexKind::Flat.into(),
            memtable_rows: 100,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        });
        manifest.segments = vec![entry(3, 0), entry(5, 2)];
        let names = [
            "manifest",
            "manifest.tmp",
            "3.seg",
            "5.seg",
            "5.del.2",
            "5.del.1",
            "4.seg",
            "4.seg.tmp",
            "9.seg",
            "9.seg.tmp",
            "6.del.1",
            "notes.txt",
            "x.seg",
            "7.del.x",
        ];
        let mut garbage = unlisted(&manifest, names, &[9]);
        garbage.sort();
        assert_eq!(garbage, ["4.seg", "4.seg.tmp", "5.del.1", "6.del.1"]);
        assert_eq!(segment_id_of("12.del.3.tmp"), Some(12));
        assert_eq!(segment_id_of("manifest"), None);
    }

    #[test]
    fn garbage_goes_only_after_the_grace_period_and_a_relisted_file_starts_over() {
        let mut tracker = GraceTracker::default();
        let start = Instant::now();
        let grace = Duration::from_mins(1);
        let all = |_: &&str| true;
        tracker.observe(&["1.seg", "2.seg"], all, start);
        assert!(tracker.expired(grace, start + Duration::from_secs(59)).is_empty());
        // 2.seg is listed again (it was being published), then reported once more.
        tracker.observe(&["1.seg"], all, start + Duration::from_secs(30));
        tracker.observe(&["1.seg", "2.seg"], all, start + Duration::from_secs(40));
        assert_eq!(tracker.expired(grace, start + Duration::from_mins(1)), ["1.seg"]);
        assert!(tracker.expired(grace, start + Duration::from_secs(99)).is_empty());
        assert_eq!(tracker.expired(grace, start + Duration::from_secs(100)), ["2.seg"]);
        // Keys of another scope are left alone by an observation.
        tracker.observe(&["a/1.seg"], |k: &&str| k.starts_with("a/"), start);
        tracker.observe(&[], |k: &&str| k.starts_with("b/"), start);
        assert!(tracker.expired_where(Duration::ZERO, start, |k: &&str| k.starts_with("b/")).is_empty());
        assert_eq!(tracker.expired(Duration::ZERO, start), ["a/1.seg"]);
        tracker.observe(&["c/1.seg"], all, start);
        tracker.forget(|k: &&str| k.starts_with("c/"));
        assert!(tracker.expired(Duration::ZERO, start).is_empty());
        tracker.observe(&["d/1.seg", "e/1.seg"], all, start);
        tracker.retain_scopes(|k: &&str| k.starts_with("e/"));
        assert_eq!(tracker.expired(Duration::ZERO, start), ["e/1.seg"]);
    }

    #[test]
    fn sweeping_a_directory_deletes_unlisted_files_after_the_grace_period() {
        let dir = std::env::temp_dir().join(format!("strata-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut manifest = Manifest::new(IndexConfig {
            dims: 3,
            metric: Metric::L2,
            element: ElementKind::F32,
            kind: IndexKind::Flat.into(),
            memtable_rows: 100,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        });
        manifest.segments = vec![entry(3, 0)];
        manifest.next_id = 10;
        let mut tracker = GraceTracker::default();
        let start = Instant::now();
        let grace = Duration::from_mins(1);
        // No manifest yet: nothing is garbage.
        std::fs::write(dir.join("4.seg"), b"x").unwrap();
        sweep_directory(&mut tracker, &dir, &[], Duration::ZERO, start);
        assert!(dir.join("4.seg").exists());
        manifest.store(&FsDirectory::new(&dir)).unwrap();
        for name in ["3.seg", "5.seg", "notes.txt"] {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        sweep_directory(&mut tracker, &dir, &[5], grace, start);
        sweep_directory(&mut tracker, &dir, &[5], grace, start + Duration::from_secs(59));
        assert!(dir.join("4.seg").exists(), "within the grace period");
        sweep_directory(&mut tracker, &dir, &[5], grace, start + grace);
        let mut left: Vec<String> =
            std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, ["3.seg", "5.seg", "manifest", "notes.txt"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
