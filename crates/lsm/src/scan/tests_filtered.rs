//! Filtered scans through the whole runtime — memtables, flushes, merges (graph extension, code
//! copies, fresh builds), VACUUM — against a model of the live rows and their filter values.
//!
//! For every segment kind, random rows with random filter values (NULLs included) go through
//! memtables of 16 rows; some are flushed, merged, deleted and vacuumed; then progressive scans
//! with filters of every operator (and `AND` / `OR` of them) must return exactly the live rows
//! the filter admits, each once, and for exact (flat) indexes the top 10 must equal brute force
//! over those rows.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_engine::filter::{ColumnType, FilterSchema, FilterSpec, FilterValue, Literal, Predicate};
use strata_engine::metric::Metric;
use strata_engine::segment::{IndexKind, SearchParams, Segment};
use strata_engine::store::ElementKind;
use strata_engine::topk::Neighbor;

use super::round::{self, FilterReport};
use super::{Candidates, Limits, Reranker, Scan, ScanOrder, ScanQuery, Sharing, Sources};
use crate::directory::memory::MemoryDirectory;
use crate::flush::{flush, FlushTarget};
use crate::manifest::IndexConfig;
use crate::memtable::{Insert, MemtableLayout};
use crate::merge::{self, Prepared};
use crate::rows::memtable_row;
use crate::segment_type::{BuildWork, SegmentType};
use crate::slabs::test_region::{TestLock, TestRegion};
use crate::slabs::Slabs;
use crate::vacuum::{vacuum_memtables, vacuum_segments};
use crate::vector::{VectorFiles, VectorSegmentSet};

const DIMS: usize = 3;
const CAPACITY: usize = 16;
const TAGS: [&str; 4] = ["red", "green", "blue", "gold"];

/// One row's filter values: tenant (int4), label (text), tags (int[]), at (timestamp).
#[derive(Debug, Clone)]
struct Values {
    tenant: Option<i64>,
    label: Option<&'static str>,
    tags: Option<Vec<i64>>,
    at: Option<i64>,
}

impl Values {
    fn random(rng: &mut ChaCha8Rng) -> Self {
        let maybe = |rng: &mut ChaCha8Rng| rng.gen_ratio(9, 10);
        Self {
            tenant: maybe(rng).then(|| rng.gen_range(0..6)),
            label: maybe(rng).then(|| TAGS[rng.gen_range(0..TAGS.len())]),
            tags: maybe(rng).then(|| (0..rng.gen_range(0..4)).map(|_| rng.gen_range(0..8)).collect()),
            at: maybe(rng).then(|| rng.gen_range(0..1000)),
        }
    }

    fn filter_values(&self) -> Vec<FilterValue<'static>> {
        vec![
            self.tenant.map_or(FilterValue::Null, FilterValue::Int),
            self.label.map_or(FilterValue::Null, |l| FilterValue::Text(l.as_bytes())),
            self.tags
                .as_ref()
                .map_or(FilterValue::Null, |t| FilterValue::IntArray(t.iter().copied().map(Some).collect())),
            self.at.map_or(FilterValue::Null, FilterValue::Int),
        ]
    }
}

/// A filter as the index takes it, and the same filter over a row's values (SQL: TRUE only).
struct Filter {
    predicate: Predicate,
    holds: fn(&Values) -> bool,
}

