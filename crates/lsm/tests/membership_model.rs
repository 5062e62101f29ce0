//! Model test of `strata_lsm::membership`: a primary writes the membership log (inserts appended
//! to the open group, deletes, VACUUM zeroing TIDs and then freeing heap slots for reuse, flushes
//! settling groups, empty groups dropped), one WAL record at a time; a replica replays it and
//! derives its index with `absorb`, reading the catalog at one replay point, each group's list at
//! a later one and the heap at a later one still (replay goes on while it reads), and sometimes
//! crashes (its memtables are lost, its segments stay).
//!
//! Oracle: a query whose snapshot was taken when the replica read the catalog, and which was not
//! cancelled by a recovery conflict (no row visible to it was removed from the heap before the
//! replica's heap reads), must find every row visible to it exactly once and with its own vector:
//! no row missing, none stale, none twice. After a pass that reads everything at one replay point,
//! the replica holds exactly the listed rows.

use std::collections::BTreeMap;

use proptest::prelude::*;
use strata_lsm::membership::{absorb, lists_needed, Derived, GroupState, GroupView, Step};

/// A heap slot (TID = index + 1): free for reuse, a live row, a deleted row whose tuple is still
/// there, or a pruned one (tuple gone, line pointer dead: the TID is not reusable until VACUUM has
/// removed it from the index). Rows are told apart by a version number (a row's "vector").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Free,
    Live(u64),
    Dead(u64),
    Pruned(u64),
}

#[derive(Debug, Clone)]
struct LogGroup {
    id: u64,
    state: GroupState,
    vacuum_gen: u64,
    /// (TID, version) per position; TID 0 = removed (the version stays, for the oracle only).
    entries: Vec<(u64, u64)>,
}

/// What the replica can observe after one WAL record.
#[derive(Debug, Clone)]
struct Snapshot {
    groups: Vec<LogGroup>,
    heap: Vec<Slot>,
}

const SLOTS: usize = 10;

struct Primary {
    now: Snapshot,
    history: Vec<Snapshot>,
    next_group: u64,
    next_version: u64,
}

impl Primary {
    fn new() -> Self {
        let now = Snapshot {
            groups: vec![LogGroup { id: 1, state: GroupState::Open, vacuum_gen: 0, entries: Vec::new() }],
            heap: vec![Slot::Free; SLOTS],
        };
        Primary { history: vec![now.clone()], now, next_group: 2, next_version: 1 }
    }

    fn record(&mut self) {
        self.history.push(self.now.clone());
    }

    fn insert(&mut self, choice: usize) {
        let free: Vec<usize> = (0..SLOTS).filter(|&i| self.now.heap[i] == Slot::Free).collect();
        if free.is_empty() {
            return;
        }
        let slot = free[choice % free.len()];
        let version = self.next_version;
        self.next_version += 1;
        self.now.heap[slot] = Slot::Live(version);
        self.record(); // the heap insert's record
        let open = self.now.groups.iter_mut().find(|g| g.state == GroupState::Open).expect("an open group");
        open.entries.push((slot as u64 + 1, version));
        self.record(); // the list append's record
    }

    fn delete(&mut self, choice: usize) {
        let live: Vec<usize> = (0..SLOTS).filter(|&i| matches!(self.now.heap[i], Slot::Live(_))).collect();
        if let Some(&slot) = live.get(choice % live.len().max(1)) {
            if let Slot::Live(version) = self.now.heap[slot] {
                self.now.heap[slot] = Slot::Dead(version);
                self.record();
            }
        }
    }

    /// PostgreSQL's lazy VACUUM: prunes the dead tuples (one record each, the point where a
    /// standby cancels queries that still see them), zeroes their TIDs in every list (one record
    /// per position), bumping each touched group's generation after its zeroings, and only then
    /// frees the line pointers for reuse (one record each).
    fn vacuum(&mut self) {
        let dead: Vec<usize> = (0..SLOTS).filter(|&i| matches!(self.now.heap[i], Slot::Dead(_))).collect();
        for &slot in &dead {
            if let Slot::Dead(version) = self.now.heap[slot] {
                self.now.heap[slot] = Slot::Pruned(version);
                self.record();
            }
        }
        for g in 0..self.now.groups.len() {
            let mut touched = false;
            for p in 0..self.now.groups[g].entries.len() {
                let (tid, version) = self.now.groups[g].entries[p];
                if tid != 0 && self.now.heap[tid as usize - 1] == Slot::Pruned(version) {
                    self.now.groups[g].entries[p].0 = 0;
                    touched = true;
                    self.record();
                }
            }
            if touched {
                self.now.groups[g].vacuum_gen += 1;
                self.record();
            }
        }
        for slot in dead {
            self.now.heap[slot] = Slot::Free;
            self.record();
        }
    }

    fn settle(&mut self) {
        for group in &mut self.now.groups {
            if group.state == GroupState::Open {
                group.state = GroupState::Settled;
            }
        }
        self.now.groups.push(LogGroup {
            id: self.next_group,
            state: GroupState::Open,
            vacuum_gen: 0,
            entries: Vec::new(),
        });
        self.next_group += 1;
        self.record();
    }

