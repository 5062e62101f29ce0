//! Text rows through strata-lsm's shared-memory memtables: documents are appended as span rows
//! with the writers' insert protocol, VACUUM marks some deleted in their memtable, sealed
//! memtables are flushed by the runtime's `flush_rows` into published text segments, and a
//! search over the segments plus the active memtable equals the reference BM25 over a model of
//! the live rows.
//!
//! The test runs inside a one-schedule shuttle run: strata-lsm's slab atomics are shuttle's when
//! a workspace build turns its `shuttle` feature on, and std's otherwise.

mod common;

use std::cell::{Cell, UnsafeCell};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use common::{assert_matches_reference, corpus, reference, Row};
use strata_lsm::directory::memory::MemoryDirectory;
use strata_lsm::files::IndexFiles;
use strata_lsm::flush::{flush_rows, FlushTarget, Flushed};
use strata_lsm::memtable::MemtableLayout;
use strata_lsm::segment_set::SegmentSet;
use strata_lsm::segment_type::{BuildWork, SegmentType};
use strata_lsm::slabs::{ActiveSlab, Bitmap, DirectoryLock, LockMode, SlabHeader, SlabMemory, SlabState, Slabs};
use strata_lsm::sync::AtomicU64;
use strata_lsm::writer::insert_span_row;
use strata_text::lsm::slab_rows;
use strata_text::{search, Bm25Params, Bm25Query, Source, TextConfig, TextSegment};

/// Slabs in heap memory for one thread.
struct HeapRegion {
    headers: Vec<SlabHeader>,
    bitmaps: Vec<[Vec<AtomicU64>; 2]>,
    tids: Vec<Vec<UnsafeCell<u64>>>,
    words: Vec<Vec<UnsafeCell<f32>>>,
    active: Vec<ActiveSlab>,
    layout: MemtableLayout,
}

impl HeapRegion {
    fn new(slabs: usize, layout: MemtableLayout) -> Self {
        let bits = || (0..layout.capacity.div_ceil(64)).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        Self {
            headers: (0..slabs).map(|_| SlabHeader::default()).collect(),
            bitmaps: (0..slabs).map(|_| [bits(), bits()]).collect(),
            tids: (0..slabs).map(|_| (0..layout.capacity).map(|_| UnsafeCell::new(0)).collect()).collect(),
            words: (0..slabs)
                .map(|_| (0..layout.capacity * layout.dims).map(|_| UnsafeCell::new(0.0)).collect())
                .collect(),
            active: vec![ActiveSlab::default()],
            layout,
        }
    }
}

impl SlabMemory for HeapRegion {
    fn slab_count(&self) -> usize {
        self.headers.len()
    }

    fn header(&self, slab: usize) -> &SlabHeader {
        &self.headers[slab]
    }

    fn bitmap_word(&self, slab: usize, _: &MemtableLayout, bitmap: Bitmap, word: usize) -> &AtomicU64 {
        &self.bitmaps[slab][usize::from(bitmap == Bitmap::Deleted)][word]
    }

    fn index_count(&self) -> usize {
        self.active.len()
    }

    fn active_slab(&self, index: usize) -> &ActiveSlab {
        &self.active[index]
    }

    unsafe fn write_row(&self, slab: usize, layout: &MemtableLayout, slot: usize, tid: u64, vector: &[f32]) {
        assert_eq!(*layout, self.layout);
        // SAFETY: one thread runs the test, and the caller has the slot to itself (the contract).
        unsafe { *self.tids[slab][slot].get() = tid };
        for (cell, &word) in self.words[slab][slot * layout.dims..(slot + 1) * layout.dims].iter().zip(vector) {
            // SAFETY: as above.
            unsafe { *cell.get() = word };
        }
    }

    unsafe fn read_row(&self, slab: usize, layout: &MemtableLayout, slot: usize) -> (u64, &[f32]) {
        let row = &self.words[slab][slot * layout.dims..(slot + 1) * layout.dims];
        // SAFETY: one thread runs the test; `UnsafeCell<f32>` has f32's layout, so the row's
        // cells are a slice of f32, written before (the contract).
        unsafe { (*self.tids[slab][slot].get(), std::slice::from_raw_parts(row.as_ptr().cast::<f32>(), row.len())) }
    }
}

/// The directory lock for one thread: an RwLock that remembers how it is held.
#[derive(Default)]
struct OneThreadLock {
    lock: RwLock<()>,
    held: Cell<Option<LockMode>>,
}

#[allow(dead_code)]
enum Held<'a> {
    Shared(RwLockReadGuard<'a, ()>),
    Exclusive(RwLockWriteGuard<'a, ()>),
}

struct Guard<'a> {
    _held: Held<'a>,
    owner: &'a OneThreadLock,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.owner.held.set(None);
    }
}

impl DirectoryLock for OneThreadLock {
    type Guard<'a> = Guard<'a>;

    fn lock(&self, mode: LockMode) -> Guard<'_> {
        let held = match mode {
            LockMode::Shared => Held::Shared(self.lock.read().unwrap()),
            LockMode::Exclusive => Held::Exclusive(self.lock.write().unwrap()),
        };
        self.held.set(Some(mode));
        Guard { _held: held, owner: self }
    }

    fn is_held(&self, mode: LockMode) -> bool {
        self.held.get().is_some_and(|held| held == mode || held == LockMode::Exclusive)
    }
}

