//! Where an IVF segment's build spends its time, phase by phase, on real rows: the quantizer's
//! training; k-means after one Lloyd update (mostly the k-means++ seeding) and after ten, with
//! 256, 128 and 64 sample rows a list; the assignment of every row to its list; and the whole
//! IVF build with that quantizer (k-means, assignment and the 4-bit encoding), each timed alone.
//!
//! ```text
//! cargo run --release -p strata-bench --example ivf_build_phases DATA_DIR [ROWS] [LISTS] [THREADS]
//! ```
//!
//! `DATA_DIR` holds `base.fvecs` (the MiniLM set). Rows are taken as they are (the MiniLM rows are
//! L2-normalised, so cosine applies); defaults: 100,000 rows, 316 lists, 2 threads, 4-bit codes,
//! as `CREATE INDEX … USING strata (v vector_cosine_ops) WITH (kind = 'ivf', rerank = 'heap')`
//! builds them.

use std::path::Path;
use std::time::Instant;

use strata_engine::ivf::{Ivf, IvfParams};
use strata_engine::kmeans::{self, KMeansParams};
use strata_engine::metric::Metric;
use strata_engine::quant::{Quantizer, QuantizerParams};
use strata_engine::store::{Elements, VectorStore};

mod texmex;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("DATA_DIR");
    let rows: usize = args.next().map_or(100_000, |a| a.parse().unwrap());
    let lists: usize = args.next().map_or(316, |a| a.parse().unwrap());
    let threads: usize = args.next().map_or(2, |a| a.parse().unwrap());
    let (dims, words) = texmex::read_vecs(&Path::new(&dir).join("base.fvecs"), rows);
    let values: Vec<f32> = words.into_iter().map(f32::from_le_bytes).collect();
    let store = VectorStore::new(Elements::F32(&values), dims, Metric::Cosine).expect("store");
    println!("{} rows × {dims}, {lists} lists, {threads} threads", store.len());

    let started = Instant::now();
    let quantizer = Quantizer::train(&store, &QuantizerParams { bits: 4, seed: 7 }).expect("quantizer");
    println!("quantizer training   {:>8.1} ms", started.elapsed().as_secs_f64() * 1e3);

    for (iterations, per_centroid) in [(1, 256), (10, 256), (10, 128), (10, 64)] {
        let kparams = KMeansParams {
            max_iterations: iterations,
            max_points_per_centroid: per_centroid,
            threads,
            spherical: Some(true),
            ..KMeansParams::default()
        };
        let started = Instant::now();
        let trained = kmeans::train(&store, lists, &kparams).expect("k-means");
        let stats = trained.stats();
        println!(
            "k-means training, {iterations:>2} iterations, {per_centroid:>3} rows a list {:>8.1} ms, inertia {:.1}",
            started.elapsed().as_secs_f64() * 1e3,
            stats.inertia.last().copied().unwrap_or(0.0)
        );
    }
    let kparams = KMeansParams { max_iterations: 10, threads, spherical: Some(true), ..KMeansParams::default() };
    let centroids = kmeans::train(&store, lists, &kparams).expect("k-means");

    let started = Instant::now();
    let assignment = kmeans::assign(&store, &centroids, threads).expect("assign");
    println!("assignment           {:>8.1} ms ({} rows)", started.elapsed().as_secs_f64() * 1e3, assignment.len());

    let started = Instant::now();
    let ivf =
        Ivf::build_with_quantizer(&store, &IvfParams { lists, threads, ..IvfParams::default() }, Some(&quantizer))
            .expect("ivf");
    println!("Ivf::build (given quantizer) {:>8.1} ms ({} lists)", started.elapsed().as_secs_f64() * 1e3, ivf.lists());
}
