//! Two nodes that hold the same groups settle to the same segments, byte for byte, whatever the
//! timing of their flushes and merges: what a standby needs to answer exactly like its primary.
//!
//! Both nodes receive the same history of groups (memtables of the primary, in the order it
//! opened them) and, at the same point, the same deletions. The "primary" publishes every group
//! as soon as it is complete, with its rows in the order writers claimed memtable slots, under
//! fresh segment ids, and merges after each publication. The "standby" publishes groups in bursts
//! and out of order (a flusher taking sealed memtables in slab order), with rows in log order,
//! under ids of its own, and lets a merge stay in flight while more groups arrive. Once both
//! have settled (the policy chooses nothing), their manifests must list segments of the same
//! groups with the same rows, and the segment files must be identical.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_engine::bitset::Bitset;
use strata_engine::metric::Metric;
use strata_engine::segment::{IndexKind, Segment};
use strata_engine::store::ElementKind;
use strata_lsm::directory::memory::MemoryDirectory;
use strata_lsm::files::IndexFiles;
use strata_lsm::follower::LOCAL_IDS;
use strata_lsm::manifest::{IndexConfig, SegmentEntry};
use strata_lsm::merge::{self, MergePlan, MergeWork, Prepared, NOTHING_PENDING};
use strata_lsm::segment_type::{BuildWork, SegmentType};
use strata_lsm::vector::VectorRows;

const DIMS: usize = 6;
const MEMTABLE_ROWS: usize = 24;

fn config(kind: IndexKind) -> IndexConfig {
    IndexConfig {
        dims: DIMS as u32,
        metric: Metric::L2,
        element: ElementKind::F32,
        kind: kind.into(),
        memtable_rows: MEMTABLE_ROWS as u32,
        rerank_from_heap: false,
        filters: strata_engine::filter::FilterSchema::default(),
    }
}

/// A group of the history: its id and its rows `(tid, vector)` in TID order.
struct Group {
    id: u64,
    rows: Vec<(u64, Vec<f32>)>,
}

/// Groups with increasing, gapped ids (the primary's merges take ids too); most are full
/// memtables, some partial (a flush that sealed a memtable early).
fn history(rng: &mut ChaCha8Rng, groups: usize) -> Vec<Group> {
    let mut id = 3;
    let mut tid = 1;
    (0..groups)
        .map(|_| {
            id += rng.gen_range(1..4);
            let rows = if rng.gen_bool(0.2) { rng.gen_range(1..MEMTABLE_ROWS) } else { MEMTABLE_ROWS };
            let rows = (0..rows)
                .map(|_| {
                    tid += rng.gen_range(1..3);
                    (tid, (0..DIMS).map(|_| rng.gen_range(-1.0f32..1.0)).collect())
                })
                .collect();
            Group { id, rows }
        })
        .collect()
}

/// A settled segment as compared: its groups (sorted), rows, deleted rows, file bytes and
/// deletion bitmap.
type Settled = (Vec<u64>, u64, u64, Vec<u8>, Option<Bitset>);

/// One node's index and its merge in flight.
struct Node {
    files: IndexFiles<Segment>,
    config: IndexConfig,
    next_id: u64,
    in_flight: Option<(MergePlan, Box<MergeWork<Segment>>)>,
}

impl Node {
    fn new(config: IndexConfig, first_id: u64) -> Self {
        let files = IndexFiles::new(Arc::new(MemoryDirectory::new()));
        files.create(config).unwrap();
        Self { files, config, next_id: first_id, in_flight: None }
    }

    /// Builds `rows` (in the order given) and publishes them under a fresh id, covering `group`.
    fn publish(&mut self, group: u64, rows: &[(u64, Vec<f32>)]) {
        let mut built_rows = VectorRows::default();
        for (tid, vector) in rows {
            built_rows.push_row(DIMS, *tid, vector);
        }
        let built = Segment::build(&self.files, &self.config, built_rows, &BuildWork::new(2)).unwrap();
        let id = self.take_id();
        self.files.publish_segment(&built, id, vec![group], self.next_id, |_| {}).unwrap();
    }

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    /// Prepares the policy's next merge with `pending` as the oldest group not yet published;
    /// returns whether there was one (a merge already in flight: nothing is prepared).
    fn start_merge(&mut self, pending: u64) -> bool {
        if self.in_flight.is_some() {
            return false;
        }
        let mut id = self.next_id;
        let prepared = merge::prepare(&self.files, MEMTABLE_ROWS as u32, pending, 1, || id, id + 1, |_| {}).unwrap();
        match prepared {
            Prepared::Nothing => false,
            Prepared::Dropped => true,
            Prepared::Build(plan, work) => {
                id += 1;
                self.next_id = id;
                self.in_flight = Some((plan, work));
                true
            }
        }
    }

    fn finish_merge(&mut self) {
        if let Some((plan, work)) = self.in_flight.take() {
            let rows = (*work).run().unwrap();
            merge::finish(&self.files, plan, rows, self.next_id, |_| {}).unwrap();
        }
    }

    /// Merges until the policy chooses nothing.
    fn settle(&mut self, pending: u64) {
        self.finish_merge();
        while self.start_merge(pending) {
            self.finish_merge();
        }
    }

