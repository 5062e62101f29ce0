//! The progressive scan against brute force over a model: random vectors split over exact and
//! estimated sources, a visibility set (the snapshot) and a filter (the WHERE clause), both
//! applied where PostgreSQL applies them: the reranker drops invisible rows of estimated
//! sources, the consumer (the executor) skips invisible rows of exact sources and filtered rows.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use strata_engine::topk::Neighbor;

use super::budget::{self, Sharing};
use super::{CandidateSource, Candidates, Limits, Reranker, Scan, ScanOrder, ShallowList, Sources};

/// splitmix64: a small deterministic generator, so one `u64` seed describes a whole model.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// One source of the model: its rows with the distances it reports.
struct Source {
    exact: bool,
    /// (row, reported distance), sorted by [`Neighbor::order`].
    rows: Vec<Neighbor>,
}

impl CandidateSource for Source {
    fn exact(&self) -> bool {
        self.exact
    }

    fn nearest(&self, depth: usize) -> Vec<Neighbor> {
        self.rows.iter().take(depth).copied().collect()
    }
}

/// The model's sources as an index with a shared candidate budget searches them: exact sources
/// as deep as [`budget::source_depth`] gives their share of the rows (shallow lists), estimated
/// ones the round's depth.
struct Shared<'a>(&'a [Source]);

impl Sources for Shared<'_> {
    fn search(&mut self, depth: usize, sharing: Sharing) -> Candidates {
        let total: u64 = self.0.iter().map(|s| s.rows.len() as u64).sum();
        let mut candidates = Candidates::default();
        for source in self.0 {
            if !source.exact {
                candidates.estimated.push(source.nearest(depth));
                continue;
            }
            let asked = match sharing {
                Sharing::Proportional => budget::source_depth(depth, source.rows.len() as u64, total),
                Sharing::Uniform => depth,
            };
            if asked < depth {
                candidates.shallow.push(ShallowList { list: candidates.exact.len(), asked });
            }
            candidates.exact.push(source.nearest(asked));
        }
        candidates
    }
}

/// The table as the snapshot sees it; counts the rows it is asked for.
struct Table<'a> {
    distance: &'a [f32],
    visible: &'a [bool],
    asked: HashMap<u64, u32>,
}

impl Reranker for Table<'_> {
    fn exact_distance(&mut self, row: u64) -> Option<f32> {
        *self.asked.entry(row).or_default() += 1;
        let row = row as usize;
        self.visible[row].then(|| self.distance[row])
    }
}

/// Rows, their exact distances to the query, visibility, the filter and the sources.
struct Model {
    distance: Vec<f32>,
    visible: Vec<bool>,
    kept: Vec<bool>,
    /// Whether the row lives in an estimated source.
    estimated: Vec<bool>,
    sources: Vec<Source>,
}

/// Shape of a model: rows, sources, fractions (in percent) of visible and kept rows, noise.
#[derive(Debug, Clone, Copy)]
struct Shape {
    seed: u64,
    rows: usize,
    exact_sources: usize,
    estimated_sources: usize,
    visible_pct: u32,
    kept_pct: u32,
    noise: f32,
}

impl Model {
    fn new(shape: Shape) -> Self {
        const DIMS: usize = 4;
        let mut rng = Rng(shape.seed);
        let query: Vec<f32> = (0..DIMS).map(|_| rng.unit()).collect();
        let sources = shape.exact_sources + shape.estimated_sources;
        assert!(sources > 0);
        let mut model = Model {
            distance: Vec::new(),
            visible: Vec::new(),
            kept: Vec::new(),
            estimated: Vec::new(),
            sources: (0..sources).map(|s| Source { exact: s < shape.exact_sources, rows: Vec::new() }).collect(),
        };
        for row in 0..shape.rows {
            let distance: f32 = (0..DIMS).map(|d| (rng.unit() - query[d]).powi(2)).sum();
            let source = (rng.next() % sources as u64) as usize;
            let exact = model.sources[source].exact;
            let reported = if exact { distance } else { distance + shape.noise * (2.0 * rng.unit() - 1.0) };
            model.sources[source].rows.push(Neighbor::new(row as u64, reported));
            model.distance.push(distance);
            model.visible.push(rng.next() % 100 < u64::from(shape.visible_pct));
            model.kept.push(rng.next() % 100 < u64::from(shape.kept_pct));
            model.estimated.push(!exact);
        }
        for source in &mut model.sources {
            source.rows.sort_by(Neighbor::order);
        }
        model
    }

