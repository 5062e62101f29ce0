//! 4-bit codes of memtable rows, so that a scan reads 192 bytes of a 384-dimensional row instead
//! of 1,536 and computes exact distances only for the best estimates.
//!
//! Memtables are scanned exactly otherwise: about 1 ms per 10,000 rows at 384 dimensions, which
//! under sustained ingest (several memtables waiting for their flush) became most of a query's
//! time. A backend that scans a memtable holding at least [`MIN_CODED_ROWS`] rows encodes its
//! rows once with strata-engine's quantizer ([`QuantizedFlat`]: seeded rotation, 4-bit codes,
//! SIMD lookup-table scan) into a [`CodesCache`] of its own, and later rounds over the same
//! memtable scan the codes, rerank the best `OVERSAMPLE · depth` estimates with the exact
//! distance of the row in the slab, and scan the rows appended since exactly. The cache is
//! private to the backend: slabs and their protocol are unchanged, and a row deleted after the
//! encoding is skipped at rerank (its deleted bit is read then). Only memtables closed to new
//! writers (sealed, flushing) are encoded, once per backend: the active one is still growing
//! and stays exact. Codes cover the run of finished slots only; a sealed memtable whose last
//! writers finish later gets one more block of codes once [`BLOCK_ROWS`] more slots are
//! finished, encoded with the first block's quantizer.
//!
//! Guarantees of [`MemtableCodes::search`]: only live rows, exact distances, nearest first, and
//! never a short list while the memtable holds more live rows than the list (a rerank left
//! short by deletions falls back to the exact scan), so the scan's exhaustion rule holds. The
//! list's membership is approximate, as a graph segment's is; indexes of `kind = 'flat'`, filtered
//! queries and element types other than `f32` keep the exact scan.

use std::collections::HashMap;
use std::sync::Arc;

use strata_engine::metric::Metric;
use strata_engine::quant::{QuantizedFlat, QuantizerParams};
use strata_engine::segment::IndexKind;
use strata_engine::store::{ElementKind, Elements, VectorStore};
use strata_engine::topk::{Neighbor, TopK};

use super::ScanQuery;
use crate::manifest::{ConfigKind, IndexConfig};
use crate::memtable::Memtable;
use crate::slabs::{SlabMemory, SlabState};

/// The fewest filled rows a memtable has before a scan encodes it (smaller ones cost less to
/// scan exactly than to encode).
pub const MIN_CODED_ROWS: usize = 2_048;

/// Estimates reranked per row asked: 4-bit codes reach recall@10 ≥ 0.99 of the exact scan at
/// 2–4 (strata-engine's quant module docs).
pub const OVERSAMPLE: usize = 4;

/// Finished slots past a memtable's codes before a scan encodes them as a new block: the exact
/// tail a scan reads stays under this (about 0.2 ms at 384 dimensions), and no row is encoded
/// twice.
pub const BLOCK_ROWS: usize = 2_048;

/// The codes of a run of a memtable's slots.
#[derive(Debug)]
struct CodedBlock {
    /// Code position → slot.
    slots: Vec<u32>,
    codes: QuantizedFlat,
}

/// Codes of a memtable's rows as they were when encoded: blocks of slots, all encoded with the
/// quantizer trained on the first block, so their estimates compare.
#[derive(Debug)]
pub struct MemtableCodes {
    segment_id: u64,
    /// The slots `0..covered` were read at encoding; later slots are scanned exactly.
    covered: usize,
    blocks: Vec<Arc<CodedBlock>>,
}

/// Runs `build` on `pool` (`None`: a helper thread made for it with every signal blocked), never
/// on rayon's global pool, whose threads a PostgreSQL backend must not create.
fn on_pool<T: Send>(pool: Option<&rayon::ThreadPool>, build: impl FnOnce() -> Option<T> + Send) -> Option<T> {
    if let Some(pool) = pool {
        pool.install(build)
    } else {
        let single = crate::threads::with_signals_blocked(|| {
            rayon::ThreadPoolBuilder::new().num_threads(1).thread_name(|_| "strata-encode".into()).build().ok()
        })?;
        single.install(build)
    }
}

