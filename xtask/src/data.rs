//! `cargo xtask data scale | synthetic`: the datasets of the scale benchmark, made once and cached
//! outside the repository (`$STRATA_DATA_CACHE`, default `~/.cache/pg_strata`).
//!
//! - `scale`: 1,000,000 real MiniLM embeddings of the PyPI and npm package summaries in the
//!   machine's package lists, 1,000 held-out queries, exact ground truth for the whole set and for
//!   its 100k and 300k prefixes. One to three and a half hours on 2 cores (80–300 texts/s); an interrupted run resumes.
//! - `synthetic`: 1,000,000 × 1024 clustered random vectors (seeded), for the memory bound only.
//!
//! The work is in `crates/bench/python/scale_data.py` (its docstring describes the files).

use std::path::PathBuf;
use std::process::Command;

use crate::{process, repo_root, setup, Options, Result};

/// Where the datasets live unless `--dir` says otherwise.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STRATA_DATA_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/pg_strata")
}

/// The default directory of the scale dataset.
pub fn scale_dir() -> PathBuf {
    cache_dir().join("minilm-1m")
}

/// The default directory of the synthetic 1024-dimensional dataset.
pub fn synthetic_dir() -> PathBuf {
    cache_dir().join("synthetic-1m-1024")
}

/// Runs `cargo xtask data KIND [--dir DIR] [--rows N] [--dims N]`.
pub fn run(kind: &str, options: &Options) -> Result {
    let dir = match kind {
        "scale" => options.dir.clone().unwrap_or_else(scale_dir),
        "synthetic" => options.dir.clone().unwrap_or_else(synthetic_dir),
        other => return Err(format!("unknown dataset {other}: scale or synthetic")),
    };
    // The synthetic set needs only numpy; the real one the model and PyTorch (several GB).
    let python = if kind == "scale" {
        setup::python_venv("target/data-venv", "crates/bench/python/requirements-data.txt")?
    } else {
        setup::python_venv("target/synthetic-venv", "crates/bench/python/requirements-synthetic.txt")?
    };
    let mut command = Command::new(python);
    command.arg(repo_root().join("crates/bench/python/scale_data.py")).arg(kind).arg("--dir").arg(&dir);
    if let Some(rows) = options.rows {
        command.args(["--rows", &rows.to_string()]);
    }
    if let Some(dims) = options.dims {
        command.args(["--dims", &dims.to_string()]);
    }
    command.env("HF_HUB_OFFLINE", "1");
    println!("==> dataset {kind} in {}", dir.display());
    process::run(&mut command)
}
