//! `cargo xtask bench --peers`: pg_strata beside pgvector, pgvectorscale and VectorChord in one
//! throwaway cluster (`crates/bench/python/pg_peers.py` measures; docs/benchmarks/peers.*).
//!
//! Each peer is built from a checkout of its public source that the user provides, outside this
//! repository (this repository holds none of their code and no script that fetches it):
//! `--pgvector DIR` (or `PGVECTOR_SRC`), `--pgvectorscale DIR` (`PGVECTORSCALE_SRC`),
//! `--vectorchord DIR` (`VECTORCHORD_SRC`). A peer already installed at the checkout's version in
//! the selected PostgreSQL is not built again.
//!
//! - pgvector: `make` and `make install` (PGXS), as for `cargo xtask bench --pgvector`.
//! - pgvectorscale: `cargo pgrx install --release` with the cargo-pgrx version its `Cargo.toml`
//!   pins (installed, when missing, into `PEERS_TOOLS/cargo-pgrx-VERSION` with its own
//!   `PGRX_HOME` there, registered with `cargo pgrx init` for the selected PostgreSQL).
//! - VectorChord: its own build script (`make build`, then `make install`, with `PG_CONFIG`),
//!   which calls cargo directly and needs no cargo-pgrx; it must be preloaded
//!   (`shared_preload_libraries`), which the cluster here does.
//!
//! `PEERS_TOOLS` defaults to [`DEFAULT_TOOLS`]. A peer whose build fails is left out of the run
//! and the report says what failed. `--sets` picks the sets (default `minilm-100k,glove-50d-100k`;
//! `minilm-1m` reads `--from DIR`, default `cargo xtask data scale`'s directory); `--rows N` and
//! `--quick` (20,000 rows, 200 queries, two dial points per index) shorten the run.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cluster::Cluster;
use crate::process;
use crate::setup::{self, pg_bin, pg_config};
use crate::{repo_root, Options, Result};

/// Where pinned cargo-pgrx versions and their `PGRX_HOME`s are installed unless `PEERS_TOOLS`
/// says otherwise.
pub const DEFAULT_TOOLS: &str = "/opt";
const PEERS_PORT: u16 = 55_450;
/// The shared buffers of a run over `sets`: room for every system's table and index of the
/// largest set at once, since all are built before the dials are measured in interleaved passes
/// (pg_peers.py) — the 100k sets about 1.8 GB in all, the 1M MiniLM set about 12.5 GB (five
/// 1.6 GB tables, pgvector's and VectorChord's indexes about 2 GB each, pgvectorscale's 0.5 GB;
/// pg_strata's segments are files of their own). With 1 GB, below the four 100k databases'
/// 1.3 GB, one sequential run measured VectorChord 1.8–4× slower than the run before.
fn shared_buffers(sets: &str) -> &'static str {
    if sets.contains("minilm-1m") {
        "13GB"
    } else {
        "4GB"
    }
}

/// The sets a run measures: `--sets`, or the two 100k sets.
fn sets(options: &Options) -> String {
    options.sets.clone().unwrap_or_else(|| "minilm-100k,glove-50d-100k".to_owned())
}
/// Room for pgvector's 1M-row HNSW graph in memory while it builds.
const MAINTENANCE_WORK_MEM: &str = "3GB";
/// Parallel maintenance workers for every system's build (a leader and one worker).
const PARALLEL_WORKERS: u32 = 1;

/// Why a peer could not be built or found.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// A file every checkout of the peer has is missing: not a checkout of that project.
    #[error("{peer}: {dir} is not a checkout of its source ({what} missing)")]
    NotACheckout {
        /// The peer.
        peer: &'static str,
        /// The directory given.
        dir: String,
        /// The file looked for.
        what: String,
    },
    /// The peer's `Cargo.toml` pins no exact pgrx version (`pgrx = "=X.Y.Z"`).
    #[error("{peer}: no exact pgrx pin (pgrx = \"=X.Y.Z\") in {file}")]
    NoPgrxPin {
        /// The peer.
        peer: &'static str,
        /// The manifest read.
        file: String,
    },
    /// A build or install step failed.
    #[error("{peer}: {step} failed: {message}")]
    Step {
        /// The peer.
        peer: &'static str,
        /// What was being done.
        step: &'static str,
        /// The command's error.
        message: String,
    },
}

impl From<PeerError> for String {
    fn from(error: PeerError) -> Self {
        error.to_string()
    }
}

/// One peer's checkout and what the report says of it.
struct Peer {
    name: &'static str,
    dir: PathBuf,
    release: String,
    commit: String,
    build: String,
}