/// The live rows among `slots` of `memtable`: their slots and their first `dims` words.
fn finished_live_rows<M: SlabMemory + ?Sized>(
    memtable: &Memtable<'_, M>,
    slots: std::ops::Range<usize>,
    dims: usize,
) -> Option<(Vec<u32>, Vec<f32>)> {
    let mut live = Vec::with_capacity(slots.len());
    let mut vectors = Vec::with_capacity(slots.len() * dims);
    for slot in slots {
        if let Some((_, row)) = memtable.live_row(slot) {
            live.push(u32::try_from(slot).ok()?);
            vectors.extend_from_slice(&row[..dims]);
        }
    }
    Some((live, vectors))
}

impl MemtableCodes {
    /// Encodes the live rows of `memtable` (their first `dims` words, as `metric` vectors);
    /// `None` when it holds no live row or the quantizer refuses them.
    /// The rows are read on the calling thread; the encoding runs on `pool` (`None`: a helper
    /// thread made for it with every signal blocked), never on rayon's global pool, whose
    /// threads a PostgreSQL backend must not create.
    pub fn encode<M: SlabMemory + ?Sized>(
        memtable: &Memtable<'_, M>,
        dims: usize,
        metric: Metric,
        pool: Option<&rayon::ThreadPool>,
    ) -> Option<Self> {
        // Only the run of finished slots: a slot a writer still writes is left to the exact tail.
        let covered = memtable.ready_through(0);
        let (slots, vectors) = finished_live_rows(memtable, 0..covered, dims)?;
        if slots.is_empty() {
            return None;
        }
        let codes = on_pool(pool, || {
            let store = VectorStore::new(Elements::F32(&vectors), dims, metric).ok()?;
            QuantizedFlat::build(&store, &QuantizerParams::default()).ok()
        })?;
        Some(Self { segment_id: memtable.segment_id(), covered, blocks: vec![Arc::new(CodedBlock { slots, codes })] })
    }

    /// These codes with the slots filled since added as one more block, encoded with the first
    /// block's quantizer (on `pool`, as [`encode`](Self::encode)); the blocks already made are
    /// shared, not copied. `None` when the quantizer refuses the rows. `memtable` must be the one
    /// encoded.
    pub fn extended<M: SlabMemory + ?Sized>(
        &self,
        memtable: &Memtable<'_, M>,
        dims: usize,
        pool: Option<&rayon::ThreadPool>,
    ) -> Option<Self> {
        let covered = memtable.ready_through(self.covered);
        let (slots, vectors) = finished_live_rows(memtable, self.covered..covered, dims)?;
        let mut blocks = self.blocks.clone();
        if !slots.is_empty() {
            let quantizer = self.blocks[0].codes.quantizer().clone();
            let codes = on_pool(pool, || {
                let store = VectorStore::new(Elements::F32(&vectors), dims, quantizer.metric()).ok()?;
                QuantizedFlat::with_quantizer(&store, quantizer).ok()
            })?;
            blocks.push(Arc::new(CodedBlock { slots, codes }));
        }
        Some(Self { segment_id: self.segment_id, covered, blocks })
    }

    /// The slots `0..covered` the codes stand for (every one of them finished when encoded;
    /// later ones are scanned exactly).
    pub fn covered(&self) -> usize {
        self.covered
    }