fn filters() -> Vec<Filter> {
    let tenant = |value| Predicate::Eq { column: 0, value: Literal::Int(value) };
    vec![
        Filter { predicate: tenant(3), holds: |v| v.tenant == Some(3) },
        Filter {
            predicate: Predicate::In { column: 0, values: vec![Literal::Int(1), Literal::Int(4), Literal::Null] },
            holds: |v| matches!(v.tenant, Some(1 | 4)),
        },
        Filter {
            predicate: Predicate::Eq { column: 1, value: Literal::Text("gold".into()) },
            holds: |v| v.label == Some("gold"),
        },
        Filter {
            predicate: Predicate::Overlaps { column: 2, values: vec![Literal::Int(2), Literal::Int(7)] },
            holds: |v| v.tags.as_ref().is_some_and(|t| t.contains(&2) || t.contains(&7)),
        },
        Filter {
            predicate: Predicate::Contains { column: 2, values: vec![Literal::Int(1), Literal::Int(5)] },
            holds: |v| v.tags.as_ref().is_some_and(|t| t.contains(&1) && t.contains(&5)),
        },
        Filter {
            predicate: Predicate::Range { column: 3, lower: Bound::Included(100), upper: Bound::Excluded(180) },
            holds: |v| v.at.is_some_and(|at| (100..180).contains(&at)),
        },
        Filter {
            predicate: Predicate::And(vec![
                tenant(2),
                Predicate::Range { column: 3, lower: Bound::Excluded(300), upper: Bound::Unbounded },
            ]),
            holds: |v| v.tenant == Some(2) && v.at.is_some_and(|at| at > 300),
        },
        Filter {
            predicate: Predicate::Or(vec![tenant(5), Predicate::Eq { column: 1, value: Literal::Text("red".into()) }]),
            holds: |v| v.tenant == Some(5) || v.label == Some("red"),
        },
        Filter { predicate: tenant(99), holds: |_| false },
    ]
}

fn config(kind: IndexKind, rerank_from_heap: bool) -> IndexConfig {
    let filters = FilterSchema::new(&[
        FilterSpec::new(ColumnType::Int4),
        FilterSpec::new(ColumnType::Text),
        FilterSpec { ty: ColumnType::IntArray, slots: 4 },
        FilterSpec::new(ColumnType::Timestamp),
    ])
    .unwrap();
    IndexConfig {
        dims: DIMS as u32,
        metric: Metric::L2,
        element: ElementKind::F32,
        kind: kind.into(),
        memtable_rows: CAPACITY as u32,
        rerank_from_heap,
        filters,
    }
}

/// An index in a test region, driven step by step on one thread.
struct Index {
    config: IndexConfig,
    region: TestRegion,
    lock: TestLock,
    files: VectorFiles,
    next_id: Cell<u64>,
    /// Live rows: vector and filter values.
    rows: BTreeMap<u64, (Vec<f32>, Values)>,
}

impl Index {
    fn new(config: IndexConfig) -> Self {
        let files = VectorFiles::new(Arc::new(MemoryDirectory::new()));
        let manifest = files.create(config).unwrap();
        Self {
            config,
            region: TestRegion::new(64, CAPACITY, config.row_words(), 1),
            lock: TestLock::default(),
            files,
            next_id: Cell::new(manifest.next_id),
            rows: BTreeMap::new(),
        }
    }

