//! Model-based concurrency test of the whole runtime: writers, the flusher, merges, VACUUM and
//! progressive scans ([`crate::scan::Scan`]) run as threads against each other (under shuttle's schedulers, which choose the
//! interleavings and make every failure reproducible), over the real memtable protocol and slab
//! lifecycle ([`crate::slabs`]), the real flush ([`crate::flush`]), merges ([`crate::merge`]),
//! deletion bitmaps and segment sets, with flat (exact) segments in a [`MemoryDirectory`].
//!
//! The reference model is a map of rows (being inserted → live; picked by a VACUUM → being
//! deleted; then gone). Checked after every step of every thread:
//! - a scan sees every row that was live when it started and still is when it ends, each with
//!   its own vector, and nothing that was never inserted (rows deleted meanwhile may or may not
//!   be there); a scan's memtables and segment set together hold no row that its snapshot's
//!   consistency rules exclude (a row is in a memtable of the snapshot or in the segment set);
//! - after the threads end and everything is flushed: the index holds exactly the model's live
//!   rows, once each, and the exact top-k of queries equals brute force over them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use shuttle::sync::Mutex;
use shuttle::thread;
use strata_engine::metric::Metric;
use strata_engine::segment::{IndexKind, SearchParams, Segment};
use strata_engine::store::ElementKind;

use crate::directory::memory::MemoryDirectory;
use crate::directory::{Directory, FileWriter};
use crate::flush::{flush, FlushTarget};
use crate::manifest::IndexConfig;
use crate::memtable::{Insert, MemtableLayout};
use crate::merge::{self, Prepared};
use crate::scan::{round, Candidates, Limits, Reranker, Scan, ScanOrder, ScanQuery, Sharing, Sources};
use crate::segment_type::{BuildWork, SegmentType};
use crate::slabs::test_region::{TestLock, TestRegion};
use crate::slabs::{DirectoryLock, LockMode, Slabs};
use crate::sync::{AtomicU64, Ordering};
use crate::vacuum::{vacuum_memtables, vacuum_segments};
use crate::vector::{VectorFiles, VectorSegmentSet};

const DIMS: usize = 2;
const CAPACITY: usize = 4;
const WRITERS: u64 = 2;
const ROWS_PER_WRITER: u64 = 16;

/// A [`MemoryDirectory`] whose every call is a scheduling point, as file I/O takes time: other
/// threads run between a flush's build, its file write and its manifest update.
struct YieldingDirectory(MemoryDirectory);

impl Directory for YieldingDirectory {
    fn create(&self, name: &str) -> std::io::Result<Box<dyn FileWriter>> {
        thread::yield_now();
        self.0.create(name)
    }
    fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        thread::yield_now();
        self.0.rename(from, to)
    }
    fn sync_dir(&self, renamed: &str) -> std::io::Result<()> {
        thread::yield_now();
        self.0.sync_dir(renamed)
    }
    fn list(&self) -> std::io::Result<Vec<String>> {
        thread::yield_now();
        self.0.list()
    }
    fn remove(&self, name: &str) -> std::io::Result<()> {
        thread::yield_now();
        self.0.remove(name)
    }
    fn exists(&self, name: &str) -> std::io::Result<bool> {
        thread::yield_now();
        self.0.exists(name)
    }
    fn open_read(&self, name: &str) -> std::io::Result<strata_engine::format::SegmentBytes> {
        thread::yield_now();
        self.0.open_read(name)
    }
    fn file_len(&self, name: &str) -> std::io::Result<u64> {
        self.0.file_len(name)
    }
    fn describe(&self, name: &str) -> String {
        self.0.describe(name)
    }
}

fn config() -> IndexConfig {
    IndexConfig {
        dims: DIMS as u32,
        metric: Metric::L2,
        element: ElementKind::F32,
        kind: IndexKind::Flat.into(),
        memtable_rows: CAPACITY as u32,
        rerank_from_heap: false,
        filters: strata_engine::filter::FilterSchema::default(),
    }
}

