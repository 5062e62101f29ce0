//! [`IndexFiles`]: the files of one index (segments, deletion bitmaps, the manifest) over a
//! [`Directory`], and the publishing protocol every writer follows.
//!
//! Publishing order (CREATE INDEX, flushes, merges, VACUUM, recovery):
//! 1. write the new file (`{id}.seg` or `{id}.del.{g}`) crash-safely ([`write_file`]);
//! 2. with the index's manifest lock held by the caller, rewrite the manifest (new generation)
//!    crash-safely ([`IndexFiles::update_manifest`]);
//! 3. the caller's `publish` callback makes the new generation visible to scans (pg_strata stores
//!    it in shared memory under its directory lock, together with any memtable state change), so
//!    scans see the old set or the new set, never a mix.
//!
//! A crash between steps leaves an unlisted file, which is garbage ([`crate::garbage`]).

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_engine::bitset::Bitset;
use strata_engine::format::FormatError;
use thiserror::Error;

use crate::directory::{read_file, write_file, Directory};
use crate::manifest::{deletion_file_name, segment_file_name, Manifest, ManifestError, SegmentEntry};
use crate::segment_type::{OpenError, SegmentType};

/// Section tag of a deletion bitmap file (little-endian `u64` words, bit `i` = row `i`).
pub const TAG_DELETIONS: u32 = 0x4445_4C31;

/// Why an operation on an index's files failed.
#[derive(Debug, Error)]
pub enum FileError {
    /// A file could not be written or read (I/O error, damaged container), or a store renamed
    /// the new file into place but could not sync its directory.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The manifest could not be read or written.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The index's directory has no manifest.
    #[error("{0}: manifest missing")]
    ManifestMissing(String),
    /// A segment file's contents are not a valid segment.
    #[error("{file}: {source}")]
    Segment {
        /// The file.
        file: String,
        /// What is wrong.
        source: OpenError,
    },
    /// A file's contents contradict the manifest.
    #[error("{0}")]
    Inconsistent(String),
    /// Building a segment failed.
    #[error("building a {kind} segment: {message}")]
    Build {
        /// The kind being built.
        kind: &'static str,
        /// The builder's error.
        message: String,
    },
    /// The work was cancelled (shutdown); nothing was published.
    #[error("cancelled")]
    Cancelled,
}

impl FileError {
    /// Whether the disk was full (ENOSPC) somewhere in this error's chain.
    pub fn is_disk_full(&self) -> bool {
        crate::directory::is_disk_full(self)
    }

    /// Whether a manifest store renamed the new manifest into place but could not sync its
    /// directory: every reader sees the new manifest, which may not be durable and cannot be
    /// taken back (pg_strata PANICs, as PostgreSQL does when an fsync of its own files fails).
    pub fn is_unsynced_manifest(&self) -> bool {
        matches!(self, Self::Manifest(e) if e.is_unsynced())
    }
}

/// The files of one index whose segments are of type `S`, in its own [`Directory`].
pub struct IndexFiles<S> {
    dir: Arc<dyn Directory>,
    segments: PhantomData<fn() -> S>,
}

impl<S> Clone for IndexFiles<S> {
    fn clone(&self) -> Self {
        Self { dir: Arc::clone(&self.dir), segments: PhantomData }
    }
}

impl<S: SegmentType> IndexFiles<S> {
    /// The index whose files are in `dir`.
    pub fn new(dir: Arc<dyn Directory>) -> Self {
        Self { dir, segments: PhantomData }
    }

    /// The directory.
    pub fn directory(&self) -> &dyn Directory {
        &*self.dir
    }

    /// The manifest, `None` when there is none yet.
    pub fn load_manifest(&self) -> Result<Option<Manifest<S::Config>>, FileError> {
        Ok(Manifest::load(&*self.dir)?)
    }

    /// The manifest; an error when there is none.
    pub fn manifest(&self) -> Result<Manifest<S::Config>, FileError> {
        self.load_manifest()?.ok_or_else(|| FileError::ManifestMissing(self.dir.describe("")))
    }

    /// Stores the first manifest of a new index.
    pub fn create(&self, config: S::Config) -> Result<Manifest<S::Config>, FileError> {
        let manifest = Manifest::new(config);
        manifest.store(&*self.dir)?;
        Ok(manifest)
    }

