//! Fault injection and crashes at any file operation, against a model of the heap.
//!
//! A small index (flat segments, 4 dimensions, memtables of 6 rows) lives in a
//! [`MemoryDirectory`]. Proptest chooses a workload — inserts, flushes, releases of flushed
//! memtables' status lists, deletes, VACUUMs, merges — and, before any step, a fault at one of
//! the next file operations: ENOSPC, EIO, or a crash of the process there. A failed step leaves
//! things as PostgreSQL would (VACUUM errors out before the heap forgets its dead rows). A crash
//! (or an unsynced manifest, after which pg_strata PANICs) loses shared memory and every unsynced
//! byte; recovery then runs as at a restart: [`repair`] over the files and the status-page model,
//! memtables refilled from the heap. Recovery itself may crash and is run again.
//!
//! After every step the index must hold every live heap row exactly once with its vector, and
//! nothing the heap no longer has; rows deleted but not yet vacuumed may or may not be there.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::Arc;

use proptest::prelude::*;
use strata_engine::metric::Metric;
use strata_engine::segment::IndexKind;
use strata_engine::segment::Segment;
use strata_engine::store::ElementKind;
use strata_lsm::directory::memory::{Fault, MemoryDirectory};
use strata_lsm::files::FileError;
use strata_lsm::manifest::IndexConfig;
use strata_lsm::merge::{self, Prepared};
use strata_lsm::recovery::{repair, RecoveryAction, Status, StatusMemtable};
use strata_lsm::segment_type::{BuildWork, SegmentType};
use strata_lsm::vacuum::vacuum_segments;
use strata_lsm::vector::{VectorFiles, VectorRows, VectorSegmentSet};

const DIMS: usize = 4;

/// Merges published, and those during whose build a VACUUM removed rows (deletions carried over).
static MERGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static MERGES_AFTER_VACUUM: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
const MEMTABLE_ROWS: usize = 6;

fn config() -> IndexConfig {
    IndexConfig {
        dims: DIMS as u32,
        metric: Metric::L2,
        element: ElementKind::F32,
        kind: IndexKind::Flat.into(),
        memtable_rows: MEMTABLE_ROWS as u32,
        rerank_from_heap: false,
        filters: strata_engine::filter::FilterSchema::default(),
    }
}

fn vector_of(tid: u64) -> Vec<f32> {
    (0..DIMS).map(|d| (tid * 7 + d as u64 * 3) as f32 % 11.0 + 0.5).collect()
}

/// A memtable in (simulated) shared memory.
#[derive(Debug, Clone)]
struct Memtable {
    id: u64,
    rows: Vec<u64>,
    deleted: BTreeSet<u64>,
}

/// The heap row of a TID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    Live,
    /// Deleted, not yet vacuumed (the index may or may not still hold it).
    Dead,
}

/// Everything outside the files: the heap, the WAL-logged status pages (always durable here),
/// and shared memory (lost at a crash).
struct World {
    files: VectorFiles,
    dir: MemoryDirectory,
    heap: BTreeMap<u64, Row>,
    next_tid: u64,
    /// Status pages: the newest memtable id and the listed memtables' TIDs.
    max_memtable_id: u64,
    listed: BTreeMap<u64, Vec<u64>>,
    /// Shared memory: memtables (the last one active while not full), flushed ones awaiting
    /// the release of their status lists, the id counter.
    memtables: Vec<Memtable>,
    flushed_unreleased: Vec<u64>,
    next_id: u64,
    /// A merge built but not published yet (shared memory: lost at a crash).
    pending_merge: Option<(merge::MergePlan, u64)>,
    /// Whether a VACUUM removed rows while the pending merge was being built.
    vacuumed_during_merge: bool,
    crashes: u64,
}

#[derive(Debug, Clone)]
enum Step {
    Insert(usize),
    Flush,
    Release,
    Delete(usize),
    Vacuum,
    Merge,
    /// Prepares and builds a merge, leaving it to be published by a later `MergeFinish` (so
    /// that VACUUMs and crashes can come in between).
    MergeStart,
    MergeFinish,
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1usize..9).prop_map(Step::Insert),
        3 => Just(Step::Flush),
        3 => Just(Step::Release),
        3 => (0usize..1000).prop_map(Step::Delete),
        2 => Just(Step::Vacuum),
        1 => Just(Step::Merge),
        2 => Just(Step::MergeStart),
        1 => Just(Step::MergeFinish),
    ]
}

