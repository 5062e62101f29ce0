//! `cargo xtask citus start|stop`: a throwaway Citus cluster (a coordinator and N workers) with
//! pg_strata preloaded on every node.
//!
//! Interface relied on by the Citus suite (`tests/citus`), the benchmark and docs/scale-out.md:
//! - nodes live in `DIR/coordinator` (port `PORT`) and `DIR/worker1` … `DIR/workerN` (ports
//!   `PORT + 1` …); each is a [`Cluster`] directory (data in `data/`, log in `log`, a unix socket in
//!   the directory) that also listens on TCP `localhost`, the address Citus's metadata names, so
//!   that nodes reach each other and shard moves work;
//! - every node preloads `citus,pg_strata`, has `wal_level = logical` (logical shard moves) and
//!   has the `citus` and `pg_strata` extensions in the `postgres` database; the coordinator knows
//!   itself (`citus_set_coordinator_host`) and every worker (`citus_add_node`);
//! - `start` on a directory that already holds the nodes starts them again (registration is
//!   skipped for nodes already registered);
//! - the last line `start` prints is the coordinator's connection string.
//!
//! Citus is built from the release tarball in `../shared/vendor` (see its README.md) and installed
//! into the PostgreSQL that `--pg` selects, only when that installation lacks `citus.so`: Citus
//! 13.2.2 for PostgreSQL 15, Citus 14.0.1 for PostgreSQL 16–18 ([`release`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cluster::Cluster;
use crate::pg;
use crate::process::{self, run};
use crate::{repo_root, Result};

mod build;

pub use build::{ensure_installed, release};

/// Default number of workers.
pub const DEFAULT_WORKERS: u32 = 2;
/// Default coordinator port (workers on the following ports).
pub const DEFAULT_PORT: u16 = 56_000;
/// Default cluster directory.
pub const DEFAULT_DIR: &str = "/tmp/pg_strata-citus";

/// Why Citus could not be built or a cluster could not be started.
#[derive(Debug, thiserror::Error)]
pub enum CitusError {
    /// `--pg` names a version no vendored Citus release serves.
    #[error("PostgreSQL {0}: no Citus release in shared/vendor serves it (Citus 13.2.2: 15; Citus 14.0.1: 16–18)")]
    Unsupported(u32),
    /// The vendored tarball is missing.
    #[error("the Citus source tarball {0} is missing (it lives in shared/vendor beside the repository)")]
    NoTarball(String),
    /// The vendored tarball is not the release it should be.
    #[error("{path}: sha256 {found}, expected {expected}")]
    Checksum {
        /// The tarball.
        path: String,
        /// Its checksum.
        found: String,
        /// The release's checksum.
        expected: &'static str,
    },
    /// A compatibility fix did not find the text it changes where it expected it.
    #[error("{file}: {what}")]
    CompatFix {
        /// The file of the unpacked source.
        file: String,
        /// What was expected there.
        what: &'static str,
    },
}

impl From<CitusError> for String {
    fn from(error: CitusError) -> Self {
        error.to_string()
    }
}

/// A running Citus cluster: its coordinator and workers.
#[derive(Debug, Clone)]
pub struct Citus {
    /// The coordinator (port `PORT`).
    pub coordinator: Cluster,
    /// The workers (ports `PORT + 1` …).
    pub workers: Vec<Cluster>,
}

/// Settings every node gets on top of [`Cluster`]'s (later lines win in postgresql.conf). A
/// session keeps up to 4 connections per worker between queries (Citus's default is 1), so that
/// a query with several shards on a worker does not open connections each time.
fn node_settings() -> &'static str {
    "\n# Citus node\n\
     listen_addresses = 'localhost'\n\
     shared_preload_libraries = 'citus,pg_strata'\n\
     wal_level = logical\n\
     max_wal_senders = 20\n\
     max_replication_slots = 20\n\
     max_worker_processes = 64\n\
     max_connections = 300\n\
     citus.node_conninfo = 'sslmode=disable'\n\
     citus.max_cached_conns_per_worker = 4\n"
}

/// Runs one SQL text on `node` in the `postgres` database; returns psql's unaligned output.
pub fn sql(node: &Cluster, text: &str) -> Result<String> {
    process::output(node.psql("postgres").args(["-A", "-t", "-c", text]))
}

impl Citus {
    /// Starts (initialising when needed) a coordinator on `port` and `workers` workers on the
    /// following ports under `dir`, registers the workers and creates both extensions.
    pub fn start(dir: &Path, port: u16, workers: u32) -> Result<Citus> {
        release(pg::selected())?;
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let dir = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let coordinator = Cluster::start_with(&dir.join("coordinator"), port, node_settings())?;
        let mut started = Vec::new();
        for i in 1..=workers {
            let worker_port = port + u16::try_from(i).map_err(|_| "too many workers")?;
            started.push(Cluster::start_with(&dir.join(format!("worker{i}")), worker_port, node_settings())?);
        }
        let citus = Citus { coordinator, workers: started };
        citus.register()?;
        Ok(citus)
    }

    fn register(&self) -> Result {
        for node in std::iter::once(&self.coordinator).chain(&self.workers) {
            sql(node, "CREATE EXTENSION IF NOT EXISTS citus")?;
        }
        sql(&self.coordinator, "CREATE EXTENSION IF NOT EXISTS pg_strata")?;
        sql(&self.coordinator, &format!("SELECT citus_set_coordinator_host('localhost', {})", self.coordinator.port))?;
        for worker in &self.workers {
            let known = sql(
                &self.coordinator,
                &format!(
                    "SELECT count(*) FROM pg_dist_node WHERE nodename = 'localhost' AND nodeport = {}",
                    worker.port
                ),
            )?;
            if known.trim() == "0" {
                // Propagates the coordinator's extensions (pg_strata) to the worker.
                sql(&self.coordinator, &format!("SELECT citus_add_node('localhost', {})", worker.port))?;
            }
        }
        Ok(())
    }