    /// Brute force: the visible rows the filter keeps, nearest first.
    fn brute_force(&self) -> Vec<u64> {
        let mut rows: Vec<Neighbor> = (0..self.distance.len())
            .filter(|&r| self.visible[r] && self.kept[r])
            .map(|r| Neighbor::new(r as u64, self.distance[r]))
            .collect();
        rows.sort_by(Neighbor::order);
        rows.into_iter().map(|n| n.row).collect()
    }

    /// Everything the scan returns (before the executor's checks), and the table's counts; with
    /// `shared`, exact sources searched with the shared budget ([`Shared`]).
    fn scan(&mut self, limits: Limits, shared: bool) -> (Vec<Neighbor>, HashMap<u64, u32>) {
        let mut table = Table { distance: &self.distance, visible: &self.visible, asked: HashMap::new() };
        let mut scan = Scan::new();
        let mut out = Vec::new();
        loop {
            let next = if shared {
                scan.next(limits, &mut Shared(&self.sources), &mut table)
            } else {
                scan.next(limits, self.sources.as_mut_slice(), &mut table)
            };
            let Some(next) = next else { break };
            out.push(next);
            assert!(out.len() <= self.distance.len(), "more rows than the model holds");
        }
        (out, table.asked)
    }

    /// What the executor passes on: visible rows the filter keeps, in scan order.
    fn accepted(&self, out: &[Neighbor]) -> Vec<u64> {
        out.iter().map(|n| n.row).filter(|&r| self.visible[r as usize] && self.kept[r as usize]).collect()
    }
}

fn unlimited(first_depth: usize, oversample: f32, order: ScanOrder) -> Limits {
    Limits { first_depth, max_tuples: usize::MAX, oversample, order }
}

fn shapes(estimated: std::ops::Range<usize>, visible_pct: std::ops::Range<u32>) -> impl Strategy<Value = Shape> {
    (any::<u64>(), 0usize..400, 1usize..4, estimated, visible_pct, 0.0f32..0.3).prop_map(
        |(seed, rows, exact_sources, estimated_sources, visible_pct, noise)| Shape {
            seed,
            rows,
            exact_sources,
            estimated_sources,
            visible_pct,
            kept_pct: 100,
            noise,
        },
    )
}

/// Checks (a) and (c) on one scan without a cap: rows each once, with its exact distance; every
/// visible row of an exact source; every visible row of an estimated source too, unless the scan
/// is [`ScanOrder::Strict`] and a deeper round found it nearer than a row already returned (it is
/// skipped then, as `Scan::next` promises; a strict scan's rows are in non-decreasing distance
/// order); invisible rows of estimated sources never, each asked of the table at most once.
fn check_complete(model: &mut Model, limits: Limits, shared: bool) -> Result<Vec<Neighbor>, TestCaseError> {
    let (out, asked) = model.scan(limits, shared);
    let strict = limits.order == ScanOrder::Strict;
    prop_assert!(!strict || out.windows(2).all(|w| w[0].distance <= w[1].distance), "rows out of distance order");
    let mut seen = HashSet::new();
    for n in &out {
        prop_assert!(seen.insert(n.row), "row {} returned twice", n.row);
        let row = n.row as usize;
        prop_assert_eq!(n.distance.to_bits(), model.distance[row].to_bits(), "row {} has no exact distance", n.row);
        prop_assert!(model.visible[row] || !model.estimated[row], "invisible row {} of an estimated source", row);
    }
    let farthest = out.last().map_or(f32::NEG_INFINITY, |n| n.distance);
    for row in (0..model.distance.len()).filter(|&r| model.visible[r] && !seen.contains(&(r as u64))) {
        prop_assert!(
            strict && model.estimated[row] && model.distance[row] < farthest,
            "visible row {} (estimated: {}) neither returned nor skipped as nearer than a returned row",
            row,
            model.estimated[row]
        );
    }
    for (row, count) in asked {
        prop_assert!(count == 1 || model.visible[row as usize], "invisible row {} asked {} times", row, count);
    }
    Ok(out)
}

