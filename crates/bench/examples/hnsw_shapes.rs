//! Recall@10 of one HNSW segment (m 16, ef_construction 64, two build threads) at ef_search
//! 40, 64, 100 and 200 on the data shapes where graph quality decides recall — a mixture of 100 tight
//! clusters, near-duplicates (50 copies at 10⁻⁴), inner product over uniform rows, and MiniLM
//! text embeddings — against brute force in `f64` (a row within 4·2⁻²⁴ of the 10th distance
//! under cosine, 10⁻⁶ relative otherwise, counts as a hit). "empty" counts queries none of whose
//! 10 true neighbours were found.
//!
//! ```text
//! cargo run --release -p strata-bench --example hnsw_shapes [ROWS] [QUERIES] [SHAPE]
//! FILES=/path/prefix …  # rows from PREFIX.base.fvecs and PREFIX.query.fvecs instead
//! NQ=300 …              # at most that many queries
//! METRIC=l2|ip|cosine … # every case under that metric
//! IVF=224 …             # an IVF segment of that many lists instead, probing 20, 45, 100, 224
//! ```

use std::fmt::Write as _;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use strata_engine::bitset::RowPredicate;
use strata_engine::cancel::Cancel;
use strata_engine::metric::Metric;
use strata_engine::segment::{build_segment, BuildOptions, IndexKind, SearchParams, Segment};
use strata_engine::store::ElementKind;