    /// `host=DIR port=PORT user=postgres` of the coordinator.
    pub fn conninfo(&self) -> String {
        self.coordinator.conninfo()
    }
}

/// The node directories under `dir` (coordinator first, then workers and any other node, such
/// as a standby the failover check made), for `stop`.
fn node_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| path.join("data/PG_VERSION").is_file())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort_by_key(|path| (path.file_name().is_none_or(|n| n != "coordinator"), path.clone()));
    dirs
}

/// Stops every node under `dir`.
pub fn stop(dir: &Path) -> Result {
    let dirs = node_dirs(dir);
    if dirs.is_empty() {
        return Err(format!("{} holds no Citus nodes", dir.display()));
    }
    let mut first_error = None;
    for node in dirs {
        if let Err(e) = crate::cluster::stop(&node) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// `cargo xtask citus start|stop|build|test|ops`: `build` only builds and installs Citus when
/// missing; `test` runs the Citus suite of `cargo xtask test` alone; `ops` runs the shard move,
/// rebalance and failover harness on a cluster of its own.
pub fn command(action: &str, options: &crate::Options) -> Result {
    let dir = options.dir.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_DIR));
    match action {
        "build" => {
            release(pg::selected())?;
            crate::setup::ensure_server()?;
            ensure_installed()
        }
        "start" => {
            release(pg::selected())?;
            crate::setup::ensure_server()?;
            ensure_installed()?;
            if !options.no_build {
                crate::setup::ensure_prerequisites()?;
                crate::setup::build_and_install()?;
            }
            let workers = options.workers.unwrap_or(DEFAULT_WORKERS);
            let citus = Citus::start(&dir, options.port.unwrap_or(DEFAULT_PORT), workers)?;
            for (i, worker) in citus.workers.iter().enumerate() {
                println!("worker {}: {}", i + 1, worker.conninfo());
            }
            println!("{}", citus.conninfo());
            Ok(())
        }
        "stop" => stop(&dir),
        "test" => {
            crate::setup::ensure_server()?;
            if !options.no_build {
                crate::setup::ensure_prerequisites()?;
                crate::setup::build_and_install_for_tests()?;
            }
            suite(options.port.unwrap_or(DEFAULT_PORT + 30))
        }
        "ops" => {
            crate::setup::ensure_server()?;
            ensure_installed()?;
            if !options.no_build {
                crate::setup::ensure_prerequisites()?;
                crate::setup::build_and_install()?;
            }
            operations(options.port.unwrap_or(DEFAULT_PORT + 20), options.rows)
        }
        other => Err(format!("unknown citus action {other} (start, stop, build, test or ops)")),
    }
}

/// The Citus suite (`tests/citus`, pytest) against a fresh cluster of a coordinator and two
/// workers on ports `port` … `port + 2` (the extension installed already); builds Citus first
/// when the installation lacks it. The cluster's directory, one per PostgreSQL version so that a
/// failed version's nodes, kept for inspection, are not started by the next version's binaries,
/// is removed when the suite passes; its nodes are stopped whatever happens.
pub fn suite(port: u16) -> Result {
    ensure_installed()?;
    let major = pg::selected();
    println!("==> Citus suite (coordinator + 2 workers, Citus {}, {major})", release(major)?.version);
    let dir = PathBuf::from(format!("/tmp/pg_strata-citus-test-{}-pg{}", std::process::id(), major.number()));
    let citus = Citus::start(&dir, port, 2).inspect_err(|_| {
        let _ = stop(&dir);
    })?;
    let python = crate::test::python_env()?;
    let outcome = run(Command::new(python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", "tests/citus"])
        .env("STRATA_CITUS_HOST", &citus.coordinator.dir)
        .env("STRATA_CITUS_PORT", citus.coordinator.port.to_string())
        .env("STRATA_SHARED_DATA", repo_root().join("../shared/data"))
        .current_dir(repo_root()));
    stop(&dir)?;
    if outcome.is_ok() {
        let _ = fs::remove_dir_all(&dir);
    }
    outcome
}

/// The operations harness (`tests/citus/operations.py`: shard moves in both transfer modes and a
/// rebalance under an insert/delete load, then a worker's failover to its promoted standby, each
/// followed by index == heap on every shard) on a fresh coordinator and two workers on ports
/// `port` … `port + 2`, the standby on `port + 5`. The cluster is removed when every check passes.
pub fn operations(port: u16, rows: Option<u64>) -> Result {
    let dir = PathBuf::from(format!("/tmp/pg_strata-citus-ops-{}", std::process::id()));
    let citus = Citus::start(&dir, port, 2)?;
    println!("==> Citus operations: moves, rebalance, failover on {}", citus.conninfo());
    let python = crate::test::python_env()?;
    let mut command = Command::new(python);
    command
        .arg("tests/citus/operations.py")
        .args(["--standby-port", &(port + 5).to_string()])
        .env("STRATA_CITUS_HOST", &citus.coordinator.dir)
        .env("STRATA_CITUS_PORT", citus.coordinator.port.to_string())
        .env("STRATA_CITUS_DIR", &dir)
        .env("STRATA_PG_BIN", crate::setup::pg_bin())
        .env("STRATA_SHARED_DATA", repo_root().join("../shared/data"))
        .current_dir(repo_root());
    if let Some(rows) = rows {
        command.args(["--rows", &rows.to_string()]);
    }
    let outcome = run(&mut command);
    stop(&dir)?;
    if outcome.is_ok() {
        let _ = fs::remove_dir_all(&dir);
    }
    outcome
}