fn vector_of(tid: u64) -> [f32; DIMS] {
    [(tid % 7) as f32, (tid % 5) as f32 + tid as f32 / 100.0]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowState {
    /// Its writer is appending it (pg_strata: its transaction has not committed; scans may see
    /// the entry, the heap's visibility check hides it).
    Inserting,
    Live,
    Deleting,
    Gone,
}

struct World {
    region: TestRegion,
    lock: TestLock,
    files: VectorFiles,
    next_id: AtomicU64,
    /// The manifest generation published for scans (pg_strata: in shared memory, stored under the
    /// directory lock).
    generation: AtomicU64,
    manifest_lock: Mutex<()>,
    meta_lock: Mutex<()>,
    model: Mutex<BTreeMap<u64, RowState>>,
    writers_done: AtomicU64,
}

impl World {
    fn new() -> Arc<Self> {
        let files = VectorFiles::new(Arc::new(YieldingDirectory(MemoryDirectory::new())));
        let manifest = files.create(config()).unwrap();
        Arc::new(Self {
            region: TestRegion::new(4, CAPACITY, DIMS, 1),
            lock: TestLock::default(),
            files,
            next_id: AtomicU64::new(manifest.next_id),
            generation: AtomicU64::new(manifest.generation),
            manifest_lock: Mutex::new(()),
            meta_lock: Mutex::new(()),
            model: Mutex::default(),
            writers_done: AtomicU64::new(0),
        })
    }

    fn slabs(&self) -> Slabs<'_, TestRegion, TestLock> {
        Slabs::new(&self.region, &self.lock)
    }

    /// Publishes `generation` for scans, under the exclusive directory lock.
    fn publish(&self, generation: u64) {
        let _lock = self.lock.lock(LockMode::Exclusive);
        self.generation.store(generation, Ordering::Release);
    }

    fn live(&self) -> BTreeSet<u64> {
        self.model.lock().unwrap().iter().filter(|(_, s)| **s == RowState::Live).map(|(t, _)| *t).collect()
    }

    /// What a scan sees: every row of its memtable snapshot and of the segment set at (or after)
    /// the snapshot's generation, deleted rows left out, as `(tid, vector)`. The set is read from
    /// the manifest on disk, as pg_strata's readers may (a process's cached set, or the manifest
    /// a flush has written but not yet published): a memtable flushed meanwhile is in both, and
    /// [`ReadSnapshot::release_held`](crate::slabs::ReadSnapshot::release_held) leaves it out
    /// of the snapshot, so that every row is read exactly once (what BM25 statistics and
    /// `strata_index_stats` count).
    fn scan(&self) -> Vec<(u64, Vec<f32>)> {
        let (mut snapshot, generation) = self.slabs().snapshot(0, || self.generation.load(Ordering::Acquire));
        // A flush may finish between the snapshot and the read of the manifest.
        thread::yield_now();
        let set = VectorSegmentSet::open(&self.files, None).expect("segments readable");
        assert!(set.generation >= generation, "a scan's segment set is never older than its snapshot");
        snapshot.release_held(|id| set.covers(id));
        let mut rows = Vec::new();
        for memtable in snapshot.iter() {
            memtable.for_each_live(|tid, vector| rows.push((tid, vector.to_vec())));
        }
        drop(snapshot);
        for open in &set.segments {
            let store = open.segment.store().expect("flat segments store vectors");
            for (row, &tid) in open.segment.ids().iter().enumerate() {
                if !open.deleted.as_ref().is_some_and(|d| d.contains(row)) {
                    rows.push((tid, store.row_f32(row).into_owned()));
                }
            }
        }
        rows
    }
}

fn writer(world: &World, writer: u64) {
    let slabs = world.slabs();
    let layout = MemtableLayout::new(CAPACITY, DIMS);
    for n in 0..ROWS_PER_WRITER {
        let tid = 1000 * (writer + 1) + n;
        world.model.lock().unwrap().insert(tid, RowState::Inserting);
        loop {
            if let Some(pin) = slabs.pin_active(0) {
                match pin.insert(tid, &vector_of(tid)) {
                    Insert::Done => {
                        // Recorded while pinned (pg_strata: the status pages, same transaction).
                        world.model.lock().unwrap().insert(tid, RowState::Live);
                        break;
                    }
                    Insert::Full => {
                        let (slab, id) = (pin.slab(), pin.segment_id());
                        drop(pin);
                        slabs.seal(0, slab, id);
                    }
                }
                continue;
            }
            let meta = world.meta_lock.lock().unwrap();
            if slabs.has_active(0) {
                continue;
            }
            if let Ok(allocation) = slabs.allocate(0, layout, || world.next_id.fetch_add(1, Ordering::AcqRel)) {
                allocation.activate();
            } else {
                // No free slab: let the flusher free one.
                drop(meta);
                thread::yield_now();
            }
        }
    }
    world.writers_done.fetch_add(1, Ordering::AcqRel);
}

