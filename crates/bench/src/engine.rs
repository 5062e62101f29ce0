//! `strata-bench engine`: every segment kind on a dataset, with a dial sweep per kind.

use std::time::Instant;

use serde::Serialize;
use strata_engine::bitset::RowPredicate;
use strata_engine::metric::Metric;
use strata_engine::segment::{build_segment, BuildOptions, IndexKind, SearchParams, Segment};
use strata_engine::store::ElementKind;

use crate::alloc;
use crate::data::{recall, Dataset};

/// One point of a dial sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// The dial's value (ef_search, probes or oversample).
    pub dial: f64,
    /// Mean recall@10.
    pub recall_at_10: f64,
    /// Single-thread latency percentiles, milliseconds.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Queries per second with one thread.
    pub qps_1: f64,
    /// Queries per second with two threads.
    pub qps_2: f64,
}

/// One system (index kind and build parameters) with its sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SystemResult {
    /// Display name.
    pub system: String,
    /// Which dial the points sweep.
    pub dial: String,
    /// Build time, seconds.
    pub build_seconds: f64,
    /// Peak heap bytes during the build above the dataset already in memory.
    pub peak_build_bytes: u64,
    /// Bytes of the segment file.
    pub bytes_on_disk: u64,
    /// Bytes of the quantized codes (0 when not quantized).
    pub code_bytes: u64,
    /// The sweep.
    pub points: Vec<Point>,
}

/// A kind to benchmark.
pub struct Config {
    /// Display name.
    pub name: String,
    /// Kind and build parameters.
    pub kind: IndexKind,
    /// Name of the dial.
    pub dial: &'static str,
    /// Dial values.
    pub values: Vec<f64>,
}

fn params(dial: &str, value: f64) -> SearchParams {
    let mut params = SearchParams::default();
    match dial {
        "ef_search" => params.ef_search = value as usize,
        "probes" => params.probes = value as usize,
        "oversample" => params.oversample = value as f32,
        _ => {}
    }
    params
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

fn search_all(segment: &Segment, queries: &[f32], dims: usize, params: &SearchParams) -> Vec<Vec<u32>> {
    queries
        .chunks_exact(dims)
        .map(|q| segment.search(q, 10, params, RowPredicate::default()).iter().map(|n| n.row as u32).collect())
        .collect()
}

/// Builds `config` over the dataset and sweeps its dial.
pub fn run(dataset: &Dataset, config: &Config, threads: usize) -> Result<SystemResult, String> {
    let dims = dataset.dims;
    let rows = dataset.base.len() / dims;
    let options = BuildOptions {
        kind: config.kind,
        metric: Metric::Cosine,
        element: ElementKind::F32,
        seed: 42,
        threads,
        store_vectors: true,
        cancel: strata_engine::cancel::Cancel::default(),
    };
    let ids: Vec<u64> = (0..rows as u64).collect();
    let baseline = alloc::reset_peak();
    let started = Instant::now();
    let built = build_segment(&options, ids, dataset.base.clone(), dims).map_err(|e| e.to_string())?;
    let build_seconds = started.elapsed().as_secs_f64();
    // The clone of the input counts against the build (the extension hands over its own buffer).
    let peak_build_bytes = (alloc::peak() - baseline) as u64;
    let bytes = built.to_bytes();
    let code_bytes: u64 = built
        .sections()
        .iter()
        .filter(|(tag, _)| *tag == strata_engine::quant::TAG_QFLAT_CODES || *tag == strata_engine::ivf::TAG_IVF_CODES)
        .map(|(_, b)| b.len() as u64)
        .sum();
    drop(built);
    let segment = Segment::from_bytes(&bytes).map_err(|e| e.to_string())?;
    let mut points = Vec::new();
    for &value in &config.values {
        let params = params(config.dial, value);
        let _warm = search_all(&segment, &dataset.queries, dims, &params);
        let mut latencies = Vec::new();
        let mut total_recall = 0.0;
        let started = Instant::now();
        for (q, truth) in dataset.queries.chunks_exact(dims).zip(&dataset.ground_truth) {
            let t = Instant::now();
            let found: Vec<u32> =
                segment.search(q, 10, &params, RowPredicate::default()).iter().map(|n| n.row as u32).collect();
            latencies.push(t.elapsed().as_secs_f64() * 1e3);
            total_recall += recall(&found, truth, 10);
        }
        let qps_1 = latencies.len() as f64 / started.elapsed().as_secs_f64();
        let halves: Vec<&[f32]> = {
            let n = dataset.queries.len() / dims;
            let split = (n / 2) * dims;
            vec![&dataset.queries[..split], &dataset.queries[split..]]
        };
        let started = Instant::now();
        std::thread::scope(|scope| {
            for half in &halves {
                let segment = &segment;
                let params = &params;
                scope.spawn(move || search_all(segment, half, dims, params));
            }
        });
        let qps_2 = (dataset.queries.len() / dims) as f64 / started.elapsed().as_secs_f64();
        latencies.sort_by(f64::total_cmp);
        points.push(Point {
            dial: value,
            recall_at_10: total_recall / latencies.len() as f64,
            p50_ms: percentile(&latencies, 0.5),
            p95_ms: percentile(&latencies, 0.95),
            p99_ms: percentile(&latencies, 0.99),
            qps_1,
            qps_2,
        });
        eprintln!(
            "  {} {}={value}: recall {:.4}, p50 {:.3} ms, QPS {:.0}/{:.0}",
            config.name,
            config.dial,
            points.last().unwrap().recall_at_10,
            points.last().unwrap().p50_ms,
            qps_1,
            qps_2
        );
    }
    Ok(SystemResult {
        system: config.name.clone(),
        dial: config.dial.to_owned(),
        build_seconds,
        peak_build_bytes,
        bytes_on_disk: bytes.len() as u64,
        code_bytes,
        points,
    })
}

/// Single-thread streaming read bandwidth over a buffer larger than the caches, GB/s.
pub fn memory_bandwidth_gbs() -> f64 {
    let words = 64 << 20; // 512 MiB of u64
    let buffer: Vec<u64> = (0..words as u64).collect();
    let mut best = 0.0f64;
    for _ in 0..3 {
        let started = Instant::now();
        let sum: u64 = buffer.iter().fold(0u64, |acc, &w| acc.wrapping_add(w));
        let seconds = started.elapsed().as_secs_f64();
        std::hint::black_box(sum);
        best = best.max(f64::from(words * 8) / seconds / 1e9);
    }
    best
}
