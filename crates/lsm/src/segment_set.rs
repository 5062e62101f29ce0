//! [`SegmentSet`]: the open segments of one manifest generation, each with its deletion bitmap.
//!
//! Segments are opened by mapping their files (the page cache is shared by every process, so
//! memory does not multiply with readers). Opening a newer generation reuses the segments whose
//! file and bitmap generation did not change. Header and table checksums are verified on open;
//! section checksums were verified once by the writer, not by every reader.
//!
//! A process keeps its sets in a [`SetCache`] (one per index) and its open files mapped for as
//! long as a set is cached; [`CacheOwners`] says which cached entries belong to which relation,
//! so that the host drops them when the relation is dropped or changed (PostgreSQL's relation
//! cache invalidations), and the space of a dropped index's files comes back.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Arc;

use strata_engine::bitset::Bitset;

use crate::dead_rows::{DeadRowHints, SkippedRows};
use crate::files::{FileError, IndexFiles};
use crate::manifest::SegmentEntry;
use crate::segment_type::SegmentType;

/// One open segment with its deletion bitmap.
pub struct OpenSegment<S> {
    /// The manifest entry it was opened from.
    pub entry: SegmentEntry,
    /// The mapped segment.
    pub segment: S,
    /// Rows deleted by VACUUM (`None`: nothing deleted).
    pub deleted: Option<Bitset>,
    /// Rows this process found dead before VACUUM did ([`crate::dead_rows`]).
    pub hints: DeadRowHints,
}

impl<S> OpenSegment<S> {
    /// An open segment with its deletion bitmap and no hinted rows.
    pub fn new(entry: SegmentEntry, segment: S, deleted: Option<Bitset>) -> Self {
        Self { entry, segment, deleted, hints: DeadRowHints::default() }
    }

    /// Rows not deleted (hinted rows count as live: only VACUUM's counts decide merges and
    /// shares).
    pub fn live_rows(&self) -> u64 {
        self.entry.rows - self.deleted.as_ref().map_or(0, |d| d.count() as u64)
    }

    /// The rows searches skip: deleted ones and those hinted dead in this process.
    pub fn skipped_rows(&self) -> SkippedRows<'_> {
        self.hints.skipped(self.deleted.as_ref())
    }

    /// Hints `rows` (segment rows) dead in this process ([`DeadRowHints::hint`]); returns how
    /// many were not skipped before.
    pub fn hint_dead(&self, rows: &[usize]) -> usize {
        self.hints.hint(self.deleted.as_ref(), self.entry.rows as usize, rows)
    }
}

/// The open segments of one manifest generation, in manifest order.
pub struct SegmentSet<S> {
    /// The manifest generation they belong to.
    pub generation: u64,
    /// The segments.
    pub segments: Vec<Arc<OpenSegment<S>>>,
    /// The manifest's `group_generations` (a node deriving its index from the membership log).
    pub group_generations: std::collections::BTreeMap<u64, u64>,
}

impl<S: SegmentType> SegmentSet<S> {
    /// Opens the segments the current manifest lists, reusing those of `previous` that are
    /// unchanged (same segment, same deletion generation).
    pub fn open(files: &IndexFiles<S>, previous: Option<&SegmentSet<S>>) -> Result<Self, FileError> {
        let manifest = files.manifest()?;
        let mut segments = Vec::with_capacity(manifest.segments.len());
        for entry in &manifest.segments {
            let reuse = previous.and_then(|p| {
                p.segments
                    .iter()
                    .find(|s| s.entry.id == entry.id && s.entry.deletion_generation == entry.deletion_generation)
            });
            if let Some(open) = reuse {
                segments.push(Arc::clone(open));
            } else {
                let segment = files.open_segment(entry, false)?;
                let deleted = files.deletions(entry)?;
                segments.push(Arc::new(OpenSegment::new(entry.clone(), segment, deleted)));
            }
        }
        Ok(Self { generation: manifest.generation, segments, group_generations: manifest.group_generations })
    }
}

impl<S> SegmentSet<S> {
    /// Whether a segment of the set holds the rows of memtable `segment_id` (flushed into it, or
    /// into one of the segments a merge made it part of).
    pub fn covers(&self, segment_id: u64) -> bool {
        self.segments.iter().any(|s| s.entry.covers.contains(&segment_id))
    }

    /// Rows not deleted, in every segment.
    pub fn live_rows(&self) -> u64 {
        self.segments.iter().map(|s| s.live_rows()).sum()
    }
}

/// A process's open segment sets, one per index (`K`: the index's key), each kept while it is
/// as new as the generation readers ask for.
///
/// Guarantees: [`SetCache::get`] returns the cached set of a key when its generation is at least
/// the one asked for; otherwise it opens the manifest's current set, reusing the cached set's
/// unchanged segments ([`SegmentSet::open`]), and caches it; an error leaves the cache as it was.
pub struct SetCache<K, S> {
    sets: HashMap<K, Arc<SegmentSet<S>>>,
}

impl<K, S> Default for SetCache<K, S> {
    fn default() -> Self {
        Self { sets: HashMap::new() }
    }
}

impl<K: Eq + Hash, S: SegmentType> SetCache<K, S> {
    /// The set of index `key` at manifest generation `generation` or newer, opened from `files`
    /// when the cached one is older (or there is none).
    pub fn get(
        &mut self,
        key: K,
        generation: u64,
        files: impl FnOnce() -> IndexFiles<S>,
    ) -> Result<Arc<SegmentSet<S>>, FileError> {
        let previous = self.sets.get(&key);
        if let Some(cached) = previous.filter(|cached| cached.generation >= generation) {
            return Ok(Arc::clone(cached));
        }
        let set = Arc::new(SegmentSet::open(&files(), previous.map(|p| &**p))?);
        self.sets.insert(key, Arc::clone(&set));
        Ok(set)
    }