/// Flushes every SEALED memtable of index 0 with the runtime's `flush_rows`; returns how many
/// segments were published.
fn flush_sealed(
    slabs: Slabs<'_, HeapRegion, OneThreadLock>,
    files: &IndexFiles<TextSegment>,
    next_id: &mut u64,
) -> usize {
    let config = TextConfig { k1: 1.2, b: 0.75 };
    let mut published = 0;
    for info in slabs.infos().into_iter().filter(|info| info.state == SlabState::Sealed) {
        let target = FlushTarget { slab: info.slab, index: 0, segment_id: info.segment_id };
        let id = *next_id;
        let flushed = flush_rows(
            slabs,
            files,
            target,
            slab_rows,
            || id,
            || id + 1,
            |rows| TextSegment::build(files, &config, rows, &BuildWork::new(1)),
            |_| {},
        )
        .unwrap();
        *next_id += 1;
        published += usize::from(matches!(flushed, Flushed::Published(_)));
    }
    slabs.free_unread();
    published
}

#[test]
fn documents_flushed_from_slab_memtables_score_as_the_reference() {
    // Segment builds need more stack than shuttle's default 32 KiB.
    let mut config = shuttle::Config::new();
    config.stack_size = 8 << 20;
    shuttle::Runner::new(shuttle::scheduler::RandomScheduler::new(1), config)
        .run(documents_flushed_from_slab_memtables);
}

fn documents_flushed_from_slab_memtables() {
    // 96 slots of 8 words: a document of up to 48 distinct lexemes takes up to 19 slots, so runs
    // straddle memtable ends often.
    let layout = MemtableLayout::new(96, 8);
    let region = HeapRegion::new(3, layout);
    let lock = OneThreadLock::default();
    let slabs = Slabs::new(&region, &lock);
    let files = IndexFiles::<TextSegment>::new(Arc::new(MemoryDirectory::new()));
    files.create(TextConfig { k1: 1.2, b: 0.75 }).unwrap();
    let rows = corpus(23, 900, 80, 2.0, 6);
    let mut model: BTreeMap<u64, &Row> = BTreeMap::new();
    let (mut next_memtable, mut next_file, mut segments, mut vacuumed) = (1u64, 100u64, 0, 0);
    for (n, row) in rows.iter().enumerate() {
        let pin_active = || loop {
            if let Some(pin) = slabs.pin_active(0) {
                return Box::new(pin);
            }
            match slabs.allocate(0, layout, || {
                next_memtable += 1;
                next_memtable
            }) {
                Ok(allocation) => {
                    allocation.activate();
                }
                Err(_) => segments += flush_sealed(slabs, &files, &mut next_file),
            }
        };
        let mut recorded = None;
        insert_span_row(
            pin_active,
            row.id,
            &row.doc.to_words(),
            |memtable| recorded = Some(memtable),
            |slab, id| {
                slabs.seal(0, slab, id);
            },
        )
        .unwrap();
        assert!(recorded.is_some(), "the writer recorded its row's memtable");
        model.insert(row.id, row);
        // VACUUM of the active memtable: every 7th row so far that is still there.
        if n % 50 == 49 {
            let pin = slabs.pin_active(0).unwrap();
            let dead: Vec<u64> = rows[..=n].iter().step_by(7).map(|r| r.id).collect();
            let mut marked = Vec::new();
            pin.memtable().delete_where(|tid| {
                let is_dead = dead.contains(&tid);
                if is_dead {
                    marked.push(tid);
                }
                is_dead
            });
            drop(pin);
            vacuumed += marked.len();
            for id in &marked {
                model.remove(id);
            }
        }
    }
    assert!(vacuumed > 20, "VACUUM marked rows in memtables ({vacuumed})");
    assert!(segments >= 3, "memtables were flushed as they filled ({segments} segments)");
    // Search: every published segment plus the rows still in memtables (one slab-rows memtable
    // per unflushed slab), with global statistics.
    let set = SegmentSet::open(&files, None).unwrap();
    let unflushed: Vec<_> = slabs
        .infos()
        .into_iter()
        .filter(|info| matches!(info.state, SlabState::Active | SlabState::Sealed))
        .filter_map(|info| slab_rows(&slabs.memtable(info.slab)).unwrap())
        .collect();
    assert!(!unflushed.is_empty(), "some rows are still in memtables");
    let mut sources: Vec<Source<'_>> =
        set.segments.iter().map(|s| Source::segment(&s.segment, s.deleted.as_ref()).unwrap()).collect();
    sources.extend(unflushed.iter().map(|m| Source::memtable(m, None).unwrap()));
    let indexed: usize = sources.iter().map(|s| s.live_stats().docs as usize).sum();
    assert_eq!(indexed, model.len(), "every live row is indexed once");
    let live: Vec<&Row> = model.values().copied().collect();
    for query in [&["t0", "t3"][..], &["t7", "t1", "t50"], &["t2"], &["t79", "t11"]] {
        let all = reference(&live, query, 1.2, 0.75);
        let q = Bm25Query::prepare(&sources, query, Bm25Params::default());
        let got: Vec<(u64, f64)> = search(&sources, &q, 10).hits.iter().map(|h| (h.id, h.score)).collect();
        assert_matches_reference(&got, &all, 10);
    }
}