    fn slabs(&self) -> Slabs<'_, TestRegion, TestLock> {
        Slabs::new(&self.region, &self.lock)
    }

    fn new_id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    fn insert(&mut self, tid: u64, vector: Vec<f32>, values: Values) {
        let row = memtable_row(&self.config, vector.clone(), &values.filter_values()).unwrap();
        let slabs = self.slabs();
        let layout = MemtableLayout::new(CAPACITY, self.config.row_words());
        loop {
            if let Some(pin) = slabs.pin_active(0) {
                match pin.insert(tid, &row) {
                    Insert::Done => break,
                    Insert::Full => {
                        let (slab, id) = (pin.slab(), pin.segment_id());
                        drop(pin);
                        slabs.seal(0, slab, id);
                        continue;
                    }
                }
            }
            slabs.allocate(0, layout, || self.new_id()).expect("a free slab").activate();
        }
        self.rows.insert(tid, (vector, values));
    }

    /// Flushes every sealed memtable (the active one stays a memtable).
    fn flush(&self) {
        let slabs = self.slabs();
        slabs.free_unread();
        for info in slabs.infos().into_iter().filter(|info| info.flushable().is_ok()) {
            flush(
                slabs,
                &self.files,
                DIMS,
                FlushTarget { slab: info.slab, index: 0, segment_id: info.segment_id },
                || self.new_id(),
                || self.next_id.get(),
                |rows| Segment::build(&self.files, &self.config, rows, &BuildWork::new(1)),
                |_| {},
            )
            .unwrap();
        }
        slabs.free_unread();
    }

    /// Merges until the policy chooses nothing.
    fn merge(&self) -> usize {
        let mut merges = 0;
        loop {
            let prepared = merge::prepare(
                &self.files,
                CAPACITY as u32,
                merge::NOTHING_PENDING,
                1,
                || self.new_id(),
                self.next_id.get(),
                |_| {},
            );
            let Prepared::Build(plan, work) = prepared.unwrap() else { return merges };
            let rows = (*work).run().unwrap();
            merge::finish(&self.files, plan, rows, self.next_id.get(), |_| {}).unwrap();
            merges += 1;
        }
    }

    fn vacuum(&mut self, dead: &BTreeSet<u64>) {
        let mut is_dead = |tid: u64| dead.contains(&tid);
        let (snapshot, ()) = self.slabs().snapshot(0, || ());
        vacuum_memtables(&snapshot[..], &mut is_dead);
        drop(snapshot);
        let set = VectorSegmentSet::open(&self.files, None).unwrap();
        vacuum_segments(&self.files, &set, &mut is_dead, || self.next_id.get(), |_| {}).unwrap();
        self.rows.retain(|tid, _| !dead.contains(tid));
    }

    /// Every row an unlimited filtered scan returns, in order, and what its filtered searches did.
    fn scan(&self, query: &ScanQuery) -> (Vec<Neighbor>, FilterReport) {
        struct Rows<'a>(&'a Index, &'a ScanQuery, FilterReport);
        impl Sources for Rows<'_> {
            fn search(&mut self, depth: usize, sharing: Sharing) -> Candidates {
                let (snapshot, ()) = self.0.slabs().snapshot(0, || ());
                let set = VectorSegmentSet::open(&self.0.files, None).unwrap();
                let params = SearchParams { ef_search: depth.max(16), probes: 1, oversample: 2.0 };
                let found = round::search(&set.segments, &snapshot, self.1, depth, &params, sharing, None);
                let report = &mut self.2;
                for (total, add) in report.segments_by_strategy.iter_mut().zip(found.filtered.segments_by_strategy) {
                    *total += add;
                }
                report.memtable_rows_admitted += found.filtered.memtable_rows_admitted;
                found.candidates
            }
        }
        /// Exact distances from the model (the table, for segments without vectors).
        struct Table<'a>(&'a Index, &'a ScanQuery);
        impl Reranker for Table<'_> {
            fn exact_distance(&mut self, row: u64) -> Option<f32> {
                self.0.rows.get(&row).map(|(vector, _)| self.1.prepared.distance_f32(vector))
            }
        }
        // Relaxed: a scan without a cap returns every admitted row (approximate kinds included).
        let limits = Limits { first_depth: 4, max_tuples: 1 << 20, oversample: 2.0, order: ScanOrder::Relaxed };
        let (mut sources, mut table) = (Rows(self, query, FilterReport::default()), Table(self, query));
        let mut scan = Scan::new();
        let mut out = Vec::new();
        while let Some(next) = scan.next(limits, &mut sources, &mut table) {
            out.push(next);
        }
        (out, sources.2)
    }
}

fn check_kind(kind: IndexKind, rerank_from_heap: bool, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut index = Index::new(config(kind, rerank_from_heap));
    let mut tid = 1u64;
    let mut reports = FilterReport::default();
    let mut merges = 0;
    for phase in 0..4 {
        for _ in 0..rng.gen_range(40..90) {
            let vector: Vec<f32> = (0..DIMS).map(|_| rng.gen_range(-10.0..10.0)).collect();
            index.insert(tid, vector, Values::random(&mut rng));
            tid += 1;
        }
        index.flush();
        if phase % 2 == 1 {
            merges += index.merge();
        }
        let dead: BTreeSet<u64> = index.rows.keys().copied().filter(|_| rng.gen_ratio(1, 6)).collect();
        index.vacuum(&dead);
        for filter in filters() {
            let values: Vec<f32> = (0..DIMS).map(|_| rng.gen_range(-10.0..10.0)).collect();
            let query = ScanQuery::new(values.clone(), &index.config).unwrap().with_filter(&filter.predicate);
            let (found, report) = index.scan(&query);
            for (total, add) in reports.segments_by_strategy.iter_mut().zip(report.segments_by_strategy) {
                *total += add;
            }
            let expected: BTreeSet<u64> =
                index.rows.iter().filter(|(_, (_, v))| (filter.holds)(v)).map(|(t, _)| *t).collect();
            let returned: Vec<u64> = found.iter().map(|n| n.row).collect();
            let unique: BTreeSet<u64> = returned.iter().copied().collect();
            let what = format!("{kind:?} seed {seed} phase {phase} filter {:?}", filter.predicate);
            assert_eq!(unique.len(), returned.len(), "{what}: a row came back twice");
            assert_eq!(unique, expected, "{what}: the scan must return exactly the admitted live rows");
            if matches!(kind, IndexKind::Flat) {
                let mut exact: Vec<(f32, u64)> =
                    expected.iter().map(|t| (query.prepared.distance_f32(&index.rows[t].0), *t)).collect();
                exact.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                let top: Vec<u64> = exact.iter().take(10).map(|&(_, t)| t).collect();
                let scan_top: BTreeSet<u64> = returned.iter().take(10).copied().collect();
                assert_eq!(scan_top, top.iter().copied().collect(), "{what}: top 10 against brute force");
            }
        }
    }
    assert!(reports.segments_by_strategy.iter().sum::<u64>() > 0, "{kind:?}: segments were searched with filters");
    assert!(merges > 0, "{kind:?}: the workload merged segments");
}