proptest! {
    /// (a) Without a limit, every visible row comes out exactly once; with exact sources only,
    /// in non-decreasing distance order, and exactly brute force's order. Also when exact
    /// sources are searched with a shared budget (shallow lists).
    #[test]
    fn unlimited_scans_return_every_visible_row_once(
        shape in shapes(0..3, 0..101),
        first_depth in 1usize..40,
        oversample in prop::sample::select(vec![0.5f32, 1.0, 2.0, 4.0]),
        shared in any::<bool>(),
        order in prop::sample::select(vec![ScanOrder::Strict, ScanOrder::Relaxed]),
    ) {
        let mut model = Model::new(shape);
        let out = check_complete(&mut model, unlimited(first_depth, oversample, order), shared)?;
        if shape.estimated_sources == 0 {
            prop_assert!(out.windows(2).all(|w| w[0].order(&w[1]).is_lt()), "out of order");
            prop_assert_eq!(model.accepted(&out), model.brute_force());
        }
        if order == ScanOrder::Strict && shape.estimated_sources == 0 {
            // Over exact lists both orders run the same rounds (a skipped row is marked returned
            // as a returned one is), so a strict scan returns exactly the relaxed scan's rows
            // that are at least as far as every row kept before them. (With estimated sources a
            // strict round holds back the deeper part of its rerank pool: `STRICT_SHARE`.)
            let (relaxed, _) = model.scan(unlimited(first_depth, oversample, ScanOrder::Relaxed), shared);
            let mut farthest = f32::NEG_INFINITY;
            let expected: Vec<u64> = relaxed
                .iter()
                .filter(|n| {
                    let kept = n.distance >= farthest;
                    farthest = farthest.max(n.distance);
                    kept
                })
                .map(|n| n.row)
                .collect();
            prop_assert_eq!(out.iter().map(|n| n.row).collect::<Vec<_>>(), expected);
        }
    }

    /// (b) With filters keeping 1 %, 10 %, 50 % and 100 % of the rows and exact sources, the
    /// first k rows the executor accepts are brute force's top k.
    #[test]
    fn filtered_top_k_equals_brute_force(
        shape in shapes(0..1, 50..101),
        kept_pct in prop::sample::select(vec![1u32, 10, 50, 100]),
        k in 1usize..30,
        first_depth in 1usize..40,
        shared in any::<bool>(),
    ) {
        let mut model = Model::new(Shape { kept_pct, ..shape });
        let mut table = Table { distance: &model.distance, visible: &model.visible, asked: HashMap::new() };
        let mut scan = Scan::new();
        let limits = unlimited(first_depth, 1.0, ScanOrder::Strict);
        let mut accepted = Vec::new();
        while accepted.len() < k {
            let next = if shared {
                scan.next(limits, &mut Shared(&model.sources), &mut table)
            } else {
                scan.next(limits, model.sources.as_mut_slice(), &mut table)
            };
            let Some(next) = next else { break };
            let row = next.row as usize;
            if model.visible[row] && model.kept[row] {
                accepted.push(next.row);
            }
        }
        let expected: Vec<u64> = model.brute_force().into_iter().take(k).collect();
        prop_assert_eq!(accepted, expected);
    }

    /// (c) Rows invisible to the snapshot in segments without vectors never come out and do not
    /// end the scan early, also when most rows are invisible and all sit in such segments.
    #[test]
    fn invisible_rows_do_not_end_the_scan(
        shape in shapes(1..4, 0..60),
        first_depth in 1usize..20,
        oversample in prop::sample::select(vec![1.0f32, 2.0]),
    ) {
        let mut model = Model::new(Shape { exact_sources: 0, ..shape });
        check_complete(&mut model, unlimited(first_depth, oversample, ScanOrder::Relaxed), false)?;
    }

    /// (d) The tuple cap: with exact sources at most `max_tuples` rows (brute force's first
    /// ones), otherwise fewer than twice as many.
    #[test]
    fn the_tuple_cap_is_respected(
        shape in shapes(0..3, 0..101),
        max_tuples in 1usize..200,
        first_depth in 1usize..40,
        shared in any::<bool>(),
    ) {
        let mut model = Model::new(shape);
        let limits = Limits { first_depth, max_tuples, oversample: 2.0, order: ScanOrder::Strict };
        let (out, _) = model.scan(limits, shared);
        if shape.estimated_sources == 0 {
            prop_assert!(out.len() <= max_tuples, "{} rows past a cap of {}", out.len(), max_tuples);
            let mut all: Vec<Neighbor> = (0..model.distance.len())
                .map(|r| Neighbor::new(r as u64, model.distance[r]))
                .collect();
            all.sort_by(Neighbor::order);
            let expected: Vec<u64> = all.iter().take(max_tuples).map(|n| n.row).collect();
            prop_assert_eq!(out.iter().map(|n| n.row).collect::<Vec<_>>(), expected);
        } else {
            prop_assert!(out.len() < 2 * max_tuples, "{} rows past twice a cap of {}", out.len(), max_tuples);
        }
    }
}

