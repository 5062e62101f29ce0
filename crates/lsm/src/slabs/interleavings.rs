//! Writers, sealers, flushers and scans run against each other under shuttle, which explores
//! their interleavings (every atomic and lock operation of the lifecycle is a scheduling point).
//!
//! The threads follow pg_strata's protocol: a writer pins its index's ACTIVE memtable, appends,
//! records the row's TID (pg_strata: in the status pages), and unpins; when the memtable is full
//! it seals it, and allocates the next one under its index's metadata lock. The flusher frees
//! unread FLUSHED slabs, begins flushing a flushable memtable, reads its rows and publishes them
//! with `finish_flush_locked` under one hold of the directory lock. Scans take a snapshot.
//!
//! Rows say where they belong: TID `1000 · index + n` and vector `[memtable id, TID]`. Besides
//! the region's own checks (two writers in a slot, a read of a slot being written), every test
//! asserts from the protocol that a flush or a scan reads only rows written for that memtable, that
//! a flush reads only rows whose TID is recorded, that every inserted row ends up in exactly one
//! published memtable (the one its writer reported), and that every ACTIVE memtable is its index's
//! active one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use shuttle::sync::Mutex;
use shuttle::thread;

use super::test_region::{TestLock, TestRegion};
use super::{DirectoryLock, LockMode, SlabMemory, SlabState, Slabs};
use crate::memtable::{Insert, Memtable, MemtableLayout};
use crate::sync::{AtomicU64, Ordering};

/// Schedules tried per scheduler; each test runs a random and a PCT scheduler.
const SCHEDULES: usize = 400;

/// Runs `test` under shuttle's random scheduler and its PCT scheduler (depth 3).
fn explore(test: fn()) {
    shuttle::check_random(test, SCHEDULES);
    shuttle::check_pct(test, SCHEDULES, 3);
}

/// The shared state of one run: the region, the lock, and what pg_strata keeps outside the slabs.
struct World {
    region: TestRegion,
    lock: TestLock,
    layout: MemtableLayout,
    next_id: AtomicU64,
    /// Per index: the metadata lock that serialises allocations (pg_strata: the metadata page).
    meta: Vec<Mutex<()>>,
    /// TIDs recorded per memtable by writers while pinned (pg_strata: the status pages).
    recorded: Mutex<BTreeMap<u64, Vec<u64>>>,
    /// TIDs per published memtable (pg_strata: segments in the manifest).
    published: Mutex<BTreeMap<u64, Vec<u64>>>,
    /// `(TID, memtable id)` of every finished insert.
    done: Mutex<Vec<(u64, u64)>>,
    /// Whether rows are span rows ([`crate::memtable::spans`]) of [`span_words`] instead of
    /// [`row_vector`]s.
    spans: bool,
}

impl World {
    fn new(slabs: usize, capacity: usize, indexes: usize) -> Arc<Self> {
        Arc::new(Self {
            region: TestRegion::new(slabs, capacity, 2, indexes),
            lock: TestLock::default(),
            layout: MemtableLayout::new(capacity, 2),
            next_id: AtomicU64::new(1),
            meta: (0..indexes).map(|_| Mutex::new(())).collect(),
            recorded: Mutex::default(),
            published: Mutex::default(),
            done: Mutex::default(),
            spans: false,
        })
    }

    /// A world whose rows are span rows.
    fn with_spans(slabs: usize, capacity: usize, indexes: usize) -> Arc<Self> {
        let mut world = Arc::try_unwrap(Self::new(slabs, capacity, indexes)).ok().expect("not shared yet");
        world.spans = true;
        Arc::new(world)
    }

    /// Calls `visit(tid)` for every live row of `memtable` (SegmentID `id`), checking that the
    /// row was written for it.
    fn for_each_row(&self, memtable: &Memtable<'_, TestRegion>, id: u64, mut visit: impl FnMut(u64)) {
        if self.spans {
            memtable.for_each_live_span(|_, tid, words| {
                assert_eq!(words, span_words(id, tid), "memtable {id} holds a span row written for another memtable");
                visit(tid);
            });
        } else {
            memtable.for_each_live(|tid, vector| {
                assert_eq!(vector, row_vector(id, tid), "memtable {id} holds a row written for another memtable");
                visit(tid);
            });
        }
    }

    fn slabs(&self) -> Slabs<'_, TestRegion, TestLock> {
        Slabs::new(&self.region, &self.lock)
    }

    fn is_published(&self, memtable: u64) -> bool {
        self.published.lock().unwrap().contains_key(&memtable)
    }
}

