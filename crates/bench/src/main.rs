//! `strata-bench` — pg_strata's benchmark harness.
//!
//! ```text
//! strata-bench engine [--data DIR] [--rows N] [--queries Q] [--threads T] [--out DIR] [--quick]
//! strata-bench memory [--data DIR] [--rows N] [--threads T] [--out DIR] [--kinds hnsw,ivf,quantized,flat]
//! strata-bench text-rank IN.json OUT.json
//! ```
//!
//! `engine` builds every segment kind on a dataset (default `../shared/data/pypi-minilm-100k`),
//! sweeps each kind's dial, runs hnswlib and faiss on the same data in the same run (a Python
//! driver in a virtual environment this command creates), and writes `engine.json`, `engine.md`
//! and `engine-frontier.png` to the output folder (default `docs/benchmarks`).
//!
//! `memory` builds and merges every kind on a dataset (default: the synthetic 1M × 1024 set of
//! `cargo xtask data synthetic`) and writes `memory.json` and `memory.md` (see [`memory`]).
//!
//! `text-rank` ranks tokenised documents for tokenised queries with strata-text (see
//! [`text_rank`]); the IR quality benchmark (`crates/bench/python/ir_quality.py`) drives it.

mod alloc;
mod data;
mod engine;
mod memory;
mod text_rank;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use strata_engine::segment::IndexKind;

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;

struct Args {
    data: PathBuf,
    rows: usize,
    queries: usize,
    threads: usize,
    out: PathBuf,
    quick: bool,
    /// `memory`: the kinds to measure (`hnsw,ivf,quantized,flat`; default all).
    kinds: Option<String>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        data: repo_root().join("../shared/data/pypi-minilm-100k"),
        rows: usize::MAX,
        queries: 1000,
        threads: 2,
        out: repo_root().join("docs/benchmarks"),
        quick: false,
        kinds: None,
    };
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let mut value = || iter.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--data" => parsed.data = PathBuf::from(value()?),
            "--rows" => parsed.rows = value()?.parse().map_err(|e| format!("--rows: {e}"))?,
            "--queries" => parsed.queries = value()?.parse().map_err(|e| format!("--queries: {e}"))?,
            "--threads" => parsed.threads = value()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--out" => parsed.out = PathBuf::from(value()?),
            "--quick" => parsed.quick = true,
            "--kinds" => parsed.kinds = Some(value()?),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if parsed.quick {
        parsed.rows = parsed.rows.min(20_000);
        parsed.queries = parsed.queries.min(200);
    }
    Ok(parsed)
}

fn configs(rows: usize, quick: bool) -> (Vec<engine::Config>, u32) {
    let lists = ((rows as f64).sqrt().round() as u32).max(1);
    let sweep = |full: &[f64], short: &[f64]| if quick { short.to_vec() } else { full.to_vec() };
    let configs = vec![
        engine::Config { name: "strata flat".into(), kind: IndexKind::Flat, dial: "none", values: vec![0.0] },
        engine::Config {
            name: "strata quantized flat (4-bit)".into(),
            kind: IndexKind::QuantizedFlat { bits: 4 },
            dial: "oversample",
            values: sweep(&[1.0, 2.0, 4.0, 8.0, 16.0], &[2.0, 4.0]),
        },
        engine::Config {
            name: format!("strata ivf (lists={lists}, 4-bit)"),
            kind: IndexKind::Ivf { lists, bits: 4 },
            dial: "probes",
            values: sweep(&[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], &[4.0, 16.0]),
        },
        engine::Config {
            name: "strata hnsw (M=16, efc=64)".into(),
            kind: IndexKind::Hnsw { m: 16, ef_construction: 64 },
            dial: "ef_search",
            values: sweep(&[10.0, 20.0, 40.0, 64.0, 100.0, 200.0, 400.0], &[40.0, 100.0]),
        },
    ];
    (configs, lists)
}

