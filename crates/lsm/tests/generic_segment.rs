//! The runtime is generic over the segment type: a second, minimal segment type (rows scored by
//! one number, as a text segment scores documents) goes through the same publishing, merging,
//! deletion and crash-recovery code as vector segments, checked against a model.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use strata_engine::bitset::Bitset;
use strata_engine::format::SegmentFile;
use strata_engine::topk::Neighbor;
use strata_lsm::directory::memory::MemoryDirectory;
use strata_lsm::files::{FileError, IndexFiles};
use strata_lsm::manifest::ManifestConfig;
use strata_lsm::merge::{self, Prepared};
use strata_lsm::recovery::{repair, Status, StatusMemtable};
use strata_lsm::segment_set::SegmentSet;
use strata_lsm::segment_type::{BuildWork, MergeInput, OpenError, SegmentType};

const TAG_TIDS: u32 = 1;
const TAG_SCORES: u32 = 2;

/// Its configuration: how many rows a memtable holds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct ScoredConfig {
    memtable_rows: u32,
}

impl ManifestConfig for ScoredConfig {
    fn validate(&self) -> Result<(), String> {
        if self.memtable_rows == 0 {
            return Err("memtable_rows must be positive".into());
        }
        Ok(())
    }
}

/// A segment of `(tid, score)` rows; a search returns the highest scores.
struct ScoredSegment {
    tids: Vec<u64>,
    scores: Vec<u32>,
}

/// A built segment (the same thing, not yet written).
struct Built(ScoredSegment);

fn words<T: Copy>(bytes: &[u8], width: usize, decode: impl Fn(&[u8]) -> T) -> Vec<T> {
    bytes.chunks_exact(width).map(decode).collect()
}

impl SegmentType for ScoredSegment {
    type Config = ScoredConfig;
    type Rows = Vec<(u64, u32)>;
    type Built = Built;
    type Query = ();
    type Params = ();

    fn open(file: SegmentFile) -> Result<Self, OpenError> {
        let tids = words(file.require(TAG_TIDS)?, 8, |c| u64::from_le_bytes(c.try_into().unwrap()));
        let scores = words(file.require(TAG_SCORES)?, 4, |c| u32::from_le_bytes(c.try_into().unwrap()));
        if tids.len() != scores.len() {
            return Err("tids and scores differ in length".into());
        }
        Ok(Self { tids, scores })
    }

    fn ids(&self) -> &[u64] {
        &self.tids
    }

    fn build(_: &IndexFiles<Self>, _: &ScoredConfig, rows: Self::Rows, _: &BuildWork) -> Result<Built, FileError> {
        Ok(Built(ScoredSegment {
            tids: rows.iter().map(|r| r.0).collect(),
            scores: rows.iter().map(|r| r.1).collect(),
        }))
    }

    fn merge(_: &ScoredConfig, inputs: Vec<MergeInput<Self>>, _: &BuildWork) -> Result<Built, FileError> {
        let mut merged = ScoredSegment { tids: Vec::new(), scores: Vec::new() };
        for input in inputs {
            for row in 0..input.segment.tids.len() {
                if !input.deleted.as_ref().is_some_and(|d| d.contains(row)) {
                    merged.tids.push(input.segment.tids[row]);
                    merged.scores.push(input.segment.scores[row]);
                }
            }
        }
        Ok(Built(merged))
    }

    fn sections(built: &Built) -> Vec<(u32, Cow<'_, [u8]>)> {
        vec![
            (TAG_TIDS, Cow::Owned(built.0.tids.iter().flat_map(|t| t.to_le_bytes()).collect())),
            (TAG_SCORES, Cow::Owned(built.0.scores.iter().flat_map(|s| s.to_le_bytes()).collect())),
        ]
    }

    fn built_rows(built: &Built) -> u64 {
        built.0.tids.len() as u64
    }

    fn search(&self, (): &(), k: usize, (): &(), deleted: Option<&Bitset>) -> Vec<Neighbor> {
        let mut rows: Vec<usize> = (0..self.tids.len()).filter(|&r| !deleted.is_some_and(|d| d.contains(r))).collect();
        rows.sort_by_key(|&r| (std::cmp::Reverse(self.scores[r]), self.tids[r]));
        rows.into_iter().take(k).map(|r| Neighbor { row: r as u64, distance: -(self.scores[r] as f32) }).collect()
    }
}

