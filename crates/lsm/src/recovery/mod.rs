//! Index recovery planning (the paper's §5.4) as a pure function.
//!
//! After a crash PostgreSQL replays WAL, which restores the status pages: the authoritative list
//! of memtables that were not yet known to be flushed (`MaxMemtableId` and, per memtable, the TIDs
//! of its committed-or-not rows). The files on disk say which segments were written. [`plan`]
//! compares the two and returns the actions that make the index contain exactly what the status
//! pages say — no more, no less:
//!
//! - a segment built only from memtables newer than `MaxMemtableId` holds rows whose inserting
//!   transactions never reached the WAL: **drop** it;
//! - a status memtable covered by a segment was flushed: **rebuild that segment's deletion bitmap**
//!   for the memtable's rows — a row stays valid iff its TID is in the status list;
//! - rows of a merged segment that come from memtables newer than `MaxMemtableId` are
//!   **invalidated** the same way (their TID lists are empty);
//! - a status memtable no segment covers was lost with shared memory: **rebuild it from the heap**
//!   by its TIDs.
//!
//! The work is bounded by the status pages (unflushed memtables), not by the index size.
//! [`repair`] executes the drops and bitmap rebuilds on an index's files; [`refill`] rebuilds the
//! lost memtables it returns from a [`HeapRows`] source. [`opening`] decides, when an index is
//! first opened, between this recovery and deriving the index from the membership log.

pub mod opening;
mod refill;
mod repair;
mod report;

use std::collections::{BTreeMap, BTreeSet};

pub use refill::{refill, HeapRows, MemtableRow, Refilled, SpanRow};
pub use repair::{repair, Repairs};
pub use report::Recovered;

/// One memtable as the status pages record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusMemtable {
    /// Its SegmentID.
    pub id: u64,
    /// TIDs appended to its page list.
    pub tids: Vec<u64>,
}

/// The recovered status pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// SegmentID of the newest memtable the status pages know.
    pub max_memtable_id: u64,
    /// Memtables not released as flushed.
    pub memtables: Vec<StatusMemtable>,
}

/// A segment on disk, as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskSegment {
    /// Segment id.
    pub id: u64,
    /// Memtable SegmentIDs whose rows it holds.
    pub covers: Vec<u64>,
}

/// What recovery must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoveryAction {
    /// Remove the segment from the manifest (and its files).
    DropSegment(u64),
    /// In `segment`, rows that came from memtable `memtable` stay valid iff their TID is in `keep`.
    RebuildBitmap {
        /// The segment.
        segment: u64,
        /// The memtable whose rows are reconciled.
        memtable: u64,
        /// TIDs that must stay valid (sorted, unique).
        keep: Vec<u64>,
    },
    /// Re-insert these TIDs (fetched from the heap) into a new memtable with this SegmentID.
    RebuildMemtable {
        /// The memtable's SegmentID.
        memtable: u64,
        /// TIDs to fetch (sorted, unique).
        tids: Vec<u64>,
    },
}

/// The actions that reconcile `segments` with `status`, in execution order: drops, then bitmap
/// rebuilds, then memtable rebuilds (each group sorted by id).
pub fn plan(status: &Status, segments: &[DiskSegment]) -> Vec<RecoveryAction> {
    let mut actions = Vec::new();
    let status_tids: BTreeMap<u64, Vec<u64>> = status
        .memtables
        .iter()
        .map(|m| {
            let set: BTreeSet<u64> = m.tids.iter().copied().collect();
            (m.id, set.into_iter().collect())
        })
        .collect();
    let mut drops = Vec::new();
    let mut bitmaps = Vec::new();
    let mut covered = BTreeSet::new();
    for segment in segments {
        if !segment.covers.is_empty() && segment.covers.iter().all(|&m| m > status.max_memtable_id) {
            drops.push(segment.id);
            continue;
        }
        for &memtable in &segment.covers {
            if memtable > status.max_memtable_id {
                bitmaps.push((segment.id, memtable, Vec::new()));
            } else if let Some(tids) = status_tids.get(&memtable) {
                covered.insert(memtable);
                bitmaps.push((segment.id, memtable, tids.clone()));
            }
        }
    }
    drops.sort_unstable();
    bitmaps.sort_by_key(|(segment, memtable, _)| (*segment, *memtable));
    actions.extend(drops.into_iter().map(RecoveryAction::DropSegment));
    actions.extend(bitmaps.into_iter().map(|(segment, memtable, keep)| RecoveryAction::RebuildBitmap {
        segment,
        memtable,
        keep,
    }));
    for (&memtable, tids) in &status_tids {
        if !covered.contains(&memtable) && memtable <= status.max_memtable_id {
            actions.push(RecoveryAction::RebuildMemtable { memtable, tids: tids.clone() });
        }
    }
    actions
}