    /// Opens the segment `entry` lists (mapped; section checksums verified when `verify`) and
    /// checks it against the entry.
    pub fn open_segment(&self, entry: &SegmentEntry, verify: bool) -> Result<S, FileError> {
        let name = entry.file_name();
        let file = read_file(&*self.dir, &name, verify)?;
        let segment = S::open(file).map_err(|source| FileError::Segment { file: self.dir.describe(&name), source })?;
        let rows = segment.ids().len();
        if rows as u64 != entry.rows {
            return Err(FileError::Inconsistent(format!(
                "segment {} holds {rows} rows, the manifest says {}",
                entry.id, entry.rows
            )));
        }
        Ok(segment)
    }

    /// The deletion bitmap `entry` lists for its `rows` rows (`None`: nothing deleted).
    pub fn deletions(&self, entry: &SegmentEntry) -> Result<Option<Bitset>, FileError> {
        let Some(name) = entry.deletion_file_name() else { return Ok(None) };
        let file = read_file(&*self.dir, &name, true)?;
        let bytes = file.require(TAG_DELETIONS)?;
        let words: Vec<u64> =
            bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        let rows = entry.rows as usize;
        Bitset::from_words(words, rows).map(Some).ok_or_else(|| {
            FileError::Inconsistent(format!("{}: deletion bitmap too short for {rows} rows", self.dir.describe(&name)))
        })
    }

    /// The deletion bitmap of `entry`, or an empty one.
    pub fn deletions_or_empty(&self, entry: &SegmentEntry) -> Result<Bitset, FileError> {
        Ok(self.deletions(entry)?.unwrap_or_else(|| Bitset::new(entry.rows as usize)))
    }

    /// Writes `built` as segment `id` (not yet listed); returns the file's length.
    pub fn write_segment(&self, id: u64, built: &S::Built) -> Result<u64, FileError> {
        let sections = S::sections(built);
        let refs: Vec<(u32, &[u8])> = sections.iter().map(|(tag, bytes)| (*tag, bytes.as_ref())).collect();
        Ok(write_file(&*self.dir, &segment_file_name(id), &refs)?)
    }

    /// Writes deletion bitmap generation `generation` of segment `id` (not yet listed).
    pub fn write_deletions(&self, id: u64, generation: u64, deleted: &Bitset) -> Result<(), FileError> {
        let bytes: Vec<u8> = deleted.words().iter().flat_map(|w| w.to_le_bytes()).collect();
        write_file(&*self.dir, &deletion_file_name(id, generation), &[(TAG_DELETIONS, &bytes)])?;
        Ok(())
    }

    /// Removes file `name`, ignoring errors (it is garbage; the sweeper retries what is left).
    pub fn remove_quietly(&self, name: &str) {
        let _ = self.dir.remove(name);
    }

    /// Step 2 of publishing: applies `change` to the manifest, raises its `next_id` to at least
    /// `next_id_floor` (and past every listed segment), stores it as the next generation, then
    /// calls `publish` with it. The caller holds the index's manifest lock.
    ///
    /// When the store fails nothing is published, except for an unsynced store
    /// ([`FileError::is_unsynced_manifest`]), after which the new manifest is in place.
    pub fn update_manifest(
        &self,
        change: impl FnOnce(&mut Manifest<S::Config>),
        next_id_floor: u64,
        publish: impl FnOnce(&Manifest<S::Config>),
    ) -> Result<Manifest<S::Config>, FileError> {
        let mut manifest = self.manifest()?;
        change(&mut manifest);
        let highest = manifest.segments.iter().map(|s| s.id + 1).max().unwrap_or(1);
        manifest.next_id = manifest.next_id.max(next_id_floor).max(highest);
        manifest.generation += 1;
        manifest.store(&*self.dir)?;
        publish(&manifest);
        Ok(manifest)
    }

    /// Writes `built` as segment `id` covering memtables `covers` and publishes it (steps 1–3).
    pub fn publish_segment(
        &self,
        built: &S::Built,
        id: u64,
        covers: Vec<u64>,
        next_id_floor: u64,
        publish: impl FnOnce(&Manifest<S::Config>),
    ) -> Result<SegmentEntry, FileError> {
        let bytes = self.write_segment(id, built)?;
        let entry = SegmentEntry { id, covers, rows: S::built_rows(built), deleted: 0, deletion_generation: 0, bytes };
        let pushed = entry.clone();
        self.update_manifest(move |manifest| manifest.segments.push(pushed), next_id_floor, publish)?;
        Ok(entry)
    }