fn gaussian(rng: &mut ChaCha8Rng) -> f32 {
    let u: f32 = rng.gen_range(1e-7..1.0);
    let v: f32 = rng.gen();
    (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
}

fn normal(n: usize, rng: &mut ChaCha8Rng) -> Vec<f32> {
    (0..n).map(|_| gaussian(rng)).collect()
}

/// (base, queries) of a shape.
fn shape(name: &str, rows: usize, nq: usize, rng: &mut ChaCha8Rng) -> (usize, Vec<f32>, Vec<f32>) {
    match name {
        "uniform16" | "uniform3" => {
            let d = if name == "uniform16" { 16 } else { 3 };
            let b = (0..rows * d).map(|_| rng.gen::<f32>()).collect();
            let q = (0..nq * d).map(|_| rng.gen::<f32>()).collect();
            (d, b, q)
        }
        "gmm32" => {
            let d = 32;
            let centres = normal(100 * d, rng);
            let pick = |n: usize, rng: &mut ChaCha8Rng| {
                let mut out = Vec::with_capacity(n * d);
                for _ in 0..n {
                    let c = rng.gen_range(0..100);
                    for j in 0..d {
                        out.push(centres[c * d + j] + 0.02 * gaussian(rng));
                    }
                }
                out
            };
            let b = pick(rows, rng);
            let q = pick(nq, rng);
            (d, b, q)
        }
        "neardup32" => {
            let d = 32;
            let n_centres = rows / 50;
            let centres = normal(n_centres * d, rng);
            let mut b = Vec::with_capacity(rows * d);
            for r in 0..rows {
                let c = r % n_centres;
                for j in 0..d {
                    b.push(centres[c * d + j] + 1e-4 * gaussian(rng));
                }
            }
            let mut q = Vec::with_capacity(nq * d);
            for _ in 0..nq {
                let c = rng.gen_range(0..n_centres);
                for j in 0..d {
                    q.push(centres[c * d + j] + 0.05 * gaussian(rng));
                }
            }
            (d, b, q)
        }
        _ => panic!("unknown shape {name}"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rows: usize = args.next().map_or(50_000, |a| a.parse().unwrap());
    let nq: usize = args.next().map_or(200, |a| a.parse().unwrap());
    let only: Option<String> = args.next();
    let cases = [
        ("gmm32", Metric::Cosine),
        ("neardup32", Metric::Cosine),
        ("uniform16", Metric::InnerProduct),
        ("uniform3", Metric::InnerProduct),
        ("gmm32", Metric::L2),
        ("minilm", Metric::Cosine),
    ];
    let k = 10;
    for (name, metric) in cases {
        let files = std::env::var("FILES").is_ok();
        if only.as_deref().is_some_and(|o| o != name) || (name == "minilm" && !files) {
            continue; // MiniLM rows come from FILES only
        }
        let metric = match std::env::var("METRIC").as_deref() {
            Ok("l2") => Metric::L2,
            Ok("ip") => Metric::InnerProduct,
            Ok("cosine") => Metric::Cosine,
            _ => metric,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(39);
        let (dims, data, queries) = match std::env::var("FILES") {
            Ok(prefix) => {
                let (d, b) = read_fvecs(&format!("{prefix}.base.fvecs"));
                let (_, q) = read_fvecs(&format!("{prefix}.query.fvecs"));
                (d, b, q)
            }
            Err(_) => shape(name, rows, nq, &mut rng),
        };
        let rows = data.len() / dims;
        let mut queries = queries;
        if let Ok(limit) = std::env::var("NQ") {
            queries.truncate(limit.parse::<usize>().unwrap() * dims);
        }
        let nq = queries.len() / dims;
        let options = BuildOptions {
            kind: match std::env::var("IVF") {
                Ok(lists) => IndexKind::Ivf { lists: lists.parse().unwrap(), bits: 4 },
                Err(_) => IndexKind::Hnsw { m: 16, ef_construction: 64 },
            },
            metric,
            element: ElementKind::F32,
            seed: 42,
            threads: 2,
            store_vectors: true,
            cancel: Cancel::default(),
        };
        let started = std::time::Instant::now();
        let built = build_segment(&options, (0..rows as u64).collect(), data.clone(), dims).unwrap();
        let build_s = started.elapsed().as_secs_f64();
        let segment = Segment::from_bytes(&built.to_bytes()).unwrap();
        let bounds: Vec<f64> = queries
            .chunks_exact(dims)
            .map(|q| {
                let mut all: Vec<f64> = data.chunks_exact(dims).map(|r| d64(metric, q, r)).collect();
                all.select_nth_unstable_by(k - 1, f64::total_cmp);
                all[k - 1]
            })
            .collect();
        let ivf = std::env::var("IVF").is_ok();
        let mut line = format!("{name:10} {metric:?}\tbuild {build_s:.1}s");
        for ef in if ivf { [20, 45, 100, 224] } else { [40, 64, 100, 200] } {
            let params = SearchParams { ef_search: ef, probes: ef, oversample: 4.0 };
            let mut hits = 0usize;
            let mut zero = 0usize;
            for (qi, q) in queries.chunks_exact(dims).enumerate() {
                let bound = bounds[qi];
                let tolerance =
                    if metric == Metric::Cosine { 4.0 * 2f64.powi(-24) } else { 1e-6 * bound.abs().max(1.0) };
                let got = segment.search(q, k, &params, RowPredicate::default());
                let h = got
                    .iter()
                    .filter(|g| {
                        d64(metric, q, &data[g.row as usize * dims..(g.row as usize + 1) * dims]) <= bound + tolerance
                    })
                    .count()
                    .min(k);
                zero += usize::from(h == 0);
                hits += h;
            }
            let what = if ivf { "probes" } else { "ef" };
            let _ = write!(line, "\t{what} {ef} {:.4} ({zero} empty)", hits as f64 / (k * nq) as f64);
        }
        println!("{line}");
    }
}

fn d64(metric: Metric, q: &[f32], r: &[f32]) -> f64 {
    let dot: f64 = q.iter().zip(r).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
    match metric {
        Metric::L2 => q.iter().zip(r).map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2)).sum(),
        Metric::InnerProduct => -dot,
        Metric::Cosine => {
            let nq: f64 = q.iter().map(|a| f64::from(*a).powi(2)).sum();
            let nr: f64 = r.iter().map(|a| f64::from(*a).powi(2)).sum();
            1.0 - dot / (nq * nr).sqrt()
        }
        _ => f64::from(metric.distance(q, r)),
    }
}

fn read_fvecs(path: &str) -> (usize, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    let dims = i32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    let mut out = Vec::new();
    for rec in bytes.chunks_exact(4 * (dims + 1)) {
        out.extend(rec[4..].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())));
    }
    (dims, out)
}