    fn drop_empty(&mut self) {
        let before = self.now.groups.len();
        self.now.groups.retain(|g| g.state == GroupState::Open || g.entries.iter().any(|&(tid, _)| tid != 0));
        if self.now.groups.len() != before {
            self.record();
        }
    }
}

/// The replica's derived index: memtables by position, segments as rows tagged with their group.
#[derive(Default)]
struct Replica {
    derived: Derived,
    memtables: BTreeMap<u64, Vec<Option<(u64, u64)>>>,
    segments: BTreeMap<u64, Vec<(u64, u64, bool)>>,
    replayed: usize,
}

impl Replica {
    fn fetch(heap: &[Slot], tid: u64) -> Option<(u64, u64)> {
        match heap[tid as usize - 1] {
            Slot::Live(version) | Slot::Dead(version) => Some((tid, version)),
            Slot::Pruned(_) | Slot::Free => None,
        }
    }

    fn execute(&mut self, step: &Step, heap: &[Slot]) {
        let mut held = Vec::new();
        match step {
            Step::Forget { group } => {
                self.memtables.remove(group);
                self.segments.remove(group);
            }
            Step::DeleteRows { group, positions, .. } => {
                let rows = self.memtables.get_mut(group).expect("a memtable group");
                for &p in positions {
                    rows[p] = None;
                }
            }
            Step::Trim { group, keep, .. } => {
                for row in self.segments.get_mut(group).expect("a segment group") {
                    if keep.binary_search(&row.0).is_err() {
                        row.2 = true;
                    }
                }
            }
            Step::Append { group, from, tids, .. } => {
                let rows = self.memtables.entry(*group).or_default();
                assert_eq!(rows.len(), *from);
                for &tid in tids {
                    let row = if tid == 0 { None } else { Self::fetch(heap, tid) };
                    held.push(row.map_or(0, |(tid, _)| tid));
                    rows.push(row);
                }
            }
            Step::Seal { group, .. } => {
                let rows = self.memtables.remove(group).expect("a memtable group");
                self.segments.insert(*group, rows.into_iter().flatten().map(|(t, v)| (t, v, false)).collect());
            }
            Step::Build { group, tids, .. } => {
                let rows = tids.iter().filter_map(|&tid| Self::fetch(heap, tid)).map(|(t, v)| (t, v, false)).collect();
                self.segments.insert(*group, rows);
            }
        }
        self.derived.record(step, &held);
    }

    /// Live rows held, as (group, tid, version).
    fn live(&self) -> Vec<(u64, u64, u64)> {
        let mut out = Vec::new();
        for (&group, rows) in &self.memtables {
            out.extend(rows.iter().flatten().map(|&(t, v)| (group, t, v)));
        }
        for (&group, rows) in &self.segments {
            out.extend(rows.iter().filter(|r| !r.2).map(|&(t, v, _)| (group, t, v)));
        }
        out
    }

    fn crash(&mut self) {
        self.memtables.clear();
        self.derived.lose_memtables();
    }

    /// One pass: the catalog at `r0`, group `i`'s list at `r_i` (non-decreasing from `r0` by
    /// `tear`), the heap at the last list read plus `lag`. Checks the oracle; returns whether the
    /// pass read everything at one replay point. `strict`: no VACUUM is in progress, so the
    /// replica must hold exactly the listed rows.
    fn pass(
        &mut self,
        history: &[Snapshot],
        advance: usize,
        tear: &[u8],
        lag: usize,
        strict: bool,
    ) -> Result<bool, String> {
        let head = history.len() - 1;
        let r0 = (self.replayed + advance).min(head);
        let mut read_at = r0;
        let mut views = Vec::new();
        for (i, entry) in history[r0].groups.iter().enumerate() {
            read_at = (read_at + usize::from(tear.get(i).copied().unwrap_or(0) % 4)).min(head);
            let tids: Vec<u64> = match history[read_at].groups.iter().find(|g| g.id == entry.id) {
                Some(later) => later.entries.iter().map(|&(tid, _)| tid).collect(),
                None => vec![0; entry.entries.len()], // dropped meanwhile: it was all zeros
            };
            views.push(GroupView { id: entry.id, state: entry.state, vacuum_gen: entry.vacuum_gen, tids });
        }
        let rf = (read_at + lag).min(head);
        self.replayed = rf;
        // As a node does: only the lists `lists_needed` names are read (each of this replica's
        // segments covers one group).
        let covers: Vec<Vec<u64>> = self.segments.keys().map(|&group| vec![group]).collect();
        let needed = lists_needed(&views, &self.derived, covers.iter().map(Vec::as_slice));
        for view in &mut views {
            if !needed.contains(&view.id) {
                view.tids.clear();
            }
        }
        for step in absorb(&views, &self.derived) {
            self.execute(&step, &history[rf].heap);
        }
        check(&history[r0], &history[rf], &self.live())?;
        let quiescent = r0 == rf;
        if quiescent {
            // Every listed row is held once, except one whose tuple VACUUM has pruned but not yet
            // unlisted; a held row no longer listed is one whose removal VACUUM has begun (zeroed,
            // generation not yet bumped): its tuple is pruned too.
            let mut held: Vec<(u64, u64)> = self.live().iter().map(|&(_, t, v)| (t, v)).collect();
            let heap = &history[r0].heap;
            let mut listed: Vec<(u64, u64)> = history[r0]
                .groups
                .iter()
                .flat_map(|g| g.entries.iter().copied())
                .filter(|&(t, v)| t != 0 && heap[t as usize - 1] != Slot::Pruned(v))
                .collect();
            held.sort_unstable();
            listed.sort_unstable();
            let mut unlisted = held.clone();
            for row in &listed {
                match unlisted.binary_search(row) {
                    Ok(i) => {
                        unlisted.remove(i);
                    }
                    Err(_) => return Err(format!("quiescent pass at {r0}: listed row {row:?} not held ({held:?})")),
                }
            }
            for &(tid, version) in &unlisted {
                if history[r0].heap[tid as usize - 1] != Slot::Pruned(version) || listed.iter().any(|&(t, _)| t == tid)
                {
                    return Err(format!("quiescent pass at {r0}: held row {:?} is not listed", (tid, version)));
                }
            }
            if strict && !unlisted.is_empty() {
                return Err(format!("final pass: held {held:?}, listed {listed:?}"));
            }
        }
        Ok(quiescent)
    }
}

