//! The membership log, and how a node derives its index from it (the replication design in
//! docs/ARCHITECTURE.md).
//!
//! The status pages record, per *group* (one memtable, or one chunk of CREATE INDEX), the heap
//! TIDs appended to it, in order. VACUUM overwrites a removed row's TID with 0 and then bumps the
//! group's `vacuum_gen`; a flush *settles* the group, after which nothing is appended to it. Kept
//! for the index's life, this log travels with the WAL to standbys, base backups and archives, and
//! every copy of the database derives its own index from it and from its own heap.
//!
//! A node reads the log while replay goes on: it reads a group's catalog entry first and its list
//! pages after, each page at its own replay point. The derivation is therefore **positional**: a
//! TID removed at one position may come back, for a different row, at a later position of the same
//! or another group, so a node deletes "the row it holds at position p" and never "the rows with
//! TID t". In a memtable a node derives, row `i` is list position `i` (positions whose TID was 0,
//! or whose heap tuple was already gone, hold a deleted placeholder row).
//!
//! [`absorb`] compares what a node holds ([`Derived`]) with the log as read ([`GroupView`]s) and
//! returns the [`Step`]s that bring the node up to date: removals first, then additions. The
//! caller executes them (heap reads, memtable appends, segment builds, bitmaps) and records each in
//! [`Derived`]. The model test `tests/membership_model.rs` checks, against a primary with TID reuse
//! and readers that see pages at different replay points, that no row a query can see is missing,
//! stale or returned twice.

use std::collections::BTreeMap;

/// Whether rows may still be appended to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum GroupState {
    /// Rows may still be appended (an active or sealed memtable on the primary).
    Open = 1,
    /// Flushed on the primary: its list is complete; only VACUUM still zeroes TIDs in it.
    Settled = 2,
}

impl TryFrom<u8> for GroupState {
    type Error = u8;

    fn try_from(value: u8) -> Result<Self, u8> {
        match value {
            1 => Ok(Self::Open),
            2 => Ok(Self::Settled),
            other => Err(other),
        }
    }
}

/// One group as a reader of the status pages sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    /// The group's id (the primary's memtable SegmentID).
    pub id: u64,
    /// Its state, read with `vacuum_gen` from the catalog entry before the list pages.
    pub state: GroupState,
    /// Bumped by VACUUM after it has zeroed TIDs in the group's list.
    pub vacuum_gen: u64,
    /// The list, position by position; 0 = removed by VACUUM.
    pub tids: Vec<u64>,
}

/// How a node holds one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// In a local memtable whose row `i` is list position `i`.
    Memtable {
        /// Per absorbed position, the TID of the live row held there, or 0 (a deleted placeholder).
        rows: Vec<u64>,
        /// The `vacuum_gen` up to which removals were applied.
        vacuum_gen: u64,
    },
    /// In local segments, with removals applied up to `vacuum_gen`.
    Segments {
        /// The `vacuum_gen` up to which removals were applied.
        vacuum_gen: u64,
    },
}

/// What [`absorb`] asks the node to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The group left the log (all its rows were removed, or the index was reset): delete every row
    /// the node holds for it.
    Forget {
        /// The group.
        group: u64,
    },
    /// The group's `vacuum_gen` moved: delete the memtable rows at these positions (their TIDs
    /// were removed by VACUUM; possibly none), then record `vacuum_gen`.
    DeleteRows {
        /// The group.
        group: u64,
        /// Positions (= memtable row numbers), ascending.
        positions: Vec<usize>,
        /// The generation this reflects.
        vacuum_gen: u64,
    },
    /// Restrict the group's rows in local segments to `keep` (settled groups list each TID at most
    /// once, so removal by TID is exact there), then record `vacuum_gen`.
    Trim {
        /// The group.
        group: u64,
        /// The TIDs that stay (sorted, unique).
        keep: Vec<u64>,
        /// The generation this reflects.
        vacuum_gen: u64,
    },
    /// Append to the group's memtable (created when absent, reflecting `vacuum_gen`) one row per
    /// position from `from` on: the heap row of each TID, or a deleted placeholder for a 0 or a
    /// tuple that is gone.
    Append {
        /// The group.
        group: u64,
        /// The first position.
        from: usize,
        /// The TIDs at `from`, `from + 1`, ...
        tids: Vec<u64>,
        /// The generation a new memtable reflects (an existing one keeps its own).
        vacuum_gen: u64,
    },
    /// The group settled and its memtable holds all of it: flush the memtable into a segment.
    Seal {
        /// The group.
        group: u64,
        /// The generation its rows reflect.
        vacuum_gen: u64,
    },
    /// The group settled before this node held any of it: build a segment from the heap rows of
    /// these TIDs (those whose tuples are gone are left out).
    Build {
        /// The group.
        group: u64,
        /// The TIDs (in list order, zeros left out).
        tids: Vec<u64>,
        /// The generation they reflect.
        vacuum_gen: u64,
    },
}