fn live(files: &IndexFiles<ScoredSegment>) -> BTreeMap<u64, u32> {
    let set = SegmentSet::open(files, None).unwrap();
    let mut rows = BTreeMap::new();
    for open in &set.segments {
        for (row, &tid) in open.segment.tids.iter().enumerate() {
            if !open.deleted.as_ref().is_some_and(|d| d.contains(row)) {
                assert!(rows.insert(tid, open.segment.scores[row]).is_none(), "TID {tid} twice");
            }
        }
    }
    rows
}

fn top(files: &IndexFiles<ScoredSegment>, k: usize) -> Vec<(u64, u32)> {
    let set = SegmentSet::open(files, None).unwrap();
    let mut best: Vec<(u64, u32)> = set
        .segments
        .iter()
        .flat_map(|open| {
            open.segment
                .search(&(), k, &(), open.deleted.as_ref())
                .into_iter()
                .map(|n| (open.segment.tids[n.row as usize], open.segment.scores[n.row as usize]))
                .collect::<Vec<_>>()
        })
        .collect();
    best.sort_by_key(|&(tid, score)| (std::cmp::Reverse(score), tid));
    best.truncate(k);
    best
}

#[test]
fn a_second_segment_type_publishes_merges_deletes_and_recovers() {
    let dir = MemoryDirectory::new();
    let files = IndexFiles::<ScoredSegment>::new(Arc::new(dir.clone()));
    files.create(ScoredConfig { memtable_rows: 4 }).unwrap();
    let mut model = BTreeMap::new();
    let mut next_id = 1;
    // Eight flushed memtables of four rows each.
    for memtable in 0..8u64 {
        let rows: Vec<(u64, u32)> =
            (0..4).map(|i| (memtable * 4 + i + 1, ((memtable * 37 + i * 11) % 50) as u32)).collect();
        model.extend(rows.iter().copied());
        let built = ScoredSegment::build(&files, &ScoredConfig { memtable_rows: 4 }, rows, &BuildWork::new(1)).unwrap();
        files.publish_segment(&built, next_id, vec![next_id], next_id + 1, |_| {}).unwrap();
        next_id += 1;
    }
    assert_eq!(live(&files), model);
    // Deletions, then a merge that carries a later deletion over.
    let manifest = files.manifest().unwrap();
    let first = manifest.segments[0].clone();
    let mut deleted = Bitset::new(4);
    deleted.insert(1);
    files.publish_deletions(&first, &deleted, next_id, |_| {}).unwrap();
    model.remove(&2);
    let Prepared::Build(plan, work) =
        merge::prepare(&files, 4, merge::NOTHING_PENDING, 1, || next_id, next_id, |_| {}).unwrap()
    else {
        panic!("eight small segments are merged")
    };
    next_id += 1;
    let rows = (*work).run().unwrap();
    let first = files.manifest().unwrap().segments[0].clone();
    deleted.insert(3);
    files.publish_deletions(&first, &deleted, next_id, |_| {}).unwrap();
    model.remove(&4);
    merge::finish(&files, plan, rows, next_id, |_| {}).unwrap();
    assert_eq!(live(&files), model);
    let mut expected: Vec<(u64, u32)> = model.iter().map(|(&t, &s)| (t, s)).collect();
    expected.sort_by_key(|&(tid, score)| (std::cmp::Reverse(score), tid));
    expected.truncate(5);
    assert_eq!(top(&files, 5), expected, "search over the merged set equals the model's top 5");
    // A crash; the status pages list one flushed memtable (id 8) whose TIDs lost two rows.
    dir.crash(|_, _| 0);
    let status = Status { max_memtable_id: 8, memtables: vec![StatusMemtable { id: 8, tids: vec![29, 30] }] };
    let repairs = repair(&files, &status, false, next_id, |_| {}).unwrap();
    assert!(repairs.refill.is_empty());
    // The merge took the four oldest segments; memtable 8's segment was trimmed to its list.
    assert!(files.manifest().unwrap().segments.iter().any(|s| s.covers == vec![8]));
    model.remove(&31);
    model.remove(&32);
    assert_eq!(repairs.invalidated, 2);
    assert_eq!(live(&files), model);
}