/// A scan over no sources ends at once; a reset scan starts over.
#[test]
fn empty_sources_and_reset() {
    let mut none: Vec<Source> = Vec::new();
    let mut table = Table { distance: &[], visible: &[], asked: HashMap::new() };
    let mut scan = Scan::new();
    assert!(scan.next(unlimited(10, 1.0, ScanOrder::Strict), none.as_mut_slice(), &mut table).is_none());
    assert_eq!(scan.rounds(), 1);

    let mut one = vec![Source { exact: true, rows: vec![Neighbor::new(7, 0.5)] }];
    scan.reset();
    assert_eq!(scan.rounds(), 0);
    let first = scan.next(unlimited(10, 1.0, ScanOrder::Strict), one.as_mut_slice(), &mut table);
    assert_eq!(first.map(|n| n.row), Some(7));
    assert!(scan.next(unlimited(10, 1.0, ScanOrder::Strict), one.as_mut_slice(), &mut table).is_none());
}

/// The scan cost examines every row of a small index, about `ef · log₂ rows · 4` of a large
/// one, and never fewer than one row or more than the index holds.
/// The cost is linear in the rows read: the unfiltered search charges per row (the first round
/// spread over its rows), a selective filter on filter columns charges its exact scan up front;
/// more rows or a longer candidate list never cost less.
#[test]
fn scan_cost_estimate() {
    use super::ScanCost;
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b.max(1.0);
    // The candidate list is the one the scan uses at that size (`budget::size_scaled_ef`).
    let list = |ef: usize| super::budget::size_scaled_ef(ef, 1_048_576) as f64;
    assert!(list(40) > 40.0);
    let big = ScanCost::estimate(1_048_576.0, 40, 0.0025);
    assert!(close(big.examined, list(40) * 20.0 * 4.0));
    assert!(close(big.per_row, 20.0 * 4.0 * 0.025) && close(big.startup, 0.0));
    assert!(
        close(ScanCost::estimate(1_048_576.0, 1, 0.0025).examined, list(10) * 20.0 * 4.0),
        "ef_search counts as 10"
    );
    // Fewer rows than the search would examine: scanned exactly up front.
    let small = ScanCost::estimate(100.0, 40, 0.0025);
    assert!(close(small.examined, 100.0) && close(small.startup, 100.0 * 0.025) && close(small.per_row, 0.0025));
    for rows in [1_000.0, 100_000.0, 10_000_000.0] {
        let cost = ScanCost::estimate(rows, 100, 1.0);
        let deeper = ScanCost::estimate(rows, 200, 1.0);
        assert!(deeper.examined >= cost.examined);
        assert!(deeper.startup + 200.0 * deeper.per_row >= cost.startup + 200.0 * cost.per_row);
    }
}

/// L2 scans report the distance, not its square; other metrics report the kernels' value.
#[test]
fn order_by_values() {
    use super::order_by_value;
    use strata_engine::metric::Metric;
    assert_eq!(order_by_value(Metric::L2, 9.0).to_bits(), 3.0f64.to_bits());
    assert_eq!(order_by_value(Metric::L2, -1e-7).to_bits(), 0.0f64.to_bits(), "rounding below zero");
    assert_eq!(order_by_value(Metric::InnerProduct, -5.0).to_bits(), (-5.0f64).to_bits());
    assert_eq!(order_by_value(Metric::Cosine, 0.25).to_bits(), 0.25f64.to_bits());
}