/// One step of the flusher: frees unread slabs, flushes one flushable memtable; whether it did.
fn flush_step(world: &World) -> bool {
    let slabs = world.slabs();
    slabs.free_unread();
    let Some(info) = slabs.infos().into_iter().find(|info| info.flushable().is_ok()) else { return false };
    let _manifest = world.manifest_lock.lock().unwrap();
    flush(
        slabs,
        &world.files,
        DIMS,
        FlushTarget { slab: info.slab, index: 0, segment_id: info.segment_id },
        || world.next_id.fetch_add(1, Ordering::AcqRel),
        || world.next_id.load(Ordering::Acquire),
        |rows| Segment::build(&world.files, &config(), rows, &BuildWork::new(1)),
        |manifest| {
            if let Some(manifest) = manifest {
                // Under the exclusive directory lock already (flush takes it).
                world.generation.store(manifest.generation, Ordering::Release);
            }
        },
    )
    .expect("flushing to memory does not fail");
    true
}

fn flusher(world: &World) {
    loop {
        let writers_done = world.writers_done.load(Ordering::Acquire) == WRITERS;
        if writers_done {
            world.slabs().seal_active(0);
        }
        if !flush_step(world) {
            if writers_done && world.slabs().infos().iter().all(|i| !i.state.holds_unflushed_rows()) {
                world.slabs().free_unread();
                return;
            }
            thread::yield_now();
        }
    }
}

/// Merges published and VACUUM passes that marked rows, over all schedules (the test asserts
/// the workload reached them).
static MERGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static DELETIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Merges as pg_strata's service does: prepared and finished under the manifest lock, built
/// without it (so flushes and VACUUM run meanwhile).
fn merger(world: &World) {
    for _ in 0..6 {
        let manifest_lock = world.manifest_lock.lock().unwrap();
        let prepared = merge::prepare(
            &world.files,
            CAPACITY as u32,
            merge::NOTHING_PENDING,
            1,
            || world.next_id.fetch_add(1, Ordering::AcqRel),
            world.next_id.load(Ordering::Acquire),
            |m| world.publish(m.generation),
        )
        .unwrap();
        drop(manifest_lock);
        if let Prepared::Build(plan, work) = prepared {
            let rows = (*work).run().unwrap();
            let _manifest = world.manifest_lock.lock().unwrap();
            let finished = merge::finish(&world.files, plan, rows, world.next_id.load(Ordering::Acquire), |m| {
                world.publish(m.generation);
            })
            .unwrap();
            if finished == merge::Finished::Published {
                MERGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        thread::yield_now();
    }
}

fn vacuum(world: &World) {
    for round in 0..4u64 {
        let dead: BTreeSet<u64> = {
            let mut model = world.model.lock().unwrap();
            let picked: Vec<u64> = model
                .iter()
                .filter(|(tid, s)| **s == RowState::Live && (**tid + round) % 3 == 0)
                .map(|(t, _)| *t)
                .take(3)
                .collect();
            for tid in &picked {
                model.insert(*tid, RowState::Deleting);
            }
            picked.into_iter().collect()
        };
        {
            let _manifest = world.manifest_lock.lock().unwrap();
            let (snapshot, ()) = world.slabs().snapshot(0, || ());
            let mut is_dead = |tid: u64| dead.contains(&tid);
            vacuum_memtables(&snapshot[..], &mut is_dead);
            drop(snapshot);
            let set = VectorSegmentSet::open(&world.files, None).unwrap();
            let next_id = || world.next_id.load(Ordering::Acquire);
            vacuum_segments(&world.files, &set, &mut is_dead, next_id, |m| {
                DELETIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                world.publish(m.generation);
            })
            .unwrap();
        }
        // The heap removes the rows once ambulkdelete returned.
        let mut model = world.model.lock().unwrap();
        for tid in dead {
            model.insert(tid, RowState::Gone);
        }
        drop(model);
        thread::yield_now();
    }
}

/// The index as the progressive scan's sources, as pg_strata's scan supplies them: each round
/// takes a fresh snapshot (memtables and the segment set of its generation or newer) and returns
/// each memtable's and segment's exact nearest rows by TID.
struct IndexSources<'a> {
    world: &'a World,
    query: [f32; DIMS],
}

impl Sources for IndexSources<'_> {
    fn search(&mut self, depth: usize, sharing: Sharing) -> Candidates {
        let world = self.world;
        let (mut snapshot, _) = world.slabs().snapshot(0, || world.generation.load(Ordering::Acquire));
        let set = VectorSegmentSet::open(&world.files, None).expect("segments readable");
        snapshot.release_held(|id| set.covers(id));
        let query = ScanQuery::new(self.query.to_vec(), &config()).expect("the index's dimensions");
        round::search(&set.segments, &snapshot, &query, depth, &SearchParams::default(), sharing, None).candidates
    }
}

/// Flat segments are exact: nothing is reranked.
struct NoRerank;