/// What a node holds, per group. It survives a node's crash only for groups held in segments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Derived {
    groups: BTreeMap<u64, Held>,
}

impl Derived {
    /// A node that holds nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// How the node holds `group`, if at all.
    pub fn held(&self, group: u64) -> Option<&Held> {
        self.groups.get(&group)
    }

    /// Every group the node holds.
    pub fn groups(&self) -> impl Iterator<Item = (u64, &Held)> {
        self.groups.iter().map(|(id, held)| (*id, held))
    }

    /// Records a group held in segments (at start-up, from the local manifest).
    pub fn hold_in_segments(&mut self, group: u64, vacuum_gen: u64) {
        self.groups.insert(group, Held::Segments { vacuum_gen });
    }

    /// Records a group held in a memtable whose row `i` is list position `i` (`rows[i]` the TID
    /// of its live row, 0 for a deleted one), reflecting `vacuum_gen`.
    pub fn hold_in_memtable(&mut self, group: u64, rows: Vec<u64>, vacuum_gen: u64) {
        self.groups.insert(group, Held::Memtable { rows, vacuum_gen });
    }

    /// Records an executed step. `held_tids` is for [`Step::Append`] only: per appended position,
    /// the TID of the live row now held there, or 0 where the node holds a placeholder.
    pub fn record(&mut self, step: &Step, held_tids: &[u64]) {
        match step {
            Step::Forget { group } => {
                self.groups.remove(group);
            }
            Step::DeleteRows { group, positions, vacuum_gen: generation } => {
                if let Some(Held::Memtable { rows, vacuum_gen }) = self.groups.get_mut(group) {
                    for &position in positions {
                        rows[position] = 0;
                    }
                    *vacuum_gen = *generation;
                }
            }
            Step::Append { group, from, tids, vacuum_gen } => {
                debug_assert_eq!(held_tids.len(), tids.len());
                let held =
                    self.groups.entry(*group).or_insert(Held::Memtable { rows: Vec::new(), vacuum_gen: *vacuum_gen });
                if let Held::Memtable { rows, .. } = held {
                    debug_assert_eq!(rows.len(), *from);
                    rows.extend_from_slice(held_tids);
                }
            }
            Step::Trim { group, vacuum_gen, .. }
            | Step::Seal { group, vacuum_gen }
            | Step::Build { group, vacuum_gen, .. } => {
                self.groups.insert(*group, Held::Segments { vacuum_gen: *vacuum_gen });
            }
        }
    }

    /// A crash of the node: its memtables are gone, its segments stay.
    pub fn lose_memtables(&mut self) {
        self.groups.retain(|_, held| matches!(held, Held::Segments { .. }));
    }
}

/// How a node's slab holds a group, for [`Derived::of_node`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeMemtable {
    /// An ABSORBING memtable: per list position the TID of its live row, or 0
    /// (`Memtable::position_tids`).
    Absorbing(Vec<u64>),
    /// A sealed, flushing or refilling memtable: the group is settled, its rows are held by TID.
    Settled,
}