/// The second half of a plan, once the trimmed segments have been read: for every memtable whose
/// list `keep` gives (the memtables of [`RecoveryAction::RebuildBitmap`] actions) and whose kept
/// segments hold the TIDs in `present`, the listed TIDs no segment holds, as
/// [`RecoveryAction::RebuildMemtable`] actions (sorted by memtable). Normally there are none; they
/// arise when a memtable refilled over several slabs was only partly flushed before another
/// crash, or when VACUUM left rows out of a flush and its list update was lost.
pub fn refill_gaps(keep: &BTreeMap<u64, Vec<u64>>, present: &BTreeMap<u64, BTreeSet<u64>>) -> Vec<RecoveryAction> {
    keep.iter()
        .filter_map(|(&memtable, tids)| {
            let held = present.get(&memtable);
            let missing: BTreeSet<u64> =
                tids.iter().copied().filter(|t| !held.is_some_and(|h| h.contains(t))).collect();
            (!missing.is_empty())
                .then(|| RecoveryAction::RebuildMemtable { memtable, tids: missing.into_iter().collect() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// The paper's example: memtable 100 (9K rows durable in status, segment 100 flushed with
    /// 10K), segment 101 flushed but never committed, memtable 102 lost.
    #[test]
    fn paper_example() {
        let status =
            Status { max_memtable_id: 100, memtables: vec![StatusMemtable { id: 100, tids: (0..9).collect() }] };
        let segments = vec![DiskSegment { id: 100, covers: vec![100] }, DiskSegment { id: 101, covers: vec![101] }];
        assert_eq!(
            plan(&status, &segments),
            vec![
                RecoveryAction::DropSegment(101),
                RecoveryAction::RebuildBitmap { segment: 100, memtable: 100, keep: (0..9).collect() },
            ]
        );
        let lost = Status { max_memtable_id: 102, memtables: vec![StatusMemtable { id: 102, tids: vec![7, 3, 7] }] };
        assert_eq!(plan(&lost, &[]), vec![RecoveryAction::RebuildMemtable { memtable: 102, tids: vec![3, 7] }]);
    }

    #[test]
    fn gaps_are_the_listed_tids_no_segment_holds() {
        let keep = BTreeMap::from([(5, vec![1, 2, 3, 4]), (6, vec![9]), (7, vec![8])]);
        let present = BTreeMap::from([(5, BTreeSet::from([1, 3, 10])), (6, BTreeSet::from([9]))]);
        assert_eq!(
            refill_gaps(&keep, &present),
            vec![
                RecoveryAction::RebuildMemtable { memtable: 5, tids: vec![2, 4] },
                RecoveryAction::RebuildMemtable { memtable: 7, tids: vec![8] },
            ]
        );
        assert_eq!(refill_gaps(&BTreeMap::new(), &present), vec![]);
    }

    /// A world: memtables with their true (committed) TIDs and which ones got flushed/merged.
    fn world() -> impl Strategy<Value = (Status, Vec<DiskSegment>, BTreeMap<u64, Vec<u64>>)> {
        (1u64..12, prop::collection::vec((prop::collection::vec(0u64..50, 0..6), any::<bool>()), 1..12), 0u64..4)
            .prop_map(|(max_id, memtables, merge_shift)| {
                let mut status = Status { max_memtable_id: max_id, memtables: Vec::new() };
                let mut segments = Vec::new();
                let mut truth = BTreeMap::new();
                for (index, (tids, flushed)) in memtables.into_iter().enumerate() {
                    let id = index as u64 + 1;
                    if id <= max_id {
                        truth.insert(id, tids.clone());
                        if !flushed || id + merge_shift > max_id {
                            status.memtables.push(StatusMemtable { id, tids });
                        }
                    }
                    if flushed {
                        segments.push(DiskSegment { id: 1000 + id, covers: vec![id] });
                    }
                }
                (status, segments, truth)
            })
    }

    proptest! {
        /// Applying the plan yields exactly the status pages' rows for every memtable they list,
        /// and nothing from memtables newer than MaxMemtableId.
        #[test]
        fn plan_reconciles_to_status((status, segments, _truth) in world()) {
            let actions = plan(&status, &segments);
            let dropped: BTreeSet<u64> = actions.iter().filter_map(|a| match a { RecoveryAction::DropSegment(s) => Some(*s), _ => None }).collect();
            for segment in &segments {
                let newer = segment.covers.iter().all(|&m| m > status.max_memtable_id);
                prop_assert_eq!(dropped.contains(&segment.id), newer);
            }
            for memtable in &status.memtables {
                let expected: BTreeSet<u64> = memtable.tids.iter().copied().collect();
                let mut recovered = BTreeSet::new();
                for action in &actions {
                    match action {
                        RecoveryAction::RebuildBitmap { memtable: m, keep, .. } if *m == memtable.id => recovered.extend(keep.iter().copied()),
                        RecoveryAction::RebuildMemtable { memtable: m, tids } if *m == memtable.id => recovered.extend(tids.iter().copied()),
                        _ => {}
                    }
                }
                prop_assert_eq!(recovered, expected);
            }
            // Work is bounded by the status pages: one action per status memtable per covering
            // segment, plus drops.
            prop_assert!(actions.len() <= dropped.len() + status.memtables.len() * (segments.len() + 1));
        }
    }
}