impl Reranker for NoRerank {
    fn exact_distance(&mut self, _row: u64) -> Option<f32> {
        unreachable!("flat segments return exact distances")
    }
}

/// Scans without a limit through [`Scan`] (rounds of growing depth, each over a fresh snapshot,
/// as the executor keeps asking): every row live throughout the scan is returned, once, and
/// nothing that was never inserted.
fn scanner(world: &World) {
    // Relaxed: every row a round finds comes out (rows arriving during the scan may be nearer).
    let limits = Limits { first_depth: 3, max_tuples: 10_000, oversample: 1.0, order: ScanOrder::Relaxed };
    for round in 0..3u8 {
        let before = world.live();
        let mut sources = IndexSources { world, query: [f32::from(round), 2.0] };
        let mut scan = Scan::new();
        let mut found = BTreeSet::new();
        while let Some(neighbor) = scan.next(limits, &mut sources, &mut NoRerank) {
            assert!(found.insert(neighbor.row), "the scan returned row {} twice", neighbor.row);
        }
        let after = world.live();
        let model = world.model.lock().unwrap().clone();
        for tid in &found {
            assert!(model.contains_key(tid), "a scan found row {tid}, which was never inserted");
        }
        for tid in before.intersection(&after) {
            assert!(found.contains(tid), "row {tid} was live throughout the scan but the scan missed it");
        }
        // Vectors as stored: what a scan reads is what its writer wrote, each row once.
        let mut read = BTreeSet::new();
        for (tid, vector) in world.scan() {
            assert_eq!(vector.as_slice(), vector_of(tid).as_slice(), "row {tid}'s vector");
            assert!(read.insert(tid), "row {tid} was read twice: from a memtable and the segment holding it");
        }
        thread::yield_now();
    }
}

/// After the threads: the index is exactly the model's live rows, and exact search equals brute
/// force over them.
fn check_final(world: &World) {
    let rows = world.scan();
    let mut seen = BTreeSet::new();
    for (tid, _) in &rows {
        assert!(seen.insert(*tid), "row {tid} is in the index twice after every flush");
    }
    assert_eq!(seen, world.live(), "the index holds exactly the live rows");
    let set = VectorSegmentSet::open(&world.files, None).unwrap();
    for query in [[0.0f32, 0.0], [3.0, 2.5], [6.0, 4.9]] {
        let mut got: Vec<(f32, u64)> = set
            .segments
            .iter()
            .flat_map(|open| {
                <Segment as SegmentType>::search(
                    &open.segment,
                    &query,
                    5,
                    &SearchParams::default(),
                    open.deleted.as_ref(),
                )
                .into_iter()
                .map(|n| (n.distance, open.segment.ids()[n.row as usize]))
                .collect::<Vec<_>>()
            })
            .collect();
        got.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut expected: Vec<(f32, u64)> = world
            .live()
            .into_iter()
            .map(|tid| {
                let v = vector_of(tid);
                ((v[0] - query[0]).powi(2) + (v[1] - query[1]).powi(2), tid)
            })
            .collect();
        expected.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let distances = |list: &[(f32, u64)]| list.iter().take(5).map(|p| p.0).collect::<Vec<_>>();
        let (got_d, expected_d) = (distances(&got), distances(&expected));
        assert_eq!(got_d.len(), expected_d.len());
        for (g, e) in got_d.iter().zip(&expected_d) {
            assert!(
                (g - e).abs() <= 1e-4 * e.max(1.0),
                "top-5 distances {got_d:?} differ from brute force {expected_d:?}"
            );
        }
    }
}

fn run() {
    let world = World::new();
    let mut threads = Vec::new();
    for w in 0..WRITERS {
        let world = Arc::clone(&world);
        threads.push(thread::spawn(move || writer(&world, w)));
    }
    for work in [flusher as fn(&World), merger, vacuum, scanner] {
        let world = Arc::clone(&world);
        threads.push(thread::spawn(move || work(&world)));
    }
    for thread in threads {
        thread.join().unwrap();
    }
    check_final(&world);
}

#[test]
fn writers_flushes_merges_vacuum_and_scans_keep_the_index_equal_to_the_model() {
    shuttle::check_random(run, 150);
    shuttle::check_pct(run, 150, 3);
    let (merges, deletions) =
        (MERGES.load(std::sync::atomic::Ordering::Relaxed), DELETIONS.load(std::sync::atomic::Ordering::Relaxed));
    eprintln!("{merges} merges, {deletions} bitmap deletions");
    assert!(merges > 100 && deletions > 100, "the schedules reached {merges} merges and {deletions} bitmap deletions");
}