/// The exact pgrx version a `Cargo.toml` pins, from `pgrx = "=X"` or
/// `pgrx = { version = "=X", … }`.
pub fn pinned_pgrx(manifest: &str) -> Option<String> {
    manifest.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("pgrx")?.trim_start().strip_prefix('=')?.trim();
        let quoted = if rest.starts_with('{') { rest.split("version").nth(1)?.split_once('=')?.1.trim() } else { rest };
        let version = quoted.strip_prefix('"')?.split('"').next()?;
        version.strip_prefix('=').map(str::to_owned)
    })
}

/// The `default_version` of an extension control file's text.
pub fn control_version(control: &str) -> Option<String> {
    control.lines().find_map(|line| {
        let value = line.trim().strip_prefix("default_version")?.trim_start().strip_prefix('=')?.trim();
        Some(value.trim_matches('\'').to_owned())
    })
}

fn git(dir: &Path, args: &[&str]) -> String {
    process::output(Command::new("git").arg("-C").arg(dir).args(args))
        .map_or_else(|_| "?".to_owned(), |s| s.trim().to_owned())
}

fn checkout(name: &'static str, dir: PathBuf, marker: &str, build: &str) -> Result<Peer> {
    if !dir.join(marker).is_file() {
        return Err(
            PeerError::NotACheckout { peer: name, dir: dir.display().to_string(), what: marker.to_owned() }.into()
        );
    }
    let release = git(&dir, &["describe", "--tags"]);
    let commit = git(&dir, &["rev-parse", "HEAD"]);
    Ok(Peer { name, dir, release, commit, build: build.to_owned() })
}

fn sharedir() -> Result<PathBuf> {
    Ok(PathBuf::from(process::output(Command::new(pg_config()).arg("--sharedir"))?.trim()).join("extension"))
}

/// Whether the selected PostgreSQL has extension `ext` installed at `version`.
fn installed_at(ext: &str, version: &str) -> Result<bool> {
    let control = std::fs::read_to_string(sharedir()?.join(format!("{ext}.control"))).unwrap_or_default();
    Ok(control_version(&control).as_deref() == Some(version)
        && sharedir()?.join(format!("{ext}--{version}.sql")).is_file())
}

/// A command of a peer's own build: its own target directory and toolchain settings, and none of
/// the variables cargo set for this xtask (`cargo pgrx` fills a control file's `@CARGO_VERSION@`
/// from `CARGO_PKG_VERSION`, which would otherwise be xtask's own version).
fn peer_cargo_env(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&name.as_ref())
        {
            command.env_remove(name.as_ref());
        }
    }
    command.env_remove("CARGO_TARGET_DIR").env_remove("RUSTFLAGS").env_remove("PGRX_PG_CONFIG_PATH")
}

fn step(peer: &'static str, step: &'static str, command: &mut Command) -> Result {
    process::run(command).map_err(|message| PeerError::Step { peer, step, message }.into())
}

/// Builds and installs pgvectorscale with the cargo-pgrx its manifest pins.
fn install_pgvectorscale(peer: &Peer) -> Result {
    let manifest_path = peer.dir.join("pgvectorscale/Cargo.toml");
    let manifest = std::fs::read_to_string(&manifest_path).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let version = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("version = \"").and_then(|v| v.strip_suffix('"')).map(str::to_owned))
        .unwrap_or_default();
    if installed_at("vectorscale", &version)? {
        println!("==> pgvectorscale {version} is already installed");
        return Ok(());
    }
    let pgrx = pinned_pgrx(&manifest)
        .ok_or_else(|| PeerError::NoPgrxPin { peer: "pgvectorscale", file: manifest_path.display().to_string() })?;
    let tools = std::env::var_os("PEERS_TOOLS").map_or_else(|| PathBuf::from(DEFAULT_TOOLS), PathBuf::from);
    let root = tools.join(format!("cargo-pgrx-{pgrx}"));
    let home = root.join("pgrx-home");
    if !root.join("bin/cargo-pgrx").is_file() {
        println!("==> installing cargo-pgrx {pgrx} into {}", root.display());
        step(
            "pgvectorscale",
            "cargo install cargo-pgrx",
            peer_cargo_env(
                Command::new("cargo")
                    .args(["install", "cargo-pgrx", "--version", &pgrx, "--locked", "--root"])
                    .arg(&root),
            ),
        )?;
    }
    let path = format!("{}:{}", root.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let feature = crate::pg::selected().feature();
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap_or_default();
    if !config.contains(&format!("{feature} = ")) {
        std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
        step(
            "pgvectorscale",
            "cargo pgrx init",
            peer_cargo_env(&mut Command::new("cargo"))
                .env("PATH", &path)
                .env("PGRX_HOME", &home)
                .args(["pgrx", "init", &format!("--{feature}")])
                .arg(pg_config()),
        )?;
    }
    println!("==> building pgvectorscale {version} (pgrx {pgrx}) from {}", peer.dir.display());
    step(
        "pgvectorscale",
        "cargo pgrx install",
        peer_cargo_env(&mut Command::new("cargo"))
            .current_dir(peer.dir.join("pgvectorscale"))
            .env("PATH", &path)
            .env("PGRX_HOME", &home)
            .args(["pgrx", "install", "--release", "--pg-config"])
            .arg(pg_config())
            .args(["--no-default-features", "--features", &format!("{feature} build_parallel")]),
    )
}

