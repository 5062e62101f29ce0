//! A backend's cache of decoded text memtables ([`strata_text::slab_cache::MemtableCache`])
//! against writers under shuttle: two writers append documents as span rows while a scan takes
//! snapshots, refreshes its cache and deletes a row as VACUUM does. After every round: every
//! document whose insert finished before the snapshot is visible exactly once (in the cache or
//! in the round's tail past a slot still being written), with its own length, no row is seen
//! twice, and a row deleted before the round is marked deleted in it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use common::slabs::{explore, HeapRegion, TestLock};
use shuttle::sync::Mutex;
use strata_engine::bitset::Bitset;
use strata_lsm::memtable::MemtableLayout;
use strata_lsm::slabs::Slabs;
use strata_lsm::sync::{AtomicU64, Ordering};
use strata_lsm::writer::insert_span_row;
use strata_text::slab_cache::MemtableCache;
use strata_text::{Document, Memtable};

/// Document `tid`: 1 to 4 distinct lexemes, so rows take 1 to 4 slots of 4 words.
fn document(tid: u64) -> Document {
    let terms = 1 + tid % 4;
    Document::new((0..terms).map(|k| (format!("w{}", (tid + k) % 7), 1 + (k as u32) % 2))).unwrap()
}

struct World {
    region: HeapRegion,
    lock: TestLock,
    layout: MemtableLayout,
    next_id: AtomicU64,
    allocating: Mutex<()>,
    done: Mutex<Vec<u64>>,
}

impl World {
    fn slabs(&self) -> Slabs<'_, HeapRegion, TestLock> {
        Slabs::new(&self.region, &self.lock)
    }

    fn insert(&self, tid: u64) {
        let slabs = self.slabs();
        let pin_active = || loop {
            if let Some(pin) = slabs.pin_active(0) {
                return Box::new(pin);
            }
            let _allocating = self.allocating.lock().unwrap();
            if !slabs.has_active(0) {
                let allocation = slabs
                    .allocate(0, self.layout, || self.next_id.fetch_add(1, Ordering::AcqRel))
                    .expect("the test never runs out of slabs");
                allocation.activate();
            }
        };
        insert_span_row(
            pin_active,
            tid,
            &document(tid).to_words(),
            |_| {},
            |slab, id| {
                slabs.seal(0, slab, id);
            },
        )
        .unwrap();
        self.done.lock().unwrap().push(tid);
    }
}

/// Live and deleted ids of one decoded memtable.
fn rows_of(memtable: &Memtable, deleted: Option<&Bitset>, live: &mut Vec<u64>, dead: &mut Vec<u64>) {
    for (row, (&id, &length)) in memtable.ids().iter().zip(memtable.doc_lens()).enumerate() {
        assert_eq!(length, document(id).length(), "row {id} decoded with another row's words");
        if deleted.is_some_and(|d| d.contains(row)) {
            dead.push(id);
        } else {
            live.push(id);
        }
    }
}

fn scan_round(world: &World, cache: &mut MemtableCache, deleted: &BTreeSet<u64>) {
    let finished: Vec<u64> = world.done.lock().unwrap().clone();
    let (snapshot, ()) = world.slabs().snapshot(0, || ());
    let round = cache.for_round(&snapshot).unwrap();
    let (mut live, mut dead) = (Vec::new(), Vec::new());
    for memtable in &round {
        rows_of(memtable.cached.0, memtable.cached.1.as_ref(), &mut live, &mut dead);
        if let Some((tail, tail_deleted)) = &memtable.tail {
            rows_of(tail, tail_deleted.as_ref(), &mut live, &mut dead);
        }
    }
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    for &id in live.iter().chain(&dead) {
        *seen.entry(id).or_default() += 1;
    }
    assert!(seen.values().all(|&n| n == 1), "a row is seen twice in one round: {seen:?}");
    for tid in finished {
        assert!(seen.contains_key(&tid), "row {tid} finished before the snapshot but the round misses it");
    }
    for tid in deleted {
        assert!(!live.contains(tid), "row {tid} was deleted before the round but is live in it");
    }
}

#[test]
fn a_scan_cache_sees_every_finished_row_once_while_writers_append() {
    explore(
        || {
            let world = Arc::new(World {
                region: HeapRegion::new(3, MemtableLayout::new(12, 4)),
                lock: TestLock::default(),
                layout: MemtableLayout::new(12, 4),
                next_id: AtomicU64::new(1),
                allocating: Mutex::new(()),
                done: Mutex::default(),
            });
            let writers: Vec<_> = [[1u64, 2, 3], [4, 5, 6]]
                .into_iter()
                .map(|tids| {
                    let world = world.clone();
                    shuttle::thread::spawn(move || {
                        for tid in tids {
                            world.insert(tid);
                        }
                    })
                })
                .collect();
            let mut cache = MemtableCache::new();
            let mut deleted = BTreeSet::new();
            for _ in 0..4 {
                scan_round(&world, &mut cache, &deleted);
                // VACUUM of the first finished row, in whichever memtable holds it.
                if let Some(&victim) = world.done.lock().unwrap().first() {
                    let (snapshot, ()) = world.slabs().snapshot(0, || ());
                    for memtable in snapshot.iter() {
                        memtable.delete_where(|tid| tid == victim);
                    }
                    deleted.insert(victim);
                }
            }
            for writer in writers {
                writer.join().unwrap();
            }
            scan_round(&world, &mut cache, &deleted);
        },
        500,
    );
}