#[test]
fn settings_give_the_first_depth_the_cap_and_search_parameters() {
    let settings = super::ScanSettings {
        ef_search: 40,
        probes: 3,
        oversample: 2.5,
        max_scan_tuples: 0,
        order: ScanOrder::Relaxed,
    };
    let limits = settings.limits();
    assert_eq!((limits.first_depth, limits.max_tuples, limits.oversample), (40, 1, 2.5));
    let small = super::ScanSettings { ef_search: 4, ..settings };
    assert_eq!(small.limits().first_depth, 10, "the first round is at least 10 deep");
    let params = settings.search_params(100);
    assert_eq!((params.ef_search, params.probes, params.oversample), (100, 3, 2.5), "ef_search ≥ depth");
    assert_eq!(settings.search_params(8).ef_search, 40);
}

#[test]
fn a_query_of_other_dimensions_than_the_index_is_refused() {
    use strata_engine::metric::Metric;
    use strata_engine::segment::IndexKind;
    use strata_engine::store::ElementKind;

    let config = crate::manifest::IndexConfig {
        dims: 3,
        metric: Metric::Cosine,
        element: ElementKind::F16,
        kind: IndexKind::Flat.into(),
        memtable_rows: 64,
        rerank_from_heap: false,
        filters: strata_engine::filter::FilterSchema::default(),
    };
    let error = super::ScanQuery::new(vec![1.0, 2.0], &config).unwrap_err();
    assert_eq!((error.expected, error.found), (3, 2));
    assert_eq!(super::ScanQuery::new(vec![1.0; 4], &config).unwrap_err().found, 4);
    let query = super::ScanQuery::new(vec![3.0, 0.0, 4.0], &config).unwrap();
    assert_eq!(query.values, [3.0, 0.0, 4.0], "kept as given for the segments");
    let same = strata_engine::store::Query::new(&[3.0, 0.0, 4.0], Metric::Cosine);
    let (a, b) = (query.prepared.distance_f32(&[0.6, 0.0, 0.8]), same.distance_f32(&[0.6, 0.0, 0.8]));
    assert_eq!(a.to_bits(), b.to_bits(), "prepared for the index's metric");
}

/// A filter lowers the cost to the admitted rows when they are few, and never raises it above
/// twice the unfiltered search.
#[test]
fn filtered_scan_cost() {
    use super::ScanCost;
    let rows = 100_000.0;
    let unfiltered = ScanCost::estimate(rows, 100, 1.0);
    assert_eq!(ScanCost::filtered(rows, 100, 1.0, 1.0), unfiltered);
    let tiny = ScanCost::filtered(rows, 100, 1.0, 0.001);
    assert!(
        (tiny.examined - 100.0).abs() < 1e-6 && (tiny.startup - 1000.0).abs() < 1e-6,
        "0.1 %: the admitted rows, up front"
    );
    assert!((ScanCost::filtered(rows, 100, 1.0, 0.0).examined - 1.0).abs() < 1e-6, "at least one");
    // Reading LIMIT 10 rows never costs more with a filter than twice the unfiltered first round.
    let limit = |c: ScanCost| c.startup + 10.0 * c.per_row;
    let first_round = unfiltered.examined * 10.0;
    for selectivity in [0.0001, 0.001, 0.01, 0.05, 0.1, 0.3] {
        let cost = ScanCost::filtered(rows, 100, 1.0, selectivity);
        assert!(limit(cost) <= 2.0 * first_round, "{selectivity}: {cost:?}");
        assert!(cost.examined <= 2.0 * unfiltered.examined);
    }
}

/// A source with exact distances whose shallow searches miss rows, as an HNSW graph's do: asked
/// for `depth` rows it returns `depth` of its first `2 · depth` rows, those a hash of the row and
/// the depth keeps first (every row once `depth` reaches its size), sorted — as many as asked,
/// as [`Sources`] requires.
struct Graph {
    rows: Vec<Neighbor>,
}

impl CandidateSource for Graph {
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
        if depth >= self.rows.len() {
            return self.rows.clone();
        }
        let kept = |n: &Neighbor| !(n.row.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7 ^ depth as u64).is_multiple_of(3);
        let window = &self.rows[..(2 * depth).min(self.rows.len())];
        let mut found: Vec<Neighbor> =
            window.iter().filter(|n| kept(n)).chain(window.iter().filter(|n| !kept(n))).take(depth).copied().collect();
        found.sort_by(Neighbor::order);
        found
    }
}