    /// Code blocks (one per encoding: the first, then one per extension that found live rows).
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// The `depth` nearest live rows of `memtable` to `query` with exact distances (see the
    /// module docs), and the rows considered. `memtable` must be the one encoded.
    pub fn search<M: SlabMemory + ?Sized>(
        &self,
        memtable: &Memtable<'_, M>,
        query: &ScanQuery,
        depth: usize,
    ) -> (Vec<Neighbor>, u64) {
        let dims = query.dims;
        let pool = depth.saturating_mul(OVERSAMPLE);
        // The best `pool` estimates over every block, as (estimate, slot).
        let mut estimates = TopK::new(pool);
        for block in &self.blocks {
            for estimate in block.codes.estimate_nearest(&query.prepared, pool).unwrap_or_default() {
                estimates.push(Neighbor::new(u64::from(block.slots[estimate.row as usize]), estimate.distance));
            }
        }
        let estimates = estimates.into_sorted();
        let mut top = TopK::new(depth);
        let mut live_coded = 0usize;
        for estimate in &estimates {
            if let Some((tid, row)) = memtable.live_row(estimate.row as usize) {
                live_coded += 1;
                top.push(Neighbor::new(tid, query.prepared.distance_f32(&row[..dims])));
            }
        }
        let coded: usize = self.blocks.iter().map(|b| b.slots.len()).sum();
        let filled = memtable.header().filled().min(memtable.layout().capacity);
        let mut rows = coded as u64;
        for slot in self.covered..filled {
            if let Some((tid, row)) = memtable.live_row(slot) {
                rows += 1;
                top.push(Neighbor::new(tid, query.prepared.distance_f32(&row[..dims])));
            }
        }
        let pool_was_everything = estimates.len() == coded;
        if top.len() < depth && !pool_was_everything && live_coded < estimates.len() {
            // Deletions emptied part of the pool: an exact scan, so that a short list still
            // means the memtable has no more live rows.
            return exact(memtable, query, depth);
        }
        (top.into_sorted(), rows)
    }
}

/// The exact scan of one memtable: its `depth` nearest live rows and the rows examined.
fn exact<M: SlabMemory + ?Sized>(memtable: &Memtable<'_, M>, query: &ScanQuery, depth: usize) -> (Vec<Neighbor>, u64) {
    let mut top = TopK::new(depth);
    let mut rows = 0;
    memtable.for_each_live(|tid, row| {
        rows += 1;
        top.push(Neighbor::new(tid, query.prepared.distance_f32(&row[..query.dims])));
    });
    (top.into_sorted(), rows)
}

/// One backend's codes of the memtables of one index, keyed by slab and memtable (its segment
/// id), dropped when the memtable leaves the index's snapshots.
#[derive(Debug)]
pub struct CodesCache {
    enabled: bool,
    metric: Metric,
    entries: HashMap<(usize, u64), Arc<MemtableCodes>>,
}

impl CodesCache {
    /// A cache for an index configured as `config`: disabled (every memtable scanned exactly)
    /// for `kind = 'flat'` (its scans are exact by contract), L1 (codes estimate inner
    /// products) and element types other than `f32`.
    pub fn new(config: &IndexConfig) -> Self {
        let enabled = !matches!(config.kind, ConfigKind::Vector(IndexKind::Flat))
            && config.element == ElementKind::F32
            && matches!(config.metric, Metric::L2 | Metric::InnerProduct | Metric::Cosine);
        Self { enabled, metric: config.metric, entries: HashMap::new() }
    }

