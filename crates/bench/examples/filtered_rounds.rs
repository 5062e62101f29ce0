//! Filtered recall and search cost of the progressive scan over one HNSW segment, as a
//! vector-only index serves `WHERE id % n = 0 ORDER BY v <=> q LIMIT 10`: the executor filters
//! what the scan returns, round after round, until ten rows pass.
//!
//! ```text
//! cargo run --release -p strata-bench --example filtered_rounds DATA_DIR [ROWS] [QUERIES]
//! ```
//!
//! `DATA_DIR` holds `base.fvecs` and `query.fvecs` (the MiniLM set). For each filter and scan
//! order it prints recall@10 against brute force over the matching rows, the rows the scan
//! returned, the candidate lists searched (the sum of each round's `ef`) and the distances the
//! continued walks computed, proxies of the scan's cost, with each round searching the graph
//! afresh and continuing the last round's walk (`hnsw::ResumableSearch`, as the index's scans
//! do).

use std::cell::{Cell, RefCell};
use std::path::Path;

use strata_engine::bitset::RowPredicate;
use strata_engine::cancel::Cancel;
use strata_engine::hnsw::ResumableSearch;
use strata_engine::metric::Metric;
use strata_engine::segment::{build_segment, BuildOptions, IndexKind, SearchParams, Segment};
use strata_engine::store::ElementKind;
use strata_engine::topk::Neighbor;
use strata_lsm::scan::{CandidateSource, Limits, Reranker, Scan, ScanOrder};

fn read_fvecs(path: &Path, limit: usize) -> (Vec<f32>, usize) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dims = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    let stride = 4 + 4 * dims;
    let rows = (bytes.len() / stride).min(limit);
    let mut out = Vec::with_capacity(rows * dims);
    for r in 0..rows {
        let row = &bytes[r * stride + 4..(r + 1) * stride];
        out.extend(row.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())));
    }
    (out, dims)
}

/// The segment as a scan source: exact distances, approximate membership; counts `ef` searched.
struct GraphSource<'a> {
    segment: &'a Segment,
    query: &'a [f32],
    ef_search: usize,
    /// `ef` of a round deeper than `ef_search`: `depth · ef_factor`.
    ef_factor: f32,
    searched: Cell<usize>,
    /// The walk continued from round to round (`None`: each round searches afresh).
    walk: Option<RefCell<ResumableSearch>>,
}

impl CandidateSource for GraphSource<'_> {
    fn exact(&self) -> bool {
        true
    }

    fn approximate(&self) -> bool {
        true
    }

    fn walked(&self) -> bool {
        true
    }

    fn nearest(&self, depth: usize) -> Vec<Neighbor> {
        let ef = if depth > self.ef_search { (depth as f32 * self.ef_factor) as usize } else { self.ef_search };
        self.searched.set(self.searched.get() + ef);
        let params = SearchParams { ef_search: ef, probes: 0, oversample: 4.0 };
        match &self.walk {
            Some(walk) => self.segment.search_resumable(
                &mut walk.borrow_mut(),
                self.query,
                depth,
                &params,
                RowPredicate::default(),
            ),
            None => self.segment.search(self.query, depth, &params, RowPredicate::default()),
        }
    }
}

struct NoRerank;

impl Reranker for NoRerank {
    fn exact_distance(&mut self, _: u64) -> Option<f32> {
        None
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("DATA_DIR"));
    let rows: usize = args.next().map_or(100_000, |a| a.parse().unwrap());
    let queries: usize = args.next().map_or(200, |a| a.parse().unwrap());
    let (base, dims) = read_fvecs(&dir.join("base.fvecs"), rows);
    let (query_rows, _) = read_fvecs(&dir.join("query.fvecs"), queries);
    let rows = base.len() / dims;
    let metric = Metric::Cosine;
    let options = BuildOptions {
        kind: IndexKind::Hnsw { m: 16, ef_construction: 64 },
        metric,
        element: ElementKind::F32,
        seed: 42,
        threads: 2,
        store_vectors: true,
        cancel: Cancel::default(),
    };
    let started = std::time::Instant::now();
    // The segment is built once per row count and kept in the temporary directory.
    let cache = std::env::temp_dir().join(format!("filtered_rounds_{rows}.seg"));
    let bytes = std::fs::read(&cache).unwrap_or_else(|_| {
        let bytes = build_segment(&options, (0..rows as u64).collect(), base.clone(), dims).unwrap().to_bytes();
        std::fs::write(&cache, &bytes).unwrap();
        bytes
    });
    let segment = Segment::from_bytes(&bytes).unwrap();
    eprintln!("built {rows} rows in {:.1} s", started.elapsed().as_secs_f64());
    let k = 10;
    for modulus in [10u64, 100, 1000] {
        let truths: Vec<Vec<f32>> = query_rows
            .chunks_exact(dims)
            .map(|q| {
                let mut d: Vec<f32> = (0..rows)
                    .filter(|r| (*r as u64).is_multiple_of(modulus))
                    .map(|r| metric.distance(q, &base[r * dims..(r + 1) * dims]))
                    .collect();
                d.sort_by(f32::total_cmp);
                d.truncate(k);
                d
            })
            .collect();
        for (order, ef_factor, continued) in [
            (ScanOrder::Strict, 1.0, false),
            (ScanOrder::Strict, 1.0, true),
            (ScanOrder::Strict, 2.0, false),
            (ScanOrder::Relaxed, 1.0, false),
            (ScanOrder::Relaxed, 1.0, true),
        ] {
            let (mut hits, mut returned, mut searched, mut distances) = (0usize, 0usize, 0usize, 0usize);
            let started = std::time::Instant::now();
            for (q, truth) in query_rows.chunks_exact(dims).zip(&truths) {
                let source = GraphSource {
                    segment: &segment,
                    query: q,
                    ef_search: 100,
                    ef_factor,
                    searched: Cell::new(0),
                    walk: continued.then(|| RefCell::new(ResumableSearch::new())),
                };
                let mut sources = [source];
                let limits = Limits { first_depth: 100, max_tuples: usize::MAX, oversample: 4.0, order };
                let mut scan = Scan::new();
                let mut accepted = Vec::new();
                while accepted.len() < k {
                    let Some(next) = scan.next(limits, &mut sources[..], &mut NoRerank) else { break };
                    returned += 1;
                    if next.row % modulus == 0 {
                        accepted.push(next);
                    }
                }
                if order == ScanOrder::Relaxed {
                    accepted.sort_by(Neighbor::order);
                }
                let bound = truth.last().copied().unwrap_or(f32::INFINITY) + 1e-6;
                hits += accepted.iter().filter(|n| n.distance <= bound).count().min(k);
                searched += sources[0].searched.get();
                distances += sources[0].walk.as_ref().map_or(0, |w| w.borrow().distances());
            }
            let n = queries as f64;
            println!(
                "1/{modulus:<4} {order:?} ef×{ef_factor} {}: recall {:.4}, rows returned {:.0}, ef searched {:.0}, distances {:.0}, {:.2} ms/query",
                if continued { "continued" } else { "afresh" },
                hits as f64 / (k as f64 * n),
                returned as f64 / n,
                searched as f64 / n,
                distances as f64 / n,
                started.elapsed().as_secs_f64() * 1e3 / n
            );
        }
    }
}