    /// Marks the rows of `tids` deleted in every segment holding them.
    fn delete(&mut self, tids: &[u64]) {
        for entry in self.files.manifest().unwrap().segments {
            let segment = self.files.open_segment(&entry, false).unwrap();
            let mut deleted = self.files.deletions_or_empty(&entry).unwrap();
            let before = deleted.count();
            for (row, tid) in segment.ids().iter().enumerate() {
                if tids.contains(tid) {
                    deleted.insert(row);
                }
            }
            if deleted.count() > before {
                self.files.publish_deletions(&entry, &deleted, self.next_id, |_| {}).unwrap();
            }
        }
    }

    /// The settled segments in canonical order (by the oldest group they cover).
    fn settled(&self) -> Vec<Settled> {
        let mut segments: Vec<SegmentEntry> = self.files.manifest().unwrap().segments;
        segments.sort_by_key(|s| s.covers.iter().copied().min());
        segments
            .into_iter()
            .map(|s| {
                let bytes = self.files.directory().open_read(&s.file_name()).unwrap().as_bytes().to_vec();
                let deleted = self.files.deletions(&s).unwrap();
                let mut covers = s.covers.clone();
                covers.sort_unstable();
                (covers, s.rows, s.deleted, bytes, deleted)
            })
            .collect()
    }
}

/// Runs one history on both nodes and asserts they settle alike; returns how many segments and
/// merged segments the settled state had before the deletions (so that the caller can see
/// merges happened).
fn settle_alike(kind: IndexKind, seed: u64) -> (usize, usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let groups = history(&mut rng, 45);
    let mut primary = Node::new(config(kind), 1_000);
    let mut standby = Node::new(config(kind), LOCAL_IDS);

    // The primary: each group as soon as it is complete, rows in slot order (writers claim slots
    // out of TID order), a merge after each.
    for (at, group) in groups.iter().enumerate() {
        let mut rows = group.rows.clone();
        rows.shuffle(&mut rng);
        primary.publish(group.id, &rows);
        let pending = groups.get(at + 1).map_or(NOTHING_PENDING, |g| g.id);
        primary.settle(pending);
    }

    // The standby: bursts of up to five groups, each burst published in a random order (groups of
    // a burst not yet published are pending, and so is the rest of the history), rows in log
    // order; a merge is started at random moments and finished only later.
    let mut at = 0;
    while at < groups.len() {
        let burst = rng.gen_range(1..=5).min(groups.len() - at);
        let mut order: Vec<usize> = (at..at + burst).collect();
        order.shuffle(&mut rng);
        let mut published = Vec::new();
        for i in order {
            standby.publish(groups[i].id, &groups[i].rows);
            published.push(i);
            let pending = (at..groups.len())
                .filter(|j| !published.contains(j))
                .map(|j| groups[j].id)
                .min()
                .unwrap_or(NOTHING_PENDING);
            if rng.gen_bool(0.5) {
                standby.finish_merge();
            }
            if rng.gen_bool(0.6) {
                standby.start_merge(pending);
            }
        }
        at += burst;
    }
    standby.settle(NOTHING_PENDING);
    primary.settle(NOTHING_PENDING);
    let settled = primary.settled();
    assert_eq!(standby.settled(), settled, "seed {seed}: settled segments differ");
    let shape = (settled.len(), settled.iter().filter(|s| s.0.len() > 1).count());

    // The same rows deleted on both (VACUUM, replayed), then both settle again: rebuilds and the
    // merges they make due.
    let mut tids: Vec<u64> = groups.iter().flat_map(|g| g.rows.iter().map(|r| r.0)).collect();
    tids.shuffle(&mut rng);
    tids.truncate(tids.len() / 6);
    for node in [&mut primary, &mut standby] {
        node.delete(&tids);
        node.settle(NOTHING_PENDING);
    }
    assert_eq!(standby.settled(), primary.settled(), "seed {seed}: settled segments differ after deletions");
    shape
}

#[test]
fn hnsw_nodes_settle_to_identical_segments() {
    let mut merged = 0;
    for seed in 0..6 {
        let (segments, merged_segments) = settle_alike(IndexKind::Hnsw { m: 6, ef_construction: 24 }, seed);
        assert!(segments >= 2, "seed {seed}: the history leaves several segments");
        merged += merged_segments;
    }
    assert!(merged >= 6, "merges happened ({merged} merged segments)");
}

#[test]
fn ivf_nodes_settle_to_identical_segments() {
    for seed in 0..4 {
        let (_, merged) = settle_alike(IndexKind::Ivf { lists: 0, bits: 4 }, seed);
        assert!(merged >= 1, "seed {seed}: merges happened");
    }
}

/// Sorting by TID keeps each row's vector and filter words with its TID, and rows already in
/// order are left as they are.
#[test]
fn rows_sorted_by_tid_keep_their_words() {
    let mut rows = VectorRows::default();
    let tids = [9u64, 3, 7, 1, 8, 2];
    for &tid in &tids {
        rows.push_row(2, tid, &[tid as f32, -(tid as f32), f32::from_bits(tid as u32 * 10)]);
    }
    rows.sort_by_tid();
    let mut expected = BTreeMap::new();
    for &tid in &tids {
        expected.insert(tid, (vec![tid as f32, -(tid as f32)], tid as u32 * 10));
    }
    assert_eq!(rows.ids, expected.keys().copied().collect::<Vec<_>>());
    for (at, (_, (vector, word))) in expected.iter().enumerate() {
        assert_eq!(&rows.vectors[at * 2..at * 2 + 2], vector.as_slice());
        assert_eq!(rows.filters[at], *word);
    }
}