proptest! {
    /// (e) Sources with exact distances that miss rows at shallow depths (HNSW segments): a strict
    /// scan returns rows in non-decreasing distance order (the reported bug: a deeper round's
    /// nearer rows came out after farther ones); a relaxed scan returns every row, once.
    #[test]
    fn approximate_sources_keep_strict_order_or_return_every_row_relaxed(
        seed in any::<u64>(),
        rows in 1usize..300,
        sources in 1usize..3,
        first_depth in 1usize..20,
    ) {
        let mut rng = Rng(seed);
        let mut graphs: Vec<Graph> = (0..sources).map(|_| Graph { rows: Vec::new() }).collect();
        let distance: Vec<f32> = (0..rows).map(|_| rng.unit()).collect();
        for (row, &d) in distance.iter().enumerate() {
            graphs[(rng.next() % sources as u64) as usize].rows.push(Neighbor::new(row as u64, d));
        }
        for graph in &mut graphs {
            graph.rows.sort_by(Neighbor::order);
        }
        let visible = vec![true; rows];
        for order in [ScanOrder::Strict, ScanOrder::Relaxed] {
            let mut table = Table { distance: &distance, visible: &visible, asked: HashMap::new() };
            let mut scan = Scan::new();
            let mut out = Vec::new();
            while let Some(next) = scan.next(unlimited(first_depth, 1.0, order), graphs.as_mut_slice(), &mut table) {
                out.push(next);
            }
            let unique: HashSet<u64> = out.iter().map(|n| n.row).collect();
            prop_assert_eq!(unique.len(), out.len(), "a row came out twice");
            match order {
                ScanOrder::Strict => prop_assert!(
                    out.windows(2).all(|w| w[0].distance <= w[1].distance),
                    "a strict scan's rows are out of distance order"
                ),
                ScanOrder::Relaxed => prop_assert_eq!(unique.len(), rows, "a relaxed scan missed rows"),
            }
        }
    }
}

/// The sources of a model: exact ones searched alone or with a shared budget, with estimated
/// sources beside them, or with graphs (and maybe estimated sources) beside them.
#[derive(Debug, Clone, Copy)]
enum Mix {
    Exact,
    Shared,
    Estimated,
    Graphs,
}

/// Which rows a filter keeps: a random share, or only the rows farthest from the query (a filter
/// anti-correlated with the vectors: every matching row lies deep in every list).
#[derive(Debug, Clone, Copy)]
enum Kept {
    Random { per_10k: u64 },
    Farthest { per_10k: u64 },
}