    /// Forgets the set of `key` (its files were recreated).
    pub fn forget(&mut self, key: &K) {
        self.sets.remove(key);
    }

    /// Forgets every set (their files stay mapped only while a reader still holds the set).
    pub fn clear(&mut self) {
        self.sets.clear();
    }
}

/// Which relation (by OID) each key of a process's caches belongs to, so that the host can drop
/// the cached entries of a relation when it is invalidated.
///
/// Guarantees: [`CacheOwners::invalidated`] returns every key noted for the relation since it
/// last returned it (for `None`, every key noted), each once, and forgets them.
#[derive(Debug)]
pub struct CacheOwners<K> {
    by_relation: HashMap<u32, HashSet<K>>,
}

impl<K> Default for CacheOwners<K> {
    fn default() -> Self {
        Self { by_relation: HashMap::new() }
    }
}

impl<K: Eq + Hash + Clone> CacheOwners<K> {
    /// Notes that the cached entries of `key` belong to relation `relation`.
    pub fn note(&mut self, relation: u32, key: &K) {
        let keys = self.by_relation.entry(relation).or_default();
        if !keys.contains(key) {
            keys.insert(key.clone());
        }
    }

    /// The keys whose entries to drop because relation `relation` was invalidated (`None`: every
    /// relation, as after a reset of the whole relation cache), forgotten here.
    pub fn invalidated(&mut self, relation: Option<u32>) -> Vec<K> {
        match relation {
            Some(relation) => {
                self.by_relation.remove(&relation).map(|keys| keys.into_iter().collect()).unwrap_or_default()
            }
            None => self.by_relation.drain().flat_map(|(_, keys)| keys).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use strata_engine::metric::Metric;
    use strata_engine::segment::{IndexKind, Segment};
    use strata_engine::store::ElementKind;

    use super::*;
    use crate::directory::memory::MemoryDirectory;
    use crate::directory::Directory;
    use crate::manifest::{segment_file_name, IndexConfig};
    use crate::segment_type::BuildWork;
    use crate::vector::{VectorFiles, VectorRows};

    fn publish(files: &VectorFiles, id: u64, tids: &[u64]) -> u64 {
        let config = files.manifest().unwrap().config;
        let rows = VectorRows {
            ids: tids.to_vec(),
            vectors: tids.iter().flat_map(|&t| [t as f32, 1.0]).collect::<Vec<f32>>().into(),
            filters: Vec::new(),
        };
        let built = Segment::build(files, &config, rows, &BuildWork::new(1)).unwrap();
        let mut generation = 0;
        files.publish_segment(&built, id, Vec::new(), 0, |m| generation = m.generation).unwrap();
        generation
    }

    #[test]
    fn a_cached_set_serves_older_generations_and_a_newer_one_reopens_only_what_changed() {
        let config = IndexConfig {
            dims: 2,
            metric: Metric::L2,
            element: ElementKind::F32,
            kind: IndexKind::Flat.into(),
            memtable_rows: 8,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        };
        let directory = Arc::new(MemoryDirectory::new());
        let files = VectorFiles::new(directory.clone());
        files.create(config).unwrap();
        let first = publish(&files, 10, &[1, 2, 3]);
        let mut cache = SetCache::default();
        let set = cache.get("a", first, || files.clone()).unwrap();
        assert_eq!((set.generation, set.segments.len(), set.live_rows()), (first, 1, 3));
        let second = publish(&files, 11, &[4, 5]);
        let again = cache.get("a", first, || unreachable!("the cached set is new enough")).unwrap();
        assert!(Arc::ptr_eq(&set, &again));
        let newer = cache.get("a", second, || files.clone()).unwrap();
        assert_eq!((newer.generation, newer.segments.len(), newer.live_rows()), (second, 2, 5));
        assert!(Arc::ptr_eq(&set.segments[0], &newer.segments[0]), "the unchanged segment is reused");
        // An error (a segment file gone) leaves the cache as it was.
        let third = publish(&files, 12, &[6]);
        directory.remove(&segment_file_name(12)).unwrap();
        assert!(cache.get("a", third, || files.clone()).is_err());
        assert!(Arc::ptr_eq(&cache.get("a", second, || unreachable!()).unwrap(), &newer));
        cache.forget(&"a");
        let mut opened = false;
        let _ = cache.get("a", 0, || {
            opened = true;
            files.clone()
        });
        assert!(opened, "a forgotten set is opened again, whatever the generation asked for");
    }

    #[test]
    fn cache_owners_return_a_relations_keys_once() {
        let mut owners = CacheOwners::default();
        owners.note(10, &"a");
        owners.note(10, &"a");
        owners.note(10, &"b");
        owners.note(20, &"c");
        assert!(owners.invalidated(Some(30)).is_empty(), "no entries of another relation");
        let mut keys = owners.invalidated(Some(10));
        keys.sort_unstable();
        assert_eq!(keys, ["a", "b"]);
        assert!(owners.invalidated(Some(10)).is_empty(), "forgotten");
        owners.note(10, &"a");
        let mut all = owners.invalidated(None);
        all.sort_unstable();
        assert_eq!(all, ["a", "c"]);
        assert!(owners.invalidated(None).is_empty());
    }
}