impl Derived {
    /// What a node holds, from its manifest (the groups each segment covers, and the generations
    /// recorded for settled groups) and its memtables. Absorbing memtables get a generation that
    /// never matches, so every pass compares them with their list position by position (cheap:
    /// both are at hand) and nothing about them has to survive a crash of the node. A group with a
    /// recorded generation but no segment or memtable is not held (its memtable was lost before
    /// its flush): [`absorb`] rebuilds it.
    pub fn of_node<'a>(
        segment_covers: impl IntoIterator<Item = &'a [u64]>,
        memtables: impl IntoIterator<Item = (u64, NodeMemtable)>,
        generations: &BTreeMap<u64, u64>,
    ) -> Self {
        let generation = |group: u64| generations.get(&group).copied().unwrap_or(0);
        let mut derived = Derived::new();
        for covers in segment_covers {
            for &group in covers {
                derived.hold_in_segments(group, generation(group));
            }
        }
        for (group, memtable) in memtables {
            match memtable {
                NodeMemtable::Absorbing(rows) => derived.hold_in_memtable(group, rows, u64::MAX),
                NodeMemtable::Settled => derived.hold_in_segments(group, generation(group)),
            }
        }
        derived
    }
}

/// The TIDs a segment covering groups `covers` may keep: the union of those groups' lists in
/// `log` (a group the log no longer has keeps nothing). Exact although a TID removed from one
/// group can come back in a later one: the earlier group's removal bumps its generation before
/// the TID is reused, so [`absorb`] trims the earlier group's segments before the later group can
/// be sealed, let alone merged with them.
pub fn segment_keep(covers: &[u64], log: &[GroupView]) -> std::collections::BTreeSet<u64> {
    log.iter()
        .filter(|view| covers.contains(&view.id))
        .flat_map(|view| view.tids.iter().copied())
        .filter(|&tid| tid != 0)
        .collect()
}

/// The groups whose lists [`absorb`] needs, given the catalog (`log` with its lists not read yet)
/// and what the node holds: groups it does not hold, groups it holds in memtables, groups held in
/// segments whose generation moved or that left the log — and, for a segment holding such a group,
/// every group that segment covers ([`segment_keep`] needs their lists). A group held in segments
/// with an unchanged generation needs no list: that is what keeps a standby's pass bounded by its
/// open groups rather than by the index.
pub fn lists_needed<'a>(
    log: &[GroupView],
    derived: &Derived,
    segment_covers: impl IntoIterator<Item = &'a [u64]> + Clone,
) -> std::collections::BTreeSet<u64> {
    let mut needed = std::collections::BTreeSet::new();
    let mut trimmed = std::collections::BTreeSet::new();
    for view in log {
        match derived.held(view.id) {
            None | Some(Held::Memtable { .. }) => {
                needed.insert(view.id);
            }
            Some(Held::Segments { vacuum_gen }) if *vacuum_gen != view.vacuum_gen => {
                trimmed.insert(view.id);
            }
            Some(Held::Segments { .. }) => {}
        }
    }
    for (group, _) in derived.groups() {
        if !log.iter().any(|view| view.id == group) {
            trimmed.insert(group);
        }
    }
    for covers in segment_covers {
        if covers.iter().any(|group| trimmed.contains(group)) {
            needed.extend(covers.iter().copied());
        }
    }
    needed.extend(trimmed);
    needed
}