/// Runs a scan as the executor does under `LIMIT limit`: rows the filter and the snapshot reject
/// are skipped, the scan is asked again until `limit` rows are accepted or it ends.
fn accept_up_to<S: Sources + ?Sized>(
    limit: usize,
    limits: Limits,
    sources: &mut S,
    table: &mut Table<'_>,
    kept: &[bool],
) -> (Vec<Neighbor>, Vec<Neighbor>) {
    let mut scan = Scan::new();
    let (mut returned, mut accepted) = (Vec::new(), Vec::new());
    while accepted.len() < limit {
        let Some(next) = scan.next(limits, sources, table) else { break };
        returned.push(next);
        if table.visible[next.row as usize] && kept[next.row as usize] {
            accepted.push(next);
        }
    }
    (returned, accepted)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// (f) The full LIMIT: over exact sources (searched alone or with a shared budget), sources
    /// with estimated distances and graphs that miss rows at shallow depths, with filters keeping
    /// from 50 % down to 0.01 % of the rows at random or only the farthest rows, a consumer
    /// asking for `limit` rows gets `min(limit, matching rows)` with a relaxed scan; a strict scan
    /// keeps every row in non-decreasing distance order, and over exact sources also returns the
    /// full LIMIT: the first rows brute force gives.
    #[test]
    fn limited_scans_return_the_full_limit(
        shape in shapes(0..1, 50..101),
        mix in prop::sample::select(vec![Mix::Exact, Mix::Shared, Mix::Estimated, Mix::Graphs]),
        kept in prop_oneof![
            prop::sample::select(vec![10_000u64, 5000, 5000, 1000, 100, 10, 1]).prop_map(|per_10k| Kept::Random { per_10k }),
            prop::sample::select(vec![1000u64, 100]).prop_map(|per_10k| Kept::Farthest { per_10k }),
        ],
        limit in 1usize..40,
        first_depth in 1usize..40,
        order in prop::sample::select(vec![ScanOrder::Strict, ScanOrder::Relaxed]),
    ) {
        let (estimated_sources, graphs, shared) = match mix {
            Mix::Exact => (0, 0, false),
            Mix::Shared => (0, 0, true),
            Mix::Estimated => (1 + shape.seed as usize % 2, 0, false),
            Mix::Graphs => (shape.seed as usize % 2, 1 + (shape.seed >> 8) as usize % 2, false),
        };
        let shape = Shape { estimated_sources, ..shape };
        let mut model = Model::new(shape);
        let rows = model.distance.len();
        // The graphs take a share of the rows out of the model's sources.
        let mut graph_sources: Vec<Graph> = (0..graphs).map(|_| Graph { rows: Vec::new() }).collect();
        if graphs > 0 {
            for source in &mut model.sources {
                let (moved, stay): (Vec<Neighbor>, Vec<Neighbor>) =
                    source.rows.iter().partition(|n| n.row % (graphs as u64 + 1) != 0);
                for n in moved {
                    let exact = Neighbor::new(n.row, model.distance[n.row as usize]);
                    model.estimated[n.row as usize] = false;
                    graph_sources[(n.row % graphs as u64) as usize].rows.push(exact);
                }
                source.rows = stay;
            }
            for graph in &mut graph_sources {
                graph.rows.sort_by(Neighbor::order);
            }
        }
        let mut by_distance: Vec<usize> = (0..rows).collect();
        by_distance.sort_by(|&a, &b| model.distance[a].total_cmp(&model.distance[b]));
        model.kept = match kept {
            Kept::Random { per_10k } => {
                let mut rng = Rng(shape.seed ^ 0x5EED);
                (0..rows).map(|_| rng.next() % 10_000 < per_10k).collect()
            }
            Kept::Farthest { per_10k } => {
                let first_kept = rows - (rows as u64 * per_10k).div_ceil(10_000) as usize;
                let mut kept = vec![false; rows];
                by_distance[first_kept..].iter().for_each(|&r| kept[r] = true);
                kept
            }
        };
        let matching = model.brute_force();
        let limits = unlimited(first_depth, 1.0, order);
        let mut table = Table { distance: &model.distance, visible: &model.visible, asked: HashMap::new() };
        let (returned, accepted) = if graphs > 0 {
            let mut all: Vec<Box<dyn CandidateSource>> = Vec::new();
            for source in &model.sources {
                all.push(Box::new(Source { exact: source.exact, rows: source.rows.clone() }));
            }
            for graph in &graph_sources {
                all.push(Box::new(Graph { rows: graph.rows.clone() }));
            }
            accept_up_to(limit, limits, &mut Boxed(&all), &mut table, &model.kept)
        } else if shared {
            accept_up_to(limit, limits, &mut Shared(&model.sources), &mut table, &model.kept)
        } else {
            accept_up_to(limit, limits, model.sources.as_mut_slice(), &mut table, &model.kept)
        };
        let approximate = graphs > 0 || estimated_sources > 0;
        let full = limit.min(matching.len());
        match order {
            ScanOrder::Relaxed => prop_assert_eq!(accepted.len(), full, "a relaxed scan came back short"),
            ScanOrder::Strict => {
                prop_assert!(
                    returned.windows(2).all(|w| w[0].distance <= w[1].distance),
                    "a strict scan's rows are out of distance order"
                );
                if !approximate {
                    let rows: Vec<u64> = accepted.iter().map(|n| n.row).collect();
                    prop_assert_eq!(rows, matching[..full].to_vec(), "a strict scan over exact sources");
                }
            }
        }
    }
}

/// Boxed sources of mixed types, searched as a slice of one type is.
struct Boxed<'a>(&'a [Box<dyn CandidateSource>]);