/// A fault planned before a step: at the `at`-th file operation from now.
#[derive(Debug, Clone, Copy)]
struct PlannedFault {
    at: u64,
    kind: u8,
}

fn fault_strategy() -> impl Strategy<Value = Option<PlannedFault>> {
    prop_oneof![
        1 => Just(None),
        1 => (0u64..12, 0u8..3).prop_map(|(at, kind)| Some(PlannedFault { at, kind })),
    ]
}

impl World {
    fn new() -> Self {
        let dir = MemoryDirectory::new();
        let files = VectorFiles::new(Arc::new(dir.clone()));
        files.create(config()).unwrap();
        Self {
            files,
            dir,
            heap: BTreeMap::new(),
            next_tid: 1,
            max_memtable_id: 0,
            listed: BTreeMap::new(),
            memtables: Vec::new(),
            flushed_unreleased: Vec::new(),
            next_id: 1,
            pending_merge: None,
            vacuumed_during_merge: false,
            crashes: 0,
        }
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn insert(&mut self, rows: usize) {
        for _ in 0..rows {
            let needs_new = self.memtables.last().is_none_or(|m| m.rows.len() >= MEMTABLE_ROWS);
            if needs_new {
                // Registered in the status pages before any row can reach it.
                let id = self.take_id();
                self.max_memtable_id = self.max_memtable_id.max(id);
                self.listed.insert(id, Vec::new());
                self.memtables.push(Memtable { id, rows: Vec::new(), deleted: BTreeSet::new() });
            }
            let tid = self.next_tid;
            self.next_tid += 1;
            self.heap.insert(tid, Row::Live);
            let memtable = self.memtables.last_mut().unwrap();
            memtable.rows.push(tid);
            self.listed.get_mut(&memtable.id).unwrap().push(tid);
        }
    }

    /// Flushes the oldest memtable (sealing it); `Err` when a file operation failed.
    fn flush(&mut self) -> Result<(), FileError> {
        let Some(memtable) = self.memtables.first().cloned() else { return Ok(()) };
        let rows: Vec<u64> = memtable.rows.iter().copied().filter(|t| !memtable.deleted.contains(t)).collect();
        if !rows.is_empty() {
            let vectors: Vec<f32> = rows.iter().flat_map(|&t| vector_of(t)).collect();
            let built = Segment::build(
                &self.files,
                &config(),
                VectorRows { ids: rows, vectors: vectors.into(), filters: Vec::new() },
                &BuildWork::new(1),
            )?;
            let file_id = self.take_id();
            self.files.publish_segment(&built, file_id, vec![memtable.id], self.next_id, |_| {})?;
        }
        self.memtables.remove(0);
        self.flushed_unreleased.push(memtable.id);
        Ok(())
    }

    /// The WAL-logged release of flushed memtables' lists (infallible: PostgreSQL's WAL).
    fn release(&mut self) {
        for id in self.flushed_unreleased.drain(..) {
            self.listed.remove(&id);
        }
    }

    fn delete(&mut self, pick: usize) {
        let live: Vec<u64> = self.heap.iter().filter(|(_, r)| **r == Row::Live).map(|(t, _)| *t).collect();
        if !live.is_empty() {
            self.heap.insert(live[pick % live.len()], Row::Dead);
        }
    }

    /// ambulkdelete, then the heap's removal of the dead rows if it returned.
    fn vacuum(&mut self) -> Result<(), FileError> {
        let dead: BTreeSet<u64> = self.heap.iter().filter(|(_, r)| **r == Row::Dead).map(|(t, _)| *t).collect();
        for memtable in &mut self.memtables {
            memtable.deleted.extend(memtable.rows.iter().filter(|t| dead.contains(t)));
        }
        for tids in self.listed.values_mut() {
            tids.retain(|t| !dead.contains(t));
        }
        let set = VectorSegmentSet::open(&self.files, None)?;
        vacuum_segments(&self.files, &set, &mut |tid| dead.contains(&tid), || self.next_id, |_| {})?;
        if !dead.is_empty() && self.pending_merge.is_some() {
            self.vacuumed_during_merge = true;
        }
        self.heap.retain(|_, row| *row == Row::Live);
        Ok(())
    }

    fn merge(&mut self) -> Result<(), FileError> {
        self.merge_start()?;
        self.merge_finish()
    }

    fn merge_finish(&mut self) -> Result<(), FileError> {
        if let Some((plan, rows)) = self.pending_merge.take() {
            let carried = self.vacuumed_during_merge;
            if merge::finish(&self.files, plan, rows, self.next_id, |_| {})? == merge::Finished::Published {
                MERGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if carried {
                    MERGES_AFTER_VACUUM.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        Ok(())
    }

    fn merge_start(&mut self) -> Result<(), FileError> {
        if self.pending_merge.is_some() {
            return Ok(());
        }
        let pending = self.listed.keys().next().copied().unwrap_or(merge::NOTHING_PENDING);
        let mut taken = None;
        let prepared = merge::prepare(
            &self.files,
            MEMTABLE_ROWS as u32,
            pending,
            1,
            || {
                let id = self.next_id;
                taken = Some(id);
                id
            },
            self.next_id,
            |_| {},
        )?;
        if taken.is_some() {
            self.next_id += 1;
        }
        if let Prepared::Build(plan, work) = prepared {
            let rows = (*work).run()?;
            self.pending_merge = Some((plan, rows));
            self.vacuumed_during_merge = false;
        }
        Ok(())
    }

    /// A crash and restart: shared memory is lost, unsynced bytes too (torn as `torn` says);
    /// recovery runs (and, when `crash_in_recovery`, dies once part way and runs again).
    fn crash_and_recover(&mut self, torn: usize, crash_in_recovery: Option<u64>) {
        self.crashes += 1;
        self.dir.crash(|_, len| torn.min(len));
        self.memtables.clear();
        self.flushed_unreleased.clear();
        self.pending_merge = None;
        if let Some(at) = crash_in_recovery {
            self.dir.plan(self.dir.calls() + at, Fault::Crash);
            if self.recover().is_ok() && !self.dir.is_dead() {
                self.dir.clear_plan();
                return;
            }
            self.dir.crash(|_, len| torn.min(len));
            self.memtables.clear();
        }
        self.recover().expect("recovery without faults succeeds");
    }

    fn recover(&mut self) -> Result<(), FileError> {
        let manifest = self.files.manifest()?;
        self.next_id = manifest.next_id.max(self.max_memtable_id + 1);
        let status = Status {
            max_memtable_id: self.max_memtable_id,
            memtables: self.listed.iter().map(|(id, tids)| StatusMemtable { id: *id, tids: tids.clone() }).collect(),
        };
        let repairs = repair(&self.files, &status, false, self.next_id, |_| {})?;
        let mut refilled = Vec::new();
        for action in repairs.refill {
            let RecoveryAction::RebuildMemtable { memtable, tids } = action else { unreachable!("refills only") };
            // Fetched from the heap: versions it still has (live or dead, not vacuumed).
            let rows: Vec<u64> = tids.into_iter().filter(|t| self.heap.contains_key(t)).collect();
            refilled.push(Memtable { id: memtable, rows, deleted: BTreeSet::new() });
        }
        self.memtables = refilled;
        Ok(())
    }

    /// The index's rows: TID → vector, every copy (segments' live rows, memtables' live rows).
    fn index_rows(&self) -> Vec<(u64, Vec<f32>)> {
        let set = VectorSegmentSet::open(&self.files, None).expect("the index's files are readable");
        let mut rows = Vec::new();
        for open in &set.segments {
            let store = open.segment.store().expect("flat segments store vectors");
            for (row, &tid) in open.segment.ids().iter().enumerate() {
                if !open.deleted.as_ref().is_some_and(|d| d.contains(row)) {
                    rows.push((tid, store.row_f32(row).into_owned()));
                }
            }
        }
        for memtable in &self.memtables {
            for &tid in memtable.rows.iter().filter(|t| !memtable.deleted.contains(t)) {
                rows.push((tid, vector_of(tid)));
            }
        }
        rows
    }

    /// The invariant: every live heap row exactly once with its vector; nothing the heap lost.
    fn check(&self) -> Result<(), TestCaseError> {
        let rows = self.index_rows();
        let mut seen = BTreeSet::new();
        for (tid, vector) in &rows {
            prop_assert!(seen.insert(*tid), "TID {} is in the index twice", tid);
            prop_assert!(self.heap.contains_key(tid), "TID {} is in the index but not in the heap", tid);
            prop_assert_eq!(vector, &vector_of(*tid), "TID {}'s vector", tid);
        }
        for (tid, row) in &self.heap {
            if *row == Row::Live {
                prop_assert!(seen.contains(tid), "live TID {} is missing from the index", tid);
            }
        }
        Ok(())
    }
}

fn run_step(world: &mut World, step: &Step) -> Result<(), FileError> {
    match step {
        Step::Insert(rows) => world.insert(*rows),
        Step::Flush => world.flush()?,
        Step::Release => world.release(),
        Step::Delete(pick) => world.delete(*pick),
        Step::Vacuum => world.vacuum()?,
        Step::Merge => world.merge()?,
        Step::MergeStart => world.merge_start()?,
        Step::MergeFinish => world.merge_finish()?,
    }
    Ok(())
}

/// One workload: its steps with their faults, how much of an unsynced file a crash keeps, and
/// where recovery itself crashes.
type Workload = (Vec<(Step, Option<PlannedFault>)>, usize, Option<u64>);

fn workload() -> impl Strategy<Value = Workload> {
    (prop::collection::vec((step_strategy(), fault_strategy()), 1..60), 0usize..400, prop::option::of(0u64..30))
}

/// Runs one workload, checking after every step; returns (faults delivered, crashes).
fn run_workload((steps, torn, crash_in_recovery): &Workload) -> Result<(u64, u64), TestCaseError> {
    let mut world = World::new();
    for (step, fault) in steps {
        if let Some(fault) = fault {
            let planned = match fault.kind {
                0 => Fault::Error(io::ErrorKind::StorageFull),
                1 => Fault::Error(io::ErrorKind::Other),
                _ => Fault::Crash,
            };
            world.dir.plan(world.dir.calls() + fault.at, planned);
        }
        let outcome = run_step(&mut world, step);
        // A fault planned past the step's last file operation is not delivered.
        world.dir.clear_plan();
        // The process died there, or a manifest is in place but maybe not durable (PANIC).
        let crashed = world.dir.is_dead() || outcome.as_ref().is_err_and(FileError::is_unsynced_manifest);
        if crashed {
            world.crash_and_recover(*torn, *crash_in_recovery);
        }
        world.check()?;
    }
    let delivered = world.dir.delivered();
    // Finally: a clean crash and restart, then everything flushed and merged without faults.
    world.crash_and_recover(*torn, None);
    world.check()?;
    while !world.memtables.is_empty() {
        world.flush().unwrap();
    }
    world.release();
    world.vacuum().unwrap();
    world.merge().unwrap();
    world.check()?;
    Ok((delivered, world.crashes))
}

#[test]
fn index_equals_the_heap_after_any_fault_or_crash() {
    let mut runner =
        proptest::test_runner::TestRunner::new(ProptestConfig { cases: 1000, ..ProptestConfig::default() });
    let faults = std::sync::atomic::AtomicU64::new(0);
    let crashes = std::sync::atomic::AtomicU64::new(0);
    let result = runner.run(&workload(), |workload| {
        let (delivered, crashed) = run_workload(&workload)?;
        faults.fetch_add(delivered, std::sync::atomic::Ordering::Relaxed);
        crashes.fetch_add(crashed, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (faults, crashes) = (faults.into_inner(), crashes.into_inner());
    let merges = MERGES.load(std::sync::atomic::Ordering::Relaxed);
    let carried = MERGES_AFTER_VACUUM.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "1000 workloads: {faults} faults delivered, {crashes} crashes recovered, {merges} merges published \
         ({carried} with deletions made during their build)"
    );
    // The workloads really hit faults and crashes mid-step (not only clean runs; each workload
    // also ends with one clean crash).
    assert!(faults > 1000 && crashes > 1000 + 300, "{faults} faults, {crashes} crashes");
}

#[test]
fn a_crash_between_publishing_and_releasing_keeps_exactly_the_listed_rows() {
    let mut world = World::new();
    world.insert(10);
    world.flush().unwrap();
    world.delete(0);
    world.vacuum().unwrap();
    // The flushed memtable is still listed: recovery trims its segment by the status list.
    world.crash_and_recover(0, None);
    world.check().unwrap();
    assert_eq!(world.index_rows().len(), 9);
}

#[test]
fn rows_vacuumed_while_a_merge_is_built_stay_deleted() {
    let mut world = World::new();
    for _ in 0..4 {
        world.insert(MEMTABLE_ROWS);
        world.flush().unwrap();
    }
    world.release();
    world.merge_start().unwrap();
    assert!(world.pending_merge.is_some(), "four released segments of one tier are merged");
    for pick in [0, 5, 11] {
        world.delete(pick);
    }
    world.vacuum().unwrap();
    world.merge_finish().unwrap();
    world.check().unwrap();
    assert_eq!(world.index_rows().len(), 4 * MEMTABLE_ROWS - 3);
    world.crash_and_recover(0, None);
    world.check().unwrap();
}