    /// The codes to search each of `memtables` with (aligned with it; `None`: exact): a sealed
    /// or flushing memtable of at least [`MIN_CODED_ROWS`] finished rows without codes is
    /// encoded, and one whose codes leave [`BLOCK_ROWS`] or more finished slots uncovered (late
    /// writers) gets a block more ([`MemtableCodes::extended`]). The active memtable stays
    /// exact: encoding it block by block as it grows cost each backend more than it saved under
    /// sustained ingest (100k rows + one writer, 40 s: client p50 15.2 → 19.2 ms, p99 45 → 83 ms;
    /// whole re-encodings had raised p99 from 47 to 155 ms). Filtered queries get no codes.
    /// Encodings run on `pool` (see [`MemtableCodes::encode`]).
    pub fn for_round<M: SlabMemory + ?Sized>(
        &mut self,
        memtables: &[Memtable<'_, M>],
        query: &ScanQuery,
        pool: Option<&rayon::ThreadPool>,
    ) -> Vec<Option<Arc<MemtableCodes>>> {
        let mut out = Vec::with_capacity(memtables.len());
        let mut seen = Vec::with_capacity(memtables.len());
        for memtable in memtables {
            let key = (memtable.slab(), memtable.segment_id());
            seen.push(key);
            if !self.enabled || query.filter.is_some() {
                out.push(None);
                continue;
            }
            if !matches!(memtable.header().state(), SlabState::Sealed | SlabState::Flushing) {
                out.push(None);
                continue;
            }
            let current = self.entries.get(&key).filter(|c| c.segment_id == key.1).cloned();
            let finished = memtable.ready_through(current.as_ref().map_or(0, |c| c.covered));
            let next = match current {
                None if finished >= MIN_CODED_ROWS => {
                    Some(MemtableCodes::encode(memtable, query.dims, self.metric, pool))
                }
                Some(codes) if finished >= codes.covered + BLOCK_ROWS => {
                    Some(codes.extended(memtable, query.dims, pool))
                }
                _ => None,
            };
            match next {
                Some(Some(codes)) => {
                    self.entries.insert(key, Arc::new(codes));
                }
                Some(None) => {
                    self.entries.remove(&key);
                }
                None => {}
            }
            out.push(self.entries.get(&key).cloned());
        }
        self.entries.retain(|key, _| seen.contains(key));
        out
    }

    /// Memtables with codes now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no memtable has codes.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(all(test, feature = "shuttle"))]
mod tests {
    use strata_engine::filter::FilterSchema;

    use super::*;
    use crate::memtable::{Insert, MemtableLayout};
    use crate::slabs::test_region::{TestLock, TestRegion};
    use crate::slabs::Slabs;

    const DIMS: usize = 16;
    const ROWS: u64 = 3_000;

    /// A deterministic pseudo-random vector for `tid`.
    fn vector_of(tid: u64) -> Vec<f32> {
        let mut state = tid.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..DIMS)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    fn config(kind: IndexKind) -> IndexConfig {
        IndexConfig {
            dims: DIMS as u32,
            metric: Metric::L2,
            element: ElementKind::F32,
            kind: kind.into(),
            memtable_rows: 4096,
            rerank_from_heap: false,
            filters: FilterSchema::default(),
        }
    }

    fn scan_query(values: &[f32]) -> ScanQuery {
        ScanQuery::l2_for_tests(values)
    }

    fn run(test: impl Fn() + Send + Sync + 'static) {
        let mut config = shuttle::Config::new();
        config.stack_size = 1 << 20;
        shuttle::Runner::new(shuttle::scheduler::RandomScheduler::new(1), config).run(test);
    }

    /// Codes give exact distances in order, ≥ 0.9 of the exact scan's nearest rows, every live
    /// row when asked for all, skip rows deleted after the encoding and see rows appended after
    /// it; the cache encodes only large memtables of approximate kinds without a filter.
    #[test]
    fn coded_memtable_search_agrees_with_the_exact_scan() {
        run(|| {
            let (region, lock) = (TestRegion::new(1, 4096, DIMS, 1), TestLock::default());
            let slabs = Slabs::new(&region, &lock);
            slabs.allocate(0, MemtableLayout::new(4096, DIMS), || 7).unwrap().activate();
            let pin = slabs.pin_active(0).unwrap();
            for tid in 1..=ROWS {
                assert_eq!(pin.insert(tid, &vector_of(tid)), Insert::Done);
            }
            let (active, ()) = slabs.snapshot(0, || ());
            let mut cache = CodesCache::new(&config(IndexKind::Hnsw { m: 16, ef_construction: 64 }));
            assert!(
                cache.for_round(&active, &scan_query(&vector_of(1)), None)[0].is_none(),
                "the active memtable stays exact"
            );
            drop(active);
            assert!(slabs.seal_active(0));
            let (memtables, ()) = slabs.snapshot(0, || ());
            let memtable = memtables[0];

            let mut flat = CodesCache::new(&config(IndexKind::Flat));
            let query = scan_query(&vector_of(10_001));
            assert!(flat.for_round(&memtables, &query, None).iter().all(Option::is_none), "flat stays exact");
            let codes = cache.for_round(&memtables, &query, None)[0].clone().expect("3,000 rows are encoded");
            assert_eq!((codes.covered(), codes.blocks()), (ROWS as usize, 1), "sealed: the same codes");

            let mut found = 0;
            for q in 0..20 {
                let query = scan_query(&vector_of(20_000 + q));
                let (coded, rows) = codes.search(&memtable, &query, 10);
                let (exact_list, _) = exact(&memtable, &query, 10);
                assert_eq!(rows, ROWS);
                assert_eq!(coded.len(), 10);
                assert!(coded.windows(2).all(|w| w[0].distance <= w[1].distance), "nearest first");
                for n in &coded {
                    assert_eq!(
                        n.distance.to_bits(),
                        query.prepared.distance_f32(&vector_of(n.row)).to_bits(),
                        "exact distances"
                    );
                }
                found += coded.iter().filter(|n| exact_list.contains(n)).count();
            }
            assert!(found >= 180, "recall@10 {} below 0.9", found as f64 / 200.0);

            let (all, _) = codes.search(&memtable, &query, ROWS as usize);
            assert_eq!(all, exact(&memtable, &query, ROWS as usize).0, "asked for every row: the exact list");

            let deleted = memtable.delete_where(|tid| tid % 3 == 0);
            assert_eq!(deleted, ROWS / 3);
            for tid in ROWS + 1..=ROWS + 50 {
                assert_eq!(pin.insert(tid, &vector_of(tid)), Insert::Done);
            }
            let (after, rows) = codes.search(&memtable, &query, ROWS as usize);
            let wrong: Vec<u64> = after.iter().map(|n| n.row).filter(|r| *r <= ROWS && r % 3 == 0).take(5).collect();
            assert!(wrong.is_empty(), "rows deleted after the encoding are skipped: {wrong:?} of {}", after.len());
            assert_eq!(after, exact(&memtable, &query, ROWS as usize).0, "appended rows are scanned exactly");
            assert_eq!(rows, ROWS + 50);
            let (near, _) = codes.search(&memtable, &query, 10);
            assert_eq!(near.len(), 10);

            let mut filtered = scan_query(&vector_of(1));
            filtered.filter = Some(strata_engine::filter::Predicate::And(Vec::new()));
            assert!(cache.for_round(&memtables, &filtered, None)[0].is_none(), "filtered queries stay exact");
            drop(pin);
            assert!(cache.for_round::<TestRegion>(&[], &query, None).is_empty());
            assert!(cache.is_empty(), "memtables gone from the snapshot are dropped");
        });
    }

    /// Codes extended block by block ([`MemtableCodes::extended`], each block with the first
    /// block's quantizer) scan the tail past their last block exactly, and across blocks keep
    /// exact distances, find ≥ 0.9 of the exact scan's nearest rows and give the exact list when
    /// asked for every row; an extension shares the blocks made before.
    #[test]
    fn codes_extended_block_by_block_agree_with_the_exact_scan() {
        run(|| {
            let capacity = MIN_CODED_ROWS + 3 * BLOCK_ROWS;
            let (region, lock) = (TestRegion::new(1, capacity, DIMS, 1), TestLock::default());
            let slabs = Slabs::new(&region, &lock);
            slabs.allocate(0, MemtableLayout::new(capacity, DIMS), || 9).unwrap().activate();
            let pin = slabs.pin_active(0).unwrap();
            let query = scan_query(&vector_of(50_000));
            let inserted = std::cell::Cell::new(0u64);
            let grow_to = |rows: usize| {
                while inserted.get() < rows as u64 {
                    inserted.set(inserted.get() + 1);
                    assert_eq!(pin.insert(inserted.get(), &vector_of(inserted.get())), Insert::Done);
                }
            };
            let memtable = || slabs.snapshot(0, || ()).0[0];
            grow_to(MIN_CODED_ROWS);
            let first = MemtableCodes::encode(&memtable(), DIMS, Metric::L2, None).unwrap();
            assert_eq!((first.covered(), first.blocks()), (MIN_CODED_ROWS, 1));
            grow_to(MIN_CODED_ROWS + BLOCK_ROWS - 1);
            let all = inserted.get() as usize;
            assert_eq!(first.search(&memtable(), &query, all).0, exact(&memtable(), &query, all).0, "the tail: exact");
            let second = first.extended(&memtable(), DIMS, None).unwrap();
            assert_eq!((second.covered(), second.blocks()), (all, 2));
            assert!(Arc::ptr_eq(&first.blocks[0], &second.blocks[0]), "earlier blocks are shared");
            grow_to(capacity);
            let codes = second.extended(&memtable(), DIMS, None).unwrap();
            assert_eq!((codes.covered(), codes.blocks()), (capacity, 3));
            let memtable = memtable();
            let mut found = 0;
            for q in 0..20 {
                let query = scan_query(&vector_of(60_000 + q));
                let (coded, rows) = codes.search(&memtable, &query, 10);
                assert_eq!(rows, inserted.get());
                let (exact_list, _) = exact(&memtable, &query, 10);
                for n in &coded {
                    assert_eq!(n.distance.to_bits(), query.prepared.distance_f32(&vector_of(n.row)).to_bits());
                }
                found += coded.iter().filter(|n| exact_list.contains(n)).count();
            }
            assert!(found >= 180, "recall@10 {} below 0.9", found as f64 / 200.0);
            let all = inserted.get() as usize;
            assert_eq!(codes.search(&memtable, &query, all).0, exact(&memtable, &query, all).0);
            drop(pin);
        });
    }

    /// In a sealed memtable, a slot a writer reserved and has not finished ends the run codes may
    /// cover: rows past it are scanned exactly (none is lost when the writer finishes later, as
    /// codes covering every filled slot had lost it), and the codes grow past it only once it is
    /// done.
    #[test]
    fn codes_stop_at_a_slot_a_writer_has_not_finished() {
        run(|| {
            let capacity = 4 * BLOCK_ROWS;
            let (region, lock) = (TestRegion::new(1, capacity, DIMS, 1), TestLock::default());
            let slabs = Slabs::new(&region, &lock);
            slabs.allocate(0, MemtableLayout::new(capacity, DIMS), || 11).unwrap().activate();
            let pin = slabs.pin_active(0).unwrap();
            let rows = MIN_CODED_ROWS as u64 + 100;
            for tid in 1..=rows {
                assert_eq!(pin.insert(tid, &vector_of(tid)), Insert::Done);
            }
            let (memtables, ()) = slabs.snapshot(0, || ());
            let memtable = memtables[0];
            assert_eq!(memtable.ready_through(0), rows as usize);
            // A writer reserves the next slot and is preempted before writing it.
            let unfinished = memtable.header().reserve();
            assert_eq!(unfinished, rows as usize);
            for tid in rows + 2..=rows + 2 + BLOCK_ROWS as u64 {
                assert_eq!(pin.insert(tid, &vector_of(tid)), Insert::Done);
            }
            assert_eq!(memtable.ready_through(0), unfinished);
            assert_eq!(memtable.ready_through(unfinished + 1), memtable.header().filled());
            drop(memtables);
            assert!(slabs.seal_active(0));
            let (memtables, ()) = slabs.snapshot(0, || ());
            let memtable = memtables[0];
            let mut cache = CodesCache::new(&config(IndexKind::Hnsw { m: 16, ef_construction: 64 }));
            let query = scan_query(&vector_of(70_000));
            let codes = cache.for_round(&memtables, &query, None)[0].clone().unwrap();
            assert_eq!(codes.covered(), unfinished, "the codes end at the unfinished slot");
            let all = memtable.header().filled();
            let (list, examined) = codes.search(&memtable, &query, all);
            assert_eq!(list, exact(&memtable, &query, all).0, "rows past it are scanned exactly");
            assert_eq!(examined, rows + 1 + BLOCK_ROWS as u64);
            let again = cache.for_round(&memtables, &query, None)[0].clone().unwrap();
            assert!(Arc::ptr_eq(&codes, &again), "no block past an unfinished slot");
            // The writer finishes: its row is found at once (exact tail), then coded.
            memtable.write_reserved(unfinished, rows + 1, &vector_of(rows + 1));
            let (list, _) = codes.search(&memtable, &query, all);
            assert!(list.iter().any(|n| n.row == rows + 1), "the finished row is scanned");
            assert_eq!(list, exact(&memtable, &query, all).0);
            let grown = cache.for_round(&memtables, &query, None)[0].clone().unwrap();
            assert_eq!((grown.covered(), grown.blocks()), (all, 2));
            assert_eq!(grown.search(&memtable, &query, all).0, exact(&memtable, &query, all).0);
            drop(pin);
        });
    }
}