/// Every kind, through memtables, flushes, merges and VACUUM, returns exactly the admitted live
/// rows (flat: the exact top 10 first).
#[test]
fn filtered_scans_return_exactly_the_admitted_live_rows() {
    let mut shuttle_config = shuttle::Config::new();
    shuttle_config.stack_size = 1 << 20;
    let runner = shuttle::Runner::new(shuttle::scheduler::RandomScheduler::new(1), shuttle_config);
    runner.run(|| {
        for seed in 0..3 {
            check_kind(IndexKind::Flat, false, seed);
            check_kind(IndexKind::Hnsw { m: 8, ef_construction: 32 }, false, seed);
            check_kind(IndexKind::Ivf { lists: 3, bits: 4 }, true, seed);
            check_kind(IndexKind::QuantizedFlat { bits: 4 }, false, seed);
        }
    });
}

/// Segments run on helper threads only when at least two have enough rows to consider: every
/// row without a filter, the rows the filter admits (by the columns' estimate) with one.
#[test]
fn parallel_searches_only_when_two_segments_have_work() {
    let config = IndexConfig { memtable_rows: 100_000, ..config(IndexKind::Flat, false) };
    let files = VectorFiles::new(Arc::new(MemoryDirectory::new()));
    let manifest = files.create(config).unwrap();
    for (n, rows) in [6_000u64, 6_000, 100].into_iter().enumerate() {
        let mut built = crate::vector::VectorRows::default();
        for tid in 1..=rows {
            let values = Values { tenant: Some((tid % 100) as i64), label: None, tags: None, at: None };
            let row = memtable_row(&config, vec![tid as f32, 0.0, 1.0], &values.filter_values()).unwrap();
            built.push_row(DIMS, tid + 10_000 * n as u64, &row);
        }
        let segment = Segment::build(&files, &config, built, &BuildWork::new(1)).unwrap();
        files.publish_segment(&segment, manifest.next_id + n as u64, Vec::new(), 0, |_| {}).unwrap();
    }
    let set = VectorSegmentSet::open(&files, None).unwrap();
    let query = ScanQuery::new(vec![0.0, 0.0, 1.0], &config).unwrap();
    assert!(round::worth_parallel(&set.segments, &query, round::PARALLEL_MIN_ROWS));
    assert!(!round::worth_parallel(&set.segments[..1], &query, round::PARALLEL_MIN_ROWS), "one large segment");
    let selective = query.clone().with_filter(&Predicate::Eq { column: 0, value: Literal::Int(7) });
    assert!(!round::worth_parallel(&set.segments, &selective, round::PARALLEL_MIN_ROWS), "60 admitted rows each");
    assert!(round::worth_parallel(&set.segments, &selective, 50), "a lower threshold");
    let broad = query.with_filter(&Predicate::Range { column: 0, lower: Bound::Included(0), upper: Bound::Unbounded });
    assert!(round::worth_parallel(&set.segments, &broad, round::PARALLEL_MIN_ROWS));
}
