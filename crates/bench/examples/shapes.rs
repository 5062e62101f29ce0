//! Recall@10 of one segment of each kind on synthetic data shapes and every metric, against
//! brute force: where the engine's answers stand off the benchmark path.
//!
//! ```text
//! cargo run --release -p strata-bench --example shapes [ROWS] [QUERIES]
//! ```

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use strata_engine::bitset::RowPredicate;
use strata_engine::cancel::Cancel;
use strata_engine::metric::Metric;
use strata_engine::segment::{build_segment, BuildOptions, IndexKind, SearchParams, Segment};
use strata_engine::store::ElementKind;

fn uniform(rows: usize, dims: usize, rng: &mut ChaCha8Rng) -> Vec<f32> {
    (0..rows * dims).map(|_| rng.gen::<f32>()).collect()
}

fn gaussian(rng: &mut ChaCha8Rng) -> f32 {
    // Box-Muller.
    let u: f32 = rng.gen_range(1e-7..1.0);
    let v: f32 = rng.gen();
    (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
}

fn mixture(rows: usize, dims: usize, rng: &mut ChaCha8Rng) -> Vec<f32> {
    let centres: Vec<Vec<f32>> = (0..50).map(|_| (0..dims).map(|_| gaussian(rng) * 10.0).collect()).collect();
    let mut out = Vec::with_capacity(rows * dims);
    for _ in 0..rows {
        let c = &centres[rng.gen_range(0..centres.len())];
        out.extend(c.iter().map(|x| x + gaussian(rng) * 0.05));
    }
    out
}

fn near_duplicates(rows: usize, dims: usize, rng: &mut ChaCha8Rng) -> Vec<f32> {
    let base = uniform(rows / 50 + 1, dims, rng);
    let mut out = Vec::with_capacity(rows * dims);
    for r in 0..rows {
        let b = &base[(r / 50) * dims..(r / 50 + 1) * dims];
        out.extend(b.iter().map(|x| x + gaussian(rng) * 1e-4));
    }
    out
}

fn unnormalised(rows: usize, dims: usize, rng: &mut ChaCha8Rng) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * dims);
    for _ in 0..rows {
        let dir: Vec<f32> = (0..dims).map(|_| gaussian(rng)).collect();
        let norm = dir.iter().map(|x| x * x).sum::<f32>().sqrt();
        let scale = 10f32.powf(rng.gen_range(-1.0..1.0)) / norm;
        out.extend(dir.iter().map(|x| x * scale));
    }
    out
}

fn truth(rows: &[f32], dims: usize, query: &[f32], metric: Metric, k: usize) -> Vec<(usize, f32)> {
    let mut all: Vec<(usize, f32)> =
        rows.chunks_exact(dims).enumerate().map(|(i, r)| (i, metric.distance(query, r))).collect();
    all.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    all.truncate(k);
    all
}

/// Writes `rows` (of `dims` floats each) to `path` in the `.fvecs` format.
fn write_fvecs(path: &str, dims: usize, rows: &[f32]) {
    let mut out = Vec::new();
    for r in rows.chunks_exact(dims) {
        out.extend((dims as i32).to_le_bytes());
        for x in r {
            out.extend(x.to_le_bytes());
        }
    }
    std::fs::write(path, out).unwrap();
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rows: usize = args.next().map_or(20_000, |a| a.parse().unwrap());
    let queries: usize = args.next().map_or(50, |a| a.parse().unwrap());
    let only: Option<String> = args.next();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let shapes: Vec<(&str, usize, Vec<f32>)> = vec![
        ("uniform3", 3, uniform(rows, 3, &mut rng)),
        ("sphere3", 3, {
            let mut u = uniform(rows, 3, &mut rng);
            for r in u.chunks_exact_mut(3) {
                let n = r.iter().map(|x| x * x).sum::<f32>().sqrt();
                for x in r.iter_mut() {
                    *x /= n;
                }
            }
            u
        }),
        ("uniform16", 16, uniform(rows, 16, &mut rng)),
        ("mixture32", 32, mixture(rows, 32, &mut rng)),
        ("dups8", 8, near_duplicates(rows, 8, &mut rng)),
        ("unnorm50", 50, unnormalised(rows, 50, &mut rng)),
    ];
    let k = 10;
    for (name, dims, data) in &shapes {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let qs: Vec<Vec<f32>> = (0..queries)
            .map(|i| {
                let r = (i * 7919) % rows;
                data[r * dims..(r + 1) * dims].iter().map(|x| x + 0.01 * gaussian(&mut rng)).collect()
            })
            .collect();
        if let Ok(dir) = std::env::var("SHAPES_DUMP") {
            write_fvecs(&format!("{dir}/{name}.base.fvecs"), *dims, data);
            write_fvecs(&format!("{dir}/{name}.query.fvecs"), *dims, &qs.concat());
        }
        for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
            let truths: Vec<_> = qs.iter().map(|q| truth(data, *dims, q, metric, k)).collect();
            let lists = (rows as f64).sqrt() as u32;
            for (kind, params) in [
                (
                    IndexKind::Hnsw { m: 16, ef_construction: 64 },
                    SearchParams { ef_search: 40, probes: 0, oversample: 4.0 },
                ),
                (
                    IndexKind::Hnsw { m: 16, ef_construction: 64 },
                    SearchParams { ef_search: 100, probes: 0, oversample: 4.0 },
                ),
                (IndexKind::Ivf { lists, bits: 4 }, SearchParams { ef_search: 100, probes: 0, oversample: 4.0 }),
                (
                    IndexKind::Ivf { lists, bits: 4 },
                    SearchParams { ef_search: 100, probes: lists as usize, oversample: 4.0 },
                ),
                (IndexKind::QuantizedFlat { bits: 4 }, SearchParams { ef_search: 100, probes: 0, oversample: 4.0 }),
            ] {
                let options = BuildOptions {
                    kind,
                    metric,
                    element: ElementKind::F32,
                    seed: 42,
                    threads: 2,
                    store_vectors: true,
                    cancel: Cancel::default(),
                };
                let ids = (0..rows as u64).collect();
                let built = build_segment(&options, ids, data.clone(), *dims).unwrap();
                let segment = Segment::from_bytes(&built.to_bytes()).unwrap();
                let mut hits = 0usize;
                for (q, t) in qs.iter().zip(&truths) {
                    let got = segment.search(q, k, &params, RowPredicate::default());
                    let bound = t.last().unwrap().1;
                    let tolerance = 1e-6 * bound.abs().max(1.0);
                    hits += got
                        .iter()
                        .filter(|g| {
                            let row = g.row as usize;
                            metric.distance(q, &data[row * dims..(row + 1) * dims]) <= bound + tolerance
                        })
                        .count()
                        .min(k);
                }
                println!(
                    "{name:10} {metric:?}\t{:?} ef {} probes {}\trecall {:.4}",
                    kind,
                    params.ef_search,
                    params.probes,
                    hits as f64 / (k * queries) as f64
                );
            }
        }
    }
}