/// The steps that bring `derived` up to date with `log`: every removal (forgotten groups, deleted
/// memtable rows, trimmed segments) before any addition (appends, seals, builds).
///
/// Each view's `state` and `vacuum_gen` must have been read before its `tids` (the catalog entry
/// before the list pages), and VACUUM must bump a group's `vacuum_gen` only after zeroing its
/// TIDs: then a removal the node misses in one pass is found in the next, whose `vacuum_gen`
/// differs from the one recorded.
pub fn absorb(log: &[GroupView], derived: &Derived) -> Vec<Step> {
    let mut removals = Vec::new();
    let mut additions = Vec::new();
    let listed: BTreeMap<u64, &GroupView> = log.iter().map(|view| (view.id, view)).collect();
    for (group, _) in derived.groups() {
        if !listed.contains_key(&group) {
            removals.push(Step::Forget { group });
        }
    }
    for view in log {
        match derived.held(view.id) {
            None => match view.state {
                GroupState::Open => additions.push(Step::Append {
                    group: view.id,
                    from: 0,
                    tids: view.tids.clone(),
                    vacuum_gen: view.vacuum_gen,
                }),
                GroupState::Settled => additions.push(Step::Build {
                    group: view.id,
                    tids: view.tids.iter().copied().filter(|&tid| tid != 0).collect(),
                    vacuum_gen: view.vacuum_gen,
                }),
            },
            Some(Held::Memtable { rows, vacuum_gen }) => {
                if *vacuum_gen != view.vacuum_gen {
                    let positions: Vec<usize> = rows
                        .iter()
                        .zip(&view.tids)
                        .enumerate()
                        .filter(|(_, (&held, &listed))| held != 0 && listed == 0)
                        .map(|(position, _)| position)
                        .collect();
                    removals.push(Step::DeleteRows { group: view.id, positions, vacuum_gen: view.vacuum_gen });
                }
                if view.tids.len() > rows.len() {
                    additions.push(Step::Append {
                        group: view.id,
                        from: rows.len(),
                        tids: view.tids[rows.len()..].to_vec(),
                        vacuum_gen: view.vacuum_gen,
                    });
                }
                if view.state == GroupState::Settled {
                    additions.push(Step::Seal { group: view.id, vacuum_gen: view.vacuum_gen });
                }
            }
            Some(Held::Segments { vacuum_gen }) => {
                if *vacuum_gen != view.vacuum_gen {
                    let mut keep: Vec<u64> = view.tids.iter().copied().filter(|&tid| tid != 0).collect();
                    keep.sort_unstable();
                    keep.dedup();
                    removals.push(Step::Trim { group: view.id, keep, vacuum_gen: view.vacuum_gen });
                }
            }
        }
    }
    removals.extend(additions);
    removals
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: u64, state: GroupState, vacuum_gen: u64, tids: &[u64]) -> GroupView {
        GroupView { id, state, vacuum_gen, tids: tids.to_vec() }
    }

    #[test]
    fn a_new_open_group_is_appended_and_a_new_settled_group_built() {
        let steps =
            absorb(&[view(1, GroupState::Settled, 0, &[5, 0, 7]), view(2, GroupState::Open, 0, &[9])], &Derived::new());
        assert_eq!(
            steps,
            vec![
                Step::Build { group: 1, tids: vec![5, 7], vacuum_gen: 0 },
                Step::Append { group: 2, from: 0, tids: vec![9], vacuum_gen: 0 },
            ]
        );
    }

    #[test]
    fn removals_are_positional_and_come_before_appends() {
        let mut derived = Derived::new();
        let first = Step::Append { group: 2, from: 0, tids: vec![4, 5], vacuum_gen: 0 };
        derived.record(&first, &[4, 5]);
        // VACUUM removed TID 4 at position 0 and the heap reused it for a new row at position 2.
        let steps = absorb(&[view(2, GroupState::Open, 1, &[0, 5, 4])], &derived);
        assert_eq!(
            steps,
            vec![
                Step::DeleteRows { group: 2, positions: vec![0], vacuum_gen: 1 },
                Step::Append { group: 2, from: 2, tids: vec![4], vacuum_gen: 1 },
            ]
        );
    }

    #[test]
    fn removals_are_only_looked_for_when_the_generation_moved() {
        let mut derived = Derived::new();
        derived.record(&Step::Append { group: 2, from: 0, tids: vec![4, 5], vacuum_gen: 3 }, &[4, 5]);
        assert!(absorb(&[view(2, GroupState::Open, 3, &[0, 5])], &derived).is_empty());
    }

    #[test]
    fn settled_groups_held_in_memtables_are_sealed_and_segments_trimmed_by_generation() {
        let mut derived = Derived::new();
        derived.record(&Step::Append { group: 2, from: 0, tids: vec![4], vacuum_gen: 0 }, &[4]);
        derived.hold_in_segments(1, 0);
        let steps =
            absorb(&[view(1, GroupState::Settled, 2, &[8, 0, 6]), view(2, GroupState::Settled, 0, &[4])], &derived);
        assert_eq!(
            steps,
            vec![Step::Trim { group: 1, keep: vec![6, 8], vacuum_gen: 2 }, Step::Seal { group: 2, vacuum_gen: 0 },]
        );
    }

    #[test]
    fn groups_that_left_the_log_are_forgotten_and_a_crash_keeps_only_segments() {
        let mut derived = Derived::new();
        derived.hold_in_segments(1, 0);
        derived.record(&Step::Append { group: 2, from: 0, tids: vec![4], vacuum_gen: 0 }, &[4]);
        assert_eq!(absorb(&[view(2, GroupState::Open, 0, &[4])], &derived), vec![Step::Forget { group: 1 }]);
        derived.lose_memtables();
        assert_eq!(derived.groups().map(|(id, _)| id).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn a_node_is_read_from_its_segments_and_memtables() {
        let generations = BTreeMap::from([(1, 3), (4, 2)]);
        let derived = Derived::of_node(
            [&[1u64, 2][..]],
            [(3, NodeMemtable::Absorbing(vec![7, 0])), (4, NodeMemtable::Settled)],
            &generations,
        );
        assert_eq!(derived.held(1), Some(&Held::Segments { vacuum_gen: 3 }));
        assert_eq!(derived.held(2), Some(&Held::Segments { vacuum_gen: 0 }));
        assert_eq!(derived.held(3), Some(&Held::Memtable { rows: vec![7, 0], vacuum_gen: u64::MAX }));
        assert_eq!(derived.held(4), Some(&Held::Segments { vacuum_gen: 2 }));
        // An absorbing memtable is compared with its list on every pass.
        let steps = absorb(&[view(3, GroupState::Open, 0, &[7, 0])], &derived);
        assert!(steps.contains(&Step::DeleteRows { group: 3, positions: vec![], vacuum_gen: 0 }));
    }

    #[test]
    fn a_segment_keeps_the_union_of_its_groups_lists() {
        let log = [
            view(1, GroupState::Settled, 1, &[5, 0, 6]),
            view(2, GroupState::Settled, 0, &[7]),
            view(3, GroupState::Open, 0, &[8]),
        ];
        let keep: Vec<u64> = segment_keep(&[1, 2, 9], &log).into_iter().collect();
        assert_eq!(keep, [5, 6, 7], "group 9 left the log; group 3 is not covered");
    }

    #[test]
    fn lists_are_read_only_for_groups_that_can_change_what_the_node_holds() {
        let generations = BTreeMap::from([(1, 0), (2, 0), (3, 0), (4, 0)]);
        let covers: [&[u64]; 3] = [&[1, 2], &[3], &[4, 9]];
        let derived = Derived::of_node(covers, [(5, NodeMemtable::Absorbing(vec![1]))], &generations);
        let catalog = [
            view(1, GroupState::Settled, 0, &[]),
            view(2, GroupState::Settled, 1, &[]), // generation moved: 2 and 1 (same segment)
            view(3, GroupState::Settled, 0, &[]), // unchanged, alone in its segment: no list
            view(4, GroupState::Settled, 0, &[]), // its segment also holds 9, which left the log
            view(5, GroupState::Open, 0, &[]),    // held in a memtable
            view(6, GroupState::Settled, 0, &[]), // not held
        ];
        let needed: Vec<u64> = lists_needed(&catalog, &derived, covers).into_iter().collect();
        assert_eq!(needed, [1, 2, 4, 5, 6, 9]);
    }

    #[test]
    fn group_state_round_trips_through_its_byte() {
        for state in [GroupState::Open, GroupState::Settled] {
            assert_eq!(GroupState::try_from(state as u8), Ok(state));
        }
        assert_eq!(GroupState::try_from(0), Err(0));
    }
}