    /// Writes a new generation of segment `id`'s deletion bitmap and publishes it.
    pub fn publish_deletions(
        &self,
        entry: &SegmentEntry,
        deleted: &Bitset,
        next_id_floor: u64,
        publish: impl FnOnce(&Manifest<S::Config>),
    ) -> Result<(), FileError> {
        let (id, generation, count) = (entry.id, entry.deletion_generation + 1, deleted.count() as u64);
        self.write_deletions(id, generation, deleted)?;
        self.update_manifest(
            |manifest| {
                if let Some(listed) = manifest.segments.iter_mut().find(|s| s.id == id) {
                    listed.deletion_generation = generation;
                    listed.deleted = count;
                }
            },
            next_id_floor,
            publish,
        )?;
        Ok(())
    }
}

/// The name of the directory of an index's files, from its storage key (database, tablespace,
/// relfilenode): `{db}_{spc}_{relnode}`.
pub fn index_dir_name(db: u32, spc: u32, relnode: u32) -> String {
    format!("{db}_{spc}_{relnode}")
}

/// The storage key `(db, spc, relnode)` of a directory name [`index_dir_name`] wrote; `None` for
/// other names.
pub fn parse_index_dir_name(name: &str) -> Option<(u32, u32, u32)> {
    let mut parts = name.split('_').map(str::parse::<u32>);
    let key = (parts.next()?.ok()?, parts.next()?.ok()?, parts.next()?.ok()?);
    parts.next().is_none().then_some(key)
}

/// The index directories under `root` (pg_strata's root directory), each with its storage key
/// `(db, spc, relnode)` parsed by [`parse_index_dir_name`]; other entries are left out, and a
/// root that cannot be read lists nothing.
pub fn index_dirs(root: &Path) -> Vec<((u32, u32, u32), PathBuf)> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| Some((parse_index_dir_name(&entry.file_name().to_string_lossy())?, entry.path())))
        .collect()
}

/// The file whose presence says an index directory's files were written on this node and kept
/// since: named like PostgreSQL's temporary files, so `pg_basebackup` does not copy it and
/// `pg_rewind` removes it. Without it, the files came from another node (a base backup, a
/// point-in-time restore, a rewind) and the index is derived in full from the membership log.
pub const NODE_MARKER: &str = "pgsql_tmp_strata_node";

/// Whether `dir` holds files written on this node (see [`NODE_MARKER`]).
pub fn node_marker_present(dir: &Path) -> bool {
    dir.join(NODE_MARKER).is_file()
}

/// Writes the node marker into `dir`. Not synced: losing it in a crash costs a full derivation,
/// never a wrong answer.
pub fn write_node_marker(dir: &Path) -> std::io::Result<()> {
    std::fs::write(dir.join(NODE_MARKER), b"")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn index_dir_names_round_trip(db: u32, spc: u32, relnode: u32) {
            prop_assert_eq!(parse_index_dir_name(&index_dir_name(db, spc, relnode)), Some((db, spc, relnode)));
        }
    }

    #[test]
    fn other_names_are_not_index_dirs() {
        for name in ["", "1_2", "1_2_3_4", "a_2_3", "1__3", "1_2_3.tmp", "4294967296_1_1", "pgsql_tmp"] {
            assert_eq!(parse_index_dir_name(name), None, "{name}");
        }
    }

    #[test]
    fn index_dirs_lists_only_index_directories_and_the_marker_says_this_node_wrote_them() {
        let root = std::env::temp_dir().join(format!("strata-index-dirs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert!(index_dirs(&root).is_empty(), "no root: nothing");
        for name in ["5_1663_16384", "7_0_1", "pgsql_tmp", "1_2"] {
            std::fs::create_dir_all(root.join(name)).unwrap();
        }
        let mut found = index_dirs(&root);
        found.sort();
        assert_eq!(found, [((5, 1663, 16384), root.join("5_1663_16384")), ((7, 0, 1), root.join("7_0_1"))]);
        let dir = root.join("7_0_1");
        assert!(!node_marker_present(&dir));
        write_node_marker(&dir).unwrap();
        assert!(node_marker_present(&dir));
        assert!(write_node_marker(&root.join("missing")).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