/// The oracle for a query whose snapshot is `at_snapshot` and whose index was read after heap
/// replay reached `at_fetch`.
fn check(at_snapshot: &Snapshot, at_fetch: &Snapshot, live: &[(u64, u64, u64)]) -> Result<(), String> {
    let listed: Vec<u64> =
        at_snapshot.groups.iter().flat_map(|g| g.entries.iter().map(|&(t, _)| t)).filter(|&t| t != 0).collect();
    // Rows the snapshot sees: live and listed (a row is committed only after its list append).
    let visible: Vec<(u64, u64)> = (0..SLOTS)
        .filter_map(|i| match at_snapshot.heap[i] {
            Slot::Live(v) if listed.contains(&(i as u64 + 1)) => Some((i as u64 + 1, v)),
            _ => None,
        })
        .collect();
    // A recovery conflict cancels the query if a row it sees was pruned before the reads.
    let survives =
        visible.iter().all(|&(t, v)| matches!(at_fetch.heap[t as usize - 1], Slot::Live(w) | Slot::Dead(w) if w == v));
    if !survives {
        return Ok(());
    }
    for &(tid, version) in &visible {
        let held: Vec<&(u64, u64, u64)> = live.iter().filter(|&&(_, t, _)| t == tid).collect();
        if held.len() != 1 || held[0].2 != version {
            return Err(format!("row {tid} (version {version}) visible to the snapshot is held as {held:?}"));
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Op {
    Insert(usize),
    Delete(usize),
    Vacuum,
    Settle,
    DropEmpty,
    Pass { advance: usize, tear: Vec<u8>, lag: usize },
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<usize>().prop_map(Op::Insert),
        3 => any::<usize>().prop_map(Op::Delete),
        2 => Just(Op::Vacuum),
        2 => Just(Op::Settle),
        1 => Just(Op::DropEmpty),
        4 => (0usize..40, proptest::collection::vec(any::<u8>(), 0..8), 0usize..6)
            .prop_map(|(advance, tear, lag)| Op::Pass { advance, tear, lag }),
        1 => Just(Op::Crash),
    ]
}

fn run(ops: &[Op]) -> Result<(), String> {
    let mut primary = Primary::new();
    let mut replica = Replica::default();
    for op in ops {
        match op {
            Op::Insert(choice) => primary.insert(*choice),
            Op::Delete(choice) => primary.delete(*choice),
            Op::Vacuum => primary.vacuum(),
            Op::Settle => primary.settle(),
            Op::DropEmpty => primary.drop_empty(),
            Op::Pass { advance, tear, lag } => {
                replica.pass(&primary.history, *advance, tear, *lag, false)?;
            }
            Op::Crash => replica.crash(),
        }
    }
    // Caught up: one pass at the head, reading everything at one point, holds exactly the list.
    let head = primary.history.len() - 1;
    replica.replayed = head;
    if !replica.pass(&primary.history, 0, &[], 0, true)? {
        return Err("the final pass was not quiescent".into());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn a_replica_derives_exactly_the_visible_rows(ops in proptest::collection::vec(op(), 1..120)) {
        run(&ops).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn a_tid_reused_in_the_same_open_group_is_not_returned_twice() {
    // Row A at TID 1 (position 0) is absorbed; A is deleted and vacuumed, TID 1 is reused for row B
    // (position 1); the replica then reads everything at once.
    let ops = vec![
        Op::Insert(0),
        Op::Pass { advance: 100, tear: vec![], lag: 0 },
        Op::Delete(0),
        Op::Vacuum,
        Op::Insert(0),
        Op::Pass { advance: 100, tear: vec![], lag: 0 },
    ];
    run(&ops).unwrap();
}