/// Runs the Python driver for hnswlib and faiss; returns its results (empty with a message when
/// the packages cannot be installed).
fn native(args: &Args, lists: u32, rows: usize) -> serde_json::Value {
    let venv = repo_root().join("target/bench-venv");
    let python = venv.join("bin/python");
    let script = repo_root().join("crates/bench/python/native.py");
    let setup = || -> Result<(), String> {
        if !python.is_file() {
            let status = Command::new("python3").args(["-m", "venv"]).arg(&venv).status().map_err(|e| e.to_string())?;
            if !status.success() {
                return Err("python3 -m venv failed".into());
            }
        }
        let status = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "numpy",
                "hnswlib",
                "faiss-cpu",
                "matplotlib",
            ])
            .status()
            .map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err("pip install of hnswlib/faiss-cpu failed".into())
        }
    };
    if let Err(e) = setup() {
        eprintln!("strata-bench: native libraries unavailable ({e}); their columns are left out");
        return json!([]);
    }
    let out = args.out.join("native.tmp.json");
    let status = Command::new(&python)
        .arg(&script)
        .arg("--data")
        .arg(&args.data)
        .args(["--rows", &rows.to_string(), "--queries", &args.queries.to_string(), "--lists", &lists.to_string()])
        .args(["--threads", &args.threads.to_string()])
        .arg("--out")
        .arg(&out)
        .args(if args.quick { vec!["--quick"] } else { vec![] })
        .env_remove("OPENBLAS_CORETYPE")
        .env_remove("OPENBLAS_L2_SIZE")
        .status();
    match status {
        Ok(s) if s.success() => {
            let text = std::fs::read_to_string(&out).unwrap_or_else(|_| "[]".into());
            let _ = std::fs::remove_file(&out);
            serde_json::from_str(&text).unwrap_or_else(|_| json!([]))
        }
        _ => {
            eprintln!("strata-bench: the native driver failed; its columns are left out");
            json!([])
        }
    }
}

/// The lowest-dial point of `system` reaching recall@10 ≥ 0.95.
fn first_at_recall<'a>(results: &'a serde_json::Value, prefix: &str) -> Option<&'a serde_json::Value> {
    let system = results.as_array()?.iter().find(|s| s["system"].as_str().is_some_and(|n| n.starts_with(prefix)))?;
    system["points"].as_array()?.iter().find(|p| p["recall_at_10"].as_f64().unwrap_or(0.0) >= 0.95)
}

fn system<'a>(results: &'a serde_json::Value, prefix: &str) -> Option<&'a serde_json::Value> {
    results.as_array()?.iter().find(|s| s["system"].as_str().is_some_and(|n| n.starts_with(prefix)))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> serde_json::Value {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => json!(a / b),
        _ => serde_json::Value::Null,
    }
}