/// Builds and installs VectorChord with its own build script.
fn install_vectorchord(peer: &Peer) -> Result {
    let control = std::fs::read_to_string(peer.dir.join("vchord.control")).unwrap_or_default();
    let version = control_version(&control).unwrap_or_default();
    if installed_at("vchord", &version)? {
        println!("==> VectorChord {version} is already installed");
        return Ok(());
    }
    println!("==> building VectorChord {version} from {}", peer.dir.display());
    let make = |target: &str| {
        let mut command = Command::new("make");
        peer_cargo_env(&mut command).current_dir(&peer.dir).env("PG_CONFIG", pg_config()).arg(target);
        command
    };
    step("VectorChord", "make build", &mut make("build"))?;
    step("VectorChord", "make install", &mut make("install"))
}

fn source(option: Option<&PathBuf>, var: &str) -> Option<PathBuf> {
    option.cloned().or_else(|| std::env::var_os(var).map(PathBuf::from))
}

/// Runs `--peers`: builds what is missing, starts the cluster, runs pg_peers.py.
pub fn run(options: &Options) -> Result {
    let pgvector = source(options.pgvector.as_ref(), "PGVECTOR_SRC")
        .ok_or("--peers needs pgvector (--pgvector DIR or PGVECTOR_SRC): pgvectorscale and VectorChord use its type")?;
    if !options.no_build {
        setup::ensure_prerequisites()?;
        setup::build_and_install()?;
    }
    let mut peers = vec![checkout("pgvector", pgvector, "vector.control", "make && make install (PGXS)")?];
    let mut unavailable = Vec::new();
    for (name, option, var, marker, build) in [
        (
            "pgvectorscale",
            options.pgvectorscale.as_ref(),
            "PGVECTORSCALE_SRC",
            "pgvectorscale/Cargo.toml",
            "cargo pgrx install --release (its pinned cargo-pgrx)",
        ),
        (
            "VectorChord",
            options.vectorchord.as_ref(),
            "VECTORCHORD_SRC",
            "vchord.control",
            "make build && make install (its own build script)",
        ),
    ] {
        match source(option, var) {
            Some(dir) => peers.push(checkout(name, dir, marker, build)?),
            None => unavailable.push(format!("{name}: no source given (--{} DIR or {var})", name.to_lowercase())),
        }
    }
    if !options.no_build {
        let mut built = Vec::new();
        for peer in peers {
            let outcome = match peer.name {
                "pgvector" => crate::bench::build_pgvector(&peer.dir),
                "pgvectorscale" => install_pgvectorscale(&peer),
                _ => install_vectorchord(&peer),
            };
            match outcome {
                Ok(()) => built.push(peer),
                Err(message) if peer.name != "pgvector" => {
                    eprintln!("==> {message}\n==> {} is left out of this run", peer.name);
                    unavailable.push(format!("{}: {}", peer.name, message.lines().next().unwrap_or_default()));
                }
                Err(message) => return Err(message),
            }
        }
        peers = built;
    }
    measure(options, &peers, &unavailable)
}