fn tid(index: usize, n: u64) -> u64 {
    1000 * index as u64 + n
}

fn row_vector(memtable: u64, tid: u64) -> [f32; 2] {
    [memtable as f32, tid as f32]
}

/// A span row of 1 to 6 words (1 to 4 slots of 2 words), saying where it belongs.
fn span_words(memtable: u64, tid: u64) -> Vec<u32> {
    let words = 1 + (tid % 6) as u32;
    (0..words).map(|k| if k == 0 { memtable as u32 } else { tid as u32 * 10 + k }).collect()
}

/// Inserts row `tid` into index `index` as pg_strata's aminsert does; returns the memtable that
/// took it.
fn insert(world: &World, index: usize, tid: u64) -> u64 {
    let slabs = world.slabs();
    loop {
        if let Some(pin) = slabs.pin_active(index) {
            let memtable = pin.segment_id();
            let inserted = if world.spans {
                pin.insert_span(tid, &span_words(memtable, tid)).expect("a span row fits in a memtable")
            } else {
                pin.insert(tid, &row_vector(memtable, tid))
            };
            match inserted {
                Insert::Done => {
                    world.recorded.lock().unwrap().entry(memtable).or_default().push(tid);
                    drop(pin);
                    world.done.lock().unwrap().push((tid, memtable));
                    return memtable;
                }
                Insert::Full => {
                    let slab = pin.slab();
                    drop(pin);
                    slabs.seal(index, slab, memtable);
                }
            }
            continue;
        }
        let meta = world.meta[index].lock().unwrap();
        if slabs.has_active(index) {
            continue;
        }
        if let Ok(allocation) = slabs.allocate(index, world.layout, || world.next_id.fetch_add(1, Ordering::AcqRel)) {
            world.recorded.lock().unwrap().insert(allocation.segment_id(), Vec::new());
            allocation.activate();
        } else {
            // No free slab: let the flusher free one.
            drop(meta);
            thread::yield_now();
        }
    }
}

/// Frees unread FLUSHED slabs, then flushes one flushable memtable as pg_strata's service does;
/// returns the memtable flushed.
fn flush_one(world: &World) -> Option<u64> {
    let slabs = world.slabs();
    slabs.free_unread();
    let candidate = slabs.infos().into_iter().find(|info| info.flushable().is_ok())?;
    let id = candidate.segment_id;
    let memtable = slabs.begin_flush(candidate.slab, candidate.index, id).ok()?;
    let mut tids = Vec::new();
    world.for_each_row(&memtable, id, |tid| {
        assert_eq!(tid / 1000, candidate.index as u64, "memtable {id} holds row {tid} of another index");
        tids.push(tid);
    });
    let recorded = world.recorded.lock().unwrap().get(&id).cloned().unwrap_or_default();
    for tid in &tids {
        assert!(
            recorded.contains(tid),
            "memtable {id} was flushed before its row {tid} was recorded: a writer pinned it"
        );
    }
    let _lock = world.lock.lock(LockMode::Exclusive);
    world.published.lock().unwrap().insert(id, tids);
    slabs.finish_flush_locked(&memtable);
    Some(id)
}

/// Flushes until `until()` holds, letting other threads run between attempts.
fn flush_until(world: &World, until: impl Fn() -> bool) {
    while !until() {
        flush_one(world);
        thread::yield_now();
    }
}

/// What one thread of a test does, given the world.
type Body = Box<dyn FnOnce(&World) + Send>;