impl Sources for Boxed<'_> {
    fn search(&mut self, depth: usize, _: Sharing) -> Candidates {
        let mut candidates = Candidates::default();
        for source in self.0 {
            let list = source.nearest(depth);
            if !source.exact() {
                candidates.estimated.push(list);
                continue;
            }
            if source.approximate() {
                candidates.approximate.push(candidates.exact.len());
            }
            candidates.exact.push(list);
        }
        candidates
    }
}

/// A strict round holds back the deeper part of a short graph-walk list (all but the nearest
/// [`super::STRICT_SHARE`]-th), but never more than its cap of rows: a deep round returns all but
/// the tail. Other approximate lists keep the share.
#[test]
fn strict_hold_back_is_a_share_of_short_lists_and_capped_on_deep_ones() {
    let list = |n: usize| (0..n as u64).map(|row| Neighbor::new(row, row as f32)).collect::<Vec<_>>();
    let frontier = |n: usize, max_held: Option<usize>| {
        let candidates =
            Candidates { exact: vec![list(n)], approximate: vec![0], walked: vec![0], ..Candidates::default() };
        candidates.frontier(n, max_held).map(|last| last.row)
    };
    // An approximate list that is not a graph walk's (IVF probing some lists) keeps the quarter.
    let probed = Candidates { exact: vec![list(5_000)], approximate: vec![0], ..Candidates::default() };
    assert_eq!(probed.frontier(5_000, Some(800)).map(|last| last.row), Some(1_249));
    // Short list: the nearest quarter (rows 0..25 of 100), whatever the cap beyond 75 rows.
    assert_eq!(frontier(100, Some(800)), Some(24));
    assert_eq!(frontier(100, Some(usize::MAX)), Some(24));
    // Deep list: all but the deepest 800 of 5,000 rows.
    assert_eq!(frontier(5_000, Some(800)), Some(4_199));
    // No hold-back (relaxed order, or the tuple cap's round): no bound from a list of full depth.
    assert_eq!(frontier(5_000, None), None);
}

/// A strict scan that must go deep (a selective filter) holds back at most
/// [`super::STRICT_HOLD_BACK_DEPTHS`] first depths of a graph's list: 2,000 rows come out of a
/// list 3,078 deep (a quarter would need 8,000, a round of 10,389), in order.
#[test]
fn deep_strict_rounds_return_all_but_the_capped_tail() {
    let rows: Vec<Neighbor> = (0..20_000u64).map(|row| Neighbor::new(row, row as f32)).collect();
    let mut sources = [Graph { rows }];
    let limits = Limits { first_depth: 10, max_tuples: usize::MAX, oversample: 1.0, order: ScanOrder::Strict };
    let mut scan = Scan::new();
    let mut out = Vec::new();
    while out.len() < 2_000 {
        out.push(scan.next(limits, &mut sources[..], &mut NoRows).expect("rows remain"));
    }
    assert!(out.windows(2).all(|w| w[0].order(&w[1]).is_lt()), "out of order");
    // Depths 10, 15, 23, 35, …, 2,052, 3,078 (each half as deep again): fifteen rounds (with
    // quarters only, eighteen).
    assert_eq!(scan.rounds(), 15);
}

/// A reranker for scans without estimated sources: never asked.
struct NoRows;

impl Reranker for NoRows {
    fn exact_distance(&mut self, row: u64) -> Option<f32> {
        unreachable!("no estimated source, no rerank of row {row}")
    }
}

/// A row two sources list in the same round (a memtable and the segment its flush just wrote)
/// comes out once: rows are marked returned when they come out, not when a round queues them.
#[test]
fn a_row_listed_by_two_sources_in_one_round_comes_out_once() {
    let mut sources = vec![
        Source { exact: true, rows: vec![Neighbor::new(1, 0.1), Neighbor::new(2, 0.2), Neighbor::new(3, 0.3)] },
        Source { exact: true, rows: vec![Neighbor::new(2, 0.2), Neighbor::new(4, 0.4)] },
    ];
    let limits = unlimited(10, 1.0, ScanOrder::Strict);
    let mut scan = Scan::new();
    let mut out = Vec::new();
    while let Some(n) = scan.next(limits, sources.as_mut_slice(), &mut NoRows) {
        out.push(n.row);
    }
    assert_eq!(out, vec![1, 2, 3, 4]);
    assert_eq!(scan.rounds(), 1);
}