fn measure(options: &Options, peers: &[Peer], unavailable: &[String]) -> Result {
    let has = |name: &str| peers.iter().any(|p| p.name == name);
    let port = options.port.unwrap_or(PEERS_PORT);
    let work = PathBuf::from(format!("/tmp/pg_strata-bench-peers-{}", std::process::id()));
    let cluster = Cluster::start(&work, port)?;
    // A list setting takes one quoted string per element.
    let preload = if has("VectorChord") { "'pg_strata', 'vchord'" } else { "'pg_strata'" };
    for (setting, value) in [
        ("shared_buffers", format!("'{}'", shared_buffers(&sets(options)))),
        ("shared_preload_libraries", preload.to_owned()),
        ("maintenance_work_mem", format!("'{MAINTENANCE_WORK_MEM}'")),
        ("max_parallel_maintenance_workers", PARALLEL_WORKERS.to_string()),
    ] {
        process::run(cluster.psql("postgres").args(["-c", &format!("ALTER SYSTEM SET {setting} = {value}")]))?;
    }
    crate::cluster::stop(&cluster.dir)?;
    let cluster = Cluster::start(&work, port)?;
    let mut systems = vec!["pg_strata"];
    for (db, ext, name) in [
        ("strata_bench", "pg_strata", "pg_strata"),
        // pg_strata's second index kind, in a database of its own: every index of a set is
        // built before the dials are measured in interleaved passes (pg_peers.py), and two
        // strata indexes on one table would leave the choice between them to the planner.
        ("strata_ivf_bench", "pg_strata", "pg_strata"),
        ("pgvector_bench", "vector", "pgvector"),
        ("vectorscale_bench", "vectorscale", "pgvectorscale"),
        ("vchord_bench", "vchord", "VectorChord"),
    ] {
        if name != "pg_strata" && !has(name) {
            continue;
        }
        process::run(cluster.psql("postgres").args(["-c", &format!("CREATE DATABASE {db}")]))?;
        process::run(cluster.psql(db).args(["-c", &format!("CREATE EXTENSION {ext} CASCADE")]))?;
        if name != "pg_strata" && !systems.contains(&name) {
            systems.push(name);
        }
    }
    let outcome = run_script(options, &cluster, peers, unavailable, &systems);
    crate::cluster::stop(&cluster.dir)?;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&work);
    }
    outcome
}

fn run_script(
    options: &Options,
    cluster: &Cluster,
    peers: &[Peer],
    unavailable: &[String],
    systems: &[&str],
) -> Result {
    let python = crate::bench::bench_python()?;
    let sets = sets(options);
    if sets.contains("glove") {
        crate::bench::install_glove(&python)?;
    }
    let out = options.dir.clone().unwrap_or_else(|| repo_root().join("docs/benchmarks"));
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let info: Vec<String> = peers
        .iter()
        .map(|p| {
            format!(
                "\"{}\": {{\"release\": \"{}\", \"commit\": \"{}\", \"build\": \"{}\"}}",
                p.name, p.release, p.commit, p.build
            )
        })
        .collect();
    let mut command = Command::new(&python);
    command
        .arg(repo_root().join("crates/bench/python/pg_peers.py"))
        .arg("--host")
        .arg(&cluster.dir)
        .args(["--port", &cluster.port.to_string()])
        .arg("--bindir")
        .arg(pg_bin())
        .arg("--data")
        .arg(repo_root().join("../shared/data/pypi-minilm-100k"))
        .arg("--scale-data")
        .arg(options.from.clone().unwrap_or_else(crate::data::scale_dir))
        .arg("--out")
        .arg(&out)
        .args(["--sets", &sets, "--systems", &systems.join(","), "--peer-info", &format!("{{{}}}", info.join(", "))])
        .args(["--shared-buffers", shared_buffers(&sets), "--maintenance-work-mem", MAINTENANCE_WORK_MEM])
        .args(["--parallel-workers", &PARALLEL_WORKERS.to_string()]);
    for why in unavailable {
        command.args(["--unavailable", why]);
    }
    if let Some(rows) = options.rows {
        command.args(["--rows", &rows.to_string()]);
    }
    if options.quick {
        command.args(["--quick", "--rows", "20000", "--queries", "200", "--seconds", "2", "--explain-queries", "50"]);
        command.args(["--filtered-queries", "40", "--insert-seconds", "2"]);
    }
    process::run(&mut command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_pgrx_version_is_read_from_both_manifest_forms() {
        assert_eq!(
            pinned_pgrx("[dependencies]\nmemoffset = \"0.9.0\"\npgrx = \"=0.16.1\"\n").as_deref(),
            Some("0.16.1")
        );
        let table = "pgrx = { version = \"=0.17.0\", default-features = false, features = [\"cshim\"] }";
        assert_eq!(pinned_pgrx(table).as_deref(), Some("0.17.0"));
        // Not exact pins, or other crates whose names start with pgrx: no answer.
        assert_eq!(pinned_pgrx("pgrx = \"0.16.1\""), None);
        assert_eq!(pinned_pgrx("pgrx-catalog = \"0.3.2\"\npgrx-tests = \"=0.16.1\""), None);
    }

    #[test]
    fn the_control_file_version_is_read() {
        let control = "comment = 'x'\ndefault_version = '1.1.1'\nmodule_pathname = 'vchord'\n";
        assert_eq!(control_version(control).as_deref(), Some("1.1.1"));
        assert_eq!(control_version("default_version='0.9.0'").as_deref(), Some("0.9.0"));
        assert_eq!(control_version("comment = 'no version'"), None);
    }
}