/// Runs every body on a thread of its own and waits for all of them.
fn run_together(world: &Arc<World>, bodies: Vec<Body>) {
    let threads: Vec<_> = bodies
        .into_iter()
        .map(|body| {
            let world = world.clone();
            thread::spawn(move || body(&world))
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

/// One writer per list of TIDs of index 0, inserting them in order, and a flusher that flushes
/// until the writers are done.
fn writers_and_flusher(writers: Vec<Vec<u64>>) -> Vec<Body> {
    let writing = Arc::new(AtomicU64::new(writers.len() as u64));
    let mut bodies: Vec<Body> = writers
        .into_iter()
        .map(|tids| {
            let writing = writing.clone();
            Box::new(move |world: &World| {
                for tid in tids {
                    insert(world, 0, tid);
                }
                writing.fetch_sub(1, Ordering::AcqRel);
            }) as Body
        })
        .collect();
    bodies.push(Box::new(move |world: &World| flush_until(world, || writing.load(Ordering::Acquire) == 0)));
    bodies
}

/// Reads index `index` through a snapshot twice, checking every row against its memtable and that
/// every insert finished before the snapshot is in its memtables or in its published segments.
fn scan(world: &World, index: usize) {
    let finished_before: Vec<(u64, u64)> = world.done.lock().unwrap().clone();
    let (snapshot, published) = world.slabs().snapshot(index, || world.published.lock().unwrap().clone());
    let ids: Vec<u64> = snapshot.iter().map(Memtable::segment_id).collect();
    for id in &ids {
        assert!(!published.contains_key(id), "memtable {id} is both searchable and published in one snapshot");
    }
    let mut seen = BTreeSet::new();
    for _ in 0..2 {
        for (memtable, &id) in snapshot.iter().zip(&ids) {
            world.for_each_row(memtable, id, |tid| {
                seen.insert(tid);
            });
            thread::yield_now();
        }
    }
    for (tid, id) in finished_before.into_iter().filter(|&(tid, _)| tid / 1000 == index as u64) {
        let in_segment = published.get(&id).is_some_and(|tids| tids.contains(&tid));
        assert!(seen.contains(&tid) || in_segment, "row {tid} of memtable {id} is missing from a later snapshot");
    }
}

/// After every thread has finished: checks the active-slab markers, flushes everything (as at
/// shutdown) and checks that every inserted row is published exactly once, in its memtable.
fn settle_and_check(world: &World) {
    let slabs = world.slabs();
    for info in slabs.infos().into_iter().filter(|info| info.state == SlabState::Active) {
        assert_eq!(
            world.region.active_slab(info.index).get(),
            Some(info.slab),
            "memtable {} is ACTIVE but not its index's active memtable: nothing seals it",
            info.segment_id
        );
    }
    slabs.seal_all();
    while flush_one(world).is_some() {}
    slabs.free_unread();
    let counts = slabs.counts();
    assert_eq!(counts.get(SlabState::Free), world.region.slab_count(), "slabs left in use: {counts:?}");
    let published = world.published.lock().unwrap();
    for &(tid, memtable) in world.done.lock().unwrap().iter() {
        let copies: Vec<u64> = published.iter().filter(|(_, tids)| tids.contains(&tid)).map(|(&id, _)| id).collect();
        assert_eq!(copies, [memtable], "row {tid} (into memtable {memtable}) is published in memtables {copies:?}");
    }
    let rows: usize = published.values().map(Vec::len).sum();
    assert_eq!(rows, world.done.lock().unwrap().len(), "rows published that no writer inserted");
}

/// A writer pins index 0's ACTIVE memtable while another thread seals it; the flusher must not
/// begin the flush until the pin is gone. Then the slab is freed and taken by index 1 while the
/// writer, if it came late, looks for index 0's memtable again: it must never write into the
/// reused slab.
#[test]
fn a_pinned_memtable_is_flushed_after_its_writer_and_a_late_writer_never_writes_into_its_reused_slab() {
    explore(|| {
        let world = World::new(2, 4, 2);
        let first = insert(&world, 0, tid(0, 1));
        run_together(
            &world,
            vec![
                Box::new(|world| {
                    insert(world, 0, tid(0, 2));
                }),
                Box::new(|world| {
                    world.slabs().seal_active(0);
                }),
                Box::new(move |world| {
                    flush_until(world, || world.is_published(first));
                    world.slabs().free_unread();
                    insert(world, 1, tid(1, 1));
                    insert(world, 1, tid(1, 2));
                }),
            ],
        );
        settle_and_check(&world);
    });
}

/// Two writers append to a memtable while it is sealed and the flusher tries to flush it: one may
/// be preempted between reserving its slot and setting the ready bit. The flush waits for both
/// (pins, completeness); no row is lost and none is published twice.
#[test]
fn a_flush_waits_for_writers_between_reserve_and_ready() {
    explore(|| {
        let world = World::new(3, 3, 1);
        let first = insert(&world, 0, tid(0, 1));
        let mut bodies: Vec<Body> = vec![
            Box::new(|world| {
                world.slabs().seal_active(0);
            }),
            Box::new(move |world| flush_until(world, || world.is_published(first))),
        ];
        for n in [2, 3] {
            bodies.push(Box::new(move |world| {
                insert(world, 0, tid(0, n));
            }));
        }
        run_together(&world, bodies);
        settle_and_check(&world);
    });
}

/// A scan holds the memtables of its snapshot while a writer fills memtables, the flusher flushes
/// them and frees what no scan reads: the scan's memtables are never freed and reused under it,
/// and it misses no row that was inserted before it began.
#[test]
fn a_scan_keeps_its_memtables_until_it_drops_its_snapshot() {
    explore(|| {
        let world = World::new(2, 2, 1);
        insert(&world, 0, tid(0, 1));
        insert(&world, 0, tid(0, 2));
        let scanner: Body = Box::new(|world| {
            scan(world, 0);
            scan(world, 0);
        });
        let others = writers_and_flusher(vec![(3..=6).map(|n| tid(0, n)).collect()]);
        run_together(&world, std::iter::once(scanner).chain(others).collect());
        settle_and_check(&world);
    });
}

/// Three writers insert two rows each into memtables of two slots while the flusher runs: they
/// fill memtables past their capacity (Full), seal them and move on to new ones; every row lands
/// in exactly one memtable.
#[test]
fn concurrent_inserts_past_capacity_land_in_exactly_one_memtable() {
    explore(|| {
        let world = World::new(4, 2, 1);
        run_together(
            &world,
            writers_and_flusher((0..3).map(|w| vec![tid(0, 10 * w + 1), tid(0, 10 * w + 2)]).collect()),
        );
        settle_and_check(&world);
    });
}

/// A writer that found its memtable full seals it late, after another writer sealed it, the
/// flusher flushed and freed it and the index's next memtable took the same slab: the late seal
/// must leave that memtable ACTIVE and its index's active one.
#[test]
fn a_late_seal_leaves_the_memtable_reusing_the_slab_alone() {
    explore(|| {
        let world = World::new(2, 1, 1);
        let first = insert(&world, 0, tid(0, 1));
        let slab = world.slabs().infos().into_iter().find(|info| info.holds(0, first)).unwrap().slab;
        let mut bodies = writers_and_flusher(vec![(2..=3).map(|n| tid(0, n)).collect()]);
        bodies.push(Box::new(move |world| {
            // Late: the slab no longer holds the memtable the writer found full.
            while world.slabs().info(slab).holds(0, first) {
                thread::yield_now();
            }
            world.slabs().seal(0, slab, first);
        }));
        run_together(&world, bodies);
        settle_and_check(&world);
    });
}

/// Span rows of 1 to 4 slots in memtables of 4 slots: runs straddle the capacity all the time.
/// Two writers, a flusher and a scan: every row is read whole (never a part of it, never another
/// memtable's words), straddling runs leave no hole that keeps a memtable from completing, and
/// every row is published exactly once, in the memtable its writer reported.
#[test]
fn span_rows_land_whole_in_exactly_one_memtable_when_runs_straddle_the_capacity() {
    explore(|| {
        let world = World::with_spans(3, 4, 1);
        let mut bodies =
            writers_and_flusher(vec![(1..=5).map(|n| tid(0, n)).collect(), (6..=9).map(|n| tid(0, n)).collect()]);
        bodies.push(Box::new(|world| scan(world, 0)));
        run_together(&world, bodies);
        settle_and_check(&world);
    });
}

/// A span row longer than a whole memtable is refused before anything is reserved.
#[test]
fn a_span_row_longer_than_a_memtable_is_refused_before_it_reserves() {
    shuttle::check_random(
        || {
            let world = World::with_spans(1, 4, 1);
            let slabs = world.slabs();
            let allocation = slabs.allocate(0, world.layout, || 1).unwrap();
            allocation.activate();
            let pin = slabs.pin_active(0).unwrap();
            let error = pin.insert_span(tid(0, 1), &[7; 8]).unwrap_err();
            assert_eq!((error.words, error.max), (8, 7));
            assert_eq!(pin.memtable().header().filled(), 0, "a refused row reserved slots");
            assert_eq!(pin.insert_span(tid(0, 1), &[7; 7]).unwrap(), Insert::Done);
            assert!(pin.memtable().is_complete());
            let mut rows = Vec::new();
            pin.memtable().for_each_live_span(|slot, tid, words| rows.push((slot, tid, words.to_vec())));
            assert_eq!(rows, [(0, tid(0, 1), vec![7; 7])]);
            assert_eq!(pin.memtable().live_rows(), 1, "continuation slots count as rows");
        },
        1,
    );
}