fn run_engine(args: &Args) -> Result<(), String> {
    std::fs::create_dir_all(&args.out).map_err(|e| e.to_string())?;
    let dataset = data::load(&args.data, args.rows, args.queries)?;
    let rows = dataset.base.len() / dataset.dims;
    let dims = dataset.dims;
    eprintln!("strata-bench engine: {rows} × {} base, {} queries", dataset.dims, dataset.ground_truth.len());
    let (configs, lists) = configs(rows, args.quick);
    let mut ours = Vec::new();
    for config in &configs {
        match engine::run(&dataset, config, args.threads) {
            Ok(result) => ours.push(result),
            Err(e) => eprintln!("strata-bench: {} failed: {e}", config.name),
        }
    }
    let bandwidth = engine::memory_bandwidth_gbs();
    drop(dataset);
    let native = native(args, lists, rows);
    let ours = serde_json::to_value(&ours).map_err(|e| e.to_string())?;
    let qps = |p: Option<&serde_json::Value>| p.and_then(|p| p["qps_1"].as_f64());
    let flat_bytes = system(&ours, "strata flat").and_then(|s| s["bytes_on_disk"].as_f64());
    let ivf = system(&ours, "strata ivf");
    let quantized = system(&ours, "strata quantized flat");
    let quantized_default =
        quantized.and_then(|s| s["points"].as_array()?.iter().find(|p| p["dial"].as_f64() == Some(4.0)).cloned());
    let scan_gbs = quantized.zip(quantized_default.as_ref()).and_then(|(s, p)| {
        let code_bytes = s["code_bytes"].as_f64()?;
        let seconds = p["p50_ms"].as_f64()? / 1e3;
        (code_bytes > 0.0 && seconds > 0.0).then(|| code_bytes / seconds / 1e9)
    });
    let headline = json!({
        "hnsw_qps_ratio_vs_hnswlib": ratio(qps(first_at_recall(&ours, "strata hnsw")), qps(first_at_recall(&native, "hnswlib"))),
        "ivf_qps_ratio_vs_faiss_ivfflat": ratio(qps(first_at_recall(&ours, "strata ivf")), qps(first_at_recall(&native, "faiss IndexIVFFlat"))),
        "ivf_bytes_ratio_vs_flat": ratio(ivf.and_then(|s| s["bytes_on_disk"].as_f64()), flat_bytes),
        "quantized_flat_recall_at_10": quantized_default.as_ref().and_then(|p| p["recall_at_10"].as_f64()),
        "quantized_scan_bandwidth_fraction": ratio(scan_gbs, Some(bandwidth)),
    });
    let report = json!({
        "headline": headline,
        "dataset": {"path": repository_relative(&args.data), "rows": rows, "dims": dims, "queries": args.queries, "metric": "cosine"},
        "machine": {"cpus": std::thread::available_parallelism().map_or(1, std::num::NonZero::get), "memory_bandwidth_gbs": bandwidth,
                    "simd": format!("{:?}", strata_engine::kernels::active().level)},
        "threads": args.threads,
        "quick": args.quick,
        "quantized_scan_gbs": scan_gbs,
        "systems": ours.as_array().cloned().unwrap_or_default().into_iter().chain(native.as_array().cloned().unwrap_or_default()).collect::<Vec<_>>(),
    });
    let json_path = args.out.join("engine.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let python = repo_root().join("target/bench-venv/bin/python");
    let reporter = repo_root().join("crates/bench/python/report_engine.py");
    let status = Command::new(if python.is_file() { python.as_os_str() } else { "python3".as_ref() })
        .arg(reporter)
        .arg(&json_path)
        .arg(&args.out)
        .status();
    if !status.is_ok_and(|s| s.success()) {
        eprintln!("strata-bench: the report script failed (markdown/plot not written)");
    }
    println!("wrote {}", json_path.display());
    Ok(())
}

/// `strata-bench memory`: build and merge memory of every kind (memory.json, memory.md).
fn run_memory(args: &Args) -> Result<(), String> {
    std::fs::create_dir_all(&args.out).map_err(|e| e.to_string())?;
    let scratch = args.out.join(".memory-scratch");
    let mut results = Vec::new();
    let mut dims = 0;
    let wanted = |name: &str| args.kinds.as_deref().is_none_or(|k| k.split(',').any(|w| w == name));
    let kinds = [
        ("hnsw", IndexKind::Hnsw { m: 16, ef_construction: 64 }),
        ("ivf", IndexKind::Ivf { lists: 0, bits: 4 }),
        ("quantized", IndexKind::QuantizedFlat { bits: 4 }),
        ("flat", IndexKind::Flat),
    ];
    for kind in kinds.into_iter().filter(|(name, _)| wanted(name)).map(|(_, kind)| kind) {
        results.extend(memory::measure_kind(&args.data, args.rows, kind, args.threads, &scratch)?);
        dims = memory::read_fvecs(&args.data.join("base.fvecs"), 1)?.0;
    }
    let peak_rss = peak_resident_bytes();
    let report = json!({
        // The cache lies outside the repository: its folder name only, no path of this machine.
        "dataset": {
            "name": args.data.file_name().map(|n| n.to_string_lossy().into_owned()),
            "rows": results.iter().map(|r| r.rows).max(),
            "dims": dims,
        },
        "margin_bytes": memory::MARGIN_BYTES,
        "peak_resident_bytes": peak_rss,
        "headline": {
            "peak_build_heap_gib": results.iter().map(|r| r.peak_heap_bytes).max().map(|b| b as f64 / f64::from(1u32 << 30)),
            "every_kind_within_budget": results.iter().all(|r| r.within_budget),
        },
        "results": results,
    });
    std::fs::write(args.out.join("memory.json"), serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    std::fs::write(args.out.join("memory.md"), memory::markdown(&results, dims, peak_rss))
        .map_err(|e| e.to_string())?;
    println!("wrote {}", args.out.join("memory.json").display());
    Ok(())
}

/// The process's peak resident set (`VmHWM`), bytes; 0 where /proc is unavailable.
fn peak_resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// `path` relative to the repository root (e.g. `../shared/data/pypi-minilm-100k`), so reports
/// name no directory of the machine that wrote them; `path` as given when it cannot be resolved.
fn repository_relative(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let (Ok(path), Ok(root)) = (path.canonicalize(), root.canonicalize()) else {
        return path.display().to_string();
    };
    let common = path.components().zip(root.components()).take_while(|(a, b)| a == b).count();
    let mut relative = PathBuf::new();
    for _ in root.components().skip(common) {
        relative.push("..");
    }
    relative.extend(path.components().skip(common));
    relative.display().to_string()
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.split_first() {
        Some((command, rest)) if command == "engine" => parse(rest).and_then(|a| run_engine(&a)),
        Some((command, rest)) if command == "memory" => parse(rest).and_then(|a| run_memory(&a)),
        Some((command, [input, output])) if command == "text-rank" => text_rank::run(Path::new(input), Path::new(output)),
        _ => {
            Err("usage: strata-bench engine [--data DIR] [--rows N] [--queries Q] [--threads T] [--out DIR] [--quick]\n       \
                 strata-bench memory [--data DIR] [--rows N] [--threads T] [--out DIR]\n       \
                 strata-bench text-rank IN.json OUT.json"
                .into())
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_paths_are_relative_to_the_repository() {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(repository_relative(crate_dir), "crates/bench");
        // Outside the repository (where shared/ lives): its parent directory.
        assert_eq!(repository_relative(&crate_dir.join("../../..")), "..");
        assert_eq!(repository_relative(Path::new("/no/such/dir")), "/no/such/dir");
    }
}
