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
//! and stays exact.
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
use crate::manifest::IndexConfig;
use crate::memtable::Memtable;
use crate::slabs::{SlabMemory, SlabState};

/// The fewest filled rows a memtable has before a scan encodes it (smaller ones cost less to
/// scan exactly than to encode).
pub const MIN_CODED_ROWS: usize = 2_048;

/// Estimates reranked per row asked: 4-bit codes reach recall@10 ≥ 0.99 of the exact scan at
/// 2–4 (strata-engine's quant module docs).
pub const OVERSAMPLE: usize = 4;

/// Codes of a memtable's rows as they were when encoded.
#[derive(Debug)]
pub struct MemtableCodes {
    segment_id: u64,
    /// The slots `0..covered` were read at encoding; later slots are scanned exactly.
    covered: usize,
    /// Code position → slot.
    slots: Vec<u32>,
    codes: QuantizedFlat,
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
        let covered = memtable.header().filled().min(memtable.layout().capacity);
        let mut slots = Vec::with_capacity(covered);
        let mut vectors = Vec::with_capacity(covered * dims);
        for slot in 0..covered {
            if let Some((_, row)) = memtable.live_row(slot) {
                slots.push(u32::try_from(slot).ok()?);
                vectors.extend_from_slice(&row[..dims]);
            }
        }
        if slots.is_empty() {
            return None;
        }
        let build = || {
            let store = VectorStore::new(Elements::F32(&vectors), dims, metric).ok()?;
            QuantizedFlat::build(&store, &QuantizerParams::default()).ok()
        };
        let codes = if let Some(pool) = pool {
            pool.install(build)?
        } else {
            let single = crate::threads::with_signals_blocked(|| {
                rayon::ThreadPoolBuilder::new().num_threads(1).thread_name(|_| "strata-encode".into()).build().ok()
            })?;
            single.install(build)?
        };
        Some(Self { segment_id: memtable.segment_id(), covered, slots, codes })
    }

    /// The slots read when the codes were made.
    pub fn covered(&self) -> usize {
        self.covered
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
        let estimates = self.codes.estimate_nearest(&query.prepared, pool).unwrap_or_default();
        let mut top = TopK::new(depth);
        let mut live_coded = 0usize;
        for estimate in &estimates {
            let slot = self.slots[estimate.row as usize] as usize;
            if let Some((tid, row)) = memtable.live_row(slot) {
                live_coded += 1;
                top.push(Neighbor::new(tid, query.prepared.distance_f32(&row[..dims])));
            }
        }
        let filled = memtable.header().filled().min(memtable.layout().capacity);
        let mut rows = self.slots.len() as u64;
        for slot in self.covered..filled {
            if let Some((tid, row)) = memtable.live_row(slot) {
                rows += 1;
                top.push(Neighbor::new(tid, query.prepared.distance_f32(&row[..dims])));
            }
        }
        let pool_was_everything = estimates.len() == self.slots.len();
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
        let enabled = !matches!(config.kind, IndexKind::Flat)
            && config.element == ElementKind::F32
            && matches!(config.metric, Metric::L2 | Metric::InnerProduct | Metric::Cosine);
        Self { enabled, metric: config.metric, entries: HashMap::new() }
    }

    /// The codes to search each of `memtables` with (aligned with it; `None`: exact), encoding
    /// the sealed or flushing memtables of at least [`MIN_CODED_ROWS`] rows that have no codes
    /// yet (or grew by half since: slots a writer still finished after the seal). Active
    /// memtables and filtered queries get no codes.
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
            // The active memtable keeps growing: each backend would encode it again and again,
            // so only memtables closed to new writers are encoded.
            let closed = matches!(memtable.header().state(), SlabState::Sealed | SlabState::Flushing);
            if !closed {
                out.push(None);
                continue;
            }
            let filled = memtable.header().filled().min(memtable.layout().capacity);
            let current = self.entries.get(&key).filter(|c| c.segment_id == key.1);
            let stale = current.is_none_or(|c| filled >= MIN_CODED_ROWS && filled > c.covered + c.covered / 2);
            if stale && filled >= MIN_CODED_ROWS {
                match MemtableCodes::encode(memtable, query.dims, self.metric, pool) {
                    Some(codes) => {
                        self.entries.insert(key, Arc::new(codes));
                    }
                    None => {
                        self.entries.remove(&key);
                    }
                }
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
    use strata_engine::store::Query;

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
            kind,
            memtable_rows: 4096,
            rerank_from_heap: false,
            filters: FilterSchema::default(),
        }
    }

    fn scan_query(values: &[f32]) -> ScanQuery {
        ScanQuery {
            values: values.to_vec(),
            prepared: Query::new(values, Metric::L2),
            filter: None,
            schema: FilterSchema::default(),
            dims: DIMS,
        }
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
            assert_eq!(codes.covered(), ROWS as usize);

            let mut found = 0;
            for q in 0..20 {
                let query = scan_query(&vector_of(20_000 + q));
                let (coded, rows) = codes.search(&memtable, &query, 10);
                let (exact_list, _) = exact(&memtable, &query, 10);
                assert_eq!(rows, ROWS);
                assert_eq!(coded.len(), 10);
                assert!(coded.windows(2).all(|w| w[0].distance <= w[1].distance), "nearest first");
                for n in &coded {
                    assert_eq!(n.distance, query.prepared.distance_f32(&vector_of(n.row)), "exact distances");
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
}
